//! What the node learns from the chain before it starts its engine: the build environment
//! (slot clock from the preset, or the devnet's system start over N2C), the deployment (the
//! validator applied to `[deployment]`/preset parameters, its reference UTxO read from the
//! ledger), an indexer caught up with the tip, and — for a provider — its live bond, posted
//! when `[bond]` asks for one and the chain has none.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use ganglion_contracts::env::Env;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::time::SlotConfig;
use ganglion_contracts::tx::TxoRef;
use ganglion_contracts::v2::build::{self, BondRequest, Deployment};
use ganglion_contracts::v2::payout::Payout;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use libp2p::PeerId;

use super::DaemonError;
use super::config::BondSection;
use crate::job::chain::ChainAccess;
use crate::network::NetworkPreset;
use crate::settings::{N2cEndpoint, Settings};
use crate::wallet::ChainClient;

/// Longest wait for the indexer to reach the tip, or for a posted bond to appear.
pub const CHAIN_WAIT: Duration = Duration::from_secs(120);

/// The build environment and the deployment of `settings`' network.
///
/// # Errors
/// [`DaemonError::Network`] (no deployment parameters), [`DaemonError::NoValidator`] (no
/// `[validator]` and no reference script at the validator's address),
/// [`DaemonError::Chain`], [`DaemonError::ReferenceMissing`] (the configured one is not there).
///
/// Without `[validator] reference` the reference-script UTxO is looked up at the validator's
/// address (the first by transaction id and index that carries the script).
pub async fn resolve(
    settings: &Settings,
    preset: &NetworkPreset,
    endpoint: &N2cEndpoint,
) -> Result<(Env, Deployment), DaemonError> {
    let params = preset.require_deployment(settings.deployment.as_ref())?;
    let reference = settings.validator.as_ref().map(|v| v.reference);
    let script =
        ganglion_contracts::v2::blueprint().and_then(|b| b.apply_data(params.to_plutus_data()))?;
    let mut client = ChainClient::connect(endpoint, preset.magic).await?;
    let slot_config = match preset.slot_config {
        Some(s) => s,
        None => SlotConfig {
            zero_time: client.system_start_ms().await?,
            zero_slot: 0,
            slot_length: 1000,
        },
    };
    let env = Env {
        params: client.protocol_params().await?,
        slot_config,
        network: preset.address_network,
    };
    let at_script = client.utxos_at(&script.address(env.network)).await;
    client.close().await;
    let at_script = at_script?;
    let utxo = match reference {
        Some(reference) => at_script
            .into_iter()
            .find(|u| u.reference == reference)
            .ok_or_else(|| {
                DaemonError::ReferenceMissing(format!(
                    "{}#{}",
                    hex::encode(reference.tx_hash),
                    reference.index
                ))
            })?,
        // No `[validator]`: found at the validator's address.
        None => reference_script_utxo(at_script, &script).ok_or(DaemonError::NoValidator)?,
    };
    tracing::info!(
        reference = %format!("{}#{}", hex::encode(utxo.reference.tx_hash), utxo.reference.index),
        configured = reference.is_some(),
        "validator reference script"
    );
    Ok((
        env,
        Deployment {
            params,
            script,
            reference: utxo,
        },
    ))
}

/// Of `utxos` (those at the validator's address), the one carrying `script` as its reference
/// script, the first by transaction id and index: where `ganglion devnet deploy` and
/// `build::deploy` put it. Any such UTxO serves (the ledger references a script by hash).
pub fn reference_script_utxo(
    utxos: Vec<ganglion_contracts::tx::Utxo>,
    script: &ganglion_contracts::blueprint::Script,
) -> Option<ganglion_contracts::tx::Utxo> {
    utxos
        .into_iter()
        .filter(|u| u.output.script_ref.as_deref() == Some(script.bytes.as_slice()))
        .min_by_key(|u| (u.reference.tx_hash, u.reference.index))
}

/// Waits until `indexer` has applied the chain's current tip (as N2C reports it now).
///
/// # Errors
/// [`DaemonError::Chain`], [`DaemonError::Indexer`], [`DaemonError::CatchUp`] after
/// [`CHAIN_WAIT`].
pub async fn catch_up<S: Kv>(
    indexer: &Indexer<S>,
    endpoint: &N2cEndpoint,
    magic: u64,
) -> Result<(), DaemonError> {
    let mut client = ChainClient::connect(endpoint, magic).await?;
    let tip = client.tip().await;
    client.close().await;
    let Some((tip, _)) = tip? else {
        return Ok(());
    };
    let start = Instant::now();
    while indexer.tip()?.is_none_or(|p| p.slot < tip) {
        if start.elapsed() > CHAIN_WAIT {
            return Err(DaemonError::CatchUp {
                tip,
                waited_s: CHAIN_WAIT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Who a provider's bond must name.
pub struct BondOwner<'a> {
    /// The payment key hash.
    pub provider: KeyHash,
    /// The attest key.
    pub attest: &'a SigningKey,
    /// The libp2p peer id.
    pub peer: PeerId,
}

/// The live bond naming `owner` (found in the caught-up `indexer`), or — when `bond` is set
/// and there is none — a bond of `bond.stake_ntx` for `bond.gpus` (default `gpus`) posted
/// through `access` and awaited. Returns the bond UTxO and its stake (NTX base units).
///
/// # Errors
/// [`DaemonError::NoBond`], [`DaemonError::Chain`], [`DaemonError::BondTimeout`],
/// [`DaemonError::Indexer`].
pub async fn ensure_bond<S: Kv>(
    indexer: &Arc<Indexer<S>>,
    access: &ChainAccess,
    deployment: &Deployment,
    env: &Env,
    owner: &BondOwner<'_>,
    bond: Option<&BondSection>,
    gpus: u64,
) -> Result<(TxoRef, u64), DaemonError> {
    let peer = owner.peer.to_bytes();
    let attest = owner.attest.verifying_key().to_bytes();
    let find = || -> Result<Option<(TxoRef, u64)>, DaemonError> {
        Ok(indexer
            .active_bonds()?
            .into_iter()
            .find(|b| {
                b.datum.provider == owner.provider
                    && b.datum.attest_key == attest
                    && b.datum.peer_id == peer
            })
            .map(|b| (b.bond, b.stake)))
    };
    if let Some(found) = find()? {
        tracing::info!(bond = %hex::encode(found.0.tx_hash), index = found.0.index, stake = found.1, "live bond found");
        return Ok(found);
    }
    let bond = bond.ok_or(DaemonError::NoBond)?;
    let draft = build::post_bond(
        deployment,
        env,
        &BondRequest {
            provider: owner.provider,
            attest_key: attest,
            peer_id: peer.clone(),
            // Claims pay the provider's own key (an enterprise address).
            payout: Payout::enterprise(owner.provider),
            gpus: bond.gpus.unwrap_or(gpus),
            stake: bond.stake_ntx,
        },
    )?;
    let tx = access.build(draft, ganglion_p2p::now_ms()).await?;
    access.submit(&tx, ganglion_p2p::now_ms()).await?;
    tracing::info!(tx = %hex::encode(tx.hash), stake = bond.stake_ntx, "bond posted");
    let start = Instant::now();
    loop {
        if let Some(found) = find()? {
            return Ok(found);
        }
        if start.elapsed() > CHAIN_WAIT {
            return Err(DaemonError::BondTimeout(hex::encode(tx.hash)));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
