//! The devnet's Ganglion deployment: the validator applied to devnet parameters (the genesis
//! NTX, 1 NTX of bond per GPU) and published as a reference script by devnet key 0 (the
//! orchestrator's key, before any node starts), through
//! [`crate::daemon::devnet::deploy_validator`].

use ganglion_contracts::params::AssetClass;
use ganglion_contracts::tx::TxoRef;
use ganglion_contracts::v2::params::Params;
use ganglion_testnet::devnet::DevnetHandle;
use ganglion_testnet::genesis::Genesis;

use super::DemoError;
use crate::wallet::PaymentKey;

/// The devnet key seed that deploys the validator.
pub const DEPLOYER_SEED: u32 = 0;
/// Minimum bond per GPU on the demo deployment, NTX base units.
pub const MIN_BOND_PER_GPU: u64 = 1_000_000;
/// The demo deployment's claim window, ms: providers claim within it after the deadline;
/// an expire (and any slash) comes only after it.
pub const CLAIM_WINDOW_MS: u64 = 60_000;

/// What nodes need to know of the deployment.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// Validator parameters (`[deployment]`).
    pub params: Params,
    /// The reference-script UTxO (`[validator] reference`).
    pub reference: TxoRef,
}

/// Deploys the validator on the devnet behind `handle` and waits for its reference UTxO.
///
/// # Errors
/// [`DemoError::Chain`] (genesis, build, submission, the reference never seen).
pub async fn deploy(handle: &DevnetHandle, genesis: &Genesis) -> Result<Deployed, DemoError> {
    let params = Params {
        ntx: AssetClass {
            policy: *genesis.ntx_policy_id().map_err(DemoError::chain)?,
            name: genesis.ntx_asset_name().map_err(DemoError::chain)?,
        },
        min_bond_per_gpu: MIN_BOND_PER_GPU,
        unbonding_delay_ms: 60_000,
        claim_window_ms: CLAIM_WINDOW_MS,
    };
    let n2c = handle
        .n2c_tcp_addr()
        .ok_or_else(|| DemoError::chain("the devnet has no N2C TCP endpoint"))?;
    let reference = crate::daemon::devnet::deploy_validator(
        n2c,
        &params,
        PaymentKey::devnet(DEPLOYER_SEED).signing_key(),
    )
    .await
    .map_err(DemoError::chain)?;
    Ok(Deployed { params, reference })
}
