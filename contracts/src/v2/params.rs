//! The parameters of the `ganglion_v2` validator (one validator for escrows and bonds: see
//! [`crate::params`] for how that breaks the parameter cycle).

use pallas_primitives::PlutusData;

use crate::data::{bytes, constr, int};
pub use crate::params::{AssetClass, KeyHash, PolicyId};

/// The parameters applied to the compiled `ganglion_v2` validator; one set = one deployment.
///
/// PlutusData: constructor 0 `[ntx_policy, ntx_name, min_bond_per_gpu, unbonding_delay_ms,
/// claim_window_ms]`, applied as a single argument.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// The NTX token (a Cardano native asset).
    pub ntx: AssetClass,
    /// NTX base units a bond must hold per GPU it backs.
    pub min_bond_per_gpu: u64,
    /// Milliseconds between `Unbond` and the earliest `Withdraw`.
    pub unbonding_delay_ms: u64,
    /// Milliseconds after an escrow's deadline during which its assigned providers may still
    /// claim their pay; `Expire` (and with it any slash) is possible only after it (DESIGN §3.1
    /// G3: only a provider with no claim by the deadline plus this window is a defaulter).
    pub claim_window_ms: u64,
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
                int(self.claim_window_ms),
            ],
        )
    }
}
