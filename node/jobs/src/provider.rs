//! The provider's driver: an accepted request becomes a `Reserved` record; the assignment seen
//! on chain is dispatched through the executor (spec fetched by CID over bitswap); when the
//! containers end, the outputs and logs are pinned (by the executor), the attestation is
//! signed with the bond's attest key and sent to the job's peers; the payment (or slash) seen
//! on chain ends the record (DESIGN §1).
//!
//! Accept/refuse is decided and recorded in one step by [`super::accept`] (capacity, price,
//! deadline, reservations with a TTL, all read from these records).

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
use super::gpu_pick::{self, PooledGpu};
use super::orchestrator;
use super::state::{ProviderEvent, ProviderState};
use super::store::{DispatchIntent, JobStore, TxKind};
use super::terms;
use ganglion_dispatch::executor::plan::{ContainerSlot, GpuAttachment, JobPlan};
use ganglion_dispatch::executor::{Executor, JobReport, Phase};
use ganglion_market::matching::Requirements;
use ganglion_market::snapshot::Offer as MarketOffer;
use ganglion_market::spec::Ensemble;
use ganglion_p2p::offers::OfferBody;
use ganglion_p2p::protocols::AttestMessage;

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
    /// Billable GPU-seconds, [`attested_gpu_seconds`] of the report's
    /// [`JobReport::billable_gpu_ms`] (0 when this node failed to deliver).
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
    /// GPUs reserved by the acceptance.
    #[serde(default)]
    pub reserved_gpus: u64,
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

/// GPUs held by this provider's jobs assigned on chain and not yet attested. Reservations do
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

/// Whether a job in `state` holds this provider's GPUs: assigned on chain, not yet attested.
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

/// Publishes this provider's offer (fresh timestamps, GPUs of unfinished jobs taken out).
/// Publishing before any peer joined the topic fails; that is only logged.
pub(crate) async fn publish_offer<S: Kv, E: Executor>(ctx: &Ctx<S, E>) {
    let Some(side) = &ctx.provider else { return };
    let now = ctx.now();
    let records = ctx.store.all::<ProviderRole>().unwrap_or_default();
    let held = held_gpus(&side.gpus, &records, None);
    let nat = ctx.p2p.nat_status().await.ok();
    let body = OfferBody {
        network_magic: ctx.chain_magic(),
        bond: side.bond,
        peer_id: side.peer_id.to_bytes(),
        addrs: vec![],
        market: advertised(
            &gpu_pick::with_held(&side.offer, &side.gpus, &held.ids),
            held.unplanned,
            nat.as_ref(),
        ),
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
    if to.is_terminal() {
        super::attestations::forget_when_done(ctx, job)?;
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
                            d.assignments = v.assignments.iter().map(v1_assignment).collect();
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
            dispatch(ctx, side, &r, v).await
        }
        ProviderState::Preparing | ProviderState::Running => {
            watch(ctx, side, &r, view.as_ref()).await
        }
        ProviderState::Finished => {
            attest(ctx, side, &r).await?;
            // An orchestrator that never takes the attestation (its node is gone) does not
            // keep this provider from its pay: past the grace, it settles itself.
            if r.detail.attestation.is_some() {
                settle_abandoned_governed(ctx, &r, view.as_ref()).await?;
            }
            Ok(())
        }
        ProviderState::Attested => settle_abandoned_governed(ctx, &r, view.as_ref()).await,
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

/// The executor plan of this node's share of the job (node rank `index`) and the ids of the
/// GPUs it runs on ([`gpus_for`]).
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
    let world: Vec<ContainerSlot> = r
        .detail
        .assignments
        .iter()
        .enumerate()
        .map(|(i, a)| ContainerSlot {
            node_rank: i as u32,
            gpus: if i as u64 == index {
                mine.iter().map(|&g| pool[g].attachment.clone()).collect()
            } else {
                (0..a.gpus)
                    .map(|g| GpuAttachment::Declared {
                        id: format!("peer-{i}-{g}"),
                    })
                    .collect()
            },
        })
        .collect();
    let exec_id = ganglion_dispatch::executor::RunId::new(executor_job(&r.job_id, index, peer))
        .map_err(|e| Unplannable::Plan(format!("cannot plan the job: {e}")))?;
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
            apply(ctx, &job, ProviderEvent::Dispatched)?;
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
/// The refusal, as recorded and logged: the escrow's budget cannot pay every assignment at its
/// rate for `max_duration_s` ([`terms::TermsError::BudgetBelowWindow`]), or no time is left
/// before the deadline ([`terms::TermsError::DurationPastDeadline`]).
fn admitted_run_s(
    view: &ganglion_indexer::JobView,
    max_duration_s: u64,
    now_ms: u64,
) -> Result<u64, String> {
    terms::check_assigned(
        view.budget,
        view.assignments.iter().map(|a| (a.gpus, a.rate)),
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
/// `Finished` with nothing run (0 GPU-seconds, exit code −1), so the attestation says so and
/// this provider is no defaulter (an assigned provider that never attests is slashed).
fn refuse<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    why: String,
) -> Result<(), EngineError> {
    tracing::warn!(job = %r.job_id, %why, "assignment refused; attesting that nothing ran");
    let mut d = r.detail.clone();
    d.error = Some(why);
    d.finished = Some(Finished {
        result: vec![],
        logs: vec![],
        gpu_seconds: 0,
        exit_code: -1,
    });
    ctx.store.set_detail::<ProviderRole>(&r.job_id, d)?;
    apply(ctx, &r.job_id, ProviderEvent::Dispatched)?;
    apply(ctx, &r.job_id, ProviderEvent::Exited)?;
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
    let stopping = ctx.stopping.clone();
    let run_id = id.clone();
    // Set once the executor has the plan: from then on its set-up is not cut half-way.
    let handed_over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = (side.executor.clone(), handed_over.clone(), plan.job.clone());
    let run = async move {
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
        handed_over.store(true, std::sync::atomic::Ordering::SeqCst);
        match exec.run(plan).await {
            Ok(report) => {
                tracing::info!(job = %report.job, outcome = ?report.outcome, "executor finished")
            }
            Err(e) => tracing::warn!(job = %id, error = %e, "executor refused the job"),
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

/// The whole GPU-seconds an attestation claims for `gpu_ms` measured GPU-milliseconds: the
/// nearest whole second (half up), and at least one for any GPU time at all.
///
/// The escrow counts whole `gpu_seconds` (`pay = ⌊gpu_seconds × rate / 3600⌋`, validator
/// `attested_pay`), so equal work can only be paid equally up to that unit. Flooring paid two
/// ranks of the same job 4 and 5 s when their containers ran 4.98 and 5.01 s (start skew
/// between providers), and a rank under a second 0: the nearest second has no bias, pays
/// ranks whose times differ by less than the skew the same unless they straddle a half
/// second, and never pays work 0. What remains until the claim is in milliseconds (DESIGN
/// §3.1 G1, a validator change): two ranks can still differ by one second of pay, and a claim
/// is at most 0.5 s (a sub-second rank: under 1 s) above the measured time.
pub fn attested_gpu_seconds(gpu_ms: u64) -> u64 {
    if gpu_ms == 0 {
        return 0;
    }
    (gpu_ms.saturating_add(500) / 1000).max(1)
}

/// What `report` attests for node rank `index`, the GPU-seconds at most `cap_gpu_seconds`
/// (the rank's GPUs × its run limit: the engine's times may overrun the kill at the limit by
/// its latency, and the budget was checked against the limit).
fn finished_of(report: &JobReport, index: u64, cap_gpu_seconds: u64) -> Finished {
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
        gpu_seconds: attested_gpu_seconds(report.billable_gpu_ms()).min(cap_gpu_seconds),
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
                    Err(why) => {
                        tracing::warn!(job = %r.job_id, ?why, "the dispatched job cannot be re-planned");
                    }
                }
            }
            Ok(())
        }
        Some(rec) if rec.phase == Phase::Running => {
            if r.state == ProviderState::Preparing {
                apply(ctx, &r.job_id, ProviderEvent::Started)?;
            }
            Ok(())
        }
        Some(rec) if rec.phase.is_terminal() => {
            let Some(report) = rec.report else {
                return Ok(());
            };
            let gpus = rec
                .plan
                .slot(u32::try_from(index).unwrap_or(u32::MAX))
                .map_or(0, |s| s.gpus.len() as u64);
            let cap = gpus.saturating_mul(rec.plan.max_duration_s);
            let mut det = r.detail.clone();
            det.finished = Some(finished_of(&report, index, cap));
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
        Some(Ok(ganglion_p2p::protocols::AttestResponse::Stored))
    );
    if orchestrator_has_it {
        apply(ctx, &r.job_id, ProviderEvent::AttestationSent)?;
    } else {
        tracing::debug!(job = %r.job_id, ?answers, "attestation not stored by the orchestrator yet");
    }
    Ok(())
}

/// [`settle_if_abandoned`] under the settle's retry backoff ([`super::retry::governed`]).
async fn settle_abandoned_governed<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    view: Option<&ganglion_indexer::JobView>,
) -> Result<(), EngineError> {
    let now = ctx.now();
    let attempt = settle_if_abandoned(ctx, r, view);
    super::retry::governed(&ctx.retries, &r.job_id, TxKind::Settle, now, attempt).await
}

/// Any peer holding all the attestations may settle: when the job is still assigned on chain
/// well after this provider finished (`settle_grace_ms × (index + 1)`), whether or not its
/// orchestrator took the attestation (the orchestrator's node may be gone), it settles with
/// its own wallet, given every co-provider's attestation.
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
    // Since it finished: attested or not, the grace runs from the end of the work.
    let attested_at = r
        .history
        .iter()
        .rev()
        .find(|t| t.state == ProviderState::Finished)
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

/// An indexed assignment (v2's shape) in the v1 shape this node's records keep until the
/// node moves to protocol v2.
fn v1_assignment(a: &ganglion_contracts::v2::datum::Assignment) -> Assignment {
    Assignment {
        provider: a.provider,
        attest_key: a.attest_key,
        gpus: a.gpus,
        rate: a.rate,
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
    fn equal_work_is_attested_equally_and_no_work_is_attested_as_zero() {
        // The demo's two ranks of one job: 4.98 s and 5.01 s (start skew). Flooring attested
        // 4 and 5 s, paid 4000 and 5000 at 3 600 000 per GPU-hour.
        assert_eq!(attested_gpu_seconds(4_980), attested_gpu_seconds(5_010));
        assert_eq!(attested_gpu_seconds(4_980), 5);
        // A rank under a second is paid a second, not 0; no GPU time is never paid.
        assert_eq!(attested_gpu_seconds(1), 1);
        assert_eq!(attested_gpu_seconds(400), 1);
        assert_eq!(attested_gpu_seconds(0), 0);
        // The nearest second, half up: never more than 0.5 s over the measurement above 1 s.
        assert_eq!(attested_gpu_seconds(1_499), 1);
        assert_eq!(attested_gpu_seconds(1_500), 2);
        assert_eq!(attested_gpu_seconds(u64::MAX), u64::MAX / 1000);
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
        let f = finished_of(&gloo, 1, 120);
        assert_eq!((f.gpu_seconds, f.exit_code), (3, 1));
        // The node's own failure to deliver (outputs not pinned) bills nothing.
        let lost = report(
            Outcome::Failed {
                reason: FailureReason::Storage {
                    detail: "store full".into(),
                },
            },
            2.9,
        );
        assert_eq!(finished_of(&lost, 1, 120).gpu_seconds, 0);
        // Never more than the rank's GPUs × its run limit (the kill's latency overruns it).
        assert_eq!(finished_of(&gloo, 1, 2).gpu_seconds, 2);
    }

    fn assigned(budget: u64, deadline_ms: u64) -> ganglion_indexer::JobView {
        let a = |p: u8| ganglion_contracts::v2::datum::Assignment {
            provider: [p; 28],
            attest_key: [p; 32],
            payout: ganglion_contracts::v2::payout::Payout::enterprise([p; 28]),
            gpus: 2,
            rate: 3_600_000,
            accept_by_ms: 0,
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
            receipts: None,
            claim_window_end_ms: None,
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
            gpus,
            rate: 3_600_000,
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
