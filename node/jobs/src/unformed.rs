//! A job whose network did not form (DESIGN §6; issue "fail before paying"): after the assign,
//! a provider whose overlay links to some other nodes of the job did not work within its link
//! timeout fails its share before any rank starts (the executor's
//! `FailureReason::NetworkUnformed`), claims no GPU time and tells the orchestrator which node
//! ranks it could not reach (the heartbeat's [`Unformed`]).
//!
//! The orchestrator, here:
//! - [`record`]: keeps each assigned provider's first report (from the assignment's own peer
//!   only — the heartbeat's checks run first), and stops the job, so a provider whose ranks
//!   did start stops them and claims;
//! - [`culprits`]: which providers to leave out: those in the most failed pairs (with two
//!   nodes the failing end cannot be told apart, so both are);
//! - [`successor`]: once every share is claimed (nothing was paid for GPU time that never
//!   ran), locks the same spec again as a new job, its matching excluding the culprits for
//!   that job's life; the two records name each other (`job status`).

use std::collections::BTreeMap;

use ganglion_contracts::v2::datum::JobId;
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::JobView;
use ganglion_indexer::store::Kv;
use ganglion_p2p::protocols::{MAX_UNFORMED_RANKS, Unformed};
use serde::{Deserialize, Serialize};

use super::engine::{Ctx, EngineError, OrchestratorRecord, OrchestratorRole};
use super::orchestrator::Excluded;

/// One provider's report that the job's network did not form, as the orchestrator keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnformedReport {
    /// The reporting provider's index in the escrow's assignments (its node rank).
    pub index: u64,
    /// The node ranks it had no working link to (other assignments only, at most
    /// [`MAX_UNFORMED_RANKS`]).
    pub unreachable: Vec<u64>,
    /// When the report came, POSIX ms (this node's clock).
    pub at_ms: u64,
}

/// The orchestrator's one-line account of `reports`, for `job status`.
pub fn describe(reports: &[UnformedReport]) -> String {
    let pairs: Vec<String> = reports
        .iter()
        .map(|r| {
            let to: Vec<String> = r.unreachable.iter().map(u64::to_string).collect();
            format!("node {} could not reach node {}", r.index, to.join(", "))
        })
        .collect();
    format!("the job network did not form: {}", pairs.join("; "))
}

/// Keeps the report of assignment `index` of `job` (a job of `world` assigned nodes): only
/// the first per index, only while the record is open, unreachable ranks limited to the
/// job's other nodes. The job is stopped with it (its heartbeats are refused `Stopped` from
/// now on). Returns whether the report was new.
///
/// # Errors
/// Store errors.
pub(crate) fn record<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    index: u64,
    unformed: &Unformed,
    world: usize,
) -> Result<bool, EngineError> {
    let world = u64::try_from(world).unwrap_or(u64::MAX);
    let mut unreachable: Vec<u64> = unformed
        .unreachable
        .iter()
        .copied()
        .filter(|&u| u < world && u != index)
        .collect();
    unreachable.sort_unstable();
    unreachable.dedup();
    unreachable.truncate(MAX_UNFORMED_RANKS);
    if unreachable.is_empty() {
        return Ok(false);
    }
    let now = ctx.now();
    let report = UnformedReport {
        index,
        unreachable,
        at_ms: now,
    };
    let changed = ctx.store.update_if::<OrchestratorRole>(
        job,
        |r| !r.state.is_terminal() && !r.detail.unformed.iter().any(|u| u.index == index),
        |r| {
            r.detail.unformed.push(report.clone());
            r.detail.stopped_at_ms.get_or_insert(now);
            r.detail.last_error = Some(describe(&r.detail.unformed));
        },
    )?;
    if changed {
        tracing::warn!(job = %job, index, unreachable = ?report.unreachable,
            "the job network did not form; the job is stopped and will be matched again");
    }
    Ok(changed)
}

/// The assignment indices to leave out of the next match: every node in the largest number
/// of failed pairs (a pair counts once, whichever end reported it).
pub fn culprits(reports: &[UnformedReport]) -> Vec<u64> {
    let mut pairs = std::collections::BTreeSet::new();
    for r in reports {
        for &u in &r.unreachable {
            pairs.insert((r.index.min(u), r.index.max(u)));
        }
    }
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    for (a, b) in pairs {
        *count.entry(a).or_default() += 1;
        *count.entry(b).or_default() += 1;
    }
    let most = count.values().copied().max().unwrap_or(0);
    count
        .into_iter()
        .filter(|&(_, n)| n == most && n > 0)
        .map(|(i, _)| i)
        .collect()
}

/// Once every share of `r`'s job is claimed: locks its spec again as a new job that excludes
/// [`culprits`] for its life, and links the two records. A successor written before a crash
/// (its `predecessor` names this job) is linked, never locked twice. Nothing happens for a
/// job without reports or tried already.
///
/// # Errors
/// Store errors; a lock that cannot be built (the deadline too near, funds) is recorded in
/// `last_error` and not retried.
pub(crate) async fn successor<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    view: &JobView,
) -> Result<(), EngineError> {
    if r.detail.unformed.is_empty() || r.detail.rematch_tried {
        return Ok(());
    }
    let job = r.job_id;
    let existing = || -> Result<Option<JobId>, EngineError> {
        Ok(ctx
            .store
            .all::<OrchestratorRole>()?
            .into_iter()
            .find(|s| s.detail.predecessor == Some(job))
            .map(|s| s.job_id))
    };
    let next = match existing()? {
        Some(next) => Ok(next),
        None => {
            let why = describe(&r.detail.unformed);
            let excluded: Vec<Excluded> = culprits(&r.detail.unformed)
                .into_iter()
                .filter_map(|i| view.assignments.get(usize::try_from(i).ok()?))
                // The plan is kept after the assign, in assignment order.
                .filter_map(|a| r.detail.chosen.iter().find(|c| c.provider == a.provider))
                .map(|chosen| Excluded {
                    chosen: chosen.clone(),
                    reason: why.clone(),
                    until_ms: None,
                })
                .collect();
            match super::orchestrator::submit_with(ctx, &r.detail.spec, excluded, Some(job)).await {
                // Recorded, then its first submission failed: the intent is re-submitted.
                Err(e) => existing()?.ok_or(e),
                ok => ok,
            }
        }
    };
    let (successor, note) = match next {
        Ok(next) => {
            tracing::info!(job = %job, successor = %next, "matched again as a new job");
            (
                Some(next),
                format!(
                    "{}; matched again as job {next}",
                    describe(&r.detail.unformed)
                ),
            )
        }
        Err(e) => {
            tracing::warn!(job = %job, error = %e, "cannot lock the job again");
            (
                None,
                format!("{}; not matched again: {e}", describe(&r.detail.unformed)),
            )
        }
    };
    ctx.store.update_if::<OrchestratorRole>(
        &job,
        |_| true,
        |rec| {
            rec.detail.successor = successor;
            rec.detail.rematch_tried = true;
            rec.detail.last_error = Some(note.clone());
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(index: u64, unreachable: &[u64]) -> UnformedReport {
        UnformedReport {
            index,
            unreachable: unreachable.to_vec(),
            at_ms: 0,
        }
    }

    #[test]
    fn the_node_in_the_most_failed_pairs_is_the_culprit() {
        // Node 2 reaches nobody; 0 and 1 reach each other.
        let reports = [report(0, &[2]), report(1, &[2]), report(2, &[0, 1])];
        assert_eq!(culprits(&reports), vec![2]);
        // Reported from one end only: the same.
        assert_eq!(culprits(&[report(0, &[2]), report(1, &[2])]), vec![2]);
    }

    #[test]
    fn two_nodes_that_cannot_reach_each_other_are_both_left_out() {
        assert_eq!(culprits(&[report(0, &[1]), report(1, &[0])]), vec![0, 1]);
        assert_eq!(culprits(&[report(1, &[0])]), vec![0, 1]);
        assert!(culprits(&[]).is_empty());
    }

    #[test]
    fn the_account_names_every_failed_pair() {
        let text = describe(&[report(0, &[2]), report(2, &[0, 1])]);
        assert_eq!(
            text,
            "the job network did not form: node 0 could not reach node 2; node 2 could not reach node 0, 1"
        );
    }
}
