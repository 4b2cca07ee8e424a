//! A devnet, an orchestrator on this host and providers in the [`DelayNet`]'s namespaces, each
//! a `ganglion node run` process with its own data dir and log. Dropping the [`Cluster`] stops
//! the nodes (SIGTERM, then SIGKILL after 10 s), then the devnet and the net.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use ganglion_node::daemon::NodeInfo;
use ganglion_node::daemon::devnet::{self, DevnetNode, DevnetProvider, NodeNet};
use ganglion_node::demo::deploy;
use ganglion_node::rpc_client::NodeClient;
use ganglion_testnet::devnet::{DevnetConfig, DevnetHandle};
use ganglion_testnet::genesis::{Fund, Genesis};
use ganglion_testnet::keys::DevKey;

use super::delaynet::DelayNet;

/// Longest wait for a node process to come up (its bond on chain included).
const START: Duration = Duration::from_secs(120);

/// One provider to start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Provider {
    /// Its host in the net (namespace index).
    pub(crate) host: usize,
    /// Declared GPUs.
    pub(crate) gpus: u32,
    /// Price, NTX base units per GPU-hour.
    pub(crate) price: u64,
    /// Lines added to its `[overlay]` section (the config's last), e.g. `relay = false`.
    pub(crate) overlay: &'static str,
}

/// The running nodes.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    children: Vec<Child>,
    /// The orchestrator's client.
    pub(crate) orchestrator: NodeClient,
    /// Each provider's node info, in start order.
    pub(crate) providers: Vec<NodeInfo>,
    // Dropped after the processes (fields drop after `Drop::drop`), in this order.
    _devnet: DevnetHandle,
    _net: DelayNet,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("dir", &self.dir.path())
            .field("providers", &self.providers.len())
            .finish_non_exhaustive()
    }
}

/// The `ganglion` binary cargo built for this test.
fn ganglion() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ganglion"))
}

/// The last `n` lines of `log`.
fn tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Devnet key seeds: the orchestrator's, then one per provider.
const ORCHESTRATOR_SEED: u32 = 0;

impl Cluster {
    /// Starts a devnet on the net's host address (genesis funds one key per node), deploys the
    /// validator, starts the orchestrator here and `providers` in their namespaces, each
    /// bootstrapping from the orchestrator and posting its bond.
    pub(crate) async fn start(net: DelayNet, providers: &[Provider]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut genesis = Genesis::devnet().expect("genesis");
        let template = genesis.funds[0].clone();
        for seed in genesis.funds.len() as u32..=providers.len() as u32 {
            let a = DevKey::from_seed(seed).address(pallas_addresses::Network::Testnet);
            genesis.funds.push(Fund {
                address: a.to_bech32().expect("bech32"),
                ..template.clone()
            });
        }
        let mut config = DevnetConfig::new(genesis.clone(), dir.path().join("devnet"));
        config.n2c_tcp_addr = Some(std::net::SocketAddr::from((net.host_ip(), 0)));
        let devnet = ganglion_testnet::devnet::start(config)
            .await
            .expect("start the devnet");
        let deployed = deploy::deploy(&devnet, &genesis)
            .await
            .expect("deploy the validator");
        let mut children = Vec::new();
        let base = |name: &str, seed: u32, ip| DevnetNode {
            data_dir: dir.path().join(name),
            n2c: devnet.n2c_tcp_addr().expect("N2C over TCP"),
            payment_seed: seed,
            deployment: deployed.params.clone(),
            reference: deployed.reference,
            bootstrap: Vec::new(),
            provider: None,
            receipt_interval_ms: None,
            overclaim_factor: None,
            net: NodeNet {
                ip,
                ..NodeNet::default()
            },
        };
        let orchestrator = base("orchestrator", ORCHESTRATOR_SEED, net.host_ip());
        let info = spawn(&mut children, &orchestrator, None, dir.path(), "");
        let mut started = Vec::new();
        for (i, p) in providers.iter().enumerate() {
            let host = net.host(p.host);
            let mut node = base(&format!("provider-{i}"), i as u32 + 1, host.ip);
            node.bootstrap = info.p2p.clone();
            node.provider = Some(DevnetProvider {
                gpus: p.gpus,
                price_ntx_per_gpu_hour: p.price,
                stake_ntx: 5_000_000,
                bond_gpus: None,
            });
            started.push(spawn(
                &mut children,
                &node,
                Some(&host.netns),
                dir.path(),
                p.overlay,
            ));
        }
        let orchestrator =
            NodeClient::of_data_dir(&orchestrator.data_dir).expect("orchestrator client");
        Self {
            dir,
            children,
            orchestrator,
            providers: started,
            _devnet: devnet,
            _net: net,
        }
    }

    /// The log of node `name` (`orchestrator`, `provider-<i>`), its last `n` lines.
    pub(crate) fn log(&self, name: &str, n: usize) -> String {
        tail(&self.dir.path().join(format!("{name}.log")), n)
    }
}

/// Writes `node`'s config (with `overlay` appended: the provider config ends in its
/// `[overlay]` section) and starts it (in `netns`), waiting for its `node.json`.
fn spawn(
    children: &mut Vec<Child>,
    node: &DevnetNode,
    netns: Option<&str>,
    dir: &Path,
    overlay: &str,
) -> NodeInfo {
    let name = node
        .data_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let config = node.write().expect("write the node's config");
    if !overlay.is_empty() {
        let text = std::fs::read_to_string(&config).expect("read the config");
        assert!(text.contains("[overlay]"), "a provider's config: {text}");
        std::fs::write(&config, format!("{text}{overlay}\n")).expect("write the config");
    }
    let log = dir.join(format!("{name}.log"));
    let mut child = devnet::spawn_in(netns, &ganglion(), &config, &log).expect("spawn");
    let started = devnet::wait_started(&mut child, &node.data_dir, START);
    children.push(child);
    started.unwrap_or_else(|e| panic!("{name} did not start: {e}\n{}", tail(&log, 40)))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill(2) on our own child's pid with a valid signal number.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for c in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
