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

/// This owner's bond among `live` (the indexer's live UTxOs), as `ensure_bond` judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnBond {
    /// Not unbonding, holding its minimum stake: it backs jobs.
    Active(TxoRef, u64),
    /// Not unbonding but below its minimum stake (a slash took part of it): it backs no job
    /// until topped up, and no second bond is posted beside it.
    BelowMinimum {
        /// The bond.
        at: TxoRef,
        /// Its stake, NTX base units.
        stake: u64,
        /// The minimum for its GPUs, NTX base units.
        min: u64,
        /// The GPUs it backs.
        gpus: u64,
    },
}

impl BondOwner<'_> {
    /// This owner's bond among `live` (an active one first), judged against
    /// `min_bond_per_gpu` (NTX base units per GPU, the deployment's).
    fn bond_among(
        &self,
        live: &[ganglion_indexer::extract::Tracked],
        min_bond_per_gpu: u64,
    ) -> Option<OwnBond> {
        let peer = self.peer.to_bytes();
        let attest = self.attest.verifying_key().to_bytes();
        let mut below = None;
        for t in live {
            let Some(b) = t.bond() else { continue };
            if b.provider != self.provider
                || b.attest_key != attest
                || b.peer_id != peer
                || b.unbonding_since_ms.is_some()
            {
                continue;
            }
            let min = min_bond_per_gpu.saturating_mul(b.gpus);
            if t.ntx >= min {
                return Some(OwnBond::Active(t.reference, t.ntx));
            }
            below.get_or_insert(OwnBond::BelowMinimum {
                at: t.reference,
                stake: t.ntx,
                min,
                gpus: b.gpus,
            });
        }
        below
    }
}

/// The live bond naming `owner` (found in the caught-up `indexer`), or — when `bond` is set
/// and there is none — a bond of `bond.stake_ntx` for `bond.gpus` (default `gpus`) posted
/// through `access` and awaited. Returns the bond UTxO and its stake (NTX base units).
///
/// A bond of `owner` below its minimum stake (slashed) is returned as it is, with a warning
/// naming `ganglion provider bond top-up`: it backs no job until topped up, and posting a
/// second bond from `[bond]` beside it would lock more NTX than the user asked for.
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
    let min_per_gpu = deployment.params.min_bond_per_gpu;
    let find = || -> Result<Option<OwnBond>, DaemonError> {
        Ok(owner.bond_among(&indexer.live_utxos()?, min_per_gpu))
    };
    match find()? {
        Some(OwnBond::Active(at, stake)) => {
            tracing::info!(bond = %hex::encode(at.tx_hash), index = at.index, stake, "live bond found");
            return Ok((at, stake));
        }
        Some(OwnBond::BelowMinimum {
            at,
            stake,
            min,
            gpus,
        }) => {
            tracing::warn!(
                bond = %format!("{}#{}", hex::encode(at.tx_hash), at.index),
                stake,
                min,
                gpus,
                "the bond holds less than its minimum stake (a slash?): it backs no job and this                  node offers nothing until it is topped up (`ganglion provider bond top-up                  --stake-ntx <NTX base units>`); no second bond is posted"
            );
            return Ok((at, stake));
        }
        None => {}
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
        if let Some(OwnBond::Active(at, stake)) = find()? {
            return Ok((at, stake));
        }
        if start.elapsed() > CHAIN_WAIT {
            return Err(DaemonError::BondTimeout(hex::encode(tx.hash)));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use ganglion_contracts::v2::datum::{BondDatum, GanglionDatum};
    use ganglion_indexer::extract::Tracked;

    use super::*;

    const MIN: u64 = 100;

    fn owner_key() -> SigningKey {
        SigningKey::from_bytes(&[9; 32])
    }

    fn bond(owner: &BondOwner<'_>, at: u8, gpus: u64, ntx: u64, unbonding: bool) -> Tracked {
        Tracked {
            reference: TxoRef {
                tx_hash: [at; 32],
                index: 0,
            },
            datum: GanglionDatum::Bond(BondDatum {
                provider: owner.provider,
                attest_key: owner.attest.verifying_key().to_bytes(),
                peer_id: owner.peer.to_bytes(),
                payout: Payout::enterprise(owner.provider),
                gpus,
                unbonding_since_ms: unbonding.then_some(1),
                commitments: vec![],
            }),
            ntx,
            output: None,
        }
    }

    #[test]
    fn a_slashed_bond_is_kept_not_doubled_and_an_active_one_wins() {
        let key = owner_key();
        let owner = BondOwner {
            provider: [1; 28],
            attest: &key,
            peer: PeerId::random(),
        };
        // Slashed below 2 × 100: kept (and named), so no second bond is posted.
        let slashed = bond(&owner, 1, 2, 150, false);
        assert_eq!(
            owner.bond_among(std::slice::from_ref(&slashed), MIN),
            Some(OwnBond::BelowMinimum {
                at: slashed.reference,
                stake: 150,
                min: 200,
                gpus: 2
            })
        );
        // An active bond of the same owner is preferred, whatever the order.
        let active = bond(&owner, 2, 2, 200, false);
        assert_eq!(
            owner.bond_among(&[slashed.clone(), active.clone()], MIN),
            Some(OwnBond::Active(active.reference, 200))
        );
        // Unbonding bonds and other owners' bonds are not this node's live bond.
        let unbonding = bond(&owner, 3, 2, 500, true);
        let other_key = SigningKey::from_bytes(&[8; 32]);
        let other = BondOwner {
            provider: [2; 28],
            attest: &other_key,
            peer: owner.peer,
        };
        let theirs = bond(&other, 4, 2, 500, false);
        assert_eq!(owner.bond_among(&[unbonding, theirs], MIN), None);
    }
}
