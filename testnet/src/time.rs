//! Slot ↔ POSIX time conversions over the one shared slot configuration.
//!
//! The shared type is [`SlotConfig`] from `uplc` (re-exported here): it is the exact value
//! the Plutus evaluator is given, so a validity interval converted here and the
//! `TxInfo.validRange` a script sees always agree. Its fields are `zero_time` (POSIX
//! milliseconds of slot `zero_slot`), `zero_slot` and `slot_length` (milliseconds).

pub use uplc::tx::script_context::SlotConfig;

/// A slot number (devnet slots start at 0 at the genesis `system_start`).
pub type Slot = u64;

/// POSIX time in milliseconds since 1970-01-01T00:00:00Z.
pub type PosixMs = u64;

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
/// [`TimeError::BeforeZeroTime`], [`TimeError::ZeroSlotLength`].
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

/// A copy of `config` (uplc's `SlotConfig` implements neither `Clone` nor `Debug`).
pub fn copy(config: &SlotConfig) -> SlotConfig {
    SlotConfig {
        zero_time: config.zero_time,
        zero_slot: config.zero_slot,
        slot_length: config.slot_length,
    }
}

/// The slot config in the tuple form `uplc::tx::eval_phase_two_raw` takes:
/// `(zero_time ms, zero_slot, slot_length ms)`.
pub fn as_eval_tuple(config: &SlotConfig) -> (u64, u64, u32) {
    (config.zero_time, config.zero_slot, config.slot_length)
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
}
