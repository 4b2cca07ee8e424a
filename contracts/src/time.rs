//! Slot ↔ POSIX time, with the slot configuration the evaluator is given.
//!
//! Slot `s` begins at `zero_time + (s − zero_slot) × slot_length`; finite lower validity
//! bounds are inclusive, upper bounds exclusive (uplc's `slot_to_begin_posix_time`).

use serde::{Deserialize, Serialize};

/// The slot clock of a chain: `zero_time` POSIX ms of slot `zero_slot`, `slot_length` ms.
///
/// uplc's own `SlotConfig` (the devnet's shared type, `ganglion_testnet::time::SlotConfig`)
/// carries the same three numbers but implements no traits; this mirror converts both ways
/// with `From`, and [`SlotConfig::as_tuple`] gives the triple uplc's evaluator takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotConfig {
    /// POSIX ms at which `zero_slot` begins.
    pub zero_time: u64,
    /// The first slot of the era the clock describes.
    pub zero_slot: u64,
    /// Slot length in ms.
    pub slot_length: u32,
}

impl SlotConfig {
    /// `(zero_time, zero_slot, slot_length)` as `uplc::tx::eval_phase_two_raw` takes it.
    pub fn as_tuple(&self) -> (u64, u64, u32) {
        (self.zero_time, self.zero_slot, self.slot_length)
    }
}

impl From<&uplc::tx::script_context::SlotConfig> for SlotConfig {
    /// From uplc's type, which the devnet re-exports as `ganglion_testnet::time::SlotConfig`:
    /// both describe the same clock; this one is `Copy`, `Debug` and serde.
    fn from(c: &uplc::tx::script_context::SlotConfig) -> Self {
        Self {
            zero_time: c.zero_time,
            zero_slot: c.zero_slot,
            slot_length: c.slot_length,
        }
    }
}

impl From<SlotConfig> for uplc::tx::script_context::SlotConfig {
    fn from(c: SlotConfig) -> Self {
        Self {
            zero_time: c.zero_time,
            zero_slot: c.zero_slot,
            slot_length: c.slot_length,
        }
    }
}

/// POSIX ms at which `slot` begins (slots before `zero_slot` clamp to `zero_time`).
pub fn slot_to_posix_ms(config: &SlotConfig, slot: u64) -> u64 {
    config.zero_time + slot.saturating_sub(config.zero_slot) * u64::from(config.slot_length)
}

/// The slot containing POSIX ms `time` (times before `zero_time` clamp to `zero_slot`).
pub fn posix_ms_to_slot(config: &SlotConfig, time: u64) -> u64 {
    config.zero_slot + time.saturating_sub(config.zero_time) / u64::from(config.slot_length.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_invert_on_slot_boundaries() {
        let c = SlotConfig {
            zero_time: 1_700_000_000_000,
            zero_slot: 0,
            slot_length: 1000,
        };
        for s in [0, 1, 86_400, 10_000_000] {
            assert_eq!(posix_ms_to_slot(&c, slot_to_posix_ms(&c, s)), s);
        }
        assert_eq!(posix_ms_to_slot(&c, 1_700_000_000_999), 0);
    }
}
