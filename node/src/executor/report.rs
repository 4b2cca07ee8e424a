//! What a job produced: outcome, per-rank exit, accounting and artifacts, and the executor's
//! own timings.

use std::path::PathBuf;

use ganglion_storage::deal::DealReady;
use serde::{Deserialize, Serialize};

use super::error::FailureReason;
use super::image::ImageRecord;
use super::plan::JobId;

/// How the job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Every rank exited 0 and its outputs are pinned.
    Succeeded,
    /// The job failed; nothing is billable.
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
    pub job: JobId,
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
    /// GPU-seconds that may be billed: the sum over ranks for a successful job, 0 otherwise
    /// (a failed job is never paid).
    pub fn billable_gpu_seconds(&self) -> f64 {
        match self.outcome {
            Outcome::Succeeded => self.ranks.iter().map(|r| r.gpu_seconds).sum(),
            Outcome::Failed { .. } => 0.0,
        }
    }

    /// The failure reason, if any.
    pub fn failure(&self) -> Option<&FailureReason> {
        match &self.outcome {
            Outcome::Failed { reason } => Some(reason),
            Outcome::Succeeded => None,
        }
    }
}
