//! The demo's node processes: one orchestrator (devnet key 0) and three providers (keys 1, 2
//! and 3; the devnet funds keys 0..3), plus a fourth (key 4, funded by the demo's genesis) for
//! the service workload only ([`providers`]), as `ganglion node run` children, each with its
//! own data dir, config and log under the demo folder. Dropping the [`Cluster`] stops them
//! (SIGTERM, then SIGKILL after 10 s), then removes the NAT namespaces ([`super::natnet`])
//! when the providers ran behind them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use ganglion_contracts::blueprint::key_address;
use ganglion_testnet::devnet::DevnetHandle;
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};

use super::DemoError;
use super::deploy::Deployed;
use super::natnet::{self, NatNet};
use crate::daemon::NodeInfo;
use crate::daemon::devnet::{self, DevnetNode, DevnetProvider, NodeNet};
use crate::datadir::DataDir;
use crate::wallet::PaymentKey;

/// Every provider's price, NTX base units per GPU-hour (1000 per GPU-second).
pub const PRICE: u64 = 3_600_000;

/// How a demo provider behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behaviour {
    /// Its price, NTX base units per GPU-hour.
    pub price: u64,
    /// `Some(f)`: a cheating provider claiming `f` × the GPU-ms it measured
    /// (`[engine] overclaim_factor`).
    pub overclaim_factor: Option<u64>,
}

impl Behaviour {
    /// An honest provider at [`PRICE`].
    pub const HONEST: Self = Self {
        price: PRICE,
        overclaim_factor: None,
    };
}
/// Longest wait for a node process to come up (its bond on chain included).
pub const START: Duration = Duration::from_secs(90);

/// A provider of the demo.
#[derive(Debug, Clone, Copy)]
pub struct ProviderSpec {
    /// Its name (data dir, log).
    pub name: &'static str,
    /// The devnet key seed paying for its bond and receiving its pay.
    pub seed: u32,
    /// Declared GPUs.
    pub gpus: u32,
    /// Bond stake, NTX base units (at least 1 NTX per GPU on the demo deployment).
    pub stake: u64,
}

/// The demo's providers: 2, 2, 4 and 2 GPUs. The batch workloads start the first three; the
/// service workload all four ([`providers`]).
pub const PROVIDERS: [ProviderSpec; 4] = [
    ProviderSpec {
        name: "provider-a",
        seed: 1,
        gpus: 2,
        stake: 5_000_000,
    },
    ProviderSpec {
        name: "provider-b",
        seed: 2,
        gpus: 2,
        stake: 5_000_000,
    },
    ProviderSpec {
        name: "provider-c",
        seed: 3,
        gpus: 4,
        stake: 5_000_000,
    },
    // Beyond the devnet's funded keys: the demo's genesis funds it (`super::run`).
    ProviderSpec {
        name: "provider-d",
        seed: 4,
        gpus: 2,
        stake: 5_000_000,
    },
];

/// The providers a run starts, a prefix of [`PROVIDERS`] (so an index is the same in both):
/// the first three for a batch job; all four for a service (`serving`), whose escrow takes
/// each provider once: two at the assign, a third by the scale-up, and after the release and
/// a provider's loss a replacement only the fourth, never used yet, can give.
pub fn providers(serving: bool) -> &'static [ProviderSpec] {
    if serving { &PROVIDERS } else { &PROVIDERS[..3] }
}

/// The orchestrator's devnet key seed.
pub const ORCHESTRATOR_SEED: u32 = 0;

/// The running node processes.
pub struct Cluster {
    ganglion: PathBuf,
    dir: PathBuf,
    children: Vec<(String, Child)>,
    orchestrator: Option<(NodeInfo, PathBuf)>,
    providers: Vec<(String, NodeInfo, PathBuf)>,
    /// Dropped after the processes stopped (fields drop after [`Drop::drop`]).
    nat: Option<NatNet>,
}

impl Cluster {
    /// No node yet; `ganglion` is the binary, `dir` the demo folder; with `nat`, provider `i`
    /// of [`PROVIDERS`] runs in its namespace `nat.host(i)` and the orchestrator relays.
    pub fn new(ganglion: PathBuf, dir: PathBuf, nat: Option<NatNet>) -> Self {
        Self {
            ganglion,
            dir,
            children: Vec::new(),
            orchestrator: None,
            providers: Vec::new(),
            nat,
        }
    }

    /// Where node `name` listens and how it relays, and the namespace it runs in.
    fn placement(&self, name: &str) -> (NodeNet, Option<String>) {
        let Some(nat) = &self.nat else {
            return (NodeNet::default(), None);
        };
        match PROVIDERS
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| nat.host(i))
        {
            Some(h) => (
                NodeNet {
                    ip: h.lan_ip,
                    rpc_port: natnet::RPC_PORT,
                    relay_server: false,
                    relay_via_bootstrap: true,
                    console_port: None,
                    gateway_port: None,
                },
                Some(h.netns.clone()),
            ),
            None => (
                NodeNet {
                    ip: nat.host_ip(),
                    relay_server: true,
                    ..NodeNet::default()
                },
                None,
            ),
        }
    }

    fn node(
        &self,
        handle: &DevnetHandle,
        deployed: &Deployed,
        name: &str,
        seed: u32,
    ) -> Result<DevnetNode, DemoError> {
        let (net, _) = self.placement(name);
        Ok(DevnetNode {
            data_dir: self.dir.join(name),
            n2c: handle
                .n2c_tcp_addr()
                .ok_or_else(|| DemoError::chain("the devnet has no N2C TCP endpoint"))?,
            payment_seed: seed,
            deployment: deployed.params.clone(),
            reference: deployed.reference,
            bootstrap: Vec::new(),
            provider: None,
            receipt_interval_ms: None,
            overclaim_factor: None,
            net,
        })
    }

    fn start(&mut self, node: &DevnetNode, name: &str) -> Result<NodeInfo, DemoError> {
        let config = node.write()?;
        let log = self.dir.join(format!("{name}.log"));
        let (_, netns) = self.placement(name);
        let mut child = devnet::spawn_in(netns.as_deref(), &self.ganglion, &config, &log)?;
        let started = devnet::wait_started(&mut child, &node.data_dir, START);
        self.children.push((name.to_string(), child));
        started.map_err(|e| DemoError::Node {
            name: name.to_string(),
            reason: format!("{e}\n--- end of {} ---\n{}", log.display(), tail(&log, 30)),
        })
    }

    /// Starts the orchestrator node, with its web console on any free port when `console`
    /// (its address in the returned [`NodeInfo::console`]).
    ///
    /// # Errors
    /// [`DemoError::Node`] with the end of its log.
    pub fn start_orchestrator(
        &mut self,
        handle: &DevnetHandle,
        deployed: &Deployed,
        console: bool,
    ) -> Result<NodeInfo, DemoError> {
        let mut node = self.node(handle, deployed, "orchestrator", ORCHESTRATOR_SEED)?;
        if console {
            node.net.console_port = Some(0);
        }
        // The service gateway (`[gateway] listen`) on any free port: the service workload's
        // requests go there.
        node.net.gateway_port = Some(0);
        let info = self.start(&node, "orchestrator")?;
        self.orchestrator = Some((info.clone(), node.data_dir));
        Ok(info)
    }

    /// Starts provider `p` behaving as `behaviour`, bootstrapping from the orchestrator; it
    /// posts its bond at start.
    ///
    /// # Errors
    /// [`DemoError::Node`] with the end of its log.
    pub fn start_provider(
        &mut self,
        handle: &DevnetHandle,
        deployed: &Deployed,
        p: ProviderSpec,
        orchestrator: &NodeInfo,
        behaviour: Behaviour,
    ) -> Result<NodeInfo, DemoError> {
        let mut node = self.node(handle, deployed, p.name, p.seed)?;
        node.bootstrap = orchestrator.p2p.clone();
        node.provider = Some(DevnetProvider {
            gpus: p.gpus,
            price_ntx_per_gpu_hour: behaviour.price,
            stake_ntx: p.stake,
            bond_gpus: None,
        });
        node.overclaim_factor = behaviour.overclaim_factor;
        let info = self.start(&node, p.name)?;
        self.providers
            .push((p.name.to_string(), info.clone(), node.data_dir));
        Ok(info)
    }

    /// The index in [`PROVIDERS`] of the started provider whose payment key hash is
    /// `key_hash` (hex).
    pub fn provider_index_of(&self, key_hash: &str) -> Option<usize> {
        let (name, _, _) = self
            .providers
            .iter()
            .find(|(_, info, _)| info.payment_key_hash == key_hash)?;
        PROVIDERS.iter().position(|p| p.name == name)
    }

    /// Provider `name`'s data dir, once started.
    pub fn provider_dir(&self, name: &str) -> Option<&Path> {
        self.providers
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, d)| d.as_path())
    }

    /// (payment key hash hex, name) of each started provider.
    pub fn provider_key_hashes(&self) -> Vec<(String, String)> {
        self.providers
            .iter()
            .map(|(name, info, _)| (info.payment_key_hash.clone(), name.clone()))
            .collect()
    }

    /// A JSON-RPC client of provider `name`.
    ///
    /// # Errors
    /// [`DemoError::Rpc`] for an unknown provider or without its cookie.
    pub fn provider_rpc(&self, name: &str) -> Result<HttpClient, DemoError> {
        let (_, info, dir) = self
            .providers
            .iter()
            .find(|(n, _, _)| n == name)
            .ok_or_else(|| DemoError::Rpc(format!("no provider {name}").into()))?;
        rpc_client(info, dir)
    }

    /// Kills node `name` with SIGKILL (the provider-loss scenario) and reaps it; returns its
    /// peer id (the owner label of its overlay pods) when it is a provider.
    ///
    /// # Errors
    /// [`DemoError::Node`] when no such node runs or the signal fails.
    pub fn kill(&mut self, name: &str) -> Result<Option<String>, DemoError> {
        let i = self
            .children
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| DemoError::Node {
                name: name.into(),
                reason: "not running".into(),
            })?;
        let (_, mut child) = self.children.remove(i);
        child.kill().map_err(|e| DemoError::Node {
            name: name.into(),
            reason: format!("SIGKILL: {e}"),
        })?;
        let _ = child.wait();
        Ok(self
            .providers
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, info, _)| info.peer_id.clone()))
    }

    /// A JSON-RPC client of the orchestrator holding its cookie's bearer token.
    ///
    /// # Errors
    /// [`DemoError::Rpc`] before the orchestrator started or without its cookie.
    pub fn orchestrator_rpc(&self) -> Result<HttpClient, DemoError> {
        let (info, dir) = self
            .orchestrator
            .as_ref()
            .ok_or_else(|| DemoError::Rpc("the orchestrator is not running".into()))?;
        rpc_client(info, dir)
    }

    /// NTX base units at the payment address of each of `providers`, from the devnet's ledger.
    ///
    /// # Errors
    /// [`DemoError::Chain`].
    pub fn provider_ntx(
        &self,
        handle: &DevnetHandle,
        deployed: &Deployed,
        providers: &[ProviderSpec],
    ) -> Result<Vec<u64>, DemoError> {
        providers
            .iter()
            .map(|p| ntx_of(handle, deployed, p.seed))
            .collect()
    }

    /// The orchestrator's web console address, when it serves one (`--console`).
    pub fn console(&self) -> Option<std::net::SocketAddr> {
        self.orchestrator
            .as_ref()
            .and_then(|(info, _)| info.console)
    }

    /// The running nodes' names (for `--keep`).
    pub fn names(&self) -> Vec<String> {
        self.children.iter().map(|(n, _)| n.clone()).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill(2) on our own child's pid with a valid signal number.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (_, c) in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// NTX base units at devnet key `seed`'s payment address, from the devnet's ledger.
///
/// # Errors
/// [`DemoError::Chain`].
pub fn ntx_of(handle: &DevnetHandle, deployed: &Deployed, seed: u32) -> Result<u64, DemoError> {
    let address = key_address(
        pallas_addresses::Network::Testnet,
        &PaymentKey::devnet(seed).key_hash(),
    );
    let utxos = handle
        .chain()
        .utxos_at(&address)
        .map_err(DemoError::chain)?;
    let mut sum = 0u64;
    for (_, bytes) in utxos {
        let out = pallas_traverse::MultiEraOutput::decode(pallas_traverse::Era::Conway, &bytes)
            .map_err(DemoError::chain)?;
        sum += ganglion_contracts::tx::Output::from_chain(&out)
            .value
            .quantity_of(&deployed.params.ntx);
    }
    Ok(sum)
}

/// A JSON-RPC client of the node `info` with data dir `dir`, holding its cookie's token.
fn rpc_client(info: &NodeInfo, dir: &Path) -> Result<HttpClient, DemoError> {
    let token = DataDir::open(dir)
        .and_then(|d| d.read_rpc_cookie())
        .map_err(|e| DemoError::Rpc(e.into()))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| DemoError::Rpc(e.into()))?,
    );
    HttpClientBuilder::default()
        .set_headers(headers)
        .request_timeout(Duration::from_secs(30))
        .build(format!("http://{}", info.rpc))
        .map_err(|e| DemoError::Rpc(e.into()))
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Builds (or finds, cached by tag) the probe image with `scripts/build-probe-image.sh` from
/// this checkout and returns its tag.
///
/// # Errors
/// [`DemoError::Image`] with the script's output.
pub fn probe_image() -> Result<String, DemoError> {
    built_image("build-probe-image.sh")
}

/// Runs `scripts/<script>` from this checkout (it builds an image, or finds it cached by tag)
/// and returns the tag it prints last.
///
/// # Errors
/// [`DemoError::Image`] with the script's output, or when it printed no tag.
pub fn built_image(script: &str) -> Result<String, DemoError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(script);
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| DemoError::Image(format!("{}: {e}", script.display()).into()))?;
    if !out.status.success() {
        return Err(DemoError::Image(
            String::from_utf8_lossy(&out.stderr).into_owned().into(),
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(|l| l.trim().to_string())
        .ok_or_else(|| DemoError::Image(format!("{} printed no tag", script.display()).into()))
}
