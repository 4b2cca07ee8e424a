//! Errors of the executor (executor-level problems) and the reasons a job fails (recorded in
//! its report; what of a failed job is billed: [`FailureReason::is_workload_outcome`]).

use serde::{Deserialize, Serialize};

/// Why the executor could not do what was asked. A job that ran and failed is not an error:
/// it is a [`JobReport`](super::JobReport) whose outcome carries a [`FailureReason`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// No Docker Engine answers at the socket (daemon not running, wrong path, no permission).
    #[error("no Docker Engine at {socket}: {detail} (start dockerd, or set the socket path)")]
    NoEngine {
        /// The socket tried, e.g. `/var/run/docker.sock`.
        socket: String,
        /// The client's complaint.
        detail: String,
    },
    /// The plan asks for NVIDIA GPUs and the engine cannot give them to containers; a missing
    /// runtime would only fail at `start` (DESIGN §6), so this is checked up front.
    #[error("no GPU runtime: {0}")]
    NoGpuRuntime(String),
    /// The plan is inconsistent (bad job id, path outside `/inputs`, no local slot…).
    #[error("invalid job plan: {0}")]
    InvalidPlan(String),
    /// The job's network did not form: links of this node still down when the overlay's link
    /// timeout ran out (`[overlay] link_timeout_s`). No rank was started.
    #[error(
        "job {job}: the job network did not form within {after_s} s: no working link to {links}"
    )]
    LinksDown {
        /// The job.
        job: super::plan::RunId,
        /// The timeout that ran out, seconds.
        after_s: u64,
        /// The node ranks this node has no working link to.
        unreachable: Vec<u32>,
        /// The links still down: rank, UDP endpoint and relay node of each.
        links: String,
    },
    /// The job id is already in this node's job table: a job is never started twice.
    #[error("job {job} is already known to this executor (phase {phase})")]
    AlreadyKnown {
        /// The job id.
        job: String,
        /// Its recorded phase.
        phase: String,
    },
    /// The durable job table failed.
    #[error("job table: {0}")]
    State(#[from] sled::Error),
    /// A job record does not decode.
    #[error("job table record: {0}")]
    Record(#[from] serde_json::Error),
    /// A Docker Engine call failed outside a job's supervision.
    #[error("Docker Engine {operation}: {source}")]
    Engine {
        /// The operation, e.g. `create network`.
        operation: &'static str,
        /// The client error.
        #[source]
        source: bollard::errors::Error,
    },
    /// A service replica's port could not be reached ([`super::Executor::connect`]).
    #[error("job {job} container {node_rank}: {reason}")]
    Unreachable {
        /// The job.
        job: String,
        /// The container's node rank.
        node_rank: u32,
        /// Why, in words.
        reason: String,
    },
    /// Local files (job work dir) failed.
    #[error("I/O on {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl ExecError {
    pub(crate) fn engine(operation: &'static str) -> impl FnOnce(bollard::errors::Error) -> Self {
        move |source| ExecError::Engine { operation, source }
    }

    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| ExecError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Why a job failed; recorded in the job table and the report. Whether its GPU time is still
/// billed: [`FailureReason::is_workload_outcome`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum FailureReason {
    /// The image is neither local nor loadable from its archive.
    ImageUnavailable {
        /// The engine's or storage's message.
        detail: String,
    },
    /// A rank's command exited non-zero.
    NonZeroExit {
        /// The container's node rank.
        node_rank: u32,
        /// Its exit code.
        exit_code: i64,
    },
    /// A rank was killed by the kernel's OOM killer (memory limit from the spec).
    OutOfMemory {
        /// The container's node rank.
        node_rank: u32,
    },
    /// The node stopped the job before its end (its orchestrator went silent, or the
    /// escrow's deadline came: DESIGN §3.1 G2, G3); the GPU time up to the stop is billable.
    Stopped {
        /// Why, as the node gave it.
        why: String,
    },
    /// The job ran past its wall-clock limit and was killed.
    WallClockExceeded {
        /// The limit, seconds (`limits.max_duration_s`).
        limit_s: u64,
    },
    /// A rank's `/outputs` exceeds the spec's scratch allowance.
    OutputsTooLarge {
        /// The container's node rank.
        node_rank: u32,
        /// What it wrote, bytes.
        bytes: u64,
        /// The allowance, bytes.
        limit_bytes: u64,
    },
    /// The Docker Engine went away (or failed) mid-job.
    EngineUnavailable {
        /// The client's message.
        detail: String,
    },
    /// Inputs could not be fetched or outputs/logs not pinned.
    Storage {
        /// The storage error.
        detail: String,
    },
    /// The node restarted before the containers were started; the job is not restarted.
    Interrupted,
    /// Setting the job up (network, work dirs, create) failed.
    Setup {
        /// The error.
        detail: String,
    },
    /// The job's network did not form: no working link to the other nodes' ranks in
    /// `unreachable` within the overlay's link timeout; no rank was started.
    NetworkUnformed {
        /// Node ranks this node could not reach.
        unreachable: Vec<u32>,
        /// The overlay's account (timeout, endpoints, relay nodes).
        detail: String,
    },
}

impl FailureReason {
    /// Whether the GPUs were given to the orchestrator's workload for the time measured, so
    /// that time is owed whatever the workload made of it: it exited non-zero (a gloo teardown
    /// error after the final barrier included), hit the memory or output allowance of its own
    /// spec, or ran past the spec's wall-clock limit (or the escrow deadline) and was stopped.
    /// The attestation carries the exit code, so the orchestrator sees the failure; it does not
    /// get the GPU time for free (DESIGN §3.1 G3: a provider is never made
    /// to pay for what the orchestrator controls).
    ///
    /// `false` where this node failed to deliver: the image, the engine, storage (inputs, logs
    /// or outputs not pinned), its own restart before the start, the set-up, or a job network
    /// that did not form (no rank started). Nothing of such
    /// a job is billed.
    pub fn is_workload_outcome(&self) -> bool {
        match self {
            Self::NonZeroExit { .. }
            | Self::OutOfMemory { .. }
            | Self::WallClockExceeded { .. }
            | Self::Stopped { .. }
            | Self::OutputsTooLarge { .. } => true,
            Self::ImageUnavailable { .. }
            | Self::EngineUnavailable { .. }
            | Self::Storage { .. }
            | Self::Interrupted
            | Self::Setup { .. }
            | Self::NetworkUnformed { .. } => false,
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ImageUnavailable { detail } => write!(f, "image unavailable: {detail}"),
            Self::NonZeroExit {
                node_rank,
                exit_code,
            } => write!(f, "rank {node_rank} exited with code {exit_code}"),
            Self::OutOfMemory { node_rank } => write!(f, "rank {node_rank} was OOM-killed"),
            Self::Stopped { why } => write!(f, "stopped by the node: {why}; containers killed"),
            Self::WallClockExceeded { limit_s } => {
                write!(
                    f,
                    "wall-clock limit of {limit_s} s exceeded; containers killed"
                )
            }
            Self::OutputsTooLarge {
                node_rank,
                bytes,
                limit_bytes,
            } => write!(
                f,
                "rank {node_rank} wrote {bytes} bytes of outputs, over the {limit_bytes} byte limit"
            ),
            Self::EngineUnavailable { detail } => write!(f, "Docker Engine unavailable: {detail}"),
            Self::Storage { detail } => write!(f, "storage: {detail}"),
            Self::Interrupted => write!(f, "node restarted before the job started"),
            Self::Setup { detail } => write!(f, "setup: {detail}"),
            Self::NetworkUnformed { detail, .. } => write!(f, "network: {detail}"),
        }
    }
}
