//! Heartbeats and receipts between a running job's providers and its orchestrator (escrow v2,
//! DESIGN §3.2 "Receipts"; the wire protocol is [`ganglion_p2p::protocols::heartbeat`]).
//!
//! - **Orchestrator** ([`on_heartbeat`]): a job it stopped (`job stop`) answers every
//!   heartbeat [`HeartbeatRefusal::Stopped`]. Otherwise a heartbeat is answered with a signed receipt only
//!   for a job this node orchestrates, assigned on chain (at the confirmation depth), from the
//!   peer its assignment's bond names, while that assignment is unclaimed and before the
//!   deadline, when every rank of the assignment is reported running and its GPU time did not
//!   go back; at most one receipt per half interval and assignment (G7: anything else is
//!   refused and changes nothing). A service's replica routed by this node's gateway gets a
//!   receipt only while it is healthy there ([`HeartbeatRefusal::NotHealthy`]), and its
//!   receipt also carries what it served through the gateway, signed ([`super::usage`]).
//! - **Orchestrator**, also: a heartbeat from the assignment's peer that reports its share
//!   ended because the job's network did not form ([`Unformed`]) is kept and stops the job
//!   ([`super::unformed::record`]); it is answered `Stopped`, never with a receipt.
//! - **Orchestrator**, also: a heartbeat from the assignment's peer that names a live log
//!   (`HeartbeatRequest::log`) has it kept as that node's latest ([`super::live_logs`]), whether
//!   or not a receipt is given.
//! - **Provider** ([`beat`]): while its share runs it sends a heartbeat every half receipt
//!   interval, with the tail of its container's log ([`super::live_logs::tail`]), keeps the
//!   best receipt ([`receipts::take`]), and stops its containers when the
//!   orchestrator refuses with `Stopped`, when it has been silent for [`super::EngineConfig::missed_receipts`] intervals or the
//!   deadline comes ([`receipts::Liveness::must_stop`]); a service's replica that the
//!   orchestrator answers [`HeartbeatRefusal::NotHealthy`] before its first receipt (its model
//!   loading) waits up to [`SERVICE_START_GRACE_MS`] from its start instead.

use ganglion_dispatch::executor::{Executor, JobRecord as ExecRecord, Phase};
use ganglion_indexer::JobStatus;
use ganglion_indexer::store::Kv;
use ganglion_p2p::protocols::{
    HeartbeatRefusal, HeartbeatRequest, HeartbeatResponse, MAX_UNFORMED_RANKS, RankSummary,
    SignedReceipt, Unformed,
};
use libp2p::PeerId;

use super::engine::{Ctx, EngineError, OrchestratorRole, ProviderRecord};
use super::receipts::{self, Liveness, StopReason, Terms, Withheld};

/// Orchestrator side: the answer to `req` from `peer`. See the module docs for the rules.
pub(crate) fn on_heartbeat<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    req: &HeartbeatRequest,
) -> HeartbeatResponse {
    match answer(ctx, peer, req) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(job = %req.job_id, error = %e, "heartbeat not answered");
            HeartbeatResponse::RateLimited
        }
    }
}

fn answer<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    req: &HeartbeatRequest,
) -> Result<HeartbeatResponse, EngineError> {
    use HeartbeatRefusal as R;
    let refuse = |r| Ok(HeartbeatResponse::Refused(r));
    let Some(record) = ctx.store.get::<OrchestratorRole>(&req.job_id)? else {
        return refuse(R::UnknownJob);
    };
    if record.state.is_terminal() {
        return refuse(R::Finished);
    }
    // A report that the network did not form is still kept for a stopped job (the first
    // report stops it; the others name their own unreachable nodes).
    if record.detail.stopped_at_ms.is_some() && req.unformed.is_none() {
        return refuse(R::Stopped);
    }
    let Some(view) = ctx
        .indexer
        .job(&req.job_id, ctx.config.depth)?
        .filter(|c| !c.tentative)
        .map(|c| c.value)
    else {
        return refuse(R::NotStarted);
    };
    match view.status {
        JobStatus::Assigned | JobStatus::Claiming => {}
        JobStatus::Locked => return refuse(R::NotStarted),
        _ => return refuse(R::Finished),
    }
    let index = req.provider_index;
    let Some(a) = usize::try_from(index)
        .ok()
        .and_then(|i| view.assignments.get(i))
    else {
        return refuse(R::NotAssigned);
    };
    let peer_bytes = peer.to_bytes();
    if !ctx
        .indexer
        .provider(&a.provider)?
        .bonds
        .iter()
        .any(|b| b.datum.peer_id == peer_bytes)
    {
        return refuse(R::NotAssigned);
    }
    // The sender is the assignment's: its live log is kept, receipt or not.
    if let Some(log) = &req.log {
        super::live_logs::remember(ctx, req.job_id, index, peer, log, ctx.now());
    }
    // Its share ended before any rank started: kept, the job stopped, no receipt.
    if let Some(unformed) = &req.unformed {
        super::unformed::record(ctx, &req.job_id, index, unformed, view.assignments.len())?;
        return refuse(R::Stopped);
    }
    if view.has_claimed(usize::try_from(index).unwrap_or(usize::MAX)) {
        return refuse(R::Finished);
    }
    let Some(terms) = Terms::of(&view, index) else {
        return refuse(R::NotStarted);
    };
    let expected = u32::try_from(a.gpus).unwrap_or(u32::MAX);
    if req.ranks.running < expected {
        return refuse(R::RanksNotRunning {
            running: req.ranks.running,
            expected,
        });
    }
    // A service's replica routed by this node's gateway is acknowledged only while healthy
    // there: one that never answers is paid at most one interval.
    if record.detail.spec.kind == ganglion_market::JobKind::Service
        && super::usage::healthy(ctx, req.job_id, index) == Some(false)
    {
        return refuse(R::NotHealthy);
    }
    let now = ctx.now();
    let mut given = ctx.receipts_given.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(at_ms, gpu_ms)) = given.get(&(req.job_id, index)) {
        if req.ranks.gpu_ms < gpu_ms {
            return refuse(R::ProgressWentBack {
                acknowledged_gpu_ms: gpu_ms,
                reported_gpu_ms: req.ranks.gpu_ms,
            });
        }
        let retry_at_ms = at_ms.saturating_add(terms.receipt_interval_ms / 2);
        if now < retry_at_ms {
            return refuse(R::TooEarly { retry_at_ms });
        }
    }
    let receipt = match receipts::acknowledge(&terms, true, now) {
        Ok(r) => r,
        Err(Withheld::NotStarted) => return refuse(R::NotStarted),
        Err(Withheld::PastDeadline) => {
            return refuse(R::PastDeadline {
                deadline_ms: terms.until_ms,
            });
        }
        Err(Withheld::NotRunning) => {
            return refuse(R::RanksNotRunning {
                running: req.ranks.running,
                expected,
            });
        }
    };
    given.insert((req.job_id, index), (now, req.ranks.gpu_ms));
    drop(given);
    tracing::debug!(job = %req.job_id, index, until = receipt.acknowledged_until_ms, "receipt given");
    // A routed service's replica: what it served so far rides with the receipt, signed. The
    // GPU time's receipt is never withheld for it.
    let usage = if record.detail.spec.kind == ganglion_market::JobKind::Service {
        super::usage::to_sign(ctx, req.job_id, index)
    } else {
        Ok(None)
    };
    let signed = match usage {
        Ok(Some(usage)) => SignedReceipt::sign_with_usage(&receipt, usage, &ctx.receipt_key),
        Ok(None) => SignedReceipt::sign(&receipt, &ctx.receipt_key),
        Err(e) => {
            tracing::warn!(job = %req.job_id, index, error = %e, "usage not kept: the receipt goes without it");
            SignedReceipt::sign(&receipt, &ctx.receipt_key)
        }
    };
    Ok(HeartbeatResponse::Receipt(signed))
}

/// Provider side, once, when this node's share ended before any rank started because the
/// job's network did not form: tells the orchestrator which node ranks it could not reach
/// (the heartbeat's [`Unformed`]), so it can match the job again without them. Sent in the
/// background (the pass goes on); best effort: an undelivered report is logged (the claim,
/// attesting no GPU time, still settles the job).
pub(crate) fn report_unformed<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &ProviderRecord,
    index: u64,
    unreachable: &[u32],
) {
    let Ok(peer) = PeerId::from_bytes(&r.detail.orchestrator_peer) else {
        return;
    };
    let req = HeartbeatRequest {
        job_id: r.job_id,
        provider_index: index,
        ranks: RankSummary::default(),
        sent_at_ms: ctx.now(),
        log: None,
        unformed: Some(Unformed {
            unreachable: unreachable
                .iter()
                .take(MAX_UNFORMED_RANKS)
                .map(|&u| u64::from(u))
                .collect(),
        }),
    };
    let (p2p, job) = (ctx.p2p.clone(), r.job_id);
    ctx.tasks.spawn(async move {
        match p2p.request_receipt(peer, req).await {
            Ok(answer) => {
                tracing::info!(job = %job, ?answer, "told the orchestrator the job network did not form")
            }
            Err(e) => {
                tracing::warn!(job = %job, error = %e, "cannot tell the orchestrator the job network did not form")
            }
        }
    });
}

/// How long a service's replica that its orchestrator's gateway has not yet seen healthy
/// keeps running without a receipt, from its container's start, ms: the gateway's own
/// starting grace (`ganglion_gateway::Controller`: a replica not healthy within 120 s is
/// given up and released).
pub const SERVICE_START_GRACE_MS: u64 = 120_000;

/// What this node's share of a job looks like in a heartbeat, from the executor's record of
/// it: every rank running (the run's GPUs) once the executor reports `Running`, and the GPU
/// time since its containers started.
fn summary(rec: Option<&ExecRecord>, gpus: u64, now_ms: u64) -> RankSummary {
    let gpus32 = u32::try_from(gpus).unwrap_or(u32::MAX);
    match rec {
        Some(r) if r.phase == Phase::Running => RankSummary {
            running: gpus32,
            exited: 0,
            gpu_ms: r
                .started_at_unix_ms
                .map_or(0, |s| now_ms.saturating_sub(s).saturating_mul(gpus)),
            progress: None,
        },
        Some(r) if r.phase.is_terminal() => RankSummary {
            running: 0,
            exited: gpus32,
            ..RankSummary::default()
        },
        _ => RankSummary::default(),
    }
}

/// Provider side, once per pass for a dispatched share: sends a heartbeat when half an
/// interval has passed since the last, keeps a better receipt, and stops the containers when
/// [`Liveness::must_stop`] says so. `exec` is the executor's record of the run.
///
/// # Errors
/// Store errors (keeping a receipt); p2p failures are logged (the next interval asks again).
pub(crate) async fn beat<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    executor: &E,
    r: &ProviderRecord,
    view: &ganglion_indexer::JobView,
    exec: Option<&ExecRecord>,
) -> Result<(), EngineError> {
    let Some(index) = r.detail.index else {
        return Ok(());
    };
    let Some(terms) = Terms::of(view, index) else {
        return Ok(());
    };
    let now = ctx.now();
    let held = ctx.store.receipt(&r.job_id)?;
    let due = {
        let sent = ctx
            .heartbeats_sent
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        sent.get(&r.job_id)
            .is_none_or(|&at| now >= at.saturating_add(terms.receipt_interval_ms / 2))
    };
    let running = exec.is_some_and(|e| e.phase == Phase::Running);
    if due && running {
        ctx.heartbeats_sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(r.job_id, now);
        if let Ok(peer) = PeerId::from_bytes(&r.detail.orchestrator_peer) {
            let log = match exec {
                Some(e) => super::live_logs::tail(ctx, executor, e, index).await,
                None => None,
            };
            let req = HeartbeatRequest {
                job_id: r.job_id,
                provider_index: index,
                ranks: summary(exec, terms.gpus, now),
                sent_at_ms: now,
                log,
                unformed: None,
            };
            match ctx.p2p.request_receipt(peer, req).await {
                Ok(HeartbeatResponse::Receipt(new)) => {
                    ctx.not_healthy
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&r.job_id);
                    match receipts::take(&terms, held.clone(), new) {
                        Ok(Some(best)) if Some(&best) != held.as_ref() => {
                            ctx.store.put_receipt(&best)?;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(job = %r.job_id, error = %e, "receipt refused")
                        }
                    }
                }
                Ok(HeartbeatResponse::Refused(HeartbeatRefusal::NotHealthy)) => {
                    ctx.not_healthy
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(r.job_id)
                        .or_insert(now);
                    tracing::debug!(job = %r.job_id, "the replica is not healthy at the gateway: no receipt");
                }
                Ok(HeartbeatResponse::Refused(HeartbeatRefusal::Stopped)) => {
                    if let Some(e) = exec {
                        tracing::info!(job = %r.job_id, "the orchestrator stopped the job; stopping");
                        executor
                            .stop(&e.plan.job, "the orchestrator stopped the job")
                            .await?;
                        return Ok(());
                    }
                }
                Ok(other) => tracing::debug!(job = %r.job_id, ?other, "no receipt"),
                Err(e) => tracing::debug!(job = %r.job_id, error = %e, "heartbeat not delivered"),
            }
        }
    }
    if !running {
        return Ok(());
    }
    let held = ctx.store.receipt(&r.job_id)?;
    // A replica its orchestrator has not yet seen healthy (its model loading) waits for its
    // first receipt up to the gateway's starting grace, not only the silent intervals: the
    // orchestrator answers, and the unpaid time at risk is bounded by the grace.
    let starting = held.is_none()
        && ctx
            .not_healthy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&r.job_id);
    let missed_limit = if starting {
        let grace = SERVICE_START_GRACE_MS.div_ceil(terms.receipt_interval_ms.max(1));
        u32::try_from(grace)
            .unwrap_or(u32::MAX)
            .max(ctx.config.missed_receipts)
    } else {
        ctx.config.missed_receipts
    };
    let liveness = Liveness {
        missed_limit: missed_limit.max(1),
        deadline_margin_ms: super::terms::SETTLE_MARGIN_MS,
    };
    // Silence counts from the containers' start: before it no work was at risk (an image
    // pull may take longer than the intervals allowed).
    let counted = Terms {
        started_at_ms: terms
            .started_at_ms
            .max(exec.and_then(|e| e.started_at_unix_ms).unwrap_or(0)),
        ..terms
    };
    if let Some(why) = liveness.must_stop(&counted, held.as_ref(), now)
        && let Some(e) = exec
    {
        let why = match why {
            StopReason::Silent { missed } => {
                format!("the orchestrator sent no receipt for {missed} intervals")
            }
            // A service's replica released by a rescale: its window ends before the deadline.
            StopReason::Deadline if terms.until_ms < view.deadline_ms => {
                "the orchestrator released this replica: its paid window ends".to_string()
            }
            StopReason::Deadline => "the escrow's deadline is near".to_string(),
        };
        tracing::warn!(job = %r.job_id, %why, "stopping the job");
        executor.stop(&e.plan.job, &why).await?;
    }
    Ok(())
}
