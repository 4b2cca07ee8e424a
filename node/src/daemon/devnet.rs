//! Nodes on a running devnet, as child processes: [`DevnetNode`] writes a node's config file
//! (and its devnet payment key), [`spawn`] starts `ganglion node run` on it and
//! [`wait_started`] waits for its `node.json`. Used by the process-level test
//! (`node/tests/daemon_run/`) and meant for `ganglion devnet demo`.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ganglion_contracts::params::Params;
use ganglion_contracts::tx::TxoRef;

use super::NodeInfo;
use crate::datadir::DataDir;
use crate::wallet::PaymentKey;

/// A provider's part of a devnet node's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevnetProvider {
    /// Declared GPUs (`[[gpus.declared]]`, model `declared`, NVIDIA, 80 GiB).
    pub gpus: u32,
    /// Price, NTX base units per GPU-hour.
    pub price_ntx_per_gpu_hour: u64,
    /// The bond posted at first start, NTX base units.
    pub stake_ntx: u64,
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
    /// `[engine] settle_grace_ms` (None = the engine's default).
    pub settle_grace_ms: Option<u64>,
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl DevnetNode {
    /// The config file's text. Listens on loopback, any free port (p2p and RPC); confirmation
    /// depth 0 (the devnet forges only when a transaction is pending) and 10-slot validity
    /// windows.
    pub fn to_toml(&self) -> String {
        let p = &self.deployment;
        let mut t = format!(
            "network = \"devnet\"\ndata_dir = {}\n\n[chain]\nn2c = {}\n\n[rpc]\nlisten = \
             \"127.0.0.1:0\"\n\n[deployment]\nntx = {{ policy = {}, name = {} }}\n\
             min_bond_per_gpu = {}\nunbonding_delay_ms = {}\nslash_bps = {}\n\n[validator]\n\
             reference = {{ tx_hash = {}, index = {} }}\n\n[p2p]\nlisten = \
             [\"/ip4/127.0.0.1/tcp/0\"]\nbootstrap = [{}]\n\n[engine]\nconfirmation_depth = 0\n\
             poll_ms = 200\nvalidity_slots = 10\n",
            quote(&self.data_dir.display().to_string()),
            quote(&self.n2c.to_string()),
            quote(&hex::encode(p.ntx.policy)),
            quote(&hex::encode(&p.ntx.name)),
            p.min_bond_per_gpu,
            p.unbonding_delay_ms,
            p.slash_bps,
            quote(&hex::encode(self.reference.tx_hash)),
            self.reference.index,
            self.bootstrap
                .iter()
                .map(|b| quote(b))
                .collect::<Vec<_>>()
                .join(", "),
        );
        if let Some(ms) = self.settle_grace_ms {
            t.push_str(&format!("settle_grace_ms = {ms}\n"));
        }
        if let Some(pr) = &self.provider {
            t.push_str(&format!(
                "\n[provider]\nprice_ntx_per_gpu_hour = {}\n\n[bond]\nstake_ntx = {}\n\n\
                 [[gpus.declared]]\nname = \"declared\"\nvendor = \"nvidia\"\nvram_gib = 80\n\
                 count = {}\n",
                pr.price_ntx_per_gpu_hour, pr.stake_ntx, pr.gpus
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
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let err = out.try_clone()?;
    let mut cmd = Command::new(ganglion);
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
