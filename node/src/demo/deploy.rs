//! The devnet's Ganglion deployment: the validator applied to devnet parameters and published
//! as a reference script by devnet key 0 (the orchestrator's key, before any node starts).

use std::time::{Duration, Instant};

use ganglion_contracts::blueprint::Blueprint;
use ganglion_contracts::build::{self, Deployment};

use ganglion_contracts::env::Env;
use ganglion_contracts::params::{AssetClass, Params};
use ganglion_contracts::protocol::ProtocolParams;
use ganglion_contracts::time::SlotConfig;
use ganglion_contracts::tx::{Output, TxoRef, Utxo};
use ganglion_testnet::devnet::DevnetHandle;
use ganglion_testnet::genesis::Genesis;

use super::DemoError;
use crate::job::chain::ChainAccess;
use crate::settings::N2cEndpoint;
use crate::wallet::PaymentKey;

/// The devnet key seed that deploys the validator.
pub const DEPLOYER_SEED: u32 = 0;
/// Minimum bond per GPU on the demo deployment, NTX base units.
pub const MIN_BOND_PER_GPU: u64 = 1_000_000;
/// Longest wait for the deployment to appear in the ledger.
pub const DEPLOY_WAIT: Duration = Duration::from_secs(60);

/// What nodes need to know of the deployment.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// Validator parameters (`[deployment]`).
    pub params: Params,
    /// The reference-script UTxO (`[validator] reference`).
    pub reference: TxoRef,
    /// The build environment (mainnet protocol parameters, the devnet's slot clock).
    pub env: Env,
    /// The deployment as the transaction builders see it.
    pub deployment: Deployment,
}

/// The build environment of a devnet started from `genesis`.
///
/// # Errors
/// [`DemoError::Chain`] when the protocol parameters do not load.
pub fn env_of(genesis: &Genesis) -> Result<Env, DemoError> {
    Ok(Env {
        params: ProtocolParams::mainnet().map_err(DemoError::chain)?,
        slot_config: SlotConfig::from(&genesis.slot_config()),
        network: pallas_addresses::Network::Testnet,
    })
}

/// Deploys the validator on the devnet behind `handle` and waits for its reference UTxO.
///
/// # Errors
/// [`DemoError::Chain`] (genesis, build, submission), [`DemoError::Timeout`].
pub async fn deploy(handle: &DevnetHandle, genesis: &Genesis) -> Result<Deployed, DemoError> {
    let env = env_of(genesis)?;
    let params = Params {
        ntx: AssetClass {
            policy: *genesis.ntx_policy_id().map_err(DemoError::chain)?,
            name: genesis.ntx_asset_name().map_err(DemoError::chain)?,
        },
        min_bond_per_gpu: MIN_BOND_PER_GPU,
        unbonding_delay_ms: 60_000,
        slash_bps: 1_000,
    };
    let script = Blueprint::committed()
        .and_then(|b| b.apply(&params))
        .map_err(DemoError::chain)?;
    let draft = build::deploy(&env, &script).map_err(DemoError::chain)?;
    let mut deployment = Deployment {
        params: params.clone(),
        script: script.clone(),
        // Not known yet: the deploy transaction does not spend the validator.
        reference: Utxo {
            reference: TxoRef {
                tx_hash: [0; 32],
                index: 0,
            },
            output: Output::new(vec![], Default::default()),
        },
    };
    let n2c = handle
        .n2c_tcp_addr()
        .ok_or_else(|| DemoError::Chain("the devnet has no N2C TCP endpoint".into()))?;
    let deployer = ChainAccess::new(
        N2cEndpoint::Tcp(n2c),
        handle.magic(),
        env.clone(),
        deployment.clone(),
        PaymentKey::devnet(DEPLOYER_SEED).signing_key().clone(),
    );
    let now = crate::p2p::now_ms();
    let tx = deployer.build(draft, now).await.map_err(DemoError::chain)?;
    deployer.submit(&tx, now).await.map_err(DemoError::chain)?;
    let address = script.address(env.network);
    let start = Instant::now();
    let reference = loop {
        let found = handle
            .chain()
            .utxos_at(&address)
            .map_err(DemoError::chain)?
            .into_iter()
            .find(|(r, _)| *r.tx_id == tx.hash);
        if let Some((r, bytes)) = found {
            let output =
                pallas_traverse::MultiEraOutput::decode(pallas_traverse::Era::Conway, &bytes)
                    .map_err(DemoError::chain)?;
            break Utxo {
                reference: TxoRef {
                    tx_hash: *r.tx_id,
                    index: r.index,
                },
                output: Output::from_chain(&output),
            };
        }
        if start.elapsed() > DEPLOY_WAIT {
            return Err(DemoError::Timeout("the validator's deployment"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    deployment.reference = reference.clone();
    Ok(Deployed {
        params,
        reference: reference.reference,
        env,
        deployment,
    })
}
