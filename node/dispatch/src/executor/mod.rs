//! Dispatch (DESIGN §6): turn an assignment into locked-down running containers,
//! supervise them, and collect and pin every output.
//!
//! - [`plan`]: what to run — job id, image source, one container per provider with its GPUs,
//!   resources from the spec, inputs, limits.
//! - [`rendezvous`]: per-container env for torch (env:// and torchrun static), Horovod (gloo),
//!   JAX, and the socket interface.
//! - [`network`]: the [`network::ClusterNetwork`] interface and the single-host
//!   [`network::DockerBridge`] (the overlay replaces it on a provider node).
//! - [`sandbox`]: the container create request: sandbox, limits, GPUs, mounts, labels.
//! - [`engine`]: connect, negotiate the API version, probe runtimes/CDI.
//! - [`image`]: local name, rootfs archive (`docker import`), `docker save` archive (`docker
//!   load`), by CID from the storage crate.
//! - [`artifacts`]: `/inputs` from CIDs, `/outputs` and logs pinned (CID, CAR, piece CID), a
//!   running container's log tail ([`Executor::log_tail`]).
//! - [`state`]: the durable job table (sled) that makes restarts safe.
//! - [`report`]: outcomes, accounting, timings.
//! - [`docker`]: [`docker::DockerExecutor`], the [`Executor`] over the Docker Engine.
//! - [`labels`], [`error`].

pub mod artifacts;
pub mod docker;
pub mod engine;
pub mod error;
pub mod image;
pub mod labels;
pub mod network;
pub mod plan;
pub mod rendezvous;
pub mod report;
pub mod sandbox;
pub mod state;

use std::future::Future;

pub use self::error::{ExecError, FailureReason};
pub use self::plan::{JobPlan, RunId};
pub use self::report::{JobReport, Outcome};
pub use self::state::{JobRecord, Phase};

/// Runs jobs' containers on this node.
pub trait Executor: Send + Sync {
    /// Runs `plan` to the end: creates and starts its containers, supervises them under the
    /// wall-clock limit, collects logs and outputs, cleans up. A job that fails is an
    /// `Ok(report)` with [`Outcome::Failed`] and its reason.
    ///
    /// # Errors
    /// [`ExecError::AlreadyKnown`] for a job id seen before (never started twice),
    /// [`ExecError::NoGpuRuntime`], [`ExecError::InvalidPlan`], job table failures.
    fn run(&self, plan: JobPlan) -> impl Future<Output = Result<JobReport, ExecError>> + Send;

    /// After a restart: adopts still-running jobs and collects finished ones from their
    /// labelled containers, fails jobs that never started, retries unfinished cleanups.
    /// Returns the reports of the jobs it brought to an end.
    ///
    /// # Errors
    /// Engine or job table failures.
    fn recover(&self) -> impl Future<Output = Result<Vec<JobReport>, ExecError>> + Send;

    /// The durable record of `job`.
    ///
    /// # Errors
    /// Job table failures.
    fn record(&self, job: &RunId) -> Result<Option<JobRecord>, ExecError>;

    /// Stops `job`'s running containers now, for `why`: its run ends as
    /// [`FailureReason::Stopped`] (a workload outcome: the GPU time up to the stop is billable),
    /// with outputs and logs collected as for any end. A job not running is left as it is.
    ///
    /// # Errors
    /// Engine failures listing or killing the containers.
    fn stop(&self, job: &RunId, why: &str) -> impl Future<Output = Result<(), ExecError>> + Send;

    /// Whether the engine holds the local image `name` (images are never pulled): a provider
    /// asks before it accepts a job naming one.
    ///
    /// # Errors
    /// Engine failures other than "no such image".
    fn has_image(&self, name: &str) -> impl Future<Output = Result<bool, ExecError>> + Send;

    /// A TCP connection to `port` on the loopback of `job`'s running container `node_rank`,
    /// opened from inside its network namespace (its pod's, or its own): how a provider's node
    /// reaches a service's replica, which need not be routable from the host. The default
    /// reaches none.
    ///
    /// # Errors
    /// [`ExecError::Unreachable`]: no such running container, or nothing accepts on `port`
    /// within 1 s; [`ExecError::Engine`] inspecting it.
    fn connect(
        &self,
        job: &RunId,
        node_rank: u32,
        port: u16,
    ) -> impl Future<Output = Result<tokio::net::TcpStream, ExecError>> + Send {
        let _ = port;
        let err = ExecError::Unreachable {
            job: job.to_string(),
            node_rank,
            reason: "this executor reaches no container's port".into(),
        };
        async { Err(err) }
    }

    /// The last `max_bytes` (at most [`MAX_LOG_TAIL_BYTES`]) of the live log of `job`'s
    /// container `node_rank` (`jobs/<job>/artifacts/rank-<n>.log`, the container's stdout and
    /// stderr as they are written, while it runs and after), with where that tail starts in
    /// the whole log. `None` when this executor keeps no such log, or the container has not
    /// written one. The default keeps none.
    ///
    /// # Errors
    /// I/O reading the log file.
    fn log_tail(
        &self,
        job: &RunId,
        node_rank: u32,
        max_bytes: u64,
    ) -> impl Future<Output = Result<Option<LogTail>, ExecError>> + Send {
        let _ = (job, node_rank, max_bytes);
        async { Ok(None) }
    }
}

/// The most bytes one [`LogTail`] carries: 64 KiB.
pub const MAX_LOG_TAIL_BYTES: u64 = 64 * 1024;

/// The end of a container's live log ([`Executor::log_tail`]). Byte offsets count from the
/// log's first byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    /// Where `bytes` start in the whole log, bytes: `total - bytes.len()`.
    pub offset: u64,
    /// The whole log's length when it was read, bytes.
    pub total: u64,
    /// The log's last bytes, as written (not necessarily UTF-8, possibly cut inside a
    /// character at either end).
    pub bytes: Vec<u8>,
}
