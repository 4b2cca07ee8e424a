//! The overlay behind the executor's [`ClusterNetwork`] interface: `attach` starts the job's
//! sandbox (pod) here, puts the addressed TUN inside it and starts the job's tunnels on the
//! node's [`OverlayNode`]; the workload then joins with `network_mode: container:<sandbox>`.
//!
//! The job's plan, keys and peers come from the `cluster` exchange before dispatch
//! ([`OverlayNetwork::prepare`]; in the node, `daemon::overlay::OverlaySetup`).
//!
//! `attach` returns only once every link of the job works ([`LinkReport::established`]):
//! the workload's ranks never start on a network that has not formed. A link still down after
//! the link timeout (`[overlay] link_timeout_s`) fails the attach naming the rank, its
//! endpoint and its relay node — the executor then fails the share before any workload
//! container, with no GPU time (DESIGN §6).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{CreateContainerOptionsBuilder, StartContainerOptions};

use super::OverlayError;
use super::addressing::JobOverlay;
use super::keys::JobKeys;
use super::node::OverlayNode;
use super::pod::{self, OVERLAY_IFNAME};
use super::router::{LinkReport, OverlayPeer};
use super::sweep::{self, SweepReport};
use super::tun::OVERLAY_MTU;
use crate::executor::ExecError;
use crate::executor::network::{Attachment, ClusterNetwork};
use crate::executor::plan::RunId;

/// Label on sandbox containers: the job id (kept apart from the executor's own labels so its
/// reconciliation never mistakes a sandbox for a rank container).
pub const SANDBOX_LABEL: &str = "ganglion.overlay.job";
/// Label on sandbox containers: the node that made them (its owner string, e.g. its peer id),
/// so a restarted node sweeps only its own pods from an engine other nodes may share.
pub const OWNER_LABEL: &str = "ganglion.overlay.owner";

/// What the `cluster` exchange settled for one job, as seen from this node.
#[derive(Debug, Clone)]
pub struct JobSetup {
    /// The job's subnet and addresses.
    pub overlay: JobOverlay,
    /// This node's ephemeral keys for the job.
    pub keys: JobKeys,
    /// The job's other nodes.
    pub peers: Vec<OverlayPeer>,
}

/// The overlay as a [`ClusterNetwork`].
#[derive(Clone)]
pub struct OverlayNetwork {
    docker: Docker,
    owner: String,
    node: Arc<OverlayNode>,
    sandbox_image: String,
    sandbox_cmd: Vec<String>,
    mtu: u32,
    link_timeout: Duration,
    jobs: Arc<Mutex<HashMap<RunId, JobSetup>>>,
}

/// Default of [`OverlayNetwork::with_link_timeout`] (`[overlay] link_timeout_s`).
pub const LINK_TIMEOUT: Duration = Duration::from_secs(60);
/// How often `attach` looks at the job's links while it waits for them.
const LINK_POLL: Duration = Duration::from_millis(50);

fn exec_error(e: OverlayError) -> ExecError {
    match e {
        OverlayError::Engine { operation, source } => ExecError::Engine { operation, source },
        OverlayError::Io { operation, source } => ExecError::Io {
            path: operation.to_string(),
            source,
        },
        other => ExecError::InvalidPlan(other.to_string()),
    }
}

impl OverlayNetwork {
    /// An overlay on `node`, with sandboxes labelled as `owner`'s (this node's stable id, e.g.
    /// its peer id; see [`OWNER_LABEL`]) from `sandbox_image` running `sandbox_cmd` (a process
    /// that just waits, e.g. the probe image's `sleep`).
    pub fn new(
        docker: Docker,
        owner: impl Into<String>,
        node: Arc<OverlayNode>,
        sandbox_image: String,
        sandbox_cmd: Vec<String>,
    ) -> Self {
        Self {
            docker,
            owner: owner.into(),
            node,
            sandbox_image,
            sandbox_cmd,
            mtu: OVERLAY_MTU,
            link_timeout: LINK_TIMEOUT,
            jobs: Arc::default(),
        }
    }

    /// Uses `mtu` bytes (`[overlay] mtu`) on the pods' interfaces instead of [`OVERLAY_MTU`].
    pub fn with_mtu(mut self, mtu: u32) -> Self {
        self.mtu = mtu;
        self
    }

    /// Waits at most `timeout` (`[overlay] link_timeout_s`) in `attach` for the job's links
    /// to work, instead of [`LINK_TIMEOUT`].
    pub fn with_link_timeout(mut self, timeout: Duration) -> Self {
        self.link_timeout = timeout;
        self
    }

    /// Waits until every link of `job` works; after `self.link_timeout` the error names each
    /// link still down by rank (from `setup`'s addresses), endpoint and relay node.
    async fn await_links(&self, job: &RunId, setup: &JobSetup) -> Result<(), ExecError> {
        let deadline = tokio::time::Instant::now() + self.link_timeout;
        loop {
            let down: Vec<LinkReport> = self
                .node
                .links(job)
                .into_iter()
                .filter(|l| !l.established)
                .collect();
            if down.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                let rank_of = |l: &LinkReport| {
                    l.addresses
                        .first()
                        .and_then(|a| setup.overlay.addresses.iter().position(|x| x == a))
                        .and_then(|r| u32::try_from(r).ok())
                };
                let named: Vec<String> = down
                    .iter()
                    .map(|l| {
                        let rank = rank_of(l).map_or_else(|| "?".to_string(), |r| r.to_string());
                        let relay = l
                            .relay
                            .map_or_else(|| "no relay".to_string(), |p| format!("relay {p}"));
                        format!("rank {rank} at {} ({relay})", l.endpoint)
                    })
                    .collect();
                return Err(ExecError::LinksDown {
                    job: job.clone(),
                    after_s: self.link_timeout.as_secs(),
                    unreachable: down.iter().filter_map(rank_of).collect(),
                    links: named.join(", "),
                });
            }
            tokio::time::sleep(LINK_POLL).await;
        }
    }

    /// Records `job`'s setup from the `cluster` exchange; `attach` needs it.
    pub fn prepare(&self, job: &RunId, setup: JobSetup) {
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(job.clone(), setup);
    }

    /// Restart recovery: removes this owner's pods of every job not in `keep` (the jobs this node's
    /// durable table still runs), see [`sweep::sweep`].
    ///
    /// # Errors
    /// [`ExecError::Engine`] when the engine cannot list or remove containers.
    pub async fn sweep_orphans(
        &self,
        keep: &std::collections::BTreeSet<RunId>,
    ) -> Result<SweepReport, ExecError> {
        sweep::sweep(&self.docker, &self.owner, keep)
            .await
            .map_err(exec_error)
    }

    /// The sandbox container of `job`'s rank `rank`.
    pub fn sandbox_name(job: &RunId, rank: u32) -> String {
        format!("ganglion-{job}-pod-{rank}")
    }

    async fn start_sandbox(
        &self,
        job: &RunId,
        setup: &JobSetup,
        rank: u32,
    ) -> Result<String, ExecError> {
        let name = Self::sandbox_name(job, rank);
        let labels = HashMap::from([
            (SANDBOX_LABEL.to_string(), job.to_string()),
            (OWNER_LABEL.to_string(), self.owner.clone()),
        ]);
        let body = pod::sandbox_body(
            &setup.overlay,
            rank,
            &self.sandbox_image,
            self.sandbox_cmd.clone(),
            labels,
        );
        let opts = CreateContainerOptionsBuilder::new().name(&name).build();
        self.docker
            .create_container(Some(opts), body)
            .await
            .map_err(ExecError::engine("create sandbox"))?;
        self.docker
            .start_container(&name, None::<StartContainerOptions>)
            .await
            .map_err(ExecError::engine("start sandbox"))?;
        Ok(name)
    }
}

impl ClusterNetwork for OverlayNetwork {
    async fn attach(
        &self,
        job: &RunId,
        world: u32,
        local: &[u32],
    ) -> Result<Attachment, ExecError> {
        let setup = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(job)
            .cloned()
            .ok_or_else(|| {
                ExecError::InvalidPlan(format!(
                    "job {job}: no overlay setup (cluster exchange missing)"
                ))
            })?;
        if setup.overlay.addresses.len() != world as usize {
            return Err(ExecError::InvalidPlan(format!(
                "job {job}: overlay plans {} containers, world is {world}",
                setup.overlay.addresses.len()
            )));
        }
        let [rank] = local else {
            return Err(ExecError::InvalidPlan(format!(
                "job {job}: the overlay runs one pod per node, got local ranks {local:?}"
            )));
        };
        let address = setup.overlay.interface_net(*rank).ok_or_else(|| {
            ExecError::InvalidPlan(format!("job {job}: no address for rank {rank}"))
        })?;
        let sandbox = self.start_sandbox(job, &setup, *rank).await?;
        let netns = pod::sandbox_netns(&self.docker, &sandbox)
            .await
            .map_err(exec_error)?;
        let tun = pod::install_tun(netns, OVERLAY_IFNAME, address, self.mtu)
            .await
            .map_err(exec_error)?;
        self.node
            .add_job(job, setup.keys.clone(), &setup.peers, tun)
            .map_err(exec_error)?;
        self.await_links(job, &setup).await?;
        Ok(Attachment {
            endpoints: HashMap::from([(*rank, pod::workload_endpoint(&sandbox))]),
            hosts: pod::rendezvous_hosts(&setup.overlay),
        })
    }

    /// Stops the job's tunnels and force-removes every sandbox of `job` this owner made (found
    /// by [`SANDBOX_LABEL`] and [`OWNER_LABEL`], so this also clears pods left before a
    /// crash), and any
    /// container still joined to one; absent is fine.
    async fn detach(&self, job: &RunId) -> Result<(), ExecError> {
        self.node.remove_job(job);
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(job);
        sweep::remove_pods(&self.docker, &self.owner, job)
            .await
            .map_err(exec_error)?;
        Ok(())
    }
}
