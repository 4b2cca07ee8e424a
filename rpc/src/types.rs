//! Request and response types. Amounts are integers: lovelace for ADA, base units for NTX.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `node_info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's version (crate version).
    pub version: String,
    /// `devnet`, `preview`, `preprod` or `mainnet`.
    pub network: String,
    /// Ouroboros network magic.
    pub magic: u64,
    /// The wallet's address (bech32), when a key exists.
    pub wallet_address: Option<String>,
}

/// `node_tip`: the chain tip seen over N2C.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tip {
    /// Slot of the tip block.
    pub slot: u64,
    /// Block header hash, hex (64 characters).
    pub hash: String,
}

/// `wallet_balance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// Lovelace.
    pub lovelace: u64,
    /// Native assets: `"<policy hex>.<asset name hex>"` → quantity.
    pub assets: BTreeMap<String, u64>,
    /// Number of UTxOs.
    pub utxos: usize,
}

/// `wallet_send` parameters (by name or position: `to`, `lovelace`, `ntx`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    /// Destination address, bech32 or hex, on the node's network.
    pub to: String,
    /// Lovelace to send (at least the output's min-UTxO).
    pub lovelace: u64,
    /// NTX base units to send along; default 0.
    #[serde(default)]
    pub ntx: u64,
}

/// `wallet_send` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// Transaction id, hex.
    pub tx_id: String,
    /// Fee paid, lovelace.
    pub fee: u64,
}
