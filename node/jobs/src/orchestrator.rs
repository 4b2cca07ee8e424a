//! The orchestrator's driver (escrow v2): lock → confirmation depth → match over the live
//! market → ask acceptances over p2p → assign (re-match without a refusing or silent provider),
//! spending each provider's bond to commit its GPUs → while the job runs, acknowledge each
//! provider's work with receipts ([`super::heartbeat`]) → each provider claims its own pay; the
//! last claim closes the escrow (`Settled`). Cancel while open (also an escrow still open at
//! its deadline); expire after the deadline and the claim window, slashing the bonds of
//! assigned providers that never claimed (DESIGN §1, §3).
//!
//! Every step is a pure function of the record and the chain: `pass` runs them for each
//! unfinished job. A step that submits a transaction first writes it to the intent log; while
//! an intent of a kind is pending, the step only waits for it on chain (re-submitting the same
//! bytes every [`super::EngineConfig::resubmit_after_ms`]).

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::tx::TxoRef;
use ganglion_contracts::v2::build::{self, AssignRequest, ExpireRequest, LockRequest};
use ganglion_contracts::v2::datum::{Assignment, JobId};
use ganglion_indexer::event::Event;
use ganglion_indexer::store::Kv;
use ganglion_indexer::{JobStatus, JobView};
use ganglion_storage::unixfs::{self, ImportOptions};
use libp2p::PeerId;
use serde::{Deserialize, Serialize};

use super::chain::SignedTx;
use super::engine::{Ctx, EngineError, OrchestratorRecord, OrchestratorRole, SpecError};
use super::links::PlanLinks;
use super::retry;
use super::state::{OrchestratorEvent, OrchestratorState};
use super::store::{JobRecord, TxIntent, TxKind};
use super::submit::{self, lapsed, nudge};
use super::unformed::UnformedReport;
use ganglion_dispatch::executor::Executor;
use ganglion_market::matching::{Requirements, match_gang};
use ganglion_market::snapshot::{MarketSnapshot, SnapshotOptions};
use ganglion_market::spec::Ensemble;
use ganglion_p2p::matrix::LinkMatrix;
use ganglion_p2p::protocols::{AcceptRequest, AcceptResponse, RefusalReason};

/// A provider the matcher chose, with what the accept request and the assignment need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chosen {
    /// Payment key hash.
    #[serde(with = "hex::serde")]
    pub provider: KeyHash,
    /// libp2p peer id bytes (from its offer).
    #[serde(with = "hex::serde")]
    pub peer: Vec<u8>,
    /// Its bond, a reference input of the assign.
    pub bond: TxoRef,
    /// GPUs placed on it.
    pub gpus: u64,
    /// NTX base units per GPU-hour.
    pub rate: u64,
    /// Its latency group in the plan (`placement.groups`), 0-based; `None` without groups
    /// (and in records written before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

impl Chosen {
    /// The provider the matcher placed `node` on, with what its offer (among `offers`) says;
    /// `None` when no offer names it.
    pub(crate) fn placed(
        node: &ganglion_market::matching::NodePlan,
        offers: &[&ganglion_p2p::offers::SignedOffer],
    ) -> Option<Self> {
        offers
            .iter()
            .find(|o| o.body.market.provider == node.provider)
            .map(|o| Self {
                provider: node.provider,
                peer: o.body.peer_id.clone(),
                bond: o.body.bond,
                gpus: u64::from(node.gpus),
                rate: node.rate,
                group: node.group,
            })
    }
}

/// A provider taken out of matching for this job, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excluded {
    /// The provider as it was chosen.
    pub chosen: Chosen,
    /// Its refusal or the failure of the request.
    pub reason: String,
    /// Until when (POSIX ms) it is left out; `None`: for the job's life.
    #[serde(default)]
    pub until_ms: Option<u64>,
}

impl Excluded {
    /// Whether it is still left out at `now_ms`.
    pub fn applies(&self, now_ms: u64) -> bool {
        self.until_ms.is_none_or(|until| now_ms < until)
    }
}

/// What the orchestrator keeps per job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrchestratorDetail {
    /// The spec as submitted.
    pub spec: Ensemble,
    /// Binary CID of the pinned spec (the escrow's `spec`).
    #[serde(with = "hex::serde")]
    pub spec_cid: Vec<u8>,
    /// Providers excluded from matching (refused or timed out).
    #[serde(default)]
    pub excluded: Vec<Excluded>,
    /// The current plan, in assignment order.
    #[serde(default)]
    pub chosen: Vec<Chosen>,
    /// The last problem met, for status displays.
    #[serde(default)]
    pub last_error: Option<String>,
    /// When the orchestrator stopped the running job (`job stop`), POSIX ms: from then on
    /// every heartbeat is answered [`HeartbeatRefusal::Stopped`](ganglion_p2p::protocols::HeartbeatRefusal)
    /// and the providers stop and claim.
    #[serde(default)]
    pub stopped_at_ms: Option<u64>,
    /// The measured provider pairs of the current plan as the matcher saw them (`job
    /// status`); `None` before a match (and in records written before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<PlanLinks>,
    /// Providers' reports that the job's network did not form, one per assignment at most
    /// ([`super::unformed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unformed: Vec<UnformedReport>,
    /// Whether the job was locked again after its network did not form (once, whatever came
    /// of it: `successor`, or why not in `last_error`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rematch_tried: bool,
    /// The job that matched this one's spec again after its network did not form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<JobId>,
    /// The job whose network did not form, that this one matches again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<JobId>,
    /// A service's replicas as the orchestrator wants them ([`super::service`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub scaling: super::service::Scaling,
}

fn state_err(job: JobId, reason: impl Into<String>) -> EngineError {
    EngineError::State {
        job,
        reason: reason.into(),
    }
}

fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

/// The escrow UTxO now: the newest escrow the job's events name (the lock's, the assign's, a
/// rescale's or the last claim's continuing output).
pub fn escrow_ref(view: &JobView) -> Option<TxoRef> {
    view.history.iter().rev().find_map(|r| match &r.event {
        Event::JobLocked { escrow, .. }
        | Event::JobAssigned { escrow, .. }
        | Event::JobRescaled { escrow, .. } => Some(*escrow),
        Event::JobClaimed {
            outcome: ganglion_indexer::event::ClaimOutcome::Continues { escrow },
            ..
        } => Some(*escrow),
        _ => None,
    })
}

/// Whether the job's chain history holds transaction `tx`.
fn on_chain(view: Option<&JobView>, tx: &[u8; 32]) -> bool {
    view.is_some_and(|v| v.history.iter().any(|r| r.meta.tx_hash == *tx))
}

async fn submit_new<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    kind: TxKind,
    tx: SignedTx,
    valid_until_slot: Option<u64>,
) -> Result<(), EngineError> {
    submit::intent_first::<OrchestratorRole, S, E>(ctx, job, kind, tx, valid_until_slot).await
}

/// Whether a lock intent can no longer land: its validity ended at least one more
/// validity window ago ([`super::EngineConfig::validity_slots`] of grace, time for the follower
/// to deliver a block forged just before the end).
fn lock_lapsed<S: Kv, E: Executor>(ctx: &Ctx<S, E>, intent: &TxIntent) -> bool {
    intent
        .valid_until_slot
        .is_some_and(|u| ctx.chain.slot_at(ctx.now()) >= u + ctx.config.validity_slots)
}

/// Validates `spec` at `now` (POSIX ms), checks that its terms can be met
/// ([`super::terms::check`]) and pins it (UnixFS, CIDv1) into the blockstore;
/// returns its binary CID (the escrow's `spec`).
pub(crate) fn pin_spec<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    spec: &Ensemble,
    now: u64,
) -> Result<Vec<u8>, EngineError> {
    spec.validate(now).map_err(SpecError::from)?;
    // Before anything is locked: a budget that cannot pay the window or a run that cannot end
    // before the deadline is refused here, not found out at the assign, a claim or the expire.
    super::terms::check(spec, now)?;
    let json = serde_json::to_vec(spec).map_err(SpecError::Serialise)?;
    let imported = unixfs::import_bytes(&json, &ImportOptions::cid_v1(), &ctx.blockstore)
        .map_err(SpecError::Import)?;
    ganglion_storage::blockstore::pin_recursive(&ctx.blockstore, &imported.root)
        .map_err(SpecError::Pin)?;
    // On disk before the lock names it: after a crash the providers must still find the spec.
    ctx.blockstore.flush()?;
    Ok(imported.root.to_bytes())
}

/// The UTxO a lock consumes to fix the job id: the largest asset-free one, else the largest,
/// among those whose job id (`build::job_id_of`) the node does not track yet. A lock the
/// ledger refused leaves its seed unspent and its record cancelled; without the filter the
/// next lock would pick the same seed and collide with that record.
///
/// # Errors
/// [`EngineError::Spec`] when no UTxO is left to seed a new job id.
pub(crate) fn seed_of(
    utxos: &[ganglion_contracts::tx::Utxo],
    tracked: impl Fn(&JobId) -> bool,
) -> Result<ganglion_contracts::tx::Utxo, EngineError> {
    let fresh: Vec<&ganglion_contracts::tx::Utxo> = utxos
        .iter()
        .filter(|u| !tracked(&ganglion_contracts::v2::build::job_id_of(&u.reference)))
        .collect();
    fresh
        .iter()
        .filter(|u| u.output.value.assets.is_empty())
        .max_by_key(|u| u.output.value.lovelace)
        .or_else(|| fresh.iter().max_by_key(|u| u.output.value.lovelace))
        .map(|u| (*u).clone())
        .ok_or_else(|| SpecError::NoSeed.into())
}

/// Checks that `utxos` (the paying wallet's) hold at least `budget` (NTX base units) of the
/// deployment's NTX `asset`, so a lock that cannot be balanced is refused with both amounts
/// named rather than the balancer's shortfall.
///
/// # Errors
/// [`SpecError::BudgetOverBalance`].
pub(crate) fn check_balance(
    utxos: &[ganglion_contracts::tx::Utxo],
    asset: &ganglion_contracts::params::AssetClass,
    budget: u64,
) -> Result<(), EngineError> {
    let balance = utxos
        .iter()
        .map(|u| u.output.value.quantity_of(asset))
        .fold(0u64, u64::saturating_add);
    if balance < budget {
        return Err(SpecError::BudgetOverBalance { budget, balance }.into());
    }
    Ok(())
}

/// Pins the spec, locks the budget. See [`super::Engine::submit`].
pub(crate) async fn submit<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    spec: &Ensemble,
) -> Result<JobId, EngineError> {
    submit_with(ctx, spec, Vec::new(), None).await
}

/// [`submit`], with providers `excluded` from its matching from the start and the job it
/// matches again (`predecessor`, [`super::unformed::successor`]).
pub(crate) async fn submit_with<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    spec: &Ensemble,
    excluded: Vec<Excluded>,
    predecessor: Option<JobId>,
) -> Result<JobId, EngineError> {
    let now = ctx.now();
    let spec_cid = pin_spec(ctx, spec, now)?;
    let terms = spec.escrow_terms();
    let utxos = ctx.chain.wallet_utxos(now).await?;
    check_balance(&utxos, &ctx.chain.deployment().params.ntx, terms.budget)?;
    let seed = seed_of(&utxos, |id| {
        matches!(ctx.store.get::<OrchestratorRole>(id), Ok(Some(_)))
    })?;
    let until = ctx.chain.slot_at(now) + ctx.config.validity_slots;
    let (draft, job) = build::lock(
        ctx.chain.deployment(),
        ctx.chain.env(),
        &LockRequest {
            orchestrator: ctx.chain.key_hash(),
            receipt_key: ctx.receipt_key.verifying_key().to_bytes(),
            spec: spec_cid.clone(),
            gpus: terms.gpus,
            max_rate: terms.max_rate,
            budget: terms.budget,
            deadline_ms: terms.deadline_ms,
            receipt_interval_ms: ctx.config.receipt_interval_ms,
            seed,
            valid_until_slot: until,
        },
    )
    .map_err(super::chain::ChainError::from)?;
    let tx = ctx.chain.build(draft, now).await?;
    ctx.store.create::<OrchestratorRole>(&JobRecord::new(
        job,
        OrchestratorState::Locked,
        OrchestratorDetail {
            spec: spec.clone(),
            spec_cid,
            excluded,
            chosen: Vec::new(),
            last_error: None,
            stopped_at_ms: None,
            links: None,
            unformed: Vec::new(),
            rematch_tried: false,
            successor: None,
            predecessor,
            scaling: Default::default(),
        },
        now,
    ))?;
    submit_new(ctx, &job, TxKind::Lock, tx, Some(until)).await?;
    Ok(job)
}

/// This node's orchestrator record of `job`.
fn record_of<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
) -> Result<OrchestratorRecord, EngineError> {
    ctx.store
        .get::<OrchestratorRole>(job)?
        .ok_or_else(|| state_err(*job, "unknown job"))
}

/// Cancels an open job. See [`super::Engine::cancel`].
pub(crate) async fn cancel<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
) -> Result<(), EngineError> {
    let r = record_of(ctx, job)?;
    if !r.state.is_open() {
        return Err(state_err(
            *job,
            format!("cannot cancel in state {:?}", r.state),
        ));
    }
    if r.intent(TxKind::Cancel).is_some() {
        return Ok(());
    }
    if r.intent(TxKind::Assign).is_some_and(|i| !lapsed(ctx, i)) {
        return Err(state_err(*job, "an assign transaction is in flight"));
    }
    let view = ctx
        .indexer
        .job(job, ctx.config.depth)?
        .ok_or_else(|| state_err(*job, "the lock is not on chain yet"))?;
    if view.value.status != JobStatus::Locked {
        return Err(state_err(
            *job,
            format!("escrow is {:?}", view.value.status),
        ));
    }
    cancel_open(ctx, job, &view.value).await
}

/// Stops `job` (`ganglion job stop`): an open escrow is cancelled ([`cancel`]); an assigned
/// job is marked stopped, so its providers' next heartbeats are refused
/// [`HeartbeatRefusal::Stopped`](ganglion_p2p::protocols::HeartbeatRefusal): they stop their
/// containers and claim the work acknowledged (at most one receipt interval past the last
/// receipt), and the last claim refunds the rest. Repeating it changes nothing.
///
/// # Errors
/// [`EngineError::State`]: an unknown job, or one already ended.
pub(crate) async fn stop<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
) -> Result<(), EngineError> {
    let r = record_of(ctx, job)?;
    if r.state.is_open() {
        return cancel(ctx, job).await;
    }
    if r.state != OrchestratorState::Assigned {
        return Err(state_err(
            *job,
            format!("cannot stop in state {:?}", r.state),
        ));
    }
    if r.detail.stopped_at_ms.is_none() {
        let mut d = r.detail.clone();
        d.stopped_at_ms = Some(ctx.now());
        ctx.store.set_detail::<OrchestratorRole>(job, d)?;
        tracing::info!(job = %job, "stopped by the orchestrator: heartbeats are refused from now on");
    }
    Ok(())
}

/// Builds and submits the cancel of the open escrow of `v` (refund, token burnt).
async fn cancel_open<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    v: &JobView,
) -> Result<(), EngineError> {
    let escrow_at = escrow_ref(v).ok_or_else(|| state_err(*job, "no escrow"))?;
    let escrow = ctx.chain.script_utxos(&[escrow_at]).await?;
    let draft = build::cancel(ctx.chain.deployment(), ctx.chain.env(), &escrow[0])
        .map_err(super::chain::ChainError::from)?;
    let tx = ctx.chain.build(draft, ctx.now()).await?;
    submit_new(ctx, job, TxKind::Cancel, tx, None).await
}

/// One pass over every unfinished orchestrator job.
pub(crate) async fn pass<S: Kv, E: Executor>(ctx: &Ctx<S, E>) {
    let records = match ctx.store.all::<OrchestratorRole>() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "job store unreadable");
            return;
        }
    };
    let open: std::collections::HashSet<JobId> = records
        .iter()
        .filter(|r| !r.state.is_terminal())
        .map(|r| r.job_id)
        .collect();
    forget_finished(ctx, &open);
    for r in records.into_iter().filter(|r| !r.state.is_terminal()) {
        let job = r.job_id;
        if let Err(e) = step(ctx, r).await {
            // A failure no retry can mend is an error for the operator; the rest are
            // passing (the next pass, or the retry governor, tries again).
            retry::log_step_failure("orchestrator step", &job, &e);
            if let Ok(Some(mut rec)) = ctx.store.get::<OrchestratorRole>(&job) {
                rec.detail.last_error = Some(e.to_string());
                let _ = ctx.store.set_detail::<OrchestratorRole>(&job, rec.detail);
            }
        }
    }
}

/// Drops the in-memory per-job state of the jobs that are no longer `open` (finished, or
/// gone from the store): the last receipt given and the live log seen per assignment. A
/// finished job gets no receipt and shows no live log, so nothing is lost; without this both
/// maps would grow with every job the node ever orchestrated.
fn forget_finished<S: Kv, E: Executor>(ctx: &Ctx<S, E>, open: &std::collections::HashSet<JobId>) {
    ctx.receipts_given
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(job, _), _| open.contains(job));
    ctx.live_logs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(job, _), _| open.contains(job));
}

fn apply<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    event: OrchestratorEvent,
    slot: Option<u64>,
) -> Result<OrchestratorState, EngineError> {
    apply_with(ctx, job, event, None, slot)
}

/// [`apply`] with the record's new detail written in the same store write.
fn apply_with<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    event: OrchestratorEvent,
    detail: Option<OrchestratorDetail>,
    slot: Option<u64>,
) -> Result<OrchestratorState, EngineError> {
    let to = ctx
        .store
        .apply_with::<OrchestratorRole>(job, event, detail, ctx.now(), slot)?;
    tracing::info!(job = %job, ?event, state = ?to, "orchestrator");
    Ok(to)
}

async fn step<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: OrchestratorRecord,
) -> Result<(), EngineError> {
    let job = r.job_id;
    let confirmed = ctx.indexer.job(&job, ctx.config.depth)?;
    let view = confirmed
        .as_ref()
        .filter(|c| !c.tentative)
        .map(|c| &c.value);
    let slot = view.and_then(|v| v.history.last()).map(|h| h.meta.slot);
    // The chain's word is final: terminal statuses end the record whoever caused them.
    if let Some(v) = view {
        let event = match v.status {
            JobStatus::Claimed => Some(OrchestratorEvent::SettleConfirmed),
            JobStatus::Cancelled => Some(OrchestratorEvent::CancelConfirmed),
            JobStatus::Expired => Some(OrchestratorEvent::ExpireConfirmed),
            JobStatus::Assigned | JobStatus::Claiming if r.state.is_open() => {
                Some(OrchestratorEvent::AssignConfirmed)
            }
            JobStatus::Locked if r.state == OrchestratorState::Locked => {
                Some(OrchestratorEvent::LockConfirmed)
            }
            _ => None,
        };
        if let Some(e) = event {
            // Every share claimed, nothing paid for a network that never formed: the spec is
            // locked again before the record ends (a crash in between links, never re-locks).
            if e == OrchestratorEvent::SettleConfirmed {
                super::unformed::successor(ctx, &r, v).await?;
            }
            apply(ctx, &job, e, slot)?;
            return Ok(());
        }
    }
    if let Some(i) = r.intent(TxKind::Cancel) {
        if !on_chain(view, &i.tx_hash) {
            nudge(ctx, i).await;
        }
        return Ok(());
    }
    let now = ctx.now();
    let chain_now_ms = ctx.chain.slot_start_ms(ctx.chain.slot_at(now));
    let deadline = r.detail.spec.deadline_ms;
    // An escrow still open at its deadline can no longer be assigned: refunded at once.
    if let Some(v) = view
        && v.status == JobStatus::Locked
        && chain_now_ms > deadline
    {
        if r.intent(TxKind::Assign).is_some_and(|i| !lapsed(ctx, i)) {
            return Ok(());
        }
        tracing::info!(job = %job, "the deadline passed before an assignment: cancelling");
        return retry::governed(
            &ctx.retries,
            &job,
            TxKind::Cancel,
            now,
            cancel_open(ctx, &job, v),
        )
        .await;
    }
    // Past the deadline and the claim window nothing but an expire can land: it refunds the
    // rest and slashes the assigned providers that never claimed.
    if let Some(v) = view
        && chain_now_ms > v.claim_window_end_ms
    {
        return retry::governed(
            &ctx.retries,
            &job,
            TxKind::Expire,
            now,
            expire(ctx, &r, view),
        )
        .await;
    }
    match r.state {
        OrchestratorState::Locked => {
            if let Some(i) = r.intent(TxKind::Lock) {
                if confirmed.is_none() && lock_lapsed(ctx, i) {
                    tracing::warn!(job = %job, tx = %hex::encode(i.tx_hash), "the lock never landed and can no longer: job ends");
                    apply(ctx, &job, OrchestratorEvent::LockLapsed, None)?;
                } else {
                    nudge(ctx, i).await;
                }
            }
            Ok(())
        }
        OrchestratorState::Matching if chain_now_ms <= deadline => do_match(ctx, &r).await,
        OrchestratorState::Assigning if chain_now_ms <= deadline => assign(ctx, &r, view).await,
        // A running service: its replicas follow the count wanted (`service::step`).
        OrchestratorState::Assigned
            if chain_now_ms < deadline
                && r.detail.spec.kind == ganglion_market::JobKind::Service =>
        {
            match view {
                Some(v) => super::service::step(ctx, &r, v).await,
                None => Ok(()),
            }
        }
        // Assigned: the providers run, claim their pay; receipts are answered as heartbeats
        // come (`heartbeat::on_heartbeat`).
        _ => Ok(()),
    }
}

/// The market snapshot the matcher runs on: `offers` as this node's engine may use them
/// (declared GPUs on the devnet only), with the latency matrix their signed links give at
/// `ctx.now()` ([`LinkMatrix::assemble`]: fresh links only, the worse end of each pair; a
/// pair without one is out of any `placement.max_rtt_ms`). Shared by the match step and
/// [`super::quote`]; the matrix comes back too, for the plan's record.
///
/// # Errors
/// [`EngineError::Spec`] ([`SpecError::Snapshot`]).
pub(crate) fn market_snapshot<'a, S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    offers: impl IntoIterator<Item = &'a ganglion_p2p::offers::SignedOffer>,
) -> Result<(MarketSnapshot, LinkMatrix), EngineError> {
    let offers: Vec<_> = offers.into_iter().collect();
    let matrix = LinkMatrix::assemble(offers.iter().copied(), ctx.now());
    let market: Vec<_> = offers.iter().map(|o| o.body.market.clone()).collect();
    let options = SnapshotOptions {
        allow_declared: ctx.config.allow_declared_gpus,
    };
    let snapshot =
        MarketSnapshot::build(&market, &matrix.samples(), options).map_err(SpecError::from)?;
    Ok((snapshot, matrix))
}

async fn do_match<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
) -> Result<(), EngineError> {
    let market = ctx.p2p.market().await?;
    let now = ctx.now();
    let excluded: Vec<KeyHash> = r
        .detail
        .excluded
        .iter()
        .filter(|x| x.applies(now))
        .map(|x| x.chosen.provider)
        .collect();
    let offers: Vec<_> = market
        .iter()
        .filter(|o| !excluded.contains(&o.body.market.provider))
        .collect();
    let (snapshot, matrix) = market_snapshot(ctx, offers.iter().copied())?;
    let plan = match match_gang(&Requirements::from_ensemble(&r.detail.spec), &snapshot) {
        Ok(p) => p,
        Err(no_fit) => {
            // Not an error: the market may fill up. Recorded for status displays, with the
            // providers left out of this job and why (their refusals are what the market
            // snapshot cannot show).
            let mut d = r.detail.clone();
            let left_out: Vec<String> = (r.detail.excluded.iter())
                .filter(|x| x.applies(now))
                .map(|x| format!("{}… {}", &hex::encode(x.chosen.provider)[..12], x.reason))
                .collect();
            d.last_error = Some(if left_out.is_empty() {
                no_fit.to_string()
            } else {
                format!("{no_fit}; left out: {}", left_out.join("; "))
            });
            ctx.store.set_detail::<OrchestratorRole>(&r.job_id, d)?;
            return Ok(());
        }
    };
    // A grouped plan is listed group by group (stable: rank order inside a group), so every
    // provider derives the same latency groups from the assignments' order
    // (`JobPlan::gpus_per_group`).
    let mut nodes: Vec<_> = plan.nodes.iter().collect();
    nodes.sort_by_key(|n| n.group);
    let chosen = nodes
        .into_iter()
        .filter_map(|n| Chosen::placed(n, &offers))
        .collect();
    let mut d = r.detail.clone();
    let providers: Vec<KeyHash> = plan.nodes.iter().map(|n| n.provider).collect();
    d.links = Some(PlanLinks {
        matched_ms: now,
        pairs: matrix.among(&providers),
    });
    d.chosen = chosen;
    d.last_error = None;
    apply_with(ctx, &r.job_id, OrchestratorEvent::Matched, Some(d), None)?;
    Ok(())
}

/// How long a provider stays out of a job's matching after failing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exclusion {
    /// Busy or unreachable: [`EngineConfig::retry_excluded_ms`](super::EngineConfig).
    Transient,
    /// Its terms do not fit the job: for the job's life.
    ForGood,
}

impl Exclusion {
    /// Until when (POSIX ms) a provider excluded now stays out; `None`: for the job's life.
    pub(crate) fn until<S: Kv, E: Executor>(self, ctx: &Ctx<S, E>) -> Option<u64> {
        match self {
            Self::Transient => Some(ctx.now() + ctx.config.retry_excluded_ms),
            Self::ForGood => None,
        }
    }

    fn of(refusal: &RefusalReason) -> Self {
        match refusal {
            RefusalReason::NoCapacity { .. }
            | RefusalReason::TooManyJobs { .. }
            | RefusalReason::RateLimited
            | RefusalReason::SpecUnavailable { .. } => Self::Transient,
            _ => Self::ForGood,
        }
    }
}

/// Drops `bad` from the plan, excludes it (see [`Exclusion`]) and matches again.
fn rematch<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    bad: &Chosen,
    why: String,
    exclusion: Exclusion,
) -> Result<(), EngineError> {
    tracing::info!(job = %r.job_id, provider = %hex::encode(bad.provider), %why, ?exclusion, "re-matching without provider");
    let mut d = r.detail.clone();
    let until_ms = exclusion.until(ctx);
    d.excluded.push(Excluded {
        chosen: bad.clone(),
        reason: why.clone(),
        until_ms,
    });
    d.chosen.clear();
    d.links = None;
    d.last_error = Some(why);
    apply_with(ctx, &r.job_id, OrchestratorEvent::Rematch, Some(d), None)?;
    Ok(())
}

/// How long a provider's acceptance lets this node assign, ms: the acceptances' `accept_by`
/// is this far from the request (within a provider's reservation; the assign's validity ends
/// by then, checked on chain).
pub const ACCEPT_WINDOW_MS: u64 = 45_000;

/// A provider's acceptance of its share, as an assign or a rescale spends it.
pub(crate) struct Accepted {
    /// Its assignment (`started_at_ms` and `until_ms` are stamped by the builder).
    pub assignment: Assignment,
    /// Its signature over the `Acceptance`.
    pub signature: Vec<u8>,
    /// The bond the acceptance's key belongs to (spent and continued with the commitment).
    pub bond: TxoRef,
}

/// Asks `c` over p2p to accept its share of `v`'s job until `accept_by_ms`: its acceptance,
/// or why not and for how long it stays out of the job's matching.
///
/// # Errors
/// [`EngineError`] reading the indexer's bonds.
pub(crate) async fn ask<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    c: &Chosen,
    v: &JobView,
    accept_by_ms: u64,
) -> Result<Result<Accepted, (String, Exclusion)>, EngineError> {
    let peer = match PeerId::from_bytes(&c.peer) {
        Ok(p) => p,
        Err(e) => return Ok(Err((format!("bad peer id: {e}"), Exclusion::ForGood))),
    };
    let Some(bond) = ctx.live_bond(&c.provider, None)? else {
        return Ok(Err(("no live bond".into(), Exclusion::Transient)));
    };
    let req = AcceptRequest {
        job_id: *job,
        bond: bond.bond,
        gpus: c.gpus,
        rate: c.rate,
        deadline_ms: v.deadline_ms,
        spec: v.spec.clone(),
        accept_by_ms,
        receipt_interval_ms: v.receipts.interval_ms,
    };
    Ok(match ctx.p2p.accept(peer, req).await {
        Ok(AcceptResponse::Accepted {
            signature,
            attest_key,
            provider,
            ..
        }) if provider == c.provider => {
            // The bond the acceptance's key belongs to: the assign spends it.
            match ctx.live_bond(&provider, Some(&attest_key))? {
                Some(bond) => Ok(Accepted {
                    assignment: Assignment {
                        provider,
                        attest_key,
                        payout: bond.datum.payout,
                        gpus: c.gpus,
                        rate: c.rate,
                        accept_by_ms,
                        // Stamped by the builder: the transaction's lower bound, the deadline.
                        started_at_ms: 0,
                        until_ms: v.deadline_ms,
                    },
                    signature,
                    bond: bond.bond,
                }),
                None => Err((
                    "accepted under a key no live bond names".into(),
                    Exclusion::ForGood,
                )),
            }
        }
        Ok(AcceptResponse::Accepted { .. }) => Err((
            "accepted under another provider key".into(),
            Exclusion::ForGood,
        )),
        Ok(AcceptResponse::Refused(why)) => {
            let exclusion = Exclusion::of(&why);
            Err((format!("refused: {why}"), exclusion))
        }
        Err(e) => Err((format!("no answer: {e}"), Exclusion::Transient)),
    })
}

async fn assign<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    view: Option<&JobView>,
) -> Result<(), EngineError> {
    let job = r.job_id;
    // A lapsed intent that never landed (AssignConfirmed would have moved us) asks again.
    if let Some(i) = r.intent(TxKind::Assign)
        && !lapsed(ctx, i)
    {
        nudge(ctx, i).await;
        return Ok(());
    }
    let Some(v) = view else { return Ok(()) };
    let now = ctx.now();
    let accept_by_ms = (now + ACCEPT_WINDOW_MS).min(v.deadline_ms.saturating_sub(1));
    let mut assignments = Vec::new();
    let mut acceptances = Vec::new();
    let mut bonds = Vec::new();
    for c in &r.detail.chosen {
        match ask(ctx, &job, c, v, accept_by_ms).await? {
            Ok(accepted) => {
                assignments.push(accepted.assignment);
                acceptances.push(accepted.signature);
                bonds.push(accepted.bond);
            }
            Err((why, exclusion)) => return rematch(ctx, r, c, why, exclusion),
        }
    }
    if assignments.is_empty() {
        return Ok(());
    }
    let escrow_at = escrow_ref(v).ok_or_else(|| state_err(job, "no escrow"))?;
    let mut refs = vec![escrow_at];
    refs.extend(bonds);
    let utxos = ctx.chain.script_utxos(&refs).await?;
    let now_slot = ctx.chain.slot_at(ctx.now());
    // The assign's upper bound may not lie after any acceptance's accept-by (checked on chain).
    let until = (now_slot + ctx.config.validity_slots).min(ctx.chain.slot_at(accept_by_ms));
    let draft = build::assign(
        ctx.chain.deployment(),
        ctx.chain.env(),
        &AssignRequest {
            escrow: utxos[0].clone(),
            assignments,
            acceptances,
            bonds: utxos[1..].to_vec(),
            valid_from_slot: now_slot,
            valid_until_slot: until,
        },
    )
    .map_err(super::chain::ChainError::from)?;
    let tx = ctx.chain.build(draft, ctx.now()).await?;
    submit_new(ctx, &job, TxKind::Assign, tx, Some(until)).await
}

/// Expires `view`'s escrow after its deadline and claim window: an open escrow is refunded;
/// an assigned one refunds the unpaid rest and slashes the bond of every assigned provider
/// that never claimed (each slash at most its assignment's value, DESIGN §3.1 G4).
async fn expire<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    view: Option<&JobView>,
) -> Result<(), EngineError> {
    if let Some(i) = r.intent(TxKind::Expire) {
        if !on_chain(view, &i.tx_hash) {
            nudge(ctx, i).await;
        }
        return Ok(());
    }
    let Some(v) = view else { return Ok(()) };
    let mut slash = Vec::new();
    if matches!(v.status, JobStatus::Assigned | JobStatus::Claiming) {
        for (i, a) in v.assignments.iter().enumerate() {
            if v.has_claimed(i) {
                continue;
            }
            // The defaulter's bond that carries this job's commitment.
            let bonds = ctx.indexer.provider(&a.provider)?.bonds;
            let committed = bonds
                .iter()
                .find(|b| b.datum.commitments.iter().any(|c| c.job_id == v.job_id))
                .or(bonds.first());
            if let Some(b) = committed {
                slash.push(b.bond);
            }
        }
    }
    let escrow_at = escrow_ref(v).ok_or_else(|| state_err(r.job_id, "no escrow"))?;
    let mut refs = vec![escrow_at];
    refs.extend(slash.iter().copied());
    let utxos = ctx.chain.script_utxos(&refs).await?;
    let (draft, outcome) = build::expire(
        ctx.chain.deployment(),
        ctx.chain.env(),
        &ExpireRequest {
            escrow: utxos[0].clone(),
            slash: utxos[1..].to_vec(),
            valid_from_slot: ctx.chain.slot_at(ctx.now()),
        },
    )
    .map_err(super::chain::ChainError::from)?;
    tracing::info!(job = %r.job_id, refund = outcome.refund, slashes = ?outcome.slashes,
        burnt = outcome.burnt, "expiring");
    let tx = ctx.chain.build(draft, ctx.now()).await?;
    submit_new(ctx, &r.job_id, TxKind::Expire, tx, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excluded(until_ms: Option<u64>) -> Excluded {
        Excluded {
            chosen: Chosen {
                provider: [1; 28],
                peer: vec![],
                bond: TxoRef {
                    tx_hash: [2; 32],
                    index: 0,
                },
                gpus: 1,
                rate: 1,
                group: None,
            },
            reason: "test".into(),
            until_ms,
        }
    }

    #[test]
    fn every_example_spec_batch_or_service_meets_the_terms_checked_before_its_lock() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ensembles");
        let now = 1_767_225_600_000;
        let (mut services, mut batches) = (0, 0);
        for entry in std::fs::read_dir(&dir).expect("examples") {
            let path = entry.expect("entry").path();
            if !path.is_file() {
                continue;
            }
            let spec = Ensemble::parse(&std::fs::read_to_string(&path).expect("read"), now)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            match spec.kind {
                ganglion_market::JobKind::Service => services += 1,
                ganglion_market::JobKind::Batch => batches += 1,
            }
            super::super::terms::check(&spec, now)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        assert!(
            services >= 1 && batches >= 5,
            "{services} services, {batches} batch jobs"
        );
    }

    #[test]
    fn a_budget_above_the_wallets_ntx_is_refused_with_both_amounts() {
        use ganglion_contracts::params::AssetClass;
        use ganglion_contracts::tx::{Output, Utxo, Value};
        let ntx = AssetClass {
            policy: [9; 28],
            name: b"NTX".to_vec(),
        };
        let holding = |n: u8, q: u64| {
            let mut value = Value::lovelace(2_000_000);
            value
                .assets
                .entry(ntx.policy)
                .or_default()
                .insert(ntx.name.clone(), q);
            Utxo {
                reference: TxoRef {
                    tx_hash: [n; 32],
                    index: 0,
                },
                output: Output::new(vec![0x60; 29], value),
            }
        };
        let utxos = [holding(1, 60_000_000), holding(2, 39_900_000)];
        assert!(check_balance(&utxos, &ntx, 99_900_000).is_ok());
        let e = check_balance(&utxos, &ntx, 999_999_000_000).expect_err("over the balance");
        assert!(
            matches!(
                &e,
                EngineError::Spec(s) if matches!(**s, SpecError::BudgetOverBalance {
                    budget: 999_999_000_000,
                    balance: 99_900_000
                })
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("budget 999999 NTX > balance 99.9 NTX"),
            "{e}"
        );
    }

    #[test]
    fn a_seed_whose_job_is_tracked_is_never_picked_again() {
        use ganglion_contracts::tx::{Output, Utxo, Value};
        let utxo = |n: u8, lovelace: u64| Utxo {
            reference: TxoRef {
                tx_hash: [n; 32],
                index: 0,
            },
            output: Output::new(vec![0x60; 29], Value::lovelace(lovelace)),
        };
        // The largest asset-free UTxO seeded a lock the ledger refused (its record is kept).
        let utxos = [utxo(1, 500_000_000), utxo(2, 100_000_000)];
        let refused = ganglion_contracts::v2::build::job_id_of(&utxos[0].reference);
        let first = seed_of(&utxos, |_| false).expect("a seed");
        assert_eq!(first.reference, utxos[0].reference);
        let next = seed_of(&utxos, |id| *id == refused).expect("another seed");
        assert_eq!(next.reference, utxos[1].reference, "a fresh job id");
        let e = seed_of(&utxos[..1], |id| *id == refused).expect_err("none left");
        assert!(
            e.to_string().contains("no UTxO to seed a new job id"),
            "{e}"
        );
    }

    #[test]
    fn busy_providers_come_back_and_misfits_stay_out() {
        assert_eq!(
            Exclusion::of(&RefusalReason::NoCapacity { free: 0 }),
            Exclusion::Transient
        );
        assert_eq!(
            Exclusion::of(&RefusalReason::TooManyJobs { active: 1, max: 1 }),
            Exclusion::Transient
        );
        assert_eq!(
            Exclusion::of(&RefusalReason::RateLimited),
            Exclusion::Transient
        );
        for misfit in [
            RefusalReason::RateTooLow { price: 9 },
            RefusalReason::Deadline,
            RefusalReason::UnknownBond,
            RefusalReason::NotProvider,
        ] {
            assert_eq!(Exclusion::of(&misfit), Exclusion::ForGood, "{misfit}");
        }
        let transient = excluded(Some(1_000));
        assert!(transient.applies(999));
        assert!(!transient.applies(1_000));
        assert!(excluded(None).applies(u64::MAX));
    }
}
