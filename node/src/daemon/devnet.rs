//! Nodes on a running devnet, as child processes: [`deploy_validator`] puts the validator's
//! reference script on chain, [`DevnetNode`] writes a node's config file (and its devnet
//! payment key), [`spawn`] starts `ganglion node run` on it and [`wait_started`] waits for its
//! `node.json`. Used by the process-level test (`node/tests/it/daemon_run/`) and meant for
//! `ganglion devnet demo`:
//!
//! ```ignore
//! let devnet = ganglion_testnet::devnet::start(DevnetConfig::new(genesis, dir)).await?;
//! let n2c = devnet.n2c_tcp_addr()?;
//! let reference = deploy_validator(n2c, &params, PaymentKey::devnet(3).signing_key()).await?;
//! let orch = DevnetNode { data_dir, n2c, payment_seed: 0, deployment: params.clone(),
//!     reference, bootstrap: vec![], provider: None, receipt_interval_ms: None,
//!     overclaim_factor: None,
//!     net: Default::default() };
//! let mut child = spawn(&ganglion_exe, &orch.write()?, &log)?;
//! let info = wait_started(&mut child, &orch.data_dir, Duration::from_secs(60))?;
//! // providers: bootstrap = info.p2p, provider = Some(DevnetProvider { .. });
//! // JSON-RPC at info.rpc, token in <data_dir>/rpc.cookie.
//! ```

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use ganglion_contracts::env::Env;
use ganglion_contracts::time::SlotConfig;
use ganglion_contracts::tx::{Output, TxoRef, Utxo};
use ganglion_contracts::v2::build::{self, Deployment};
use ganglion_contracts::v2::params::Params;

use super::{DaemonError, NodeInfo};
use crate::config::Network;
use crate::datadir::DataDir;
use crate::job::chain::ChainAccess;
use crate::network::NetworkPreset;
use crate::settings::N2cEndpoint;
use crate::wallet::{ChainClient, PaymentKey};

/// Deploys the validator applied to `params` on the devnet at `n2c`: a reference-script
/// output paid and signed by `deployer` (a funded devnet key), with a small clock-dependent
/// self-payment so that every run's job ids differ. Returns its UTxO once the
/// ledger holds it (the `[validator] reference` of every node's config).
///
/// # Errors
/// [`DaemonError::Chain`] (connection, build, submission), [`DaemonError::Network`] (devnet
/// preset), [`DaemonError::ReferenceMissing`] when it is not on chain within
/// [`super::chain::CHAIN_WAIT`].
pub async fn deploy_validator(
    n2c: SocketAddr,
    params: &Params,
    deployer: &SigningKey,
) -> Result<TxoRef, DaemonError> {
    deploy_validator_at(&N2cEndpoint::Tcp(n2c), params, deployer).await
}

/// The reference-script UTxO of the validator applied to `params` already on the devnet at
/// `endpoint`, if any (the first by transaction id and index).
///
/// # Errors
/// [`DaemonError::Chain`], [`DaemonError::Network`].
pub async fn deployed_reference(
    endpoint: &N2cEndpoint,
    params: &Params,
) -> Result<Option<TxoRef>, DaemonError> {
    let preset = NetworkPreset::of(Network::Devnet);
    let script =
        ganglion_contracts::v2::blueprint().and_then(|b| b.apply_data(params.to_plutus_data()))?;
    let mut client = ChainClient::connect(endpoint, preset.magic).await?;
    let utxos = client
        .utxos_at(&script.address(preset.address_network))
        .await;
    client.close().await;
    Ok(super::chain::reference_script_utxo(utxos?, &script).map(|u| u.reference))
}

/// [`deploy_validator`] on the devnet at `endpoint` (a Unix socket or TCP).
///
/// # Errors
/// As [`deploy_validator`].
pub async fn deploy_validator_at(
    endpoint: &N2cEndpoint,
    params: &Params,
    deployer: &SigningKey,
) -> Result<TxoRef, DaemonError> {
    let preset = NetworkPreset::of(Network::Devnet);
    let endpoint = endpoint.clone();
    let script =
        ganglion_contracts::v2::blueprint().and_then(|b| b.apply_data(params.to_plutus_data()))?;
    let mut client = ChainClient::connect(&endpoint, preset.magic).await?;
    let zero_time = client.system_start_ms().await;
    let pparams = client.protocol_params().await;
    client.close().await;
    let env = Env {
        params: pparams?,
        slot_config: SlotConfig {
            zero_time: zero_time?,
            zero_slot: 0,
            slot_length: 1000,
        },
        network: preset.address_network,
    };
    // The deploy transaction spends no script, so the deployment's reference is unused.
    let placeholder = Deployment {
        params: params.clone(),
        script: script.clone(),
        reference: Utxo {
            reference: TxoRef {
                tx_hash: [0; 32],
                index: 0,
            },
            output: Output::new(vec![], Default::default()),
        },
    };
    let access = ChainAccess::new(
        endpoint.clone(),
        preset.magic,
        env.clone(),
        placeholder,
        deployer.clone(),
    );
    let mut draft = build::deploy(&env, &script)?;
    // A self-payment whose amount carries the clock: the deployer's UTxOs (and so the job ids
    // the engine seeds from them, and the container names on a shared Docker host) differ in
    // every run of a fresh devnet.
    draft.pay(Output::new(
        access.address(),
        ganglion_contracts::tx::Value::lovelace(2_000_000 + ganglion_p2p::now_ms() % 1_000_000),
    ));
    let tx = access.build(draft, ganglion_p2p::now_ms()).await?;
    access.submit(&tx, ganglion_p2p::now_ms()).await?;
    let address = script.address(env.network);
    let start = Instant::now();
    loop {
        let mut client = ChainClient::connect(&endpoint, preset.magic).await?;
        let utxos = client.utxos_at(&address).await;
        client.close().await;
        if let Some(u) = utxos?.into_iter().find(|u| u.reference.tx_hash == tx.hash) {
            return Ok(u.reference);
        }
        if start.elapsed() > super::chain::CHAIN_WAIT {
            return Err(DaemonError::ReferenceMissing(hex::encode(tx.hash)));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A provider's part of a devnet node's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevnetProvider {
    /// Declared GPUs (`[[gpus.declared]]`, model `declared`, NVIDIA, 80 GiB).
    pub gpus: u32,
    /// Price, NTX base units per GPU-hour.
    pub price_ntx_per_gpu_hour: u64,
    /// The bond posted at first start, NTX base units.
    pub stake_ntx: u64,
    /// GPUs the bond backs (`[bond] gpus`; `None`: the GPUs offered). Escrow v2 commits a
    /// job's GPUs on the bond until the job's deadline plus the claim window, so a provider
    /// running jobs back to back bonds for more GPUs than it has (and the stake for them).
    pub bond_gpus: Option<u64>,
}

/// A node on a devnet: everything its config file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevnetNode {
    /// Its data dir (created by [`DevnetNode::write`]).
    pub data_dir: PathBuf,
    /// The devnet's N2C TCP address.
    pub n2c: SocketAddr,
    /// The devnet key seed whose key becomes the payment key (0..4 are funded at genesis).
    pub payment_seed: u32,
    /// The deployment's validator parameters (`[deployment]`).
    pub deployment: Params,
    /// The reference-script UTxO (`[validator] reference`).
    pub reference: TxoRef,
    /// Bootstrap multiaddrs (`[p2p] bootstrap`), e.g. another node's `node.json` `p2p`.
    pub bootstrap: Vec<String>,
    /// Set for a provider.
    pub provider: Option<DevnetProvider>,
    /// `[engine] receipt_interval_ms` (None = the engine's default).
    pub receipt_interval_ms: Option<u64>,
    /// `[engine] overclaim_factor`: a cheating provider (devnet demo; None = honest).
    pub overclaim_factor: Option<u64>,
    /// Where it listens and whether it relays.
    pub net: NodeNet,
}

/// How a devnet node is networked; the default is loopback, any free ports, no relaying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNet {
    /// The IPv4 address the p2p swarm (TCP, any free port) and the JSON-RPC server bind.
    pub ip: std::net::Ipv4Addr,
    /// The JSON-RPC port (0 = any free port).
    pub rpc_port: u16,
    /// `[p2p] relay_server`: serve as a circuit relay.
    pub relay_server: bool,
    /// `[p2p] relay_via_bootstrap`: behind a NAT, be reached through the bootstrap relays.
    pub relay_via_bootstrap: bool,
    /// `[console] listen` on `ip` at this port (0 = any free port); `None` = no console.
    pub console_port: Option<u16>,
    /// `[gateway] listen` on `ip` at this port (0 = any free port); `None` = no service
    /// gateway.
    pub gateway_port: Option<u16>,
}

impl Default for NodeNet {
    fn default() -> Self {
        Self {
            ip: std::net::Ipv4Addr::LOCALHOST,
            rpc_port: 0,
            relay_server: false,
            relay_via_bootstrap: false,
            console_port: None,
            gateway_port: None,
        }
    }
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl DevnetNode {
    /// The config file's text. Listens on [`NodeNet`]'s address (p2p and metrics: any free
    /// port; RPC: its port; for a provider, the overlay's UDP socket: any free port); confirmation
    /// depth 0 (the devnet forges only when a transaction is pending) and 10-slot validity
    /// windows.
    pub fn to_toml(&self) -> String {
        let p = &self.deployment;
        let mut t = format!(
            "network = \"devnet\"\ndata_dir = {}\n\n[chain]\nn2c = {}\n\n[rpc]\nlisten = \
             {}\n\n[deployment]\nntx = {{ policy = {}, name = {} }}\n\
             min_bond_per_gpu = {}\nunbonding_delay_ms = {}\nclaim_window_ms = {}\n\n[validator]\n\
             reference = {{ tx_hash = {}, index = {} }}\n\n[p2p]\nlisten = \
             [{}]\nbootstrap = [{}]\nrelay_server = {}\nrelay_via_bootstrap = {}\n\n[engine]\nconfirmation_depth = 0\n\
             poll_ms = 200\nvalidity_slots = 10\n",
            quote(&self.data_dir.display().to_string()),
            quote(&self.n2c.to_string()),
            quote(&SocketAddr::from((self.net.ip, self.net.rpc_port)).to_string()),
            quote(&hex::encode(p.ntx.policy)),
            quote(&hex::encode(&p.ntx.name)),
            p.min_bond_per_gpu,
            p.unbonding_delay_ms,
            p.claim_window_ms,
            quote(&hex::encode(self.reference.tx_hash)),
            self.reference.index,
            quote(&format!("/ip4/{}/tcp/0", self.net.ip)),
            self.bootstrap
                .iter()
                .map(|b| quote(b))
                .collect::<Vec<_>>()
                .join(", "),
            self.net.relay_server,
            self.net.relay_via_bootstrap,
        );
        if let Some(f) = self.overclaim_factor {
            t.push_str(&format!("overclaim_factor = {f}\n"));
        }
        if let Some(ms) = self.receipt_interval_ms {
            t.push_str(&format!("receipt_interval_ms = {ms}\n"));
        }
        t.push_str(&format!(
            "\n[metrics]\nlisten = {}\n",
            quote(&SocketAddr::from((self.net.ip, 0)).to_string())
        ));
        if let Some(port) = self.net.console_port {
            t.push_str(&format!(
                "\n[console]\nlisten = {}\n",
                quote(&SocketAddr::from((self.net.ip, port)).to_string())
            ));
        }
        if let Some(port) = self.net.gateway_port {
            t.push_str(&format!(
                "\n[gateway]\nlisten = {}\n",
                quote(&SocketAddr::from((self.net.ip, port)).to_string())
            ));
        }
        if let Some(pr) = &self.provider {
            // Only the declared GPUs: a devnet node on a machine with real GPUs offers the same.
            let pool: Vec<String> = (0..pr.gpus)
                .map(|i| quote(&format!("declared:{i}")))
                .collect();
            t.push_str(&format!(
                "\n[provider]\nprice_ntx_per_gpu_hour = {}\npool = [{}]\n\n[bond]\nstake_ntx = {}\n{}\n\
                 [[gpus.declared]]\nname = \"declared\"\nvendor = \"nvidia\"\nvram_gib = 80\n\
                 count = {}\n\n[overlay]\nlisten_port = 0\n",
                pr.price_ntx_per_gpu_hour,
                pool.join(", "),
                pr.stake_ntx,
                pr.bond_gpus.map_or(String::new(), |g| format!("gpus = {g}\n")),
                pr.gpus
            ));
        }
        t
    }

    /// Creates the data dir, imports the devnet payment key (when absent) and writes
    /// `<data dir>/node.toml`; returns the config path.
    ///
    /// # Errors
    /// I/O, or a key file error (as I/O).
    pub fn write(&self) -> io::Result<PathBuf> {
        let dir = DataDir::open(&self.data_dir).map_err(io::Error::other)?;
        if !dir.payment_key().exists() {
            PaymentKey::devnet(self.payment_seed)
                .create(&dir.payment_key())
                .map_err(io::Error::other)?;
        }
        let path = self.data_dir.join("node.toml");
        std::fs::write(&path, self.to_toml())?;
        Ok(path)
    }
}

/// Starts `<ganglion> node run --config <config>`, stdout and stderr appended to `log`,
/// `RUST_LOG` as inherited (default `info`).
///
/// # Errors
/// I/O (the log file, the spawn).
pub fn spawn(ganglion: &Path, config: &Path, log: &Path) -> io::Result<Child> {
    spawn_in(None, ganglion, config, log)
}

/// [`spawn`] inside network namespace `netns` (`ip netns exec <netns>`, which execs the node:
/// the child's pid is the node's) when given.
///
/// # Errors
/// I/O (the log file, the spawn).
pub fn spawn_in(
    netns: Option<&str>,
    ganglion: &Path,
    config: &Path,
    log: &Path,
) -> io::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let err = out.try_clone()?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(ganglion);
            c
        }
        None => Command::new(ganglion),
    };
    cmd.args(["node", "run", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info");
    }
    cmd.spawn()
}

/// Waits until the node in `data_dir` has written its `node.json` for process `child`
/// (a previous run's file names another pid), or `child` exits.
///
/// # Errors
/// [`io::ErrorKind::TimedOut`] after `timeout`; [`io::ErrorKind::Other`] when the child
/// exited (its status in the message).
pub fn wait_started(child: &mut Child, data_dir: &Path, timeout: Duration) -> io::Result<NodeInfo> {
    let start = Instant::now();
    loop {
        if let Some(info) = NodeInfo::read(data_dir).filter(|i| i.pid == child.id()) {
            return Ok(info);
        }
        if let Some(status) = child.try_wait()? {
            return Err(io::Error::other(format!(
                "ganglion node run ({}) exited before starting: {status}",
                data_dir.display()
            )));
        }
        if start.elapsed() > timeout {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "node in {} not started after {timeout:?}",
                    data_dir.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use ganglion_contracts::params::AssetClass;

    use super::*;
    use crate::settings::Settings;

    #[test]
    fn the_written_config_parses_back_to_the_same_node() {
        let node = DevnetNode {
            data_dir: PathBuf::from("/var/tmp/x \"quoted\""),
            n2c: "127.0.0.1:3001".parse().expect("addr"),
            payment_seed: 1,
            deployment: Params {
                ntx: AssetClass {
                    policy: [7; 28],
                    name: b"NTX".to_vec(),
                },
                min_bond_per_gpu: 1_000_000,
                unbonding_delay_ms: 60_000,
                claim_window_ms: 30_000,
            },
            reference: TxoRef {
                tx_hash: [9; 32],
                index: 3,
            },
            bootstrap: vec!["/ip4/127.0.0.1/tcp/4001".into()],
            provider: Some(DevnetProvider {
                gpus: 2,
                price_ntx_per_gpu_hour: 3_600_000,
                stake_ntx: 5_000_000,
                bond_gpus: Some(5),
            }),
            receipt_interval_ms: Some(2_500),
            overclaim_factor: None,
            net: NodeNet {
                ip: "192.168.31.2".parse().expect("ip"),
                rpc_port: 7070,
                relay_server: false,
                relay_via_bootstrap: true,
                console_port: Some(7080),
                gateway_port: Some(8080),
            },
        };
        let s = Settings::from_toml(&node.to_toml()).expect("parses");
        assert_eq!(s.rpc.listen.to_string(), "192.168.31.2:7070");
        assert_eq!(
            s.console.listen.map(|a| a.to_string()).as_deref(),
            Some("192.168.31.2:7080")
        );
        assert_eq!(
            s.gateway.listen.map(|a| a.to_string()).as_deref(),
            Some("192.168.31.2:8080")
        );
        assert_eq!(
            s.p2p.listen,
            vec![
                "/ip4/192.168.31.2/tcp/0"
                    .parse::<libp2p::Multiaddr>()
                    .expect("addr")
            ]
        );
        assert!(s.p2p.relay_via_bootstrap && !s.p2p.relay_server);
        assert_eq!(s.data_dir.as_deref(), Some(node.data_dir.as_path()));
        assert_eq!(s.chain.n2c.as_deref(), Some("127.0.0.1:3001"));
        assert_eq!(s.deployment.as_ref(), Some(&node.deployment));
        assert_eq!(
            s.validator.as_ref().map(|v| v.reference),
            Some(node.reference)
        );
        assert_eq!(s.p2p.bootstrap.len(), 1);
        assert_eq!(s.engine.confirmation_depth, Some(0));
        assert_eq!(s.engine.receipt_interval_ms, Some(2_500));
        assert_eq!(
            s.metrics.listen,
            Some(SocketAddr::from(([192, 168, 31, 2], 0)))
        );
        assert_eq!(s.bond.as_ref().map(|b| b.stake_ntx), Some(5_000_000));
        let limits = s.provider.as_ref().expect("[provider]");
        assert_eq!(limits.price_ntx_per_gpu_hour, 3_600_000);
        assert_eq!(
            limits.pool.as_deref(),
            Some(&["declared:0".to_string(), "declared:1".to_string()][..]),
            "only the declared GPUs, whatever this machine has"
        );
        assert_eq!(s.gpus.declared.iter().map(|d| d.count).sum::<u32>(), 2);
        assert_eq!(s.overlay.listen_port, 0, "several providers share one host");
        let orch = DevnetNode {
            provider: None,
            receipt_interval_ms: None,
            overclaim_factor: None,
            net: Default::default(),
            ..node
        };
        let s = Settings::from_toml(&orch.to_toml()).expect("parses");
        assert!(s.provider.is_none() && s.bond.is_none());
        assert!(s.rpc.listen.ip().is_loopback());
        assert!(!s.p2p.relay_via_bootstrap && !s.p2p.relay_server);
        assert!(s.gpus.declared.is_empty());
    }
}
