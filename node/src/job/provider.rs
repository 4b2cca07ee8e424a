//! The provider's driver: an accepted request becomes a `Reserved` record; the assignment seen
//! on chain is dispatched through the executor (spec fetched by CID over bitswap); when the
//! containers end, the outputs and logs are pinned (by the executor), the attestation is
//! signed with the bond's attest key and sent to the job's peers; the payment (or slash) seen
//! on chain ends the record (DESIGN §1, issue 10 "Provider path").
//!
//! Accept/refuse itself is answered inside the p2p event loop by
//! [`crate::p2p::provider::Provider`] (capacity, price, deadline, reservations with a TTL); the
//! engine learns of it from [`crate::p2p::Event::AcceptAnswered`].

use std::sync::Arc;

use ed25519_dalek::SigningKey;
use ganglion_contracts::datum::{Assignment, JobId};
use ganglion_contracts::signed::{AttestationBody, sign};
use ganglion_contracts::tx::TxoRef;
use ganglion_indexer::JobStatus;
use ganglion_indexer::store::Kv;
use libp2p::PeerId;
use serde::{Deserialize, Serialize};

use super::cluster::{ClusterPeers, ClusterSetup, peers_of};
use super::engine::{Ctx, EngineError, ProviderRecord, ProviderRole};
use super::orchestrator;
use super::state::{ProviderEvent, ProviderState};
use super::store::{DispatchIntent, JobRecord, TxKind};
use crate::executor::plan::{ContainerSlot, GpuAttachment, JobPlan};
use crate::executor::{Executor, JobReport, Phase};
use crate::market::snapshot::Offer as MarketOffer;
use crate::market::spec::Ensemble;
use crate::p2p::offers::OfferBody;
use crate::p2p::protocols::AttestMessage;

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
    /// How this node's GPUs reach a container, first `gpus` of an assignment used.
    pub gpus: Vec<GpuAttachment>,
    /// What is advertised (re-published every `EngineConfig::offer_every`).
    pub offer: MarketOffer,
    /// The reservation TTL of the p2p `ProviderConfig`, ms.
    pub reservation_ttl_ms: u64,
    /// Sets up the job's network with the other assigned providers before each dispatch (the
    /// daemon's overlay); `None` when the executor's network needs no set-up.
    pub cluster: Option<Arc<dyn ClusterSetup>>,
}

/// What the executor produced, as attested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// Binary CID of the pinned outputs (empty when none).
    #[serde(with = "hex::serde")]
    pub result: Vec<u8>,
    /// Binary CID of the pinned logs (empty when none).
    #[serde(with = "hex::serde")]
    pub logs: Vec<u8>,
    /// Billable GPU-seconds (0 for a failed run).
    pub gpu_seconds: u64,
    /// Exit code of this node's container (−1 when unknown).
    pub exit_code: i64,
}

/// What the provider keeps per job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProviderDetail {
    /// The orchestrator's peer id bytes (spec fetched from it, attestation sent to it).
    #[serde(with = "hex::serde")]
    pub orchestrator_peer: Vec<u8>,
    /// Reservation end, POSIX ms.
    pub reserved_until_ms: u64,
    /// This provider's index in the assignment (its node rank).
    pub index: Option<u64>,
    /// The assignment, once on chain.
    pub assignments: Vec<Assignment>,
    /// The run's result.
    pub finished: Option<Finished>,
    /// The attestation sent.
    pub attestation: Option<AttestMessage>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// The executor job id of `job` at `rank`: 40 hex digits of the job id and the rank (the
/// executor's 64-character limit; both providers of a test may share one Docker host).
pub fn executor_job(job: &JobId, rank: u64) -> String {
    format!("{}-n{rank}", &hex::encode(job.0)[..40])
}

/// Creates the `Reserved` record when this node accepted a request.
pub(crate) fn on_p2p_event<S: Kv, E: Executor>(ctx: &Ctx<S, E>, event: crate::p2p::Event) {
    let crate::p2p::Event::AcceptAnswered {
        peer,
        job_id,
        accepted: true,
    } = event
    else {
        return;
    };
    let Some(side) = &ctx.provider else { return };
    let now = ctx.now();
    let detail = ProviderDetail {
        orchestrator_peer: peer.to_bytes(),
        reserved_until_ms: now + side.reservation_ttl_ms,
        ..ProviderDetail::default()
    };
    match ctx.store.create::<ProviderRole>(&JobRecord::new(
        job_id,
        ProviderState::Reserved,
        detail,
        now,
    )) {
        Ok(()) => tracing::info!(job = %job_id, "reserved"),
        Err(super::store::StoreError::Exists { .. }) => {}
        Err(e) => tracing::error!(job = %job_id, error = %e, "cannot record the reservation"),
    }
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

/// GPUs held by this provider's jobs assigned on chain and not yet attested. Reservations do
/// not count: the accept protocol enforces them (a provider without room refuses and the
/// orchestrator re-matches), and counting them would hide a provider from the re-match of the
/// very job it reserved for.
fn busy_gpus(records: &[ProviderRecord]) -> u64 {
    records
        .iter()
        .filter(|r| holds_gpus(r.state))
        .filter_map(|r| {
            let i = usize::try_from(r.detail.index?).ok()?;
            r.detail.assignments.get(i).map(|a| a.gpus)
        })
        .sum()
}

/// Whether a job in `state` holds this provider's GPUs: assigned on chain, not yet attested.
fn holds_gpus(state: ProviderState) -> bool {
    matches!(
        state,
        ProviderState::Assigned
            | ProviderState::Preparing
            | ProviderState::Running
            | ProviderState::Finished
    )
}

/// Publishes this provider's offer (fresh timestamps, GPUs of unfinished jobs taken out) and
/// syncs the accept side with it (busy GPUs; reservations of assigned or ended jobs released).
/// Publishing before any peer joined the topic fails; that is only logged.
pub(crate) async fn publish_offer<S: Kv, E: Executor>(ctx: &Ctx<S, E>) {
    let Some(side) = &ctx.provider else { return };
    let now = ctx.now();
    let records = ctx.store.all::<ProviderRole>().unwrap_or_default();
    let busy = busy_gpus(&records);
    let running =
        u32::try_from(records.iter().filter(|r| holds_gpus(r.state)).count()).unwrap_or(u32::MAX);
    // Reservations live at most `reservation_ttl_ms` in the p2p provider: only records that
    // left `Reserved` since then can still have one to release.
    let since = now.saturating_sub(side.reservation_ttl_ms);
    let tracked = records
        .iter()
        .filter(|r| r.state != ProviderState::Reserved)
        .filter(|r| r.history.last().is_some_and(|t| t.at_ms >= since))
        .map(|r| r.job_id)
        .collect();
    if let Err(e) = ctx.p2p.sync_provider(busy, running, tracked).await {
        tracing::debug!(error = %e, "provider side not synced");
    }
    let nat = ctx.p2p.nat_status().await.ok();
    let body = OfferBody {
        network_magic: ctx.chain_magic(),
        bond: side.bond,
        peer_id: side.peer_id.to_bytes(),
        addrs: vec![],
        market: advertised(&side.offer, busy, nat.as_ref()),
        issued_ms: now,
        expires_ms: now + ctx.config.offer_ttl_ms,
    };
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
            tracing::warn!(job = %job, error = %e, "provider step");
        }
    }
}

fn apply<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    event: ProviderEvent,
) -> Result<ProviderState, EngineError> {
    let to = ctx
        .store
        .apply::<ProviderRole>(job, event, ctx.now(), None)?;
    tracing::info!(job = %job, ?event, state = ?to, "provider");
    Ok(to)
}

fn fail<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    why: String,
) -> Result<(), EngineError> {
    let mut d = r.detail.clone();
    d.error = Some(why);
    ctx.store.set_detail::<ProviderRole>(&r.job_id, d)?;
    apply(ctx, &r.job_id, ProviderEvent::Failed)?;
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
    // Endings on chain.
    if let Some(v) = &view
        && matches!(
            v.status,
            JobStatus::Settled | JobStatus::Expired | JobStatus::Cancelled
        )
    {
        if v.payments.iter().any(|p| p.to == me) {
            apply(ctx, &job, ProviderEvent::PaymentSeen)?;
        } else if v.defaulters().contains(&me)
            && matches!(
                r.state,
                ProviderState::Assigned
                    | ProviderState::Preparing
                    | ProviderState::Running
                    | ProviderState::Finished
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
                Some(v) if v.status == JobStatus::Assigned => {
                    match v.assignments.iter().position(|a| a.provider == me) {
                        Some(i) => {
                            let mut d = r.detail.clone();
                            d.index = Some(i as u64);
                            d.assignments = v.assignments.clone();
                            ctx.store.set_detail::<ProviderRole>(&job, d)?;
                            apply(ctx, &job, ProviderEvent::AssignmentSeen)?;
                        }
                        None => fail(ctx, &r, "assigned to other providers".into())?,
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
            dispatch(ctx, side, &r, &v.spec).await
        }
        ProviderState::Preparing | ProviderState::Running => {
            watch(ctx, side, &r, view.as_ref()).await
        }
        ProviderState::Finished => attest(ctx, side, &r).await,
        ProviderState::Attested => settle_if_abandoned(ctx, &r, view.as_ref()).await,
        _ => Ok(()),
    }
}

/// Fetches the spec by CID (bitswap, from the orchestrator) and reads it from the blockstore.
async fn fetch_spec<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    spec_cid: &[u8],
) -> Result<Ensemble, EngineError> {
    let cid = cid::Cid::try_from(spec_cid).map_err(|e| EngineError::Spec(e.to_string()))?;
    let peer = PeerId::from_bytes(&r.detail.orchestrator_peer)
        .map_err(|e| EngineError::Spec(format!("orchestrator peer id: {e}")))?;
    ctx.p2p.fetch_dag(cid, peer).await?;
    let mut json = Vec::new();
    ganglion_storage::unixfs::cat(&ctx.blockstore, &cid, &mut json)
        .map_err(|e| EngineError::Spec(e.to_string()))?;
    Ensemble::from_json_str(&String::from_utf8_lossy(&json))
        .map_err(|e| EngineError::Spec(e.to_string()))
}

/// The executor plan of this node's share of the job.
async fn plan_for<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
    index: u64,
    spec_cid: &[u8],
) -> Result<Result<JobPlan, String>, EngineError> {
    let spec = fetch_spec(ctx, r, spec_cid).await?;
    let world: Vec<ContainerSlot> = r
        .detail
        .assignments
        .iter()
        .enumerate()
        .map(|(i, a)| ContainerSlot {
            node_rank: i as u32,
            gpus: if i as u64 == index {
                side.gpus.iter().take(a.gpus as usize).cloned().collect()
            } else {
                (0..a.gpus)
                    .map(|g| GpuAttachment::Declared {
                        id: format!("peer-{i}-{g}"),
                    })
                    .collect()
            },
        })
        .collect();
    let exec_id = crate::executor::JobId::new(executor_job(&r.job_id, index))?;
    Ok(
        JobPlan::from_ensemble(exec_id, &spec, world, vec![index as u32])
            .map_err(|e| format!("cannot plan the job: {e}")),
    )
}

async fn dispatch<S: Kv + 'static, E: Executor + 'static>(
    ctx: &Arc<Ctx<S, E>>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
    spec_cid: &[u8],
) -> Result<(), EngineError> {
    let job = r.job_id;
    let Some(index) = r.detail.index else {
        return fail(ctx, r, "assigned without an index".into());
    };
    let plan = match plan_for(ctx, side, r, index, spec_cid).await? {
        Ok(p) => p,
        Err(why) => return fail(ctx, r, why),
    };
    // Written before the executor sees the job: a restart finds it and never starts a second.
    let intent = ctx.store.record_dispatch::<ProviderRole>(
        &job,
        DispatchIntent {
            executor_job: plan.job.to_string(),
            written_ms: ctx.now(),
        },
    )?;
    apply(ctx, &job, ProviderEvent::Dispatched)?;
    spawn_run(ctx, side, r, index, intent.executor_job, plan);
    Ok(())
}

/// Starts this node's share of the job in the background: first the job's network with the
/// other assigned providers (when the side has a [`ClusterSetup`]), then the executor. A failed
/// set-up leaves the job to the next pass (`watch` finds no executor record and calls again).
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
    let cluster = side.cluster.clone().map(|setup| {
        let rank = u32::try_from(index).unwrap_or(u32::MAX);
        let peers = peers_of(&ctx.indexer, &r.detail.assignments, rank).map(|peers| ClusterPeers {
            job: r.job_id,
            exec_job: plan.job.clone(),
            rank,
            world: u32::try_from(r.detail.assignments.len()).unwrap_or(u32::MAX),
            peers,
        });
        (setup, peers)
    });
    // Weak: a stopped engine's context (its store) must not live on in a running job's task.
    let weak = Arc::downgrade(ctx);
    let p2p = ctx.p2p.clone();
    tokio::spawn(async move {
        if let Some((setup, peers)) = &cluster {
            let ready = match peers {
                Ok(peers) => setup.prepare(&p2p, peers).await,
                Err(why) => Err(why.clone()),
            };
            if let Err(why) = ready {
                tracing::warn!(job = %id, error = %why, "job network not ready (retried)");
                if let Some(ctx) = weak.upgrade() {
                    ctx.running
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&id);
                }
                return;
            }
        }
        match exec.run(plan).await {
            Ok(report) => {
                tracing::info!(job = %report.job, outcome = ?report.outcome, "executor finished")
            }
            Err(e) => tracing::warn!(job = %id, error = %e, "executor refused the job"),
        }
        if let Some((setup, Ok(peers))) = &cluster {
            setup.forget(&peers.job);
        }
    });
}

fn finished_of(report: &JobReport, index: u64) -> Finished {
    let rank = report
        .ranks
        .iter()
        .find(|r| u64::from(r.node_rank) == index);
    let cid_bytes = |c: Option<&crate::executor::report::Artifact>| {
        c.and_then(|a| cid::Cid::try_from(a.cid.as_str()).ok())
            .map(|c| c.to_bytes())
            .unwrap_or_default()
    };
    Finished {
        result: cid_bytes(rank.and_then(|r| r.outputs.as_ref())),
        logs: cid_bytes(rank.and_then(|r| r.logs.as_ref())),
        gpu_seconds: report.billable_gpu_seconds().floor() as u64,
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
    let id = crate::executor::JobId::new(d.executor_job.clone())?;
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
            if !spawned
                && let Some(v) = view
                && let Ok(plan) = plan_for(ctx, side, r, index, &v.spec).await?
            {
                spawn_run(ctx, side, r, index, d.executor_job.clone(), plan);
            }
            Ok(())
        }
        Some(rec) if rec.phase == Phase::Running => {
            apply(ctx, &r.job_id, ProviderEvent::Started)?;
            Ok(())
        }
        Some(rec) if rec.phase.is_terminal() => {
            let Some(report) = rec.report else {
                return Ok(());
            };
            let mut det = r.detail.clone();
            det.finished = Some(finished_of(&report, index));
            ctx.store.set_detail::<ProviderRole>(&r.job_id, det)?;
            apply(ctx, &r.job_id, ProviderEvent::Exited)?;
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

async fn attest<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    side: &ProviderSide<E>,
    r: &ProviderRecord,
) -> Result<(), EngineError> {
    let Some(f) = &r.detail.finished else {
        return fail(ctx, r, "finished without a result".into());
    };
    let me = ctx.chain.key_hash();
    let msg = match &r.detail.attestation {
        Some(m) => m.clone(),
        None => {
            // The result and log blocks on disk before a signature names them: after a crash
            // the auditor and the orchestrator must still find them here.
            ctx.blockstore.flush()?;
            let body = AttestationBody {
                job_id: r.job_id,
                provider: me,
                result: f.result.clone(),
                logs: f.logs.clone(),
                gpu_seconds: f.gpu_seconds,
                exit_code: f.exit_code,
            };
            let m = AttestMessage {
                job_id: r.job_id,
                provider: me,
                result: body.result.clone(),
                logs: body.logs.clone(),
                gpu_seconds: body.gpu_seconds,
                exit_code: body.exit_code,
                signature: sign(&side.attest, &body.signed_bytes()),
            };
            let mut d = r.detail.clone();
            d.attestation = Some(m.clone());
            ctx.store.set_detail::<ProviderRole>(&r.job_id, d)?;
            m
        }
    };
    // The job's peers: the orchestrator and the other assigned providers (their bonds name
    // their peer ids).
    let mut peers = Vec::new();
    if let Ok(p) = PeerId::from_bytes(&r.detail.orchestrator_peer) {
        peers.push(p);
    }
    for a in r.detail.assignments.iter().filter(|a| a.provider != me) {
        for b in ctx.indexer.provider(&a.provider)?.bonds {
            if let Ok(p) = PeerId::from_bytes(&b.datum.peer_id)
                && !peers.contains(&p)
            {
                peers.push(p);
            }
        }
    }
    let answers = ctx.p2p.attest_all(&peers, &msg).await;
    let orchestrator_has_it = matches!(
        answers.first(),
        Some(Ok(crate::p2p::protocols::AttestResponse::Stored))
    );
    if orchestrator_has_it {
        apply(ctx, &r.job_id, ProviderEvent::AttestationSent)?;
    } else {
        tracing::debug!(job = %r.job_id, ?answers, "attestation not stored by the orchestrator yet");
    }
    Ok(())
}

/// Any peer holding all the attestations may settle (issue 10): when the job is still assigned
/// on chain well after this provider attested, it settles with its own wallet.
async fn settle_if_abandoned<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    view: Option<&ganglion_indexer::JobView>,
) -> Result<(), EngineError> {
    let Some(v) = view.filter(|v| v.status == JobStatus::Assigned) else {
        return Ok(());
    };
    if let Some(i) = r.intent(TxKind::Settle) {
        if !v.history.iter().any(|h| h.meta.tx_hash == i.tx_hash) {
            orchestrator::nudge(ctx, i).await;
        }
        return Ok(());
    }
    let attested_at = r
        .history
        .iter()
        .rev()
        .find(|t| t.state == ProviderState::Attested)
        .map_or(0, |t| t.at_ms);
    let wait = ctx
        .config
        .settle_grace_ms
        .saturating_mul(r.detail.index.unwrap_or(0) + 1);
    if ctx.now() < attested_at.saturating_add(wait) {
        return Ok(());
    }
    let atts = orchestrator::attestations(ctx, v, r.detail.attestation.as_ref()).await?;
    if atts.is_empty() || atts.iter().any(Option::is_none) {
        return Ok(());
    }
    let (tx, until) = orchestrator::settle_tx(ctx, v, atts.into_iter().flatten().collect()).await?;
    tracing::info!(job = %r.job_id, "the orchestrator has not settled: settling as a provider");
    orchestrator::submit_as::<ProviderRole, S, E>(ctx, &r.job_id, TxKind::Settle, tx, Some(until))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::snapshot::{GpuModel, OfferedGpus};
    use crate::market::spec::{Interconnect, Vendor};

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

    #[test]
    fn executor_job_ids_are_valid_and_distinct_per_rank() {
        let job = JobId([0xab; 32]);
        let a = executor_job(&job, 0);
        let b = executor_job(&job, 1);
        assert_ne!(a, b);
        for id in [a, b] {
            crate::executor::JobId::new(id).expect("a valid executor job id");
        }
    }
}
