//! Validator parameters, and how the parameter cycle of DESIGN §3 is broken.
//!
//! The escrow must recognise bonds (read as reference inputs) and a bond's `Slash` must
//! recognise the escrow being expired in the same transaction; parameterising each by the
//! other's hash is a cycle. Ganglion compiles both into **one** validator (`ganglion`): one
//! script hash `H` is the escrow address, the bond address and the policy id of both the job
//! thread tokens and the bond tokens. The datum constructor tells an escrow from a bond. So
//! the only parameters left are these.

use pallas_primitives::PlutusData;

use crate::data::{bytes, constr, int};

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

/// The parameters applied to the compiled `ganglion` validator; one set = one deployment.
///
/// PlutusData: constructor 0 `[ntx_policy, ntx_name, min_bond_per_gpu, unbonding_delay_ms,
/// slash_bps]`, applied as a single argument.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// The NTX token (a Cardano native asset).
    pub ntx: AssetClass,
    /// NTX base units a bond must hold per GPU it backs.
    pub min_bond_per_gpu: u64,
    /// Milliseconds between `Unbond` and the earliest `Withdraw`.
    pub unbonding_delay_ms: u64,
    /// Share of a defaulter's bond paid to the orchestrator on `Expire`, in basis points.
    pub slash_bps: u16,
}

impl Params {
    /// The parameter as PlutusData.
    pub fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![
                bytes(self.ntx.policy),
                bytes(self.ntx.name.clone()),
                int(self.min_bond_per_gpu),
                int(self.unbonding_delay_ms),
                int(self.slash_bps),
            ],
        )
    }

    /// NTX base units taken from a bond holding `stake` by one slash (rounded down, as
    /// on-chain).
    pub fn slash_amount(&self, stake: u64) -> u64 {
        (u128::from(stake) * u128::from(self.slash_bps) / 10_000) as u64
    }
}
