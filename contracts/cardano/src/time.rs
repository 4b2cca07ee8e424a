//! The slot clock: slot ↔ POSIX milliseconds over one [`SlotConfig`].
//!
//! Slot `s` begins at `zero_time + (s − zero_slot) × slot_length` (POSIX ms); a time belongs
//! to the slot it falls in, rounding down. This is the mapping uplc's
//! `slot_to_begin_posix_time` applies to a transaction's validity interval (finite lower
//! bounds inclusive, upper bounds exclusive), so a bound converted here and the
//! `TxInfo.validRange` a script sees agree. The devnet's ledger and every transaction
//! builder share this one type; [`SlotConfig::as_tuple`] gives the triple uplc's
//! `eval_phase_two_raw` takes.

use serde::{Deserialize, Serialize};

/// A slot number.
pub type Slot = u64;

/// POSIX time in milliseconds since 1970-01-01T00:00:00Z.
pub type PosixMs = u64;

/// The slot clock of a chain (uplc's `SlotConfig` triple, with `Copy`, `Debug` and serde:
/// `{zero_time, zero_slot, slot_length}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotConfig {
    /// POSIX ms at which `zero_slot` begins.
    pub zero_time: PosixMs,
    /// The first slot of the era the clock describes (the devnet: 0 at its system start).
    pub zero_slot: Slot,
    /// Slot length in ms.
    pub slot_length: u32,
}

impl SlotConfig {
    /// `(zero_time ms, zero_slot, slot_length ms)` as `uplc::tx::eval_phase_two_raw` takes it.
    pub fn as_tuple(&self) -> (u64, u64, u32) {
        (self.zero_time, self.zero_slot, self.slot_length)
    }

    /// The slot containing `time_ms`, clamped to `zero_slot` for a time before the clock's
    /// zero (and for a zero slot length), to `u64::MAX` on overflow: for callers that read a
    /// wall clock, which cannot be before a live chain's start.
    pub fn slot_at_saturating(&self, time_ms: PosixMs) -> Slot {
        match posix_ms_to_slot(self, time_ms) {
            Ok(slot) => slot,
            Err(TimeError::Overflow) => Slot::MAX,
            Err(_) => self.zero_slot,
        }
    }

    /// The POSIX ms at which `slot` begins, clamped to `zero_time` for a slot before
    /// `zero_slot`, to `u64::MAX` on overflow.
    pub fn slot_start_saturating(&self, slot: Slot) -> PosixMs {
        match slot_to_posix_ms(self, slot) {
            Ok(ms) => ms,
            Err(TimeError::BeforeZeroSlot { .. }) => self.zero_time,
            Err(_) => PosixMs::MAX,
        }
    }
}

/// Errors of slot/time conversions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// The time is before the slot configuration's `zero_time`.
    #[error("time {time_ms} ms is before the chain's zero time {zero_time_ms} ms")]
    BeforeZeroTime {
        /// The time asked about (POSIX ms).
        time_ms: PosixMs,
        /// The chain's zero time (POSIX ms).
        zero_time_ms: PosixMs,
    },
    /// The slot is before the slot configuration's `zero_slot`.
    #[error("slot {slot} is before the chain's zero slot {zero_slot}")]
    BeforeZeroSlot {
        /// The slot asked about.
        slot: Slot,
        /// The chain's first slot.
        zero_slot: Slot,
    },
    /// The slot length is zero (an invalid configuration).
    #[error("slot length is zero")]
    ZeroSlotLength,
    /// The result does not fit a u64.
    #[error("time arithmetic overflow")]
    Overflow,
}

/// POSIX ms at which `slot` begins.
///
/// # Errors
/// [`TimeError::BeforeZeroSlot`] for a slot before `zero_slot`, [`TimeError::Overflow`].
pub fn slot_to_posix_ms(config: &SlotConfig, slot: Slot) -> Result<PosixMs, TimeError> {
    let since = slot
        .checked_sub(config.zero_slot)
        .ok_or(TimeError::BeforeZeroSlot {
            slot,
            zero_slot: config.zero_slot,
        })?;
    since
        .checked_mul(u64::from(config.slot_length))
        .and_then(|ms| ms.checked_add(config.zero_time))
        .ok_or(TimeError::Overflow)
}

/// The slot containing POSIX time `time_ms` (rounding down, as the ledger does).
///
/// # Errors
/// [`TimeError::BeforeZeroTime`], [`TimeError::ZeroSlotLength`], [`TimeError::Overflow`].
pub fn posix_ms_to_slot(config: &SlotConfig, time_ms: PosixMs) -> Result<Slot, TimeError> {
    if config.slot_length == 0 {
        return Err(TimeError::ZeroSlotLength);
    }
    let since = time_ms
        .checked_sub(config.zero_time)
        .ok_or(TimeError::BeforeZeroTime {
            time_ms,
            zero_time_ms: config.zero_time,
        })?;
    (since / u64::from(config.slot_length))
        .checked_add(config.zero_slot)
        .ok_or(TimeError::Overflow)
}

/// The current wall-clock POSIX time in ms (0 if the system clock is before 1970).
pub fn now_posix_ms() -> PosixMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SlotConfig {
        SlotConfig {
            zero_time: 1_700_000_000_000,
            zero_slot: 0,
            slot_length: 1000,
        }
    }

    #[test]
    fn slot_and_time_round_trip() {
        let c = cfg();
        for slot in [0u64, 1, 59, 86_400, 10_000_000] {
            let t = slot_to_posix_ms(&c, slot).expect("in range");
            assert_eq!(t, c.zero_time + slot * 1000);
            assert_eq!(posix_ms_to_slot(&c, t).expect("in range"), slot);
            assert_eq!(posix_ms_to_slot(&c, t + 999).expect("in range"), slot);
        }
    }

    #[test]
    fn times_before_zero_are_rejected() {
        let c = cfg();
        assert!(matches!(
            posix_ms_to_slot(&c, c.zero_time - 1),
            Err(TimeError::BeforeZeroTime { .. })
        ));
        let c2 = SlotConfig { zero_slot: 10, ..c };
        assert!(matches!(
            slot_to_posix_ms(&c2, 9),
            Err(TimeError::BeforeZeroSlot { .. })
        ));
        let c3 = SlotConfig {
            slot_length: 0,
            ..c
        };
        assert_eq!(
            posix_ms_to_slot(&c3, c.zero_time),
            Err(TimeError::ZeroSlotLength)
        );
    }

    #[test]
    fn saturating_forms_clamp_at_the_clock_zero() {
        let c = SlotConfig {
            zero_slot: 10,
            ..cfg()
        };
        assert_eq!(c.slot_at_saturating(c.zero_time - 1), 10);
        assert_eq!(c.slot_at_saturating(c.zero_time + 1_999), 11);
        assert_eq!(c.slot_start_saturating(3), c.zero_time);
        assert_eq!(c.slot_start_saturating(12), c.zero_time + 2_000);
        assert_eq!(c.slot_start_saturating(u64::MAX), u64::MAX);
    }

    #[test]
    fn serde_shape_is_the_three_named_numbers() {
        let json = serde_json::to_value(cfg()).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"zero_time": 1_700_000_000_000u64, "zero_slot": 0, "slot_length": 1000})
        );
    }
}
