//! The key, policy and asset types of the validator's parameters and datums, and how the
//! parameter cycle of DESIGN §3 is broken.
//!
//! The escrow must recognise bonds (spent alongside an assign) and a bond's `Slash` must
//! recognise the escrow being expired in the same transaction; parameterising each by the
//! other's hash is a cycle. Ganglion compiles both into **one** validator (`ganglion_v2`):
//! one script hash `H` is the escrow address, the bond address and the policy id of both the
//! job thread tokens and the bond tokens. The datum constructor tells an escrow from a bond.
//! So the only parameters left are the NTX token and a few numbers
//! ([`crate::v2::params::Params`]).

/// 28-byte blake2b-224 hash of an ed25519 verification key (`VerificationKeyHash`).
pub type KeyHash = [u8; 28];

/// 28-byte policy id (blake2b-224 of a script).
pub type PolicyId = [u8; 28];

/// A native asset class: policy id and asset name (0–32 bytes).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct AssetClass {
    /// Minting policy hash.
    #[serde(with = "hex::serde")]
    pub policy: PolicyId,
    /// Asset name bytes.
    #[serde(with = "hex::serde")]
    pub name: Vec<u8>,
}
