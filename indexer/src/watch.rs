//! What the indexer looks for: one deployment of the Ganglion validator.

use ganglion_contracts::params::{KeyHash, Params, PolicyId};
use serde::{Deserialize, Serialize};

/// A deployment: the applied script's hash (address and policy) and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watch {
    /// Script hash of the applied `ganglion` validator.
    #[serde(with = "hex::serde")]
    pub script_hash: PolicyId,
    /// Its parameters (NTX asset class, minimum bond per GPU, …).
    pub params: Params,
}

impl Watch {
    /// True when `address` (raw bytes) is locked by this script, whatever its stake part
    /// and network (CIP-19 header types 1, 3, 5, 7 carry a script payment credential).
    pub fn is_script_address(&self, address: &[u8]) -> bool {
        matches!(address.first().map(|h| h >> 4), Some(1 | 3 | 5 | 7))
            && address.get(1..29) == Some(&self.script_hash[..])
    }
}

/// The payment key hash of a key-locked Shelley address (header types 0, 2, 4, 6).
pub fn payment_key(address: &[u8]) -> Option<KeyHash> {
    match address.first().map(|h| h >> 4) {
        Some(0 | 2 | 4 | 6) => address.get(1..29)?.try_into().ok(),
        _ => None,
    }
}
