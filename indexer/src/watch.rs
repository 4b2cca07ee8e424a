//! What the indexer looks for: one deployment of a Ganglion validator, protocol v1
//! (`ganglion`) or v2 (`ganglion_v2`, `docs/escrow-v2.md`).
//!
//! The protocol is named by the parameters' type ([`Params`]): one indexer follows one
//! deployment of one protocol. Protocol v1 goes next; dropping it is deleting
//! [`Params::V1`] and `extract::v1`.

use ganglion_contracts::params::{AssetClass, KeyHash, PolicyId};
use serde::{Deserialize, Serialize};

/// A deployment: the applied script's hash (address and policy) and its parameters.
///
/// JSON: `{"script_hash": "<hex>", "params": {…}}`; the parameters' fields say the protocol
/// (v2 has `claim_window_ms`, v1 `slash_bps`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watch {
    /// Script hash of the applied validator.
    #[serde(with = "hex::serde")]
    pub script_hash: PolicyId,
    /// Its parameters, and with them its protocol.
    pub params: Params,
    /// The chain's slot clock, to turn validity bounds (slots) into POSIX ms as the
    /// validator sees them (a v2 claim's lower bound). Absent in a `watch.json` written
    /// before it; then those times are not reported.
    #[serde(default)]
    pub slot_config: Option<ganglion_cardano::time::SlotConfig>,
}

/// The parameters of the watched validator; the variant is the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Params {
    /// Escrow protocol v2 (`ganglion_v2`): receipts, per-provider claims, proportional
    /// slashes. Tried first when read from JSON: v1 parameters lack `claim_window_ms`.
    V2(ganglion_contracts::v2::params::Params),
    /// Escrow protocol v1 (`ganglion`): one settle pays every provider.
    V1(ganglion_contracts::params::Params),
}

impl From<ganglion_contracts::params::Params> for Params {
    fn from(p: ganglion_contracts::params::Params) -> Self {
        Self::V1(p)
    }
}

impl From<ganglion_contracts::v2::params::Params> for Params {
    fn from(p: ganglion_contracts::v2::params::Params) -> Self {
        Self::V2(p)
    }
}

impl Params {
    /// The NTX token.
    pub fn ntx(&self) -> &AssetClass {
        match self {
            Self::V2(p) => &p.ntx,
            Self::V1(p) => &p.ntx,
        }
    }

    /// NTX base units a bond must hold per GPU it backs.
    pub fn min_bond_per_gpu(&self) -> u64 {
        match self {
            Self::V2(p) => p.min_bond_per_gpu,
            Self::V1(p) => p.min_bond_per_gpu,
        }
    }

    /// Milliseconds after a deadline during which claims stay possible (v2; `None` under
    /// v1, which has no claims).
    pub fn claim_window_ms(&self) -> Option<u64> {
        match self {
            Self::V2(p) => Some(p.claim_window_ms),
            Self::V1(_) => None,
        }
    }
}

impl Watch {
    /// A v1 deployment.
    pub fn v1(script_hash: PolicyId, params: ganglion_contracts::params::Params) -> Self {
        Self {
            script_hash,
            params: Params::V1(params),
            slot_config: None,
        }
    }

    /// A v2 deployment.
    pub fn v2(script_hash: PolicyId, params: ganglion_contracts::v2::params::Params) -> Self {
        Self {
            script_hash,
            params: Params::V2(params),
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
        self.params.min_bond_per_gpu().saturating_mul(gpus)
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

    fn ntx() -> AssetClass {
        AssetClass {
            policy: [0x4e; 28],
            name: b"NTX".to_vec(),
        }
    }

    #[test]
    fn the_json_of_the_parameters_names_the_protocol() {
        let v1 = Watch::v1(
            [1; 28],
            ganglion_contracts::params::Params {
                ntx: ntx(),
                min_bond_per_gpu: 7,
                unbonding_delay_ms: 8,
                slash_bps: 9,
            },
        );
        let v2 = Watch::v2(
            [1; 28],
            ganglion_contracts::v2::params::Params {
                ntx: ntx(),
                min_bond_per_gpu: 7,
                unbonding_delay_ms: 8,
                claim_window_ms: 9,
            },
        );
        for w in [v1, v2] {
            let json = serde_json::to_string(&w).expect("serialises");
            let back: Watch = serde_json::from_str(&json).expect("parses");
            assert_eq!(back, w, "{json}");
        }
        // The `watch.json` of a v1 deployment, as the binary documents it.
        let v1_text = format!(
            r#"{{"script_hash": "{}", "params": {{"ntx": {{"policy": "{}", "name": "4e5458"}},
            "min_bond_per_gpu": 1, "unbonding_delay_ms": 2, "slash_bps": 3}}}}"#,
            "01".repeat(28),
            "4e".repeat(28)
        );
        let w: Watch = serde_json::from_str(&v1_text).expect("v1 watch.json parses");
        assert!(matches!(w.params, Params::V1(_)), "{w:?}");
        assert_eq!(w.params.claim_window_ms(), None);
    }
}
