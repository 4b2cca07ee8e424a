//! The shares of an orchestrated job as `job_status` shows them: each assigned provider's
//! state, attested exit code, GPU time and pay, from the chain's record ([`Audit::job`]), the
//! job's outcome once it is final, and why a failed share failed, read from the log its
//! provider attested ([`Audit::logs`]; the provider ends it with a
//! `ganglion_jobs::failure_note` line).

use ganglion_contracts::v2::datum::JobId;
use ganglion_rpc::audit::AuditJob;
use ganglion_rpc::types::JobNode;

use crate::audit::service::Audit;
use crate::job::failure_note;
use crate::job::orchestrator::Chosen;

/// The job's shares and its outcome (`succeeded` / `failed`, or `stopped` when the
/// orchestrator `stopped` it, once every share is claimed or the escrow expired). Empty and
/// `None` when the chain does not show the job yet.
pub(super) async fn of(
    audit: &dyn Audit,
    job: &JobId,
    stopped: bool,
) -> (Vec<JobNode>, Option<String>) {
    let Ok(view) = audit.job(job).await else {
        return (vec![], None);
    };
    let mut nodes = nodes_of(&view);
    let outcome = outcome_of(&view, &nodes).map(|o| if stopped { "stopped".into() } else { o });
    // Reasons are read once the job is final: a log fetched over bitswap may take the fetch
    // timeout, which a poll of a running job must not wait for.
    if outcome.as_deref() == Some("failed") {
        if let Ok(logs) = audit.logs(job).await {
            for l in logs {
                if let Some(n) = usize::try_from(l.index).ok().and_then(|i| nodes.get_mut(i))
                    && failed(n)
                {
                    n.reason = reason_in(&l.text);
                }
            }
        }
        for n in nodes.iter_mut().filter(|n| n.state == "defaulted") {
            n.reason =
                Some("no claim before the claim window closed: the expiry slashed its bond".into());
        }
    }
    (nodes, outcome)
}

/// Marks `running` (from the heartbeats this node acknowledged: assignment index, GPU-ms
/// reported) the shares the chain shows assigned and unclaimed, with the GPU time reported.
pub(super) fn mark_running(nodes: &mut [JobNode], running: &[(u64, u64)]) {
    for n in nodes.iter_mut().filter(|n| n.state == "assigned") {
        if let Some((_, gpu_ms)) = running.iter().find(|(i, _)| *i == n.index) {
            n.state = "running".into();
            n.gpu_ms = Some(*gpu_ms);
        }
    }
}

/// Gives each share the latency group (`placement.groups`) the orchestrator's plan placed its
/// provider in: `chosen` is the plan in assignment order, so share `i` is `chosen[i]` (when
/// the providers agree; a share the plan does not name keeps `None`).
pub(super) fn mark_groups(nodes: &mut [JobNode], chosen: &[Chosen]) {
    for n in nodes.iter_mut() {
        let planned = usize::try_from(n.index).ok().and_then(|i| chosen.get(i));
        if let Some(c) = planned.filter(|c| hex::encode(c.provider) == n.provider) {
            n.group = c.group;
        }
    }
}

fn nodes_of(view: &AuditJob) -> Vec<JobNode> {
    let expired = view.status == "expired";
    view.assignments
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let att = a.attestation.as_ref();
            JobNode {
                index: i as u64,
                provider: a.provider.clone(),
                gpus: a.gpus,
                state: match (att, expired) {
                    (Some(_), _) => "claimed",
                    (None, true) => "defaulted",
                    (None, false) => "assigned",
                }
                .into(),
                exit_code: att.map(|t| t.exit_code),
                gpu_ms: att.map(|t| t.gpu_ms),
                paid: a.paid,
                logs: att.map(|t| t.logs.clone()).filter(|c| !c.is_empty()),
                reason: None,
                group: None,
                rate: Some(a.rate),
                released_until_ms: a.until_ms.filter(|u| *u < view.deadline_ms),
                usage: None,
            }
        })
        .collect()
}

/// What a job has cost so far, NTX base units: each claimed share's pay, and each share still
/// running its reported GPU time at its rate (`⌊gpu_ms × rate / 3 600 000⌋`, as a claim pays).
pub(super) fn cost_so_far(nodes: &[JobNode]) -> u64 {
    nodes
        .iter()
        .map(|n| match (n.paid, n.gpu_ms, n.rate) {
            (Some(paid), _, _) => paid.get(),
            (None, Some(gpu_ms), Some(rate)) => {
                ganglion_contracts::v2::rules::pay_for(gpu_ms, rate.get())
            }
            _ => 0,
        })
        .sum()
}

/// A share that did not deliver: its provider defaulted, or attested a non-zero exit code.
fn failed(n: &JobNode) -> bool {
    n.state == "defaulted" || n.exit_code.is_some_and(|c| c != 0)
}

fn outcome_of(view: &AuditJob, nodes: &[JobNode]) -> Option<String> {
    let done = matches!(view.status.as_str(), "claimed" | "expired");
    (done && !nodes.is_empty()).then(|| {
        if nodes.iter().any(failed) {
            "failed".into()
        } else {
            "succeeded".into()
        }
    })
}

/// Why a share failed, from its log: the last `[ganglion] …` line its provider appended, else
/// the log's last non-empty line (at most 300 characters).
fn reason_in(log: &str) -> Option<String> {
    let lines = || log.lines().map(str::trim).filter(|l| !l.is_empty());
    let line = lines()
        .filter_map(|l| l.strip_prefix(failure_note::PREFIX.trim_end()))
        .map(str::trim)
        .next_back()
        .or_else(|| lines().next_back())?;
    Some(line.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use ganglion_rpc::audit::{AuditAssignment, AuditAttestation};

    use super::*;

    fn view(status: &str, exits: &[Option<i64>]) -> AuditJob {
        AuditJob {
            job_id: "00".repeat(32),
            status: status.into(),
            orchestrator: "11".repeat(28),
            spec: String::new(),
            gpus: exits.len() as u64,
            max_rate: 1.into(),
            budget: 1.into(),
            deadline_ms: 0,
            started_at_ms: Some(0),
            assignments: exits
                .iter()
                .map(|e| AuditAssignment {
                    provider: "22".repeat(28),
                    attest_key: "33".repeat(32),
                    gpus: 1,
                    rate: 1.into(),
                    attestation: e.map(|exit_code| AuditAttestation {
                        result: String::new(),
                        logs: "bafk".into(),
                        gpu_ms: 5,
                        exit_code,
                    }),
                    paid: e.map(|_| 5.into()),
                    started_at_ms: None,
                    until_ms: None,
                })
                .collect(),
            refund: None,
            txs: vec![],
            confirmations: 0,
        }
    }

    fn outcome(status: &str, exits: &[Option<i64>]) -> Option<String> {
        let v = view(status, exits);
        outcome_of(&v, &nodes_of(&v))
    }

    #[test]
    fn the_outcome_is_known_only_once_every_share_is_final() {
        assert_eq!(outcome("claiming", &[Some(0), None]), None);
        assert_eq!(
            outcome("claimed", &[Some(0), Some(0)]).as_deref(),
            Some("succeeded")
        );
        assert_eq!(
            outcome("claimed", &[Some(0), Some(1)]).as_deref(),
            Some("failed")
        );
        assert_eq!(
            outcome("claimed", &[Some(-1), Some(0)]).as_deref(),
            Some("failed")
        );
        assert_eq!(
            outcome("expired", &[Some(0), None]).as_deref(),
            Some("failed")
        );
        assert_eq!(outcome("cancelled", &[]), None);
    }

    #[test]
    fn a_share_without_a_claim_is_defaulted_only_after_the_expiry() {
        let states = |status| {
            let v = view(status, &[Some(0), None]);
            nodes_of(&v)
                .into_iter()
                .map(|n| n.state)
                .collect::<Vec<_>>()
        };
        assert_eq!(states("claiming"), ["claimed", "assigned"]);
        assert_eq!(states("expired"), ["claimed", "defaulted"]);
    }

    #[test]
    fn an_acknowledged_heartbeat_marks_an_unclaimed_share_running() {
        let v = view("claiming", &[Some(0), None, None]);
        let mut nodes = nodes_of(&v);
        mark_running(&mut nodes, &[(0, 99), (1, 7_000)]);
        let states: Vec<_> = nodes.iter().map(|n| (n.state.as_str(), n.gpu_ms)).collect();
        assert_eq!(
            states,
            [
                ("claimed", Some(5)),
                ("running", Some(7_000)),
                ("assigned", None)
            ],
            "a claimed share keeps its attested GPU time"
        );
    }

    /// A grouped plan's shares show the group the orchestrator placed each provider in; a
    /// share whose provider the plan does not name at its index keeps none.
    #[test]
    fn each_share_carries_its_planned_group() {
        let chosen = |provider: [u8; 28], group| Chosen {
            provider,
            peer: vec![],
            bond: ganglion_contracts::tx::TxoRef {
                tx_hash: [0; 32],
                index: 0,
            },
            gpus: 1,
            rate: 1,
            group,
        };
        let v = view("claiming", &[None, None, None]);
        let mut nodes = nodes_of(&v);
        nodes[2].provider = "44".repeat(28);
        mark_groups(
            &mut nodes,
            &[
                chosen([0x22; 28], Some(0)),
                chosen([0x22; 28], Some(1)),
                chosen([0x55; 28], Some(1)),
            ],
        );
        let groups: Vec<_> = nodes.iter().map(|n| n.group).collect();
        assert_eq!(groups, [Some(0), Some(1), None]);
        let json = serde_json::to_value(&nodes[0]).expect("json");
        assert_eq!(json["group"], 0);
        let json = serde_json::to_value(&nodes[2]).expect("json");
        assert!(
            json.get("group").is_none(),
            "absent without a group: {json}"
        );
    }

    #[test]
    fn the_reason_is_the_providers_note_else_the_last_line() {
        let noted = format!(
            "loading data\nTraceback\n{}",
            failure_note::line(Some(1), "rank 1 exited with code 2")
        );
        assert_eq!(
            reason_in(&noted).as_deref(),
            Some("node rank 1: rank 1 exited with code 2")
        );
        assert_eq!(
            reason_in("step 1\nValueError: bad shape\n\n").as_deref(),
            Some("ValueError: bad shape")
        );
        assert_eq!(reason_in(""), None);
    }
}
