//! The per-job overlay in `ganglion node run` (DESIGN §6): a provider binds one
//! [`OverlayNode`] (`[overlay] listen_port`), gives its
//! Docker executor an [`OverlayNetwork`] (owner = its peer id), sweeps orphaned pods at
//! start, and before each dispatch runs the
//! p2p `cluster` exchange with exactly the job's other assigned providers ([`OverlaySetup`],
//! the engine's [`ClusterSetup`]).
//!
//! Policy: a provider always uses the overlay, single-node jobs too (one code path), when it
//! can: the pod's TUN needs root (`CAP_NET_ADMIN`) and the sandbox image must exist on the
//! engine. Otherwise it falls back to one Docker bridge per job ([`DaemonNetwork::Bridge`]),
//! logged as a warning: such a provider runs single-host jobs only.
//!
//! Addressing: the job's subnet is planned from the chain job id alone (no held subnets), so
//! every node computes the same plan without another round; two jobs on one node that land
//! in the same subnet still stay apart (each pod is its own namespace and the router keys
//! every link by job). Rank `i` (the `i`-th assignment) gets the `i`-th address, rank 0
//! first.
//!
//! Restarts: what the node announced for a job (its x25519 secret and the plan) is kept in
//! `<data dir>/overlay/<job id>.json` (mode 0600) until the job's run ends, so a node killed
//! between its exchange and its start announces the same key again — its peers, waiting for
//! their links to it, learnt that key already.
//!
//! Endpoint candidates: this host's IPv4 interface addresses (loopback and Docker's own
//! `docker*`/`br-*`/`veth*` left out; loopback only when nothing else exists) with the
//! socket's port, then the mappings peers observed (identify), as
//! [`exchange::candidates`] orders them.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ganglion_contracts::v2::datum::JobId as ChainJobId;
use ipnet::Ipv4Net;

use crate::daemon::exchange;
use crate::job::cluster::{ClusterPeers, ClusterSetup, SetupFailure};
use ganglion_dispatch::executor::ExecError;
use ganglion_dispatch::executor::network::{Attachment, ClusterNetwork, DockerBridge};
use ganglion_dispatch::executor::plan::RunId;
use ganglion_dispatch::overlay::addressing::JobOverlay;
use ganglion_dispatch::overlay::config::OverlayConfig;
use ganglion_dispatch::overlay::keys::JobKeys;
use ganglion_dispatch::overlay::network::{JobSetup, OverlayNetwork};
use ganglion_dispatch::overlay::node::OverlayNode;
use ganglion_p2p::Client;
use ganglion_p2p::protocols::{ClusterHello, ClusterResponse};
use libp2p::PeerId;

/// Longest wait for every peer's hello in one dispatch try, then the engine retries.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);

/// The sandbox's command in the probe image: sleep until removed (the longest `sleep(3)`
/// the probe takes, about 68 years).
pub fn sandbox_cmd() -> Vec<String> {
    vec!["sleep".into(), i32::MAX.to_string()]
}

/// The tag `scripts/build-probe-image.sh` gives the probe image built from this checkout's
/// `scripts/images/probe/probe.c` (`ganglion/probe:<first 12 hex of its SHA-256>`): the
/// default sandbox image of every pod.
pub fn probe_image_tag() -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(include_bytes!("../../../scripts/images/probe/probe.c"));
    format!("ganglion/probe:{}", &hex::encode(digest)[..12])
}

/// The executor's network in the daemon: the overlay, or the single-host bridge fallback.
#[derive(Clone)]
pub enum DaemonNetwork {
    /// The per-job overlay.
    Overlay(OverlayNetwork),
    /// One internal Docker bridge per job (single host only).
    Bridge(DockerBridge),
}

impl ClusterNetwork for DaemonNetwork {
    async fn attach(
        &self,
        job: &RunId,
        world: u32,
        local: &[u32],
    ) -> Result<Attachment, ExecError> {
        match self {
            Self::Overlay(n) => n.attach(job, world, local).await,
            Self::Bridge(n) => n.attach(job, world, local).await,
        }
    }

    async fn detach(&self, job: &RunId) -> Result<(), ExecError> {
        match self {
            Self::Overlay(n) => n.detach(job).await,
            Self::Bridge(n) => n.detach(job).await,
        }
    }
}

/// This host's LAN: each usable IPv4 interface's address and network.
fn lan_interfaces() -> Vec<(Ipv4Addr, Ipv4Net)> {
    let all = if_addrs::get_if_addrs().unwrap_or_default();
    let v4 = |i: &if_addrs::Interface| match &i.addr {
        if_addrs::IfAddr::V4(a) => Ipv4Net::new(a.ip, a.prefixlen).ok().map(|n| (a.ip, n)),
        if_addrs::IfAddr::V6(_) => None,
    };
    let docker = |name: &str| {
        ["docker", "br-", "veth"]
            .iter()
            .any(|p| name.starts_with(p))
    };
    let lan: Vec<_> = all
        .iter()
        .filter(|i| !i.is_loopback() && !docker(&i.name))
        .filter_map(v4)
        .collect();
    if lan.is_empty() {
        all.iter()
            .filter(|i| i.is_loopback())
            .filter_map(v4)
            .collect()
    } else {
        lan
    }
}

/// What this node announced for one job (kept so a retried exchange announces the same).
#[derive(Clone)]
struct Announced {
    keys: JobKeys,
    plan: JobOverlay,
}

/// [`Announced`] on disk: the secret as hex.
#[derive(serde::Serialize, serde::Deserialize)]
struct AnnouncedFile {
    secret: String,
    plan: JobOverlay,
}

impl Announced {
    fn load(path: &std::path::Path) -> Option<Self> {
        let bytes = ganglion_wallet::secret::read_secret(path).ok()?;
        let file: AnnouncedFile = serde_json::from_slice(&bytes).ok()?;
        let secret: [u8; 32] = hex::decode(&file.secret).ok()?.try_into().ok()?;
        Some(Self {
            keys: JobKeys::from_secret_bytes(secret),
            plan: file.plan,
        })
    }

    fn save(&self, path: &std::path::Path) -> Result<(), String> {
        let file = AnnouncedFile {
            secret: hex::encode(self.keys.to_secret_bytes()),
            plan: self.plan.clone(),
        };
        let json = serde_json::to_vec(&file).map_err(|e| e.to_string())?;
        ganglion_wallet::secret::write_secret(path, &json).map_err(|e| e.to_string())
    }
}

/// The overlay's [`ClusterSetup`]: the `cluster` exchange bound to the assignment, then
/// [`OverlayNetwork::prepare`]; it answers the other nodes' hellos from what it announced
/// ([`exchange::ClusterHellos`]).
pub struct OverlaySetup {
    network: OverlayNetwork,
    node: Arc<OverlayNode>,
    config: OverlayConfig,
    port: u16,
    jobs: Mutex<HashMap<ChainJobId, Announced>>,
    hellos: exchange::ClusterHellos,
    /// Where [`Announced`] is kept across restarts (`None`: in memory only).
    state_dir: Option<std::path::PathBuf>,
}

impl OverlaySetup {
    /// The set-up for `network` on `node`, whose socket listens on `port`.
    pub fn new(
        network: OverlayNetwork,
        node: Arc<OverlayNode>,
        config: OverlayConfig,
        port: u16,
    ) -> Self {
        Self {
            network,
            node,
            config,
            port,
            jobs: Mutex::default(),
            hellos: exchange::ClusterHellos::default(),
            state_dir: None,
        }
    }

    /// Keeps what this node announces for each job in `dir` (created, mode 0700) until the
    /// job's run ends, so a restarted node announces the same (see the module docs).
    ///
    /// # Errors
    /// [`ganglion_wallet::secret::Error::Io`] when the directory cannot be created.
    pub fn with_state_dir(
        mut self,
        dir: std::path::PathBuf,
    ) -> Result<Self, ganglion_wallet::secret::Error> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(ganglion_wallet::secret::io("create directory", &dir))?;
        self.state_dir = Some(dir);
        Ok(self)
    }

    fn state_file(&self, job: &ChainJobId) -> Option<std::path::PathBuf> {
        (self.state_dir.as_ref()).map(|d| d.join(format!("{}.json", hex::encode(job.0))))
    }

    /// Turns on the relay fallback over `p2p`'s streams (`[overlay] relay_fallback_s`): a
    /// link with no direct handshake by then carries its datagrams over libp2p, through the
    /// peer that sent the job's hello. Call once, after the swarm started, and run the returned
    /// acceptor as long as the node lives (the daemon's critical task `overlay relay`).
    ///
    /// # Errors
    /// [`OverlayError::Relay`](ganglion_dispatch::overlay::OverlayError) when the relay protocol is taken.
    pub fn enable_relay(
        &self,
        p2p: &Client,
    ) -> Result<
        ganglion_dispatch::overlay::node::RelayAcceptor,
        ganglion_dispatch::overlay::OverlayError,
    > {
        self.node
            .set_relay(p2p.streams(), self.config.relay_fallback())
    }

    /// Whether links may use the libp2p relay (`[overlay] relay`): when false, do not call
    /// [`Self::enable_relay`].
    pub fn relays(&self) -> bool {
        self.config.relay
    }

    /// The overlay node's driver watch ([`OverlayNode::driver`]): run it as the critical task
    /// `overlay driver`. `None` when it was taken already.
    pub fn driver(
        &self,
    ) -> Option<
        impl std::future::Future<Output = Result<(), ganglion_dispatch::overlay::OverlayError>>
        + Send
        + 'static,
    > {
        self.node.driver()
    }

    /// This node's links of `job` (direct, relayed or pending), for logs and status.
    pub fn links(&self, job: &RunId) -> Vec<ganglion_dispatch::overlay::router::LinkReport> {
        self.node.links(job)
    }

    fn announced(&self, job: &ClusterPeers) -> Result<Announced, String> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = jobs
            .get(&job.job)
            .filter(|a| a.plan.addresses.len() == job.world as usize)
        {
            return Ok(a.clone());
        }
        let file = self.state_file(&job.job);
        if let Some(a) = (file.as_deref())
            .and_then(Announced::load)
            .filter(|a| a.plan.addresses.len() == job.world as usize)
        {
            tracing::info!(job = %job.job, "announcing the key kept before the restart");
            jobs.insert(job.job, a.clone());
            return Ok(a);
        }
        let key = RunId::new(hex::encode(job.job.0)).map_err(|e| e.to_string())?;
        let plan = self
            .config
            .pool()
            .plan(&key, job.world, &BTreeSet::new())
            .map_err(|e| e.to_string())?;
        let a = Announced {
            keys: JobKeys::generate(),
            plan,
        };
        // On disk before the hello names the key: a restart must announce the same.
        if let Some(file) = &file {
            a.save(file)?;
        }
        jobs.insert(job.job, a.clone());
        Ok(a)
    }
}

#[async_trait]
impl ClusterSetup for OverlaySetup {
    async fn prepare(&self, p2p: &Client, job: &ClusterPeers) -> Result<(), SetupFailure> {
        let Announced { keys, plan } = self.announced(job)?;
        let own = plan
            .address(job.rank)
            .ok_or_else(|| format!("no overlay address for rank {}", job.rank))?;
        let lan = lan_interfaces();
        let lan_sockets: Vec<SocketAddr> = lan
            .iter()
            .map(|(ip, _)| SocketAddr::new(IpAddr::V4(*ip), self.port))
            .collect();
        let observed = p2p
            .observed_addrs()
            .await
            .map_err(|e| format!("p2p: {e}"))?
            .into_iter()
            .map(|(_, a)| a);
        let candidates = exchange::candidates(&lan_sockets, observed);
        let hello = exchange::hello(job.job, &keys, &[own], &candidates);
        let assigned: Vec<_> = job.peers.iter().map(|(_, p)| *p).collect();
        // A failure names the node it concerns (a peer's hello missing or wrong).
        let of_rank = |rank: u32, detail: String| SetupFailure {
            unreachable: vec![rank],
            detail,
        };
        let answers = exchange::exchange(p2p, &self.hellos, hello, &assigned, EXCHANGE_TIMEOUT)
            .await
            .map_err(|e| {
                let rank = match &e {
                    ganglion_dispatch::overlay::OverlayError::Exchange { peer, .. } => job
                        .peers
                        .iter()
                        .find(|(_, p)| p.to_string() == *peer)
                        .map(|(r, _)| *r),
                    _ => None,
                };
                SetupFailure {
                    unreachable: rank.into_iter().collect(),
                    detail: e.to_string(),
                }
            })?;
        let nets: Vec<Ipv4Net> = lan.iter().map(|(_, n)| *n).collect();
        let mut peers = Vec::new();
        for (rank, peer) in &job.peers {
            let hello = answers
                .get(peer)
                .ok_or_else(|| of_rank(*rank, format!("rank {rank} ({peer}) sent no hello")))?;
            let mut learned = exchange::learn_peer(
                hello,
                job.job,
                &plan,
                &[own],
                &nets,
                self.config.keepalive(),
            )
            .map_err(|e| of_rank(*rank, format!("rank {rank} ({peer}): {e}")))?;
            // The relay fallback reaches the peer through the node that sent its hello.
            learned.peer.relay = Some(*peer);
            if learned.peer.addresses != [plan.addresses[*rank as usize]] {
                return Err(of_rank(
                    *rank,
                    format!(
                        "rank {rank} ({peer}) claims {:?}, the plan gives it {}",
                        learned.peer.addresses, plan.addresses[*rank as usize]
                    ),
                ));
            }
            tracing::info!(job = %job.job, rank, %peer, endpoint = %learned.peer.endpoint,
                "overlay peer");
            peers.push(learned.peer);
        }
        self.network.prepare(
            &job.exec_job,
            JobSetup {
                overlay: plan,
                keys,
                peers,
            },
        );
        Ok(())
    }

    fn give_up_after(&self) -> std::time::Duration {
        self.config.link_timeout()
    }

    /// Forgets the keys and plan announced for `job`; its hello stays registered
    /// ([`exchange::ClusterHellos`]) for a peer late to the exchange.
    fn forget(&self, job: &ChainJobId) {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(job);
        if let Some(file) = self.state_file(job) {
            let _ = std::fs::remove_file(file);
        }
    }

    fn answer(&self, peer: PeerId, hello: &ClusterHello) -> ClusterResponse {
        self.hellos.answer(peer, hello)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_tag_matches_the_build_script_rule() {
        let tag = probe_image_tag();
        let hash = tag.strip_prefix("ganglion/probe:").expect("prefix");
        assert_eq!(hash.len(), 12);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        // The script hashes the same file with sha256sum; check against the CLI where present.
        let src = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/images/probe/probe.c"
        );
        if let Ok(out) = std::process::Command::new("sha256sum").arg(src).output() {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.starts_with(hash), "{text} vs {tag}");
        }
    }

    #[test]
    fn lan_interfaces_exclude_docker_bridges() {
        let lan = lan_interfaces();
        assert!(!lan.is_empty(), "at least loopback");
        for (ip, net) in &lan {
            assert!(net.contains(ip));
        }
        assert!(
            lan.iter()
                .all(|(ip, _)| !ip.is_loopback() || lan.iter().all(|(i, _)| i.is_loopback())),
            "loopback only when nothing else: {lan:?}"
        );
    }
}
