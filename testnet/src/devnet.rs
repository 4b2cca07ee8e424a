//! Start a devnet: open the chain, bind the servers (port 0 by default), run the slot
//! clock that forges a block in every slot with pending transactions, and hand back a
//! [`DevnetHandle`] with the addresses, submit/tip/rollback and shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pallas_crypto::hash::Hash;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use ganglion_cardano::time::{now_posix_ms, slot_to_posix_ms};

use crate::chain::{Chain, ChainError, ChainEvent, SubmitError};
use crate::genesis::Genesis;
use crate::serve::{n2c, n2n};
use crate::store::BlockRef;

/// How to run a devnet.
#[derive(Debug, Clone)]
pub struct DevnetConfig {
    /// The genesis (used to initialise a fresh data directory; must match an existing one).
    pub genesis: Genesis,
    /// Data directory (sled store); created if missing.
    pub data_dir: PathBuf,
    /// N2N TCP address; default `127.0.0.1:0` (an ephemeral port).
    pub n2n_addr: SocketAddr,
    /// N2C Unix socket path; default `<data_dir>/node.socket`; `None` = no Unix socket.
    pub n2c_socket: Option<PathBuf>,
    /// N2C TCP address; default `Some(127.0.0.1:0)`.
    pub n2c_tcp_addr: Option<SocketAddr>,
    /// Operator control socket (`rollback <n>`, `tip`); default `<data_dir>/control.socket`.
    pub control_socket: Option<PathBuf>,
    /// The HTTP API in Blockfrost's and Kupo's conventions
    /// ([`crate::serve::blockfrost`]); default `None` (not served).
    pub http_addr: Option<SocketAddr>,
    /// Mempool capacity (transactions); default 10 000.
    pub mempool_capacity: usize,
    /// Forge blocks automatically every slot with pending transactions; default true.
    /// With `false`, call [`DevnetHandle::forge_now`] (deterministic tests, benches).
    pub auto_forge: bool,
    /// With `auto_forge`: also forge an empty block when the tip is this many slots old and
    /// nothing is pending, so nodes waiting for confirmations never wait on unrelated traffic;
    /// default `None` (only blocks with transactions).
    pub idle_block_slots: Option<u64>,
}

impl DevnetConfig {
    /// Defaults for `genesis` in `data_dir`.
    pub fn new(genesis: Genesis, data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        Self {
            genesis,
            n2c_socket: Some(data_dir.join("node.socket")),
            control_socket: Some(data_dir.join("control.socket")),
            data_dir,
            n2n_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            n2c_tcp_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            http_addr: None,
            mempool_capacity: 10_000,
            auto_forge: true,
            idle_block_slots: None,
        }
    }

    /// A devnet kept in `data_dir`, as `ganglion-devnet up` and `ganglion devnet up` run it:
    /// the genesis of `data_dir/genesis.json` when there (else `genesis`, else the built-in
    /// devnet genesis, started now), written back there; N2N and N2C TCP on `n2n` and
    /// `n2c_tcp`, the HTTP API on `http` when given; an empty block after `idle_block_s` idle
    /// seconds (0: only blocks with transactions). Returns the config and the genesis file's
    /// path.
    ///
    /// # Errors
    /// [`DevnetError::Genesis`] (unreadable, invalid), [`DevnetError::Io`] (writing it).
    pub fn kept_in(
        data_dir: &std::path::Path,
        genesis: Option<&std::path::Path>,
        n2n: SocketAddr,
        n2c_tcp: SocketAddr,
        http: Option<SocketAddr>,
        idle_block_s: u64,
    ) -> Result<(Self, PathBuf), DevnetError> {
        let genesis_path = data_dir.join("genesis.json");
        let g = match genesis {
            Some(p) => Genesis::load(p),
            None if genesis_path.exists() => Genesis::load(&genesis_path),
            None => Genesis::devnet(),
        }?;
        let io = |what: String| move |source| DevnetError::Io { what, source };
        std::fs::create_dir_all(data_dir)
            .map_err(io(format!("creating {}", data_dir.display())))?;
        std::fs::write(&genesis_path, g.to_json()?)
            .map_err(io(format!("writing {}", genesis_path.display())))?;
        let slot_ms = u64::from(g.slot_length_ms).max(1);
        let mut config = Self::new(g, data_dir);
        config.n2n_addr = n2n;
        config.n2c_tcp_addr = Some(n2c_tcp);
        config.http_addr = http;
        config.idle_block_slots =
            (idle_block_s > 0).then(|| (idle_block_s * 1000).div_ceil(slot_ms).max(1));
        Ok((config, genesis_path))
    }
}

/// Where `up` serves the HTTP API: an address, or `off` (none). Parsed from the command
/// line (`--http 127.0.0.1:3003`, `--http off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpListen(pub Option<SocketAddr>);

impl std::str::FromStr for HttpListen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "off" {
            return Ok(Self(None));
        }
        s.parse()
            .map(|a| Self(Some(a)))
            .map_err(|_| format!("{s:?} is neither an address (IP:port) nor off"))
    }
}

/// Errors starting a devnet.
#[derive(Debug, thiserror::Error)]
pub enum DevnetError {
    /// Creating the data directory or binding a listener failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The genesis could not be read or written.
    #[error(transparent)]
    Genesis(#[from] crate::genesis::GenesisError),
    /// Opening the chain failed.
    #[error(transparent)]
    Chain(#[from] ChainError),
}

/// A running devnet. Dropping it cancels the tasks; prefer [`DevnetHandle::shutdown`].
pub struct DevnetHandle {
    chain: Arc<Chain>,
    genesis: Genesis,
    n2n_addr: SocketAddr,
    n2c_socket: Option<PathBuf>,
    n2c_tcp_addr: Option<SocketAddr>,
    control_socket: Option<PathBuf>,
    http_addr: Option<SocketAddr>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DevnetError {
    let what = what.into();
    move |source| DevnetError::Io { what, source }
}

/// Start a devnet. Must be called inside a tokio runtime.
///
/// # Errors
/// [`DevnetError`].
pub async fn start(config: DevnetConfig) -> Result<DevnetHandle, DevnetError> {
    std::fs::create_dir_all(&config.data_dir)
        .map_err(io(format!("create {}", config.data_dir.display())))?;
    let genesis = config.genesis.clone();
    let dir = config.data_dir.join("chain");
    let capacity = config.mempool_capacity;
    let g = genesis.clone();
    let chain = tokio::task::spawn_blocking(move || Chain::open(&g, &dir, capacity))
        .await
        .map_err(|e| {
            ChainError::Task(if e.is_panic() {
                "panicked"
            } else {
                "cancelled"
            })
        })??;
    let chain = Arc::new(chain);
    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();

    let n2n_listener = TcpListener::bind(config.n2n_addr)
        .await
        .map_err(io(format!("bind N2N {}", config.n2n_addr)))?;
    let n2n_addr = n2n_listener.local_addr().map_err(io("N2N local addr"))?;
    tasks.spawn(n2n::run(
        n2n_listener,
        chain.clone(),
        genesis.network_magic,
        cancel.clone(),
    ));

    let settings = n2c::N2cSettings {
        magic: genesis.network_magic,
        system_start_ms: genesis.system_start_ms,
    };
    if let Some(path) = &config.n2c_socket {
        if path.exists() {
            std::fs::remove_file(path).map_err(io(format!("remove stale {}", path.display())))?;
        }
        let l = UnixListener::bind(path).map_err(io(format!("bind {}", path.display())))?;
        tasks.spawn(n2c::run(
            n2c::Listener::Unix(l),
            chain.clone(),
            settings,
            cancel.clone(),
        ));
    }
    let n2c_tcp_addr = match config.n2c_tcp_addr {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(io(format!("bind N2C {addr}")))?;
            let local = l.local_addr().map_err(io("N2C local addr"))?;
            tasks.spawn(n2c::run(
                n2c::Listener::Tcp(l),
                chain.clone(),
                settings,
                cancel.clone(),
            ));
            Some(local)
        }
        None => None,
    };

    if let Some(path) = &config.control_socket {
        if path.exists() {
            std::fs::remove_file(path).map_err(io(format!("remove stale {}", path.display())))?;
        }
        let l = UnixListener::bind(path).map_err(io(format!("bind {}", path.display())))?;
        tasks.spawn(crate::control::run(l, chain.clone(), cancel.clone()));
    }
    let http_addr = match config.http_addr {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(io(format!("bind HTTP {addr}")))?;
            let local = l.local_addr().map_err(io("HTTP local addr"))?;
            let api = crate::serve::blockfrost::Api::new(chain.clone(), &genesis)?;
            let stop = cancel.clone();
            tasks.spawn(async move {
                if let Err(e) = crate::serve::blockfrost::serve(l, Arc::new(api), stop).await {
                    tracing::error!(error = %e, "the HTTP API stopped");
                }
            });
            Some(local)
        }
        None => None,
    };
    if config.auto_forge {
        tasks.spawn(slot_clock(
            chain.clone(),
            config.idle_block_slots,
            cancel.clone(),
        ));
    }
    tracing::info!(%n2n_addr, n2c_socket = ?config.n2c_socket, ?n2c_tcp_addr, ?http_addr, magic = genesis.network_magic, "devnet started");
    Ok(DevnetHandle {
        chain,
        genesis,
        n2n_addr,
        n2c_socket: config.n2c_socket,
        n2c_tcp_addr,
        control_socket: config.control_socket,
        http_addr,
        cancel,
        tasks,
    })
}

/// The block producer's clock: wake at the start of every slot, forge if anything is
/// pending (or, with `idle_block_slots`, an empty block when the tip is that old). The timer
/// is the slot clock itself, not a synchronisation device.
async fn slot_clock(chain: Arc<Chain>, idle_block_slots: Option<u64>, cancel: CancellationToken) {
    let config = chain.rules().slot_config;
    loop {
        let next = chain.wall_slot() + 1;
        let at = slot_to_posix_ms(&config, next).unwrap_or(u64::MAX);
        let wait = Duration::from_millis(at.saturating_sub(now_posix_ms()));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => return,
        }
        let c = chain.clone();
        let forged = tokio::task::spawn_blocking(move || match idle_block_slots {
            Some(n) => c.forge_or_idle(next, n),
            None => c.forge(next),
        });
        match forged.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, slot = next, "forging failed"),
            Err(e) => tracing::error!(error = %e, slot = next, "forging task failed"),
        }
    }
}

impl DevnetHandle {
    /// N2N TCP address (chainsync headers, blockfetch, keepalive).
    pub fn n2n_addr(&self) -> SocketAddr {
        self.n2n_addr
    }

    /// N2C Unix socket path, if enabled.
    pub fn n2c_socket(&self) -> Option<&std::path::Path> {
        self.n2c_socket.as_deref()
    }

    /// N2C TCP address, if enabled.
    pub fn n2c_tcp_addr(&self) -> Option<SocketAddr> {
        self.n2c_tcp_addr
    }

    /// Control socket path, if enabled.
    pub fn control_socket(&self) -> Option<&std::path::Path> {
        self.control_socket.as_deref()
    }

    /// The HTTP API's address ([`DevnetConfig::http_addr`]), when served.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Its addresses as `ganglion-devnet up` prints them (one JSON object): `n2n`,
    /// `n2c_socket`, `n2c_tcp`, `control_socket`, `http` (the HTTP API's base URL, or null),
    /// `magic`, and `genesis` (the file given).
    pub fn addresses_json(&self, genesis: &std::path::Path) -> serde_json::Value {
        serde_json::json!({
            "n2n": self.n2n_addr().to_string(),
            "n2c_socket": self.n2c_socket().map(|p| p.display().to_string()),
            "n2c_tcp": self.n2c_tcp_addr().map(|a| a.to_string()),
            "control_socket": self.control_socket().map(|p| p.display().to_string()),
            "http": self.http_addr().map(|a| format!("http://{a}")),
            "magic": self.magic(),
            "genesis": genesis.display().to_string(),
        })
    }

    /// Network magic for handshakes.
    pub fn magic(&self) -> u64 {
        self.genesis.network_magic
    }

    /// The genesis.
    pub fn genesis(&self) -> &Genesis {
        &self.genesis
    }

    /// The chain (ledger, store, events).
    pub fn chain(&self) -> &Arc<Chain> {
        &self.chain
    }

    /// Current tip (`None` at origin).
    pub fn tip(&self) -> Option<BlockRef> {
        self.chain.tip()
    }

    /// Subscribe to chain events (subscribe *before* acting, then wait under a timeout).
    pub fn events(&self) -> broadcast::Receiver<ChainEvent> {
        self.chain.subscribe_events()
    }

    /// Validate and queue a transaction (same path as local-tx-submission).
    ///
    /// # Errors
    /// [`SubmitError`].
    pub async fn submit(&self, tx: Vec<u8>) -> Result<Hash<32>, SubmitError> {
        let chain = self.chain.clone();
        tokio::task::spawn_blocking(move || chain.submit(&tx))
            .await
            .map_err(|e| SubmitError::Internal(e.to_string()))?
    }

    /// Forge a block now (at the next slot) if anything is pending.
    ///
    /// # Errors
    /// [`ChainError`].
    pub async fn forge_now(&self) -> Result<Option<BlockRef>, ChainError> {
        let chain = self.chain.clone();
        tokio::task::spawn_blocking(move || {
            let slot = chain.next_block_slot();
            chain.forge(slot)
        })
        .await
        .map_err(|e| {
            ChainError::Task(if e.is_panic() {
                "panicked"
            } else {
                "cancelled"
            })
        })?
    }

    /// Inject a rollback of `n` blocks (n ≤ k); followers see `RollBackward`.
    ///
    /// # Errors
    /// [`ChainError`].
    pub async fn rollback(&self, n: u64) -> Result<Option<BlockRef>, ChainError> {
        let chain = self.chain.clone();
        tokio::task::spawn_blocking(move || chain.rollback(n))
            .await
            .map_err(|e| {
                ChainError::Task(if e.is_panic() {
                    "panicked"
                } else {
                    "cancelled"
                })
            })?
    }

    /// Stop the servers and the clock, and wait for open connections to drain.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        for p in [&self.n2c_socket, &self.control_socket]
            .into_iter()
            .flatten()
        {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for DevnetHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
