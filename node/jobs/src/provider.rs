//! The provider's driver: an accepted request becomes a `Reserved` record; the assignment seen
//! on chain is dispatched through the executor (spec fetched by CID over bitswap); while the
//! containers run it sends heartbeats and keeps the orchestrator's best receipt, and stops
//! them when the orchestrator goes silent or the deadline comes ([`super::heartbeat`]); when
//! they end, the outputs and logs are pinned (by the executor), the attestation is signed with
//! the bond's attest key and the provider **claims its own pay** on chain with it and its best
//! receipt (escrow v2 `Claim`, the GPU time bounded as the validator bounds it); its claim
//! seen on chain (or a slash) ends the record (DESIGN §1, §3).
//!
//! Accept/refuse is decided and recorded in one step by [`super::accept`] (capacity, price,
//! deadline, reservations with a TTL, all read from these records).

use std::sync::Arc;

use ed25519_dalek::SigningKey;
use ganglion_contracts::tx::TxoRef;
use ganglion_contracts::v2::build::{self as v2build, ClaimRequest};
use ganglion_contracts::v2::datum::{Assignment, GanglionDatum, JobId};
use ganglion_contracts::v2::redeemer::{Attestation, SignedReceipt as ClaimReceipt};
use ganglion_contracts::v2::signed::{AttestationBody, sign};
use ganglion_indexer::JobStatus;
use ganglion_indexer::store::Kv;
use libp2p::PeerId;
use serde::{Deserialize, Serialize};

use super::cluster::{ClusterPeers, ClusterSetup, SetupFailure, peers_of};
use super::engine::{Ctx, EngineError, ProviderRecord, ProviderRole, SpecError};
use super::gpu_pick::{self, PooledGpu};
use super::orchestrator;
use super::state::{ProviderEvent, ProviderState};
use super::store::{DispatchIntent, JobStore, TxKind};
use super::submit;
use super::terms;
use ganglion_dispatch::executor::plan::{ContainerSlot, GpuAttachment, JobPlan};
use ganglion_dispatch::executor::{Executor, FailureReason, JobReport, Phase};
use ganglion_market::matching::Requirements;
use ganglion_market::snapshot::Offer as MarketOffer;
use ganglion_market::spec::Ensemble;
use ganglion_p2p::offers::OfferBody;

/// A provider node's part of the engine.
pub struct ProviderSide<E> {
    /// Runs the containers.
    pub executor: Arc<E>,
    /// The bond's attest key (the same as in the p2p `ProviderConfig`).
    pub attest: SigningKey,
    /// The live bond offered under.
    pub bond: TxoRef,
    /// This node's libp2p peer id (the bond's `peer_id`).
    pub peer_id: PeerId,
    /// The pooled GPUs: how each reaches a container and the model it is offered as
    /// ([`gpu_pick::pool`]). A job's share runs on those [`gpu_pick::pick`] chooses (meeting
    /// its spec, not held by this node's other jobs, the MIG rules), recorded with its dispatch.
    pub gpus: Vec<PooledGpu>,
    /// What is advertised (re-published every `EngineConfig::offer_every`).
    pub offer: MarketOffer,
    /// What this provider accepts (price, deadline, capacity, reservation TTL).
    pub policy: super::accept::AcceptPolicy,
    /// Sets up the job's network with the other assigned providers before each dispatch (the
    /// daemon's overlay), and answers their cluster hellos ([`ClusterSetup::answer`]); `None`
    /// when the executor's network needs no set-up (every hello is then `UnknownJob`).
    pub cluster: Option<Arc<dyn ClusterSetup>>,
    /// A Kubo RPC (`[storage] kubo_rpc`) a job's inputs and image archive are fetched from
    /// when the orchestrator's node does not serve them over bitswap; `None` = bitswap only.
    pub kubo: Option<ganglion_storage::pin::Kubo>,
}

/// Longest a fetch of one input (or image archive) from the Kubo RPC may take.
pub const KUBO_FETCH_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// What the executor produced, as attested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// Binary CID of the pinned outputs (empty when none).
    #[serde(with = "hex::serde")]
    pub result: Vec<u8>,
    /// Binary CID of the pinned logs (empty when none).
    #[serde(with = "hex::serde")]
    pub logs: Vec<u8>,
    /// Billable GPU-milliseconds as measured: the report's [`JobReport::billable_gpu_ms`]
    /// (0 when this node failed to deliver), at most the run limit's GPU time. The claim
    /// attests the smaller of this and the on-chain bound ([`super::receipts::claimable_gpu_ms`]).
    pub gpu_ms: u64,
    /// Exit code of this node's container (−1 when unknown).
    pub exit_code: i64,
}

/// What the provider keeps per job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProviderDetail {
    /// The orchestrator's peer id bytes (spec fetched from it, heartbeats sent to it).
    #[serde(with = "hex::serde")]
    pub orchestrator_peer: Vec<u8>,
    /// Reservation end, POSIX ms.
    pub reserved_until_ms: u64,
    /// GPUs reserved by the acceptance.
    #[serde(default)]
    pub reserved_gpus: u64,
    /// This provider's index in the assignment (its node rank).
    pub index: Option<u64>,
    /// The assignment, once on chain.
    pub assignments: Vec<Assignment>,
    /// The run's result.
    pub finished: Option<Finished>,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// A service's replica: the peers besides the orchestrator its spec names as gateways
    /// (`serve.gateways`, peer id bytes, the unparsable left out), let through to the replica
    /// like the orchestrator. Recorded at the dispatch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<Vec<u8>>,
    /// A service's replica: the usage it attested in its log when it ended (its best
    /// receipt's, signed by the orchestrator), kept after the receipt is dropped at the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::usage::Attested>,
}

/// The peers `spec` names as its gateways (`serve.gateways`), as peer id bytes; an entry that
/// does not parse as a peer id is left out (and logged).
pub fn gateways_of(spec: &Ensemble) -> Vec<Vec<u8>> {
    let Some(serve) = &spec.serve else {
        return Vec::new();
    };
    serve
        .gateways
        .iter()
        .filter_map(|g| match g.parse::<PeerId>() {
            Ok(p) => Some(p.to_bytes()),
            Err(e) => {
                tracing::warn!(gateway = %g, error = %e, "serve.gateways names no peer id: ignored");
                None
            }
        })
        .collect()
}

/// The executor job id of `job` at `rank` on the node with peer id `node`: 40 hex digits of
/// the job id, the rank and 8 hex digits of SHA-256 of the peer id
/// (`<40 hex>-n<rank>-<8 hex>`, within the executor's 64 characters).
///
/// The executor names its containers and the overlay its pods after this id, and finds,
/// adopts and removes them by the label carrying it. Several nodes may share one Docker Engine
/// (two providers of one job, or nodes of two chains whose job ids coincide — fresh devnets
/// seeded alike): were the id the same on two nodes, the second's pod or container name
/// conflicted (its set-up failed after it was assigned, and it attested 0 GPU-seconds) and one
/// node's clean-up force-removed the other's running containers (whose run then failed and was
/// paid 0). The node's own peer id in the id keeps every node's objects apart; it is stable
/// across restarts (the key lives in the data dir), and the dispatch intent records the id.
pub fn executor_job(job: &JobId, rank: u64, node: &PeerId) -> String {
    use sha2::{Digest, Sha256};
    let tag = Sha256::digest(node.to_bytes());
    format!(
        "{}-n{rank}-{}",
        &hex::encode(job.0)[..40],
        hex::encode(&tag[..4])
    )
}

/// The offer as published: [`with_busy`], and direct-capable when declared so or when AutoNAT
/// confirmed a public address (`nat`; `None` = the swarm did not answer).
pub fn advertised(
    offer: &MarketOffer,
    busy: u64,
    nat: Option<&libp2p::autonat::NatStatus>,
) -> MarketOffer {
    let mut o = with_busy(offer, busy);
    o.direct_capable |= matches!(nat, Some(libp2p::autonat::NatStatus::Public(_)));
    o
}

/// `offer` with `busy` GPUs taken out of its free counts, first group first.
pub fn with_busy(offer: &MarketOffer, busy: u64) -> MarketOffer {
    let mut o = offer.clone();
    let mut left = busy;
    for g in &mut o.gpus {
        let take = u64::from(g.free).min(left);
        g.free -= take as u32;
        left -= take;
    }
    o
}

/// GPUs held by this provider's jobs assigned on chain and not yet finished. Reservations do
/// not count: the accept protocol enforces them (a provider without room refuses and the
/// orchestrator re-matches), and counting them would hide a provider from the re-match of the
/// very job it reserved for.
pub(crate) fn busy_gpus(records: &[ProviderRecord]) -> u64 {
    records
        .iter()
        .filter(|r| holds_gpus(r.state))
        .filter_map(|r| {
            let i = usize::try_from(r.detail.index?).ok()?;
            r.detail.assignments.get(i).map(|a| a.gpus)
        })
        .sum()
}

/// Whether a job in `state` holds this provider's GPUs: assigned on chain, containers not yet
/// ended.
pub(crate) fn holds_gpus(state: ProviderState) -> bool {
    matches!(
        state,
        ProviderState::Assigned
            | ProviderState::Preparing
            | ProviderState::Running
            | ProviderState::Finished
    )
}

/// The GPUs this provider's jobs hold, but `except`'s ([`holds_gpus`]): the ids recorded with
/// their dispatch, and the count of those not dispatched yet (assigned, GPUs not chosen).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Held {
    /// Pooled GPU ids ([`PooledGpu::id`]) recorded by dispatched jobs.
    pub ids: Vec<String>,
    /// GPUs of jobs holding GPUs not chosen yet.
    pub unplanned: u64,
}

/// [`Held`] by `records` of this provider with `pool`.
pub(crate) fn held_gpus(
    pool: &[PooledGpu],
    records: &[ProviderRecord],
    except: Option<&JobId>,
) -> Held {
    let mut held = Held::default();
    for r in records
        .iter()
        .filter(|r| holds_gpus(r.state) && Some(&r.job_id) != except)
    {
        match &r.dispatch {
            Some(d) => held.ids.extend(recorded_gpus(pool, r, d)),
            None => held.unplanned += share(r),
        }
    }
    held
}

/// The GPUs of this node's share of `r` (its assignment at its index; 0 before one).
fn share(r: &ProviderRecord) -> u64 {
    r.detail
        .index
        .and_then(|i| r.detail.assignments.get(usize::try_from(i).ok()?))
        .map_or(0, |a| a.gpus)
}

/// The GPU ids `r`'s dispatch `d` runs on: those recorded, or for a dispatch written before
/// they were (no `gpus`), the first of the pool, as that node version gave them.
fn recorded_gpus(pool: &[PooledGpu], r: &ProviderRecord, d: &DispatchIntent) -> Vec<String> {
    if d.gpus.is_empty() {
        let n = usize::try_from(share(r)).unwrap_or(usize::MAX);
        return pool.iter().take(n).map(|g| g.id.clone()).collect();
    }
    d.gpus.clone()
}

/// This provider's bond UTxO now: every assign that commits the bond and every claim that
/// releases it continues it at a new UTxO (escrow v2), so the offer and the claim name the
/// live one the indexer sees (the one the node started with until then).
fn current_bond<S: Kv, E: Executor>(ctx: &Ctx<S, E>, side: &ProviderSide<E>) -> TxoRef {
    active_bond(ctx, side).map_or(side.bond, |b| b.bond)
}

/// This provider's active bond as the indexer sees it (not unbonding, stake at least the
/// minimum for its GPUs), whichever UTxO it is at now: the one the node started with, its
/// continuations, or one posted (`provider_post`) or topped up (`provider_topUp`) since.
fn active_bond<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    side: &ProviderSide<E>,
) -> Option<ganglion_indexer::query::ActiveBond> {
    let attest = side.attest.verifying_key().to_bytes();
    ctx.live_bond(&ctx.chain.key_hash(), Some(&attest))
        .ok()
        .flatten()
}

/// GPUs a stake of `stake` NTX base units backs at `min_per_gpu` each (the offer's
/// `bond_gpus`).
pub fn bond_gpus(stake: u64, min_per_gpu: u64) -> u32 {
    u32::try_from(stake / min_per_gpu.max(1)).unwrap_or(u32::MAX)
}

/// Publishes this provider's offer (fresh timestamps, GPUs of unfinished jobs taken out)
/// under its active bond, with the GPUs that bond's stake backs now, this node's fresh link
/// measurements ([`super::links::offer_links`]) and its best measured uplink. Without an
/// active bond (withdrawn, unbonding, slashed below its minimum) nothing is offered until one
/// is posted or topped up: an offer naming a spent bond would only be dropped by every peer.
/// Publishing before any peer joined the topic fails; that is only logged.
pub(crate) async fn publish_offer<S: Kv, E: Executor>(ctx: &Ctx<S, E>) {
    let Some(side) = &ctx.provider else { return };
    let Some(bond) = active_bond(ctx, side) else {
        tracing::debug!("no active bond: no offer (post or top up a bond)");
        return;
    };
    let now = ctx.now();
    let records = ctx.store.all::<ProviderRole>().unwrap_or_default();
    let held = held_gpus(&side.gpus, &records, None);
    let nat = ctx.p2p.nat_status().await.ok();
    let mut market = advertised(
        &gpu_pick::with_held(&side.offer, &side.gpus, &held.ids),
        held.unplanned,
        nat.as_ref(),
    );
    market.bond_gpus = bond_gpus(bond.stake, ctx.chain.deployment().params.min_bond_per_gpu);
    // The best send rate a throughput probe measured (`p2p::probe`); without one, the
    // configured figure stands (the daemon's "unmeasured" default).
    if let Some(best) = ctx.p2p.throughputs().into_values().max() {
        market.uplink_mbps = best;
    }
    let mut body = OfferBody {
        network_magic: ctx.chain_magic(),
        bond: bond.bond,
        peer_id: side.peer_id.to_bytes(),
        addrs: vec![],
        market,
        issued_ms: now,
        expires_ms: now + ctx.config.offer_ttl_ms,
        links: super::links::offer_links(&ctx.p2p, &side.peer_id, now).await,
    };
    let dropped = ganglion_p2p::links::fit(&mut body);
    if dropped > 0 {
        tracing::debug!(dropped, "offer too large: its last links left out");
    }
    if let Err(e) = ctx.p2p.publish_offer(body.sign(&side.attest)).await {
        tracing::debug!(error = %e, "offer not published");
    }
}

/// One pass over every unfinished provider job.
pub(crate) async fn pass<S: Kv + 'static, E: Executor + 'static>(ctx: &Arc<Ctx<S, E>>) {
    if ctx.provider.is_none() {
        return;
    }
    let records = match ctx.store.all::<ProviderRole>() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "job store unreadable");
            return;
        }
    };
    for r in records.into_iter().filter(|r| !r.state.is_terminal()) {
        let job = r.job_id;
        if let Err(e) = step(ctx, r).await {
            // A failure no retry can mend is an error for the operator; the rest are
            // passing (the next pass, or the retry governor, tries again).
            crate::retry::log_step_failure("provider step", &job, &e);
            // For status displays (`job_status`'s `last_error`).
            let why = e.to_string();
            if let Ok(Some(mut rec)) = ctx.store.get::<ProviderRole>(&job)
                && rec.detail.error.as_deref() != Some(why.as_str())
            {
                rec.detail.error = Some(why);
                let _ = ctx.store.set_detail::<ProviderRole>(&job, rec.detail);
            }
        }
    }
}

fn apply<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    event: ProviderEvent,
) -> Result<ProviderState, EngineError> {
    apply_with(ctx, job, event, None)
}

/// [`apply`] with the record's new detail written in the same store write.
fn apply_with<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    event: ProviderEvent,
    detail: Option<ProviderDetail>,
) -> Result<ProviderState, EngineError> {
    let to = ctx
        .store
        .apply_with::<ProviderRole>(job, event, detail, ctx.now(), None)?;
    tracing::info!(job = %job, ?event, state = ?to, "provider");
    if to.is_terminal() {
        ctx.store.forget_receipt(job)?;
    }
    Ok(to)
}

fn fail<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    why: String,
) -> Result<(), EngineError> {
    let mut d = r.detail.clone();
    d.error = Some(why);
    apply_with(ctx, &r.job_id, ProviderEvent::Failed, Some(d))?;
    Ok(())
}

async fn step<S: Kv + 'static, E: Executor + 'static>(
    ctx: &Arc<Ctx<S, E>>,
    r: ProviderRecord,
) -> Result<(), EngineError> {
    let Some(side) = &ctx.provider else {
        return Ok(());
    };
    let me = ctx.chain.key_hash();
    let job = r.job_id;
    let view = ctx
        .indexer
        .job(&job, ctx.config.depth)?
        .filter(|c| !c.tentative)
        .map(|c| c.value);
    // This provider's claim on chain: paid, whoever submitted it.
    if let (Some(v), Some(i)) = (&view, r.detail.index)
        && v.has_claimed(usize::try_from(i).unwrap_or(usize::MAX))
    {
        if matches!(r.state, ProviderState::Finished | ProviderState::Claiming) {
            apply(ctx, &job, ProviderEvent::PaymentSeen)?;
        }
        return Ok(());
    }
    // Endings on chain.
    if let Some(v) = &view
        && matches!(
            v.status,
            JobStatus::Claimed | JobStatus::Expired | JobStatus::Cancelled
        )
    {
        if v.defaulters().contains(&me)
            && matches!(
                r.state,
                ProviderState::Assigned
                    | ProviderState::Preparing
                    | ProviderState::Running
                    | ProviderState::Finished
                    | ProviderState::Claiming
            )
        {
            apply(ctx, &job, ProviderEvent::SlashSeen)?;
        } else if !matches!(r.state, ProviderState::Preparing | ProviderState::Running) {
            // Running containers are left to finish (and be cleaned up) by the executor.
            fail(
                ctx,
                &r,
                format!("job ended on chain ({:?}) without paying us", v.status),
            )?;
        }
        return Ok(());
    }
    match r.state {
        ProviderState::Reserved => {
            match &view {
                // Another provider may have claimed already (`Claiming`).
                Some(v) if matches!(v.status, JobStatus::Assigned | JobStatus::Claiming) => {
                    match v.assignments.iter().position(|a| a.provider == me) {
                        Some(i) => {
                            let mut d = r.detail.clone();
                            d.index = Some(i as u64);
                            d.assignments = v.assignments.clone();
                            apply_with(ctx, &job, ProviderEvent::AssignmentSeen, Some(d))?;
                        }
                        // Passed over by the assign (or rescale) that followed the
                        // reservation; a reservation for a running service waits for the
                        // rescale that adds it, until it lapses.
                        None if assigned_since(ctx, v, reserved_at(&r)) => {
                            fail(ctx, &r, "assigned to other providers".into())?;
                        }
                        None if ctx.now()
                            > r.detail.reserved_until_ms + ctx.config.reservation_grace_ms =>
                        {
                            fail(ctx, &r, "reservation lapsed without an assignment".into())?;
                        }
                        None => {}
                    }
                }
                _ if ctx.now() > r.detail.reserved_until_ms + ctx.config.reservation_grace_ms => {
                    fail(ctx, &r, "reservation lapsed without an assignment".into())?;
                }
                _ => {}
            }
            Ok(())
        }
        ProviderState::Assigned => {
            let Some(v) = &view else { return Ok(()) };
            dispatch(ctx, side, &r, v).await
        }
        ProviderState::Preparing | ProviderState::Running => {
            watch(ctx, side, &r, view.as_ref()).await
        }
        ProviderState::Finished | ProviderState::Claiming => {
            let now = ctx.now();
            super::retry::governed(
                &ctx.retries,
                &job,
                TxKind::Claim,
                now,
                claim(ctx, side, &r, view.as_ref()),
            )
            .await
        }
        _ => Ok(()),
    }
}

/// When `r` was reserved, POSIX ms (this node's clock): its first transition.
fn reserved_at(r: &ProviderRecord) -> u64 {
    r.history.first().map_or(0, |t| t.at_ms)
}

/// Whether `view`'s assignments last changed (its assign, or a rescale of a service) at or
/// after `since_ms`: a reservation made before that change and not in it was passed over.
fn assigned_since<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    view: &ganglion_indexer::JobView,
    since_ms: u64,
) -> bool {
    use ganglion_indexer::event::Event;
    view.history
        .iter()
        .rev()
        .find(|h| {
            matches!(
                h.event,
                Event::JobAssigned { .. } | Event::JobRescaled { .. }
            )
        })
        .is_some_and(|h| ctx.chain.slot_start_ms(h.meta.slot) >= since_ms)
}

/// Claims this provider's pay for `r` (escrow v2 `Claim`): its attestation of the run's GPU
/// time — at most what the validator pays with its best receipt at this claim's validity lower
/// bound ([`super::receipts::claimable_gpu_ms`]), so the claim never fails on the bound — and
/// that receipt. A claim in flight is re-submitted until its short validity ends, then built
/// again on the escrow as it is then (another provider's claim may have spent the one it named).
async fn claim<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
    view: Option<&ganglion_indexer::JobView>,
) -> Result<(), EngineError> {
    let job = r.job_id;
    if let Some(i) = r.intent(TxKind::Claim)
        && !submit::lapsed(ctx, i)
    {
        submit::nudge(ctx, i).await;
        return Ok(());
    }
    let Some(v) = view else { return Ok(()) };
    let (Some(index), Some(f)) = (r.detail.index, &r.detail.finished) else {
        return fail(ctx, r, "finished without a result".into());
    };
    let Some(terms) = super::receipts::Terms::of(v, index) else {
        return Ok(());
    };
    let now = ctx.now();
    let window_end = v.claim_window_end_ms;
    let from_slot = ctx.chain.slot_at(now);
    // The claim's upper bound may not lie past the deadline plus the claim window.
    let until = (from_slot + CLAIM_VALIDITY_SLOTS).min(ctx.chain.slot_at(window_end));
    if until <= from_slot {
        return fail(ctx, r, "the claim window ended before the claim".into());
    }
    let lower_bound_ms = ctx.chain.slot_start_ms(from_slot);
    let held = ctx.store.receipt(&job)?;
    let held_until = held.as_ref().map(super::receipts::acknowledged);
    let gpu_ms = match ctx.config.overclaim_factor {
        0 | 1 => super::receipts::claimable_gpu_ms(&terms, held.as_ref(), f.gpu_ms, lower_bound_ms),
        factor => {
            tracing::warn!(job = %job, measured = f.gpu_ms, factor,
                "overclaiming (a cheating provider, devnet demo): the validator will refuse it");
            f.gpu_ms.saturating_mul(factor)
        }
    };
    if gpu_ms < f.gpu_ms {
        tracing::info!(job = %job, measured = f.gpu_ms, claimed = gpu_ms,
            "claiming what the receipts and the elapsed time allow");
    }
    let me = ctx.chain.key_hash();
    let body = AttestationBody {
        job_id: job,
        provider: me,
        result: f.result.clone(),
        logs: f.logs.clone(),
        gpu_ms,
        exit_code: f.exit_code,
    };
    // The result and log blocks on disk before a signature names them: after a crash the
    // auditor must still find them here.
    ctx.blockstore.flush()?;
    let attestation = Attestation {
        result: body.result.clone(),
        logs: body.logs.clone(),
        gpu_ms,
        exit_code: f.exit_code,
        signature: sign(&side.attest, &body.signed_bytes()),
    };
    let escrow_at = orchestrator::escrow_ref(v).ok_or_else(|| EngineError::State {
        job,
        reason: "no escrow".into(),
    })?;
    let escrow = ctx.chain.script_utxos(&[escrow_at]).await?;
    let release = releasable_bond(ctx, side, &job).await;
    let draft = v2build::claim(
        ctx.chain.deployment(),
        ctx.chain.env(),
        &ClaimRequest {
            escrow: escrow[0].clone(),
            index,
            attestation,
            receipt: held.map(|h| ClaimReceipt {
                acknowledged_until_ms: h.receipt.acknowledged_until_ms,
                signature: h.signature.to_vec(),
            }),
            valid_from_slot: from_slot,
            valid_until_slot: until,
            release,
        },
    )
    .map_err(super::chain::ChainError::from)?;
    let bound_gpu_ms = ganglion_contracts::v2::rules::claim_bound_gpu_ms(
        terms.gpus,
        terms.started_at_ms,
        terms.until_ms,
        terms.receipt_interval_ms,
        held_until,
        lower_bound_ms,
    );
    let tx = match ctx.chain.build(draft, now).await {
        Ok(tx) => tx,
        Err(source) if gpu_ms > bound_gpu_ms => {
            return Err(EngineError::ClaimAboveBound {
                claimed_gpu_ms: gpu_ms,
                bound_gpu_ms,
                source,
            });
        }
        Err(e) => return Err(e.into()),
    };
    // Submitted before its intent is written: a claim the ledger refuses (another provider's
    // claim spent the escrow UTxO first) leaves nothing to wait for, and the next try builds
    // on the escrow's new UTxO. A crash in between is harmless: a second claim of the same
    // assignment is refused on chain.
    tracing::info!(job = %job, gpu_ms, "claiming");
    submit::ledger_first::<ProviderRole, S, E>(ctx, &job, TxKind::Claim, tx, Some(until)).await?;
    if r.state == ProviderState::Finished {
        apply(ctx, &job, ProviderEvent::ClaimSubmitted)?;
    }
    Ok(())
}

/// This provider's live bond when it still holds a commitment to `job`: the claim spends it
/// and drops that commitment (DESIGN §3.1 G5: a claimed assignment no longer holds the bond's
/// GPUs, so the next job can use them before this one's deadline + claim window). `None` when
/// the bond cannot be read now (the claim then leaves the commitment to lapse) or holds none.
async fn releasable_bond<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    side: &ProviderSide<E>,
    job: &JobId,
) -> Option<ganglion_contracts::tx::Utxo> {
    let at = current_bond(ctx, side);
    match ctx.chain.script_utxos(&[at]).await {
        Ok(mut utxos) if utxos.len() == 1 => {
            let bond = utxos.remove(0);
            let commits = bond
                .output
                .datum
                .as_ref()
                .and_then(|d| GanglionDatum::from_plutus_data(d).ok())
                .is_some_and(|d| matches!(&d, GanglionDatum::Bond(b) if b.commits_to(job)));
            commits.then_some(bond)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(job = %job, error = %e, "bond not read: the claim leaves its commitment to lapse");
            None
        }
    }
}

/// Validity of a claim transaction, slots: short, so that a claim that lost the race for the
/// escrow UTxO to another provider's claim is built again soon on the escrow's next UTxO.
const CLAIM_VALIDITY_SLOTS: u64 = 15;

/// Fetches the spec by CID (bitswap, from the orchestrator) and reads it from the blockstore.
async fn fetch_spec<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    spec_cid: &[u8],
) -> Result<Ensemble, EngineError> {
    let peer =
        PeerId::from_bytes(&r.detail.orchestrator_peer).map_err(SpecError::OrchestratorPeer)?;
    read_spec(ctx, peer, spec_cid).await
}

/// The ensemble spec `spec_cid` (binary CID), fetched over bitswap from `peer` (or read from
/// the blockstore when held) and parsed.
///
/// # Errors
/// [`SpecError`] (CID, blocks, JSON), p2p fetch failures.
pub(crate) async fn read_spec<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    spec_cid: &[u8],
) -> Result<Ensemble, EngineError> {
    let cid = cid::Cid::try_from(spec_cid).map_err(SpecError::Cid)?;
    ctx.p2p.fetch_dag(cid, peer).await?;
    let mut json = Vec::new();
    ganglion_storage::unixfs::cat(&ctx.blockstore, &cid, &mut json).map_err(SpecError::Read)?;
    Ok(Ensemble::from_json_str(&String::from_utf8_lossy(&json)).map_err(SpecError::from)?)
}

/// Fetches the spec's inputs and image archive into this node's blockstore over bitswap, from
/// the orchestrator (who serves what it `storage add`ed) or any connected peer holding the
/// blocks, else — when the node has one ([`ProviderSide::kubo`]) — from its Kubo RPC
/// (`dag/export`), each block checked against its CID. Blocks already held are not fetched
/// again.
///
/// # Errors
/// The first CID that could not be fetched, naming where the spec puts it and why.
async fn fetch_content<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    spec: &Ensemble,
) -> Result<(), String> {
    let peer = PeerId::from_bytes(&r.detail.orchestrator_peer)
        .map_err(|e| format!("the orchestrator's peer id does not parse: {e}"))?;
    let wanted = spec
        .inputs
        .iter()
        .map(|i| (i.cid.0, format!("input {}", i.path)))
        .chain(
            spec.image
                .archive
                .iter()
                .map(|a| (a.cid.0, "the image archive".to_string())),
        );
    let kubo = ctx.provider.as_ref().and_then(|side| side.kubo.as_ref());
    for (cid, what) in wanted {
        let e = match ctx.p2p.fetch_dag(cid, peer).await {
            Ok(fetched) => {
                tracing::info!(job = %r.job_id, %cid, %what, blocks = fetched.blocks, bytes = fetched.bytes, "fetched");
                continue;
            }
            Err(e) => e,
        };
        let Some(kubo) = kubo else {
            return Err(format!(
                "{what} ({cid}) could not be fetched from the orchestrator: {e}"
            ));
        };
        tracing::info!(job = %r.job_id, %cid, %what, error = %e,
            "not served over bitswap: fetching from the Kubo RPC");
        match kubo
            .fetch_into(&cid, &ctx.blockstore, KUBO_FETCH_LIMIT)
            .await
        {
            Ok(fetched) => {
                tracing::info!(job = %r.job_id, %cid, %what, blocks = fetched.blocks, bytes = fetched.bytes, "fetched from the Kubo RPC");
            }
            Err(k) => {
                return Err(format!(
                    "{what} ({cid}) could not be fetched from the orchestrator ({e}) nor from \
                     the Kubo RPC ({k})"
                ));
            }
        }
    }
    Ok(())
}

/// Why this node's share of a job cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unplannable {
    /// Its GPUs: too few pooled GPUs meeting the spec are free ([`gpu_pick::PickRefusal`]), or a
    /// GPU recorded with its dispatch is no longer pooled.
    Gpus(String),
    /// The executor plan.
    Plan(String),
}

/// The GPUs (indices into `pool`) of this node's share of `r`, `n` GPUs: those recorded with
/// its dispatch ([`recorded_gpus`]), else [`gpu_pick::pick`]'s among those the other jobs of
/// `records` do not hold.
fn gpus_for(
    pool: &[PooledGpu],
    records: &[ProviderRecord],
    r: &ProviderRecord,
    spec: &Ensemble,
    n: u64,
) -> Result<Vec<usize>, String> {
    if let Some(d) = &r.dispatch {
        return recorded_gpus(pool, r, d)
            .iter()
            .map(|id| {
                pool.iter().position(|g| g.id == *id).ok_or_else(|| {
                    format!("GPU {id}, recorded for this job at its dispatch, is no longer pooled")
                })
            })
            .collect();
    }
    let held = held_gpus(pool, records, Some(&r.job_id));
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    gpu_pick::pick(pool, &Requirements::from_ensemble(spec), &held.ids, n)
        .map_err(|e| format!("refused: {e}"))
}

/// The executor plan of this node's share of the job (node rank `index`; a service's replica
/// is node rank 0 of a world of its own) and the ids of the GPUs it runs on ([`gpus_for`]).
fn plan_on(
    pool: &[PooledGpu],
    peer: &PeerId,
    records: &[ProviderRecord],
    r: &ProviderRecord,
    index: u64,
    spec: &Ensemble,
) -> Result<(JobPlan, Vec<String>), Unplannable> {
    let n = usize::try_from(index)
        .ok()
        .and_then(|i| r.detail.assignments.get(i))
        .map_or(0, |a| a.gpus);
    let mine = gpus_for(pool, records, r, spec, n).map_err(Unplannable::Gpus)?;
    let attached = || mine.iter().map(|&g| pool[g].attachment.clone()).collect();
    let exec_id = ganglion_dispatch::executor::RunId::new(executor_job(&r.job_id, index, peer))
        .map_err(|e| Unplannable::Plan(format!("cannot plan the job: {e}")))?;
    // A service's replica is a world of its own: it shares no network or rendezvous with the
    // other replicas (the gateway reaches each through its provider's node).
    if spec.kind == ganglion_market::JobKind::Service {
        let world = vec![ContainerSlot {
            node_rank: 0,
            gpus: attached(),
        }];
        let plan = JobPlan::from_ensemble(exec_id, spec, world, vec![0])
            .map_err(|e| Unplannable::Plan(format!("cannot plan the replica: {e}")))?;
        return Ok((plan, mine.iter().map(|&g| pool[g].id.clone()).collect()));
    }
    let world: Vec<ContainerSlot> = r
        .detail
        .assignments
        .iter()
        .enumerate()
        .map(|(i, a)| ContainerSlot {
            node_rank: i as u32,
            gpus: if i as u64 == index {
                attached()
            } else {
                (0..a.gpus)
                    .map(|g| GpuAttachment::Declared {
                        id: format!("peer-{i}-{g}"),
                    })
                    .collect()
            },
        })
        .collect();
    let plan = JobPlan::from_ensemble(exec_id, spec, world, vec![index as u32])
        .map_err(|e| Unplannable::Plan(format!("cannot plan the job: {e}")))?;
    Ok((plan, mine.iter().map(|&g| pool[g].id.clone()).collect()))
}

/// What [`prepare`] decided for an assigned job.
#[derive(Debug)]
enum Prepared {
    /// Run `plan`: its dispatch intent, with the GPUs chosen, is written.
    Run {
        /// The plan, cut to end before the deadline.
        plan: Box<JobPlan>,
        /// The intent as written.
        intent: DispatchIntent,
    },
    /// Refused before any container: the terms, or too few free GPUs meeting the spec.
    Refuse(String),
    /// Cannot be planned.
    Fail(String),
}

/// The dispatch decision for this node's share (node rank `r.detail.index`) of the assigned
/// job `r` with `spec`: its GPUs chosen among those this node's other jobs do not hold
/// ([`gpu_pick::pick`]), the terms checked and the run cut to the deadline, then the dispatch
/// intent, with the GPU ids, written durably before the executor sees the job (a restart
/// re-plans onto the same GPUs; later picks see them held). Synchronous from reading the
/// records to writing the intent, so no other dispatch of this engine picks in between.
fn prepare(
    store: &JobStore,
    side_pool: &[PooledGpu],
    peer: &PeerId,
    r: &ProviderRecord,
    spec: &Ensemble,
    view: &ganglion_indexer::JobView,
    now_ms: u64,
) -> Result<Prepared, EngineError> {
    let Some(index) = r.detail.index else {
        return Ok(Prepared::Fail("assigned without an index".into()));
    };
    let records = store.all::<ProviderRole>()?;
    let (mut plan, gpus) = match plan_on(side_pool, peer, &records, r, index, spec) {
        Ok(p) => p,
        Err(Unplannable::Gpus(why)) => return Ok(Prepared::Refuse(why)),
        Err(Unplannable::Plan(why)) => return Ok(Prepared::Fail(why)),
    };
    // Before any container: terms no run can meet are refused, and the run is cut to end
    // before the deadline (DESIGN §3.1 G3: the provider stops in time and attests what ran).
    let limit_s = match admitted_run_s(view, plan.max_duration_s, now_ms) {
        Ok(s) => s,
        Err(why) => return Ok(Prepared::Refuse(why)),
    };
    if limit_s < plan.max_duration_s {
        tracing::info!(job = %r.job_id, max_duration_s = plan.max_duration_s, limit_s,
            "the run is cut to stop before the deadline");
        plan.max_duration_s = limit_s;
    }
    // Written before the executor sees the job: a restart finds it and never starts a second.
    let intent = store.record_dispatch::<ProviderRole>(
        &r.job_id,
        DispatchIntent {
            executor_job: plan.job.to_string(),
            written_ms: now_ms,
            gpus,
        },
    )?;
    Ok(Prepared::Run {
        plan: Box::new(plan),
        intent,
    })
}

async fn dispatch<S: Kv + 'static, E: Executor + 'static>(
    ctx: &Arc<Ctx<S, E>>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
    view: &ganglion_indexer::JobView,
) -> Result<(), EngineError> {
    let job = r.job_id;
    let Some(index) = r.detail.index else {
        return fail(ctx, r, "assigned without an index".into());
    };
    let spec = fetch_spec(ctx, r, &view.spec).await?;
    // The job's content before any container: a share whose inputs or image archive cannot be
    // fetched never starts (and claims that nothing ran, naming the CID).
    if let Err(why) = fetch_content(ctx, r, &spec).await {
        return refuse(ctx, r, why);
    }
    let prepared = prepare(
        &ctx.store,
        &side.gpus,
        &side.peer_id,
        r,
        &spec,
        view,
        ctx.now(),
    )?;
    match prepared {
        Prepared::Run { plan, intent } => {
            tracing::info!(job = %job, gpus = ?intent.gpus, "dispatching");
            let gateways = gateways_of(&spec);
            if gateways.is_empty() {
                apply(ctx, &job, ProviderEvent::Dispatched)?;
            } else {
                // Read again: `prepare` wrote the dispatch intent into the record.
                let mut det = ctx
                    .store
                    .get::<ProviderRole>(&job)?
                    .map_or_else(|| r.detail.clone(), |now| now.detail);
                det.gateways = gateways;
                apply_with(ctx, &job, ProviderEvent::Dispatched, Some(det))?;
            }
            spawn_run(ctx, side, r, index, intent.executor_job, *plan);
            Ok(())
        }
        Prepared::Refuse(why) => refuse(ctx, r, why),
        Prepared::Fail(why) => fail(ctx, r, why),
    }
}

/// How long this node's share of `view` may run when started at `now_ms` (POSIX ms):
/// `max_duration_s` cut to end [`terms::SETTLE_MARGIN_MS`] before the deadline.
///
/// # Errors
/// The refusal, as recorded and logged: the escrow's budget left cannot pay every running
/// assignment at its rate for `max_duration_s` ([`terms::TermsError::BudgetBelowWindow`]),
/// or no time is left before the deadline ([`terms::TermsError::DurationPastDeadline`]).
fn admitted_run_s(
    view: &ganglion_indexer::JobView,
    max_duration_s: u64,
    now_ms: u64,
) -> Result<u64, String> {
    // What the escrow still holds against the assignments still running (a service's
    // released or claimed replicas are paid, or bounded, already).
    let paid: u64 = view.claims.iter().flatten().map(|c| c.paid).sum();
    let running = super::service::running(view);
    terms::check_assigned(
        view.budget.saturating_sub(paid),
        running
            .iter()
            .filter_map(|&i| view.assignments.get(usize::try_from(i).ok()?))
            .map(|a| (a.gpus, a.rate)),
        max_duration_s,
    )
    .map_err(|e| format!("refused the terms: {e}"))?;
    match terms::run_limit_s(max_duration_s, view.deadline_ms, now_ms) {
        0 => Err(format!(
            "refused the terms: {}",
            terms::TermsError::DurationPastDeadline {
                max_duration_s,
                left_ms: view.deadline_ms.saturating_sub(now_ms),
                margin_ms: terms::SETTLE_MARGIN_MS,
            }
        )),
        s => Ok(s),
    }
}

/// Refuses an assignment before any container exists: records why and goes straight to
/// `Finished` with nothing run (0 GPU-ms, exit code −1), so the claim says so and this
/// provider is no defaulter (an assigned provider that never claims is slashed).
fn refuse<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    why: String,
) -> Result<(), EngineError> {
    tracing::warn!(job = %r.job_id, %why, "assignment refused; attesting that nothing ran");
    let mut d = r.detail.clone();
    d.finished = Some(Finished {
        result: vec![],
        logs: noted_log(ctx, r, &[], r.detail.index, &why),
        gpu_ms: 0,
        exit_code: -1,
    });
    d.error = Some(why);
    if r.state == ProviderState::Assigned {
        apply_with(ctx, &r.job_id, ProviderEvent::Dispatched, Some(d))?;
        apply(ctx, &r.job_id, ProviderEvent::Exited)?;
    } else {
        apply_with(ctx, &r.job_id, ProviderEvent::Exited, Some(d))?;
    }
    Ok(())
}

/// The log to attest for a share that failed or never ran: `container_log` (binary CID, empty
/// when none) with the reason appended ([`super::failure_note`]); `container_log` unchanged
/// when the note cannot be pinned (logged: the claim must not wait on it).
fn noted_log<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    container_log: &[u8],
    index: Option<u64>,
    why: &str,
) -> Vec<u8> {
    super::failure_note::pin(&ctx.blockstore, container_log, index, why).unwrap_or_else(|e| {
        tracing::warn!(job = %r.job_id, error = %e, "cannot pin the failure note; attesting the log as it is");
        container_log.to_vec()
    })
}

/// Starts this node's share of the job in the background: first the job's network with the
/// other assigned providers (when the side has a [`ClusterSetup`]), then the executor. A failed
/// set-up leaves the job to the next pass (`watch` finds no executor record and calls again),
/// until [`ClusterSetup::give_up_after`] from the dispatch: then the share ends with nothing
/// run ([`refuse`]: no GPU time claimed, no default) and the orchestrator is told which nodes
/// did not answer ([`super::heartbeat::report_unformed`]).
fn spawn_run<S: Kv + 'static, E: Executor + 'static>(
    ctx: &Arc<Ctx<S, E>>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
    index: u64,
    id: String,
    plan: JobPlan,
) {
    {
        let mut running = ctx.running.lock().unwrap_or_else(|p| p.into_inner());
        if !running.insert(id.clone()) {
            return;
        }
    }
    let exec = side.executor.clone();
    // The job's network is the plan's world: every assigned provider for a batch job, this
    // node alone for a service's replica (node rank 0 of a world of one, no peer to agree
    // with).
    let cluster = side.cluster.clone().map(|setup| {
        let rank = plan
            .local
            .first()
            .copied()
            .unwrap_or_else(|| u32::try_from(index).unwrap_or(u32::MAX));
        let world = u32::try_from(plan.world.len()).unwrap_or(u32::MAX);
        let peers = if world == 1 {
            Ok(Vec::new())
        } else {
            peers_of(&ctx.indexer, &r.detail.assignments, rank)
        };
        let peers = peers.map(|peers| ClusterPeers {
            job: r.job_id,
            exec_job: plan.job.clone(),
            rank,
            world,
            peers,
        });
        (setup, peers)
    });
    // Weak: a stopped engine's context (its store) must not live on in a running job's task.
    let weak = Arc::downgrade(ctx);
    let p2p = ctx.p2p.clone();
    let stopping = ctx.stopping.clone();
    let run_id = id.clone();
    let job_id = r.job_id;
    let dispatched_ms = r
        .dispatch
        .as_ref()
        .map_or_else(|| ctx.now(), |d| d.written_ms);
    // Set once the executor has the plan: from then on its set-up is not cut half-way.
    let handed_over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = (side.executor.clone(), handed_over.clone(), plan.job.clone());
    let run = async move {
        if let Some((setup, peers)) = &cluster {
            let ready = match peers {
                Ok(peers) => setup.prepare(&p2p, peers).await,
                Err(why) => Err(SetupFailure::from(why.clone())),
            };
            if let Err(why) = ready {
                let Some(ctx) = weak.upgrade() else { return };
                ctx.running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                let limit = setup.give_up_after();
                let waited_ms = ctx.now().saturating_sub(dispatched_ms);
                if u128::from(waited_ms) < limit.as_millis() {
                    tracing::warn!(job = %id, error = %why, "job network not ready (retried)");
                    return;
                }
                if let Ok(Some(rec)) = ctx.store.get::<ProviderRole>(&job_id)
                    && rec.state == ProviderState::Preparing
                {
                    let note = format!(
                        "the job network did not form within {} s: {why}",
                        limit.as_secs()
                    );
                    match refuse(&ctx, &rec, note) {
                        Ok(()) if !why.unreachable.is_empty() => {
                            super::heartbeat::report_unformed(&ctx, &rec, index, &why.unreachable);
                        }
                        Ok(()) => {}
                        Err(e) => {
                            tracing::error!(job = %job_id, error = %e, "cannot record the refusal")
                        }
                    }
                }
                // Given up: what was announced for the job goes (its key kept on disk too).
                setup.forget(&job_id);
                return;
            }
        }
        handed_over.store(true, std::sync::atomic::Ordering::SeqCst);
        match exec.run(plan).await {
            Ok(report) => {
                tracing::info!(job = %report.job, outcome = ?report.outcome, "executor finished")
            }
            // Known already: its record is followed by `watch`. Anything else never started a
            // container: the share ends claiming that nothing ran (no default, no re-plan spin).
            Err(ganglion_dispatch::executor::ExecError::AlreadyKnown { .. }) => {}
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "executor refused the job");
                if let Some(ctx) = weak.upgrade()
                    && let Ok(Some(rec)) = ctx.store.get::<ProviderRole>(&job_id)
                    && rec.state == ProviderState::Preparing
                    && let Err(e) = refuse(&ctx, &rec, format!("the executor refused the job: {e}"))
                {
                    tracing::error!(job = %job_id, error = %e, "cannot record the refusal");
                }
            }
        }
        if let Some((setup, Ok(peers))) = &cluster {
            setup.forget(&peers.job);
        }
    };
    // Tracked: the engine's shutdown stops supervising the run (the container keeps running
    // and is adopted by the executor's recovery at the next start) and waits for this task.
    ctx.tasks.spawn(async move {
        tokio::pin!(run);
        tokio::select! {
            () = stopping.cancelled() => {}
            () = &mut run => return,
        }
        // The executor's set-up (network, containers) is never cut half-way: Docker finishes a
        // request whose client went away, so a create dropped in flight lands *after* the next
        // start's recovery undid the set-up — two networks of one name, and the re-dispatched
        // run fails on them (and is paid nothing). Supervision ends once the containers are
        // started (or the set-up failed), at most [`SETUP_GRACE`] later.
        let (exec, handed_over, job) = watcher;
        if handed_over.load(std::sync::atomic::Ordering::SeqCst) {
            let set_up = async {
                loop {
                    match exec.record(&job) {
                        Ok(Some(r)) if r.phase != Phase::Preparing => return,
                        Err(_) => return,
                        _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                    }
                }
            };
            tokio::select! {
                () = &mut run => return,
                () = set_up => {}
                () = tokio::time::sleep(SETUP_GRACE) => {
                    tracing::warn!(job = %run_id, "the executor's set-up outlasted the stop's grace");
                }
            }
        }
        tracing::info!(job = %run_id, "engine stopping: the run's containers are left to the executor's recovery");
    });
}

/// How long an engine's stop waits for a run's executor set-up (network, containers created
/// and started) to finish before it stops supervising the run anyway.
const SETUP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The node rank this provider's container has in its executor plan: the plan's one local
/// rank (its assignment index for a batch job, 0 for a service's replica), `index` when the
/// plan names none.
pub(crate) fn exec_rank(plan: &JobPlan, index: u64) -> u32 {
    plan.local
        .first()
        .copied()
        .unwrap_or_else(|| u32::try_from(index).unwrap_or(u32::MAX))
}

/// What `report` attests for node rank `index`: the billable GPU-ms measured, at most
/// `cap_gpu_ms` (the rank's GPUs × its run limit: the engine's times may overrun the kill at the
/// limit by its latency, and the budget was checked against the limit). Milliseconds, not
/// rounded: equal work, equal pay, to the base unit (DESIGN §3.1 G1).
fn finished_of(report: &JobReport, index: u64, cap_gpu_ms: u64) -> Finished {
    let rank = report
        .ranks
        .iter()
        .find(|r| u64::from(r.node_rank) == index);
    let cid_bytes = |c: Option<&ganglion_dispatch::executor::report::Artifact>| {
        c.and_then(|a| cid::Cid::try_from(a.cid.as_str()).ok())
            .map(|c| c.to_bytes())
            .unwrap_or_default()
    };
    Finished {
        result: cid_bytes(rank.and_then(|r| r.outputs.as_ref())),
        logs: cid_bytes(rank.and_then(|r| r.logs.as_ref())),
        gpu_ms: report.billable_gpu_ms().min(cap_gpu_ms),
        exit_code: rank.and_then(|r| r.exit_code).unwrap_or(-1),
    }
}

async fn watch<S: Kv + 'static, E: Executor + 'static>(
    ctx: &Arc<Ctx<S, E>>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
    view: Option<&ganglion_indexer::JobView>,
) -> Result<(), EngineError> {
    let (Some(d), Some(index)) = (&r.dispatch, r.detail.index) else {
        return fail(ctx, r, "dispatched without a dispatch intent".into());
    };
    let id = ganglion_dispatch::executor::RunId::new(d.executor_job.clone())?;
    match side.executor.record(&id)? {
        None => {
            // Killed between the dispatch intent and the executor's own record: the
            // executor never saw the job, so running it now is its first start (and the
            // executor's table refuses any second one).
            let spawned = ctx
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&d.executor_job);
            if !spawned && let Some(v) = view {
                // Onto the GPUs recorded with the dispatch.
                let spec = fetch_spec(ctx, r, &v.spec).await?;
                let records = ctx.store.all::<ProviderRole>()?;
                match plan_on(&side.gpus, &side.peer_id, &records, r, index, &spec) {
                    Ok((plan, _)) => {
                        spawn_run(ctx, side, r, index, d.executor_job.clone(), plan);
                    }
                    // Nothing was started: claim that nothing ran (no default, no spin).
                    Err(Unplannable::Gpus(why) | Unplannable::Plan(why)) => {
                        return refuse(
                            ctx,
                            r,
                            format!("the dispatched job cannot be re-planned: {why}"),
                        );
                    }
                }
            }
            Ok(())
        }
        Some(rec) if rec.phase == Phase::Running => {
            if r.state == ProviderState::Preparing {
                apply(ctx, &r.job_id, ProviderEvent::Started)?;
            }
            if let Some(v) = view {
                super::heartbeat::beat(ctx, &side.executor, r, v, Some(&rec)).await?;
            }
            Ok(())
        }
        Some(rec) if rec.phase.is_terminal() => {
            let Some(report) = rec.report else {
                return Ok(());
            };
            let node_rank = exec_rank(&rec.plan, index);
            let gpus = rec.plan.slot(node_rank).map_or(0, |s| s.gpus.len() as u64);
            let cap = gpus.saturating_mul(rec.plan.max_duration_s.saturating_mul(1000));
            let mut det = r.detail.clone();
            let mut finished = finished_of(&report, u64::from(node_rank), cap);
            if let Some(attested) = ctx
                .store
                .receipt(&r.job_id)?
                .as_ref()
                .and_then(super::usage::Attested::of)
            {
                // A service's replica: the usage its best receipt carries, attested with the log.
                det.usage = Some(attested);
                finished.logs = super::failure_note::append(
                    &ctx.blockstore,
                    &finished.logs,
                    &super::usage::line(&attested),
                )
                .unwrap_or_else(|e| {
                    tracing::warn!(job = %r.job_id, error = %e, "cannot attest the usage; attesting the log as it is");
                    finished.logs.clone()
                });
            }
            if let ganglion_dispatch::executor::Outcome::Failed { reason } = &report.outcome {
                finished.logs = noted_log(ctx, r, &finished.logs, Some(index), &reason.to_string());
                det.error.get_or_insert_with(|| reason.to_string());
            }
            det.finished = Some(finished);
            apply_with(ctx, &r.job_id, ProviderEvent::Exited, Some(det))?;
            if let ganglion_dispatch::executor::Outcome::Failed {
                reason: FailureReason::NetworkUnformed { unreachable, .. },
            } = &report.outcome
            {
                super::heartbeat::report_unformed(ctx, r, index, unreachable);
            }
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_market::snapshot::{GpuModel, OfferedGpus};
    use ganglion_market::spec::{Interconnect, Vendor};

    fn offer(frees: &[u32]) -> MarketOffer {
        MarketOffer {
            provider: [1; 28],
            bond_gpus: 8,
            price_per_gpu_hour: 1,
            score: 1,
            uplink_mbps: 1,
            max_job_duration_s: None,
            max_job_nodes: None,
            gpus: frees
                .iter()
                .map(|f| OfferedGpus {
                    model: GpuModel {
                        vendor: Vendor::Any,
                        name: "m".into(),
                        vram_mib: 0,
                        compute_capability: None,
                        gfx_target: None,
                        interconnect: Interconnect::Any,
                        ..GpuModel::default()
                    },
                    free: *f,
                    declared: true,
                })
                .collect(),
            direct_capable: false,
            compute: ganglion_market::snapshot::Compute::Unmeasured,
        }
    }

    #[test]
    fn an_offer_is_direct_capable_when_declared_or_autonat_finds_a_public_address() {
        use libp2p::autonat::NatStatus;
        let public = NatStatus::Public("/ip4/203.0.113.7/tcp/4001".parse().expect("addr"));
        let behind_nat = NatStatus::Private;
        let relay_only = offer(&[2]);
        assert!(!advertised(&relay_only, 0, None).direct_capable);
        assert!(!advertised(&relay_only, 0, Some(&behind_nat)).direct_capable);
        assert!(!advertised(&relay_only, 0, Some(&NatStatus::Unknown)).direct_capable);
        assert!(advertised(&relay_only, 0, Some(&public)).direct_capable);
        let declared = MarketOffer {
            direct_capable: true,
            ..offer(&[2])
        };
        assert!(advertised(&declared, 0, Some(&behind_nat)).direct_capable);
        assert_eq!(advertised(&declared, 1, None).gpus[0].free, 1);
    }

    #[test]
    fn busy_gpus_leave_the_offer_first_group_first() {
        let frees = |o: MarketOffer| o.gpus.iter().map(|g| g.free).collect::<Vec<_>>();
        assert_eq!(frees(with_busy(&offer(&[2, 3]), 0)), [2, 3]);
        assert_eq!(frees(with_busy(&offer(&[2, 3]), 3)), [0, 2]);
        assert_eq!(frees(with_busy(&offer(&[2, 3]), 9)), [0, 0]);
    }

    fn report(outcome: ganglion_dispatch::executor::Outcome, run_seconds: f64) -> JobReport {
        use ganglion_dispatch::executor::report::{RankReport, Timings, Usage};
        JobReport {
            job: ganglion_dispatch::executor::RunId::new("attest").expect("valid"),
            outcome,
            image: None,
            ranks: vec![RankReport {
                node_rank: 1,
                container_id: "c".into(),
                exit_code: Some(1),
                oom_killed: false,
                gpus: 1,
                run_seconds,
                gpu_seconds: run_seconds,
                usage: Usage::default(),
                logs: None,
                outputs: None,
            }],
            timings: Timings::default(),
            adopted: false,
        }
    }

    #[test]
    fn a_rank_that_exits_non_zero_after_its_work_attests_the_gpu_time_it_ran() {
        use ganglion_dispatch::executor::{FailureReason, Outcome};
        // Torch's gloo teardown: the checksum printed, then exit 1. Was attested as 0 GPU-s.
        let gloo = report(
            Outcome::Failed {
                reason: FailureReason::NonZeroExit {
                    node_rank: 1,
                    exit_code: 1,
                },
            },
            2.9,
        );
        let f = finished_of(&gloo, 1, 120_000);
        // Milliseconds as measured, not rounded: equal work, equal pay, to the base unit.
        assert_eq!((f.gpu_ms, f.exit_code), (2_900, 1));
        // The node's own failure to deliver (outputs not pinned) bills nothing.
        let lost = report(
            Outcome::Failed {
                reason: FailureReason::Storage {
                    detail: "store full".into(),
                },
            },
            2.9,
        );
        assert_eq!(finished_of(&lost, 1, 120_000).gpu_ms, 0);
        // Never more than the rank's GPUs × its run limit (the kill's latency overruns it).
        assert_eq!(finished_of(&gloo, 1, 2_000).gpu_ms, 2_000);
    }

    fn assigned(budget: u64, deadline_ms: u64) -> ganglion_indexer::JobView {
        let a = |p: u8| ganglion_contracts::v2::datum::Assignment {
            provider: [p; 28],
            attest_key: [p; 32],
            payout: ganglion_contracts::v2::payout::Payout::enterprise([p; 28]),
            gpus: 2,
            rate: 3_600_000,
            accept_by_ms: 0,
            started_at_ms: 0,
            until_ms: deadline_ms,
        };
        ganglion_indexer::JobView {
            job_id: JobId([3; 32]),
            orchestrator: [9; 28],
            spec: vec![],
            gpus: 4,
            budget,
            deadline_ms,
            status: JobStatus::Assigned,
            assignments: vec![a(1), a(2)],
            payments: vec![],
            receipts: ganglion_indexer::ReceiptTerms {
                key: [8; 32],
                interval_ms: 10_000,
            },
            claim_window_end_ms: deadline_ms,
            claims: vec![],
            history: vec![],
        }
    }

    #[test]
    fn an_assignment_whose_budget_cannot_pay_the_run_is_refused_before_any_container() {
        // The job: 4 GPUs, budget 1 base unit, a 200 s run.
        let why = admitted_run_s(&assigned(1, 10_000_000), 200, 0).expect_err("refused");
        assert!(why.contains("budget_ntx 1 cannot pay 4 GPU(s)"), "{why}");
        assert!(why.contains("800000"), "{why}");
        // Paid in full: runs for its whole duration.
        assert_eq!(
            admitted_run_s(&assigned(800_000, 10_000_000), 200, 0),
            Ok(200)
        );
    }

    #[test]
    fn a_run_that_would_outlive_the_deadline_is_cut_to_stop_before_it() {
        // The job: deadline 150 s ahead, a 200 s command: stopped 10 s before it.
        let now = 1_000_000;
        let v = assigned(u64::MAX, now + 150_000);
        assert_eq!(
            admitted_run_s(&v, 200, now),
            Ok(150 - terms::SETTLE_MARGIN_MS / 1000)
        );
        // No time left at all: refused, nothing started.
        let why = admitted_run_s(&v, 200, now + 145_000).expect_err("too late");
        assert!(why.contains("does not fit before the deadline"), "{why}");
    }

    #[test]
    fn executor_job_ids_are_valid_and_distinct_per_rank_and_per_node() {
        let job = JobId([0xab; 32]);
        let node = PeerId::random();
        let a = executor_job(&job, 0, &node);
        let b = executor_job(&job, 1, &node);
        assert_ne!(a, b);
        // The same chain job id and rank on two nodes of one Docker Engine (two devnets seeded
        // alike): distinct ids, hence distinct container and pod names and labels. With the id
        // of the job and rank alone the second node's pod name conflicted and it attested 0.
        let other = executor_job(&job, 0, &PeerId::random());
        assert_ne!(a, other);
        assert_eq!(a, executor_job(&job, 0, &node), "stable for one node");
        assert!(a.starts_with(&hex::encode(job.0)[..40]), "{a}");
        for id in [a, b, other] {
            ganglion_dispatch::executor::RunId::new(id).expect("a valid executor job id");
        }
    }

    /// A job of `count` GPUs over two nodes, `min_vram_gib` each (0 = any), torch ranks.
    fn spec(count: u32, min_vram_gib: u32) -> Ensemble {
        let json = serde_json::json!({
            "image": { "local": "pytorch/pytorch:2.3.1" },
            "command": ["python", "train.py"],
            "gpus": { "count": count, "min_vram_gib": min_vram_gib },
            "distributed": { "framework": "torch" },
            "limits": { "max_duration_s": 60, "max_rate_ntx_per_gpu_hour": 3_600_000 },
            "budget_ntx": 1_000_000_000,
            "deadline_ms": 99_999_999_999_999_u64,
        });
        Ensemble::from_json_str(&json.to_string()).expect("spec parses")
    }

    /// An assigned provider record: node rank 0 of two, `gpus` GPUs here.
    fn assigned_record(job: u8, gpus: u64) -> ProviderRecord {
        let a = |p: u8| Assignment {
            provider: [p; 28],
            attest_key: [p; 32],
            payout: ganglion_contracts::v2::payout::Payout::enterprise([p; 28]),
            gpus,
            rate: 3_600_000,
            accept_by_ms: 0,
            started_at_ms: 0,
            until_ms: 0,
        };
        let detail = ProviderDetail {
            index: Some(0),
            assignments: vec![a(1), a(2)],
            ..ProviderDetail::default()
        };
        crate::store::JobRecord::new(JobId([job; 32]), ProviderState::Assigned, detail, 0)
    }

    /// The slot-0 GPUs of a prepared run, and its intent's.
    fn ran_on(p: Prepared) -> (Vec<String>, Vec<String>) {
        let Prepared::Run { plan, intent } = p else {
            panic!("not run: {p:?}")
        };
        let slot = plan.slot(0).expect("slot 0");
        (
            slot.gpus.iter().map(|g| g.id().to_string()).collect(),
            intent.gpus,
        )
    }

    /// The store at `path` reopened once the dropped one let go of sled's file lock (its
    /// flusher thread may still hold it for a moment), within 10 s.
    fn reopen(path: &std::path::Path) -> JobStore {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match JobStore::open(path) {
                Ok(s) => return s,
                Err(e) if std::time::Instant::now() > deadline => panic!("reopen: {e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }

    #[test]
    fn a_second_concurrent_job_is_planned_onto_other_gpus_and_a_restart_keeps_them() {
        use crate::gpu_pick::tests::{H100, RTX4090, mixed_pool};
        let dir = tempfile::tempdir().expect("tmp");
        let pool = mixed_pool(Some(true));
        let peer = PeerId::random();
        let view = assigned(u64::MAX, u64::MAX / 2);
        let now = 1_000_000;
        let (first, second, third) = (
            assigned_record(1, 2),
            assigned_record(2, 1),
            assigned_record(3, 1),
        );
        {
            let store = JobStore::open(dir.path()).expect("open");
            for r in [&first, &second, &third] {
                store.create::<ProviderRole>(r).expect("create");
            }
            // Two GPUs of a 4-GPU job: the first two whole GPUs (`take(2)` gave the same
            // first GPUs to every job).
            let p = prepare(&store, &pool, &peer, &first, &spec(4, 0), &view, now).expect("1");
            let (a, recorded) = ran_on(p);
            assert_eq!(recorded, [RTX4090, H100]);
            let attached: Vec<String> = recorded
                .iter()
                .map(|id| pool.iter().find(|g| g.id == *id).expect("pooled"))
                .map(|g| g.attachment.id().to_string())
                .collect();
            assert_eq!(a, attached, "the plan attaches the recorded GPUs");
            // The second job, running next to it: a GPU the first does not hold.
            let p = prepare(&store, &pool, &peer, &second, &spec(2, 0), &view, now).expect("2");
            let (_, b) = ran_on(p);
            assert_eq!(b.len(), 1);
            assert!(!recorded.contains(&b[0]), "{b:?} overlaps {recorded:?}");
            // A third asking for an 80 GB GPU: the H100 is held, refused before any container,
            // naming the requirement and the numbers (not run on a smaller GPU).
            let p = prepare(&store, &pool, &peer, &third, &spec(2, 80), &view, now).expect("3");
            let Prepared::Refuse(why) = p else {
                panic!("not refused: {p:?}")
            };
            assert!(
                why.contains(
                    "not enough GPUs meeting the spec free: 1 needed (gpus.min_vram_gib 80"
                ),
                "{why}"
            );
            assert!(why.contains("1 meet it, 1 of them held"), "{why}");
        }
        // A restart: the store reopened, the first job re-planned from its record onto the
        // same GPUs, whatever is free now; the second still sees them held.
        let store = reopen(dir.path());
        let records = store.all::<ProviderRole>().expect("records");
        let mine = |job: u8| {
            records
                .iter()
                .find(|r| r.job_id == JobId([job; 32]))
                .expect("record")
                .clone()
        };
        let (plan, ids) =
            plan_on(&pool, &peer, &records, &mine(1), 0, &spec(4, 0)).expect("re-planned");
        assert_eq!(ids, [RTX4090, H100]);
        assert_eq!(plan.slot(0).map(|s| s.gpus.len()), Some(2));
        let held = held_gpus(&pool, &records, Some(&JobId([3; 32])));
        assert_eq!(held.ids.len(), 3);
        assert_eq!(held.unplanned, 0);
        // A dispatch written before GPU ids were recorded holds the first GPUs of the pool,
        // as the node that wrote it gave them.
        let mut legacy = mine(2);
        if let Some(d) = legacy.dispatch.as_mut() {
            d.gpus.clear();
        }
        let (_, ids) = plan_on(&pool, &peer, &records, &legacy, 0, &spec(2, 0)).expect("legacy");
        assert_eq!(ids, [RTX4090]);
        let records = vec![mine(1), legacy, mine(3)];
        let held = held_gpus(&pool, &records, None);
        assert_eq!(held.ids, [RTX4090, H100, RTX4090]);
        // A recorded GPU gone from the pool is named, never swapped silently.
        let smaller: Vec<PooledGpu> = pool.iter().filter(|g| g.id != H100).cloned().collect();
        assert!(matches!(
            plan_on(&smaller, &peer, &records, &mine(1), 0, &spec(4, 0)),
            Err(Unplannable::Gpus(why)) if why.contains(H100)
        ));
    }
}
