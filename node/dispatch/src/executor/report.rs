//! What a job produced: outcome, per-rank exit, accounting and artifacts, and the executor's
//! own timings.

use std::path::PathBuf;

use ganglion_storage::deal::DealReady;
use serde::{Deserialize, Serialize};

use super::error::FailureReason;
use super::image::ImageRecord;
use super::plan::RunId;

/// How the job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Every rank exited 0 and its outputs are pinned.
    Succeeded,
    /// The job failed; what is billable: [`JobReport::billable_gpu_ms`].
    Failed {
        /// Why.
        #[serde(flatten)]
        reason: FailureReason,
    },
}

/// A pinned artifact (logs or outputs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Root CID (CIDv1, raw leaves: `ImportOptions::cid_v1`).
    pub cid: String,
    /// Content bytes.
    pub bytes: u64,
    /// The CAR v1 export and its piece CID (outputs only).
    pub car: Option<CarArtifact>,
    /// The import options the outputs' CID was made with (outputs only): CID version, raw
    /// leaves, chunker, links per node and `hidden` (dot-files taken, `docs/dispatch.md`), so
    /// anyone can re-import the same tree to the same CID. `None` in reports written before
    /// it was recorded, and for logs (a single file: `ImportOptions::cid_v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ganglion_storage::unixfs::ImportOptions>,
}

/// A CAR file of an artifact and its Filecoin deal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarArtifact {
    /// Where the CAR lies on this node.
    pub path: PathBuf,
    /// Piece CID, padded size, payload CID, CAR size.
    pub deal: DealReady,
}

/// CPU and memory seen in the engine's streamed stats (the cgroup vanishes at exit, so these
/// are the last/peak values sampled while it ran, about once a second; `samples == 0` for a
/// container that ended before the first sample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Cumulative CPU time, nanoseconds (last sample).
    pub cpu_ns: u64,
    /// Peak memory usage, bytes.
    pub peak_memory_bytes: u64,
    /// Stats samples received.
    pub samples: u32,
}

/// One container's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    /// Node rank.
    pub node_rank: u32,
    /// Container id.
    pub container_id: String,
    /// Exit code (None when the engine could not tell).
    pub exit_code: Option<i64>,
    /// Killed by the OOM killer.
    pub oom_killed: bool,
    /// GPUs held.
    pub gpus: u32,
    /// Engine `State.StartedAt` → `State.FinishedAt`, seconds.
    pub run_seconds: f64,
    /// GPUs × run seconds (DESIGN §6 accounting).
    pub gpu_seconds: f64,
    /// CPU/memory usage.
    pub usage: Usage,
    /// stdout+stderr, pinned.
    pub logs: Option<Artifact>,
    /// `/outputs`, pinned with its CAR and piece CID (successful jobs only).
    pub outputs: Option<Artifact>,
}

/// Executor overhead, milliseconds from "assignment seen" (the `run` call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Image resolved/loaded.
    pub image_ms: u64,
    /// Network, work dirs, inputs and containers created.
    pub created_ms: u64,
    /// Every local container started: "all containers running".
    pub all_running_ms: u64,
    /// Every container exited.
    pub exited_ms: u64,
    /// Logs and outputs pinned (CAR, piece CID).
    pub collected_ms: u64,
    /// Containers, network and job dirs removed.
    pub cleaned_ms: u64,
}

/// The result of one job on this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    /// The job.
    pub job: RunId,
    /// The outcome.
    pub outcome: Outcome,
    /// The image run, with its digest.
    pub image: Option<ImageRecord>,
    /// Per container, by node rank.
    pub ranks: Vec<RankReport>,
    /// Executor timings (after a restart: counted from the adoption).
    pub timings: Timings,
    /// Whether this report came from adopting the job after a restart.
    pub adopted: bool,
}

impl JobReport {
    /// GPU-milliseconds that may be billed: the sum over ranks of GPUs × the engine's
    /// `StartedAt → FinishedAt` (DESIGN §6), for a job that succeeded or that failed by its own
    /// workload ([`FailureReason::is_workload_outcome`]: non-zero exit, OOM, outputs over the
    /// allowance, wall-clock limit); 0 when this node failed to deliver (image, engine,
    /// storage, set-up, restart before the start).
    pub fn billable_gpu_ms(&self) -> u64 {
        (self.billable_gpu_seconds() * 1000.0).round() as u64
    }

    /// [`JobReport::billable_gpu_ms`] as measured, in seconds (not rounded).
    pub fn billable_gpu_seconds(&self) -> f64 {
        let billable = match &self.outcome {
            Outcome::Succeeded => true,
            Outcome::Failed { reason } => reason.is_workload_outcome(),
        };
        if !billable {
            return 0.0;
        }
        self.ranks.iter().map(|r| r.gpu_seconds.max(0.0)).sum()
    }

    /// The failure reason, if any.
    pub fn failure(&self) -> Option<&FailureReason> {
        match &self.outcome {
            Outcome::Failed { reason } => Some(reason),
            Outcome::Succeeded => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outcome: Outcome, gpu_seconds: &[f64]) -> JobReport {
        JobReport {
            job: RunId::new("bill").expect("valid"),
            outcome,
            image: None,
            ranks: gpu_seconds
                .iter()
                .enumerate()
                .map(|(i, s)| RankReport {
                    node_rank: i as u32,
                    container_id: format!("c{i}"),
                    exit_code: Some(0),
                    oom_killed: false,
                    gpus: 1,
                    run_seconds: *s,
                    gpu_seconds: *s,
                    usage: Usage::default(),
                    logs: None,
                    outputs: None,
                })
                .collect(),
            timings: Timings::default(),
            adopted: false,
        }
    }

    #[test]
    fn a_workload_that_failed_after_its_work_is_billed_the_time_it_held_the_gpus() {
        // A gloo teardown error after the final barrier: the rank exits 1 once its work is
        // done. The GPU time was the orchestrator's; flooring it to 0 lost the provider's pay.
        for reason in [
            FailureReason::NonZeroExit {
                node_rank: 0,
                exit_code: 1,
            },
            FailureReason::OutOfMemory { node_rank: 0 },
            FailureReason::WallClockExceeded { limit_s: 2 },
            FailureReason::OutputsTooLarge {
                node_rank: 0,
                bytes: 2,
                limit_bytes: 1,
            },
        ] {
            let r = report(Outcome::Failed { reason }, &[2.0044]);
            assert_eq!(r.billable_gpu_ms(), 2004, "{:?}", r.outcome);
        }
        assert_eq!(
            report(Outcome::Succeeded, &[1.25, 0.5]).billable_gpu_ms(),
            1750
        );
    }

    #[test]
    fn a_node_that_failed_to_deliver_bills_nothing() {
        for reason in [
            FailureReason::ImageUnavailable { detail: "x".into() },
            FailureReason::EngineUnavailable { detail: "x".into() },
            FailureReason::Storage { detail: "x".into() },
            FailureReason::Interrupted,
            FailureReason::Setup { detail: "x".into() },
            FailureReason::NetworkUnformed {
                unreachable: vec![1],
                detail: "x".into(),
            },
        ] {
            let r = report(Outcome::Failed { reason }, &[3.0]);
            assert_eq!(r.billable_gpu_ms(), 0, "{:?}", r.outcome);
            assert_eq!(r.billable_gpu_seconds(), 0.0);
        }
    }
}
