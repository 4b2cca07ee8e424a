//! What the indexer looks for: one deployment of the Ganglion validator (`ganglion_v2`,
//! `docs/escrow-v2.md`), named by its script hash and parameters.

use ganglion_contracts::params::{KeyHash, PolicyId};
pub use ganglion_contracts::v2::params::Params;
use serde::{Deserialize, Serialize};

/// A deployment: the applied script's hash (address and policy) and its parameters.
///
/// JSON: `{"script_hash": "<hex>", "params": {…}, "slot_config": {…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watch {
    /// Script hash of the applied validator.
    #[serde(with = "hex::serde")]
    pub script_hash: PolicyId,
    /// Its parameters.
    pub params: Params,
    /// The chain's slot clock, to turn validity bounds (slots) into POSIX ms as the
    /// validator sees them (a claim's lower bound). Absent in a `watch.json` written before
    /// it; then those times are not reported.
    #[serde(default)]
    pub slot_config: Option<ganglion_cardano::time::SlotConfig>,
}

impl Watch {
    /// A deployment of `ganglion_v2` with these parameters.
    pub fn v2(script_hash: PolicyId, params: Params) -> Self {
        Self {
            script_hash,
            params,
            slot_config: None,
        }
    }

    /// The same deployment on a chain whose slot clock is `slot_config`.
    pub fn with_slot_config(mut self, slot_config: ganglion_cardano::time::SlotConfig) -> Self {
        self.slot_config = Some(slot_config);
        self
    }

    /// True when `address` (raw bytes) is locked by this script, whatever its stake part
    /// and network (CIP-19 header types 1, 3, 5, 7 carry a script payment credential).
    pub fn is_script_address(&self, address: &[u8]) -> bool {
        matches!(address.first().map(|h| h >> 4), Some(1 | 3 | 5 | 7))
            && address.get(1..29) == Some(&self.script_hash[..])
    }

    /// NTX base units a bond backing `gpus` GPUs must hold.
    pub fn min_stake(&self, gpus: u64) -> u64 {
        self.params.min_bond_per_gpu.saturating_mul(gpus)
    }
}

/// The payment key hash of a key-locked Shelley address (header types 0, 2, 4, 6).
pub fn payment_key(address: &[u8]) -> Option<KeyHash> {
    match address.first().map(|h| h >> 4) {
        Some(0 | 2 | 4 | 6) => address.get(1..29)?.try_into().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_contracts::params::AssetClass;

    fn ntx() -> AssetClass {
        AssetClass {
            policy: [0x4e; 28],
            name: b"NTX".to_vec(),
        }
    }

    #[test]
    fn the_watch_round_trips_through_json() {
        let w = Watch::v2(
            [1; 28],
            Params {
                ntx: ntx(),
                min_bond_per_gpu: 7,
                unbonding_delay_ms: 8,
                claim_window_ms: 9,
            },
        );
        let json = serde_json::to_string(&w).expect("serialises");
        let back: Watch = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, w, "{json}");
        // The `watch.json` of a deployment, as the binary documents it.
        let text = format!(
            r#"{{"script_hash": "{}", "params": {{"ntx": {{"policy": "{}", "name": "4e5458"}},
            "min_bond_per_gpu": 1, "unbonding_delay_ms": 2, "claim_window_ms": 3}}}}"#,
            "01".repeat(28),
            "4e".repeat(28)
        );
        let w: Watch = serde_json::from_str(&text).expect("watch.json parses");
        assert_eq!(w.params.claim_window_ms, 3);
        assert_eq!(w.min_stake(4), 4);
        // A v1 deployment's parameters (`slash_bps`, no claim window) are refused.
        let v1 = text.replace("claim_window_ms", "slash_bps");
        assert!(serde_json::from_str::<Watch>(&v1).is_err());
    }
}
