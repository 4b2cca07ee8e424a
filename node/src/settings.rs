//! The daemon's settings: the config file ([`crate::config::NodeConfig`] sections plus the
//! daemon's own), then `GANGLION_*` environment overrides, which win.
//!
//! ```toml
//! network = "devnet"                  # devnet | preview | preprod | mainnet
//! data_dir = "/var/lib/ganglion"      # default: $HOME/.ganglion/<network>
//!
//! [chain]
//! n2c = "/run/cardano/node.socket"    # a Unix socket path, or host:port for N2C over TCP
//!
//! [rpc]
//! listen = "127.0.0.1:7070"           # localhost by default
//!
//! [deployment]                        # required on public networks (see network.rs)
//! ntx = { policy = "<56 hex>", name = "<hex>" }
//! min_bond_per_gpu = 100000000
//! unbonding_delay_ms = 604800000
//! slash_bps = 2000
//!
//! [gpus]                              # ... the sections of config.rs
//!
//! [p2p]                               # `ganglion node run` only: crate::daemon::config
//! listen = ["/ip4/0.0.0.0/tcp/0"]     # multiaddrs
//! bootstrap = []                      # multiaddrs ending in /p2p/<peer id>
//! [validator]                         # the reference-script UTxO of the deployment
//! reference = { tx_hash = "<64 hex>", index = 0 }
//! [bond]                              # provider: posted at start when none is live
//! stake_ntx = 5000000                 # NTX base units
//! [engine]                            # job engine timing (confirmation_depth in blocks, ..._ms)
//! confirmation_depth = 0
//! [metrics]                           # GET /metrics (Prometheus); off unless set
//! listen = "127.0.0.1:9464"
//! ```
//!
//! | variable | overrides |
//! |---|---|
//! | `GANGLION_NETWORK` | `network` |
//! | `GANGLION_DATA_DIR` | `data_dir` |
//! | `GANGLION_N2C` | `chain.n2c` |
//! | `GANGLION_RPC_LISTEN` | `rpc.listen` |
//! | `GANGLION_METRICS_LISTEN` | `metrics.listen` (`off` disables it) |
//!
//! The daemon's keys are split off the file before the rest is handed to `NodeConfig`, so
//! both halves keep rejecting unknown keys.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ganglion_contracts::params::Params;
use serde::{Deserialize, Serialize};

use crate::config::{Network, NodeConfig};

/// Top-level keys owned by this module.
const OWN_KEYS: [&str; 9] = [
    "data_dir",
    "chain",
    "rpc",
    "deployment",
    "p2p",
    "bond",
    "validator",
    "engine",
    "metrics",
];

/// Default JSON-RPC listen address (localhost only).
pub const DEFAULT_RPC_LISTEN: &str = "127.0.0.1:7070";

/// Everything the daemon and the CLI read from config and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The sections of [`NodeConfig`] (network, GPUs, ...).
    pub node: NodeConfig,
    /// The daemon's own sections.
    pub daemon: DaemonSections,
}

/// The daemon's keys of the config file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonSections {
    /// The data directory; `None` = `$HOME/.ganglion/<network>`.
    pub data_dir: Option<PathBuf>,
    /// `[chain]`.
    pub chain: ChainSection,
    /// `[rpc]`.
    pub rpc: RpcSection,
    /// `[deployment]`: validator parameters (required on public networks).
    pub deployment: Option<Params>,
    /// `[p2p]`: listen addresses and bootstrap peers (`ganglion node run`).
    pub p2p: crate::daemon::config::P2pSection,
    /// `[bond]`: the bond a provider posts at start when it has none.
    pub bond: Option<crate::daemon::config::BondSection>,
    /// `[validator]`: the reference-script UTxO of the deployment.
    pub validator: Option<crate::daemon::config::ValidatorSection>,
    /// `[engine]`: job engine timing.
    pub engine: crate::daemon::config::EngineSection,
    /// `[metrics]`: the Prometheus endpoint (off unless `listen` is set).
    pub metrics: crate::daemon::config::MetricsSection,
}

/// `[chain]`: how to reach a node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChainSection {
    /// N2C endpoint: a Unix socket path, or `host:port` for N2C over TCP (the devnet serves
    /// both).
    pub n2c: Option<String>,
}

/// `[rpc]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpcSection {
    /// Listen address of the JSON-RPC server (HTTP and WebSocket on one port).
    pub listen: SocketAddr,
}

impl Default for RpcSection {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
        }
    }
}

/// Where the N2C endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum N2cEndpoint {
    /// A Unix socket.
    Unix(PathBuf),
    /// TCP (the devnet's N2C port).
    Tcp(SocketAddr),
}

/// Why settings could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key or value does not fit the schema.
    #[error("config {path}: {message}")]
    Parse {
        /// The file (empty for text parsed directly).
        path: PathBuf,
        /// TOML's message (names the key, and the line where known).
        message: String,
    },
    /// An environment variable has a value that does not parse.
    #[error("environment variable {var}={value:?}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// No data dir configured and `$HOME` is unset.
    #[error("no data dir: set data_dir, GANGLION_DATA_DIR or HOME")]
    NoDataDir,
    /// No N2C endpoint configured.
    #[error("no chain connection: set [chain] n2c or GANGLION_N2C")]
    NoN2c,
}

impl Settings {
    /// Parses config text (no environment applied).
    ///
    /// # Errors
    /// [`Error::Parse`] with an empty path.
    pub fn from_toml(text: &str) -> Result<Self, Error> {
        Self::parse(text, Path::new(""))
    }

    fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        let parse_err = |message: String| Error::Parse {
            path: path.to_path_buf(),
            message,
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let mut own = toml::Table::new();
        for k in OWN_KEYS {
            if let Some(v) = table.remove(k) {
                own.insert(k.to_string(), v);
            }
        }
        let node: NodeConfig = table.try_into().map_err(|e| parse_err(e.to_string()))?;
        let daemon: DaemonSections = own.try_into().map_err(|e| parse_err(e.to_string()))?;
        Ok(Self { node, daemon })
    }

    /// Loads the config file at `path` (defaults when `None`), then applies the process
    /// environment.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Parse`], [`Error::Env`].
    pub fn load(path: Option<&Path>) -> Result<Self, Error> {
        let mut s = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| Error::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                Self::parse(&text, p)?
            }
            None => Self {
                node: NodeConfig::default(),
                daemon: DaemonSections::default(),
            },
        };
        s.apply_env(|k| std::env::var(k).ok())?;
        Ok(s)
    }

    /// Applies `GANGLION_*` overrides read through `var` (the process environment in
    /// [`Settings::load`]; a map in tests).
    ///
    /// # Errors
    /// [`Error::Env`] for a value that does not parse.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), Error> {
        if let Some(v) = var("GANGLION_NETWORK") {
            self.node.network =
                toml::Value::String(v.clone())
                    .try_into()
                    .map_err(|_| Error::Env {
                        var: "GANGLION_NETWORK",
                        value: v,
                        reason: "expected devnet, preview, preprod or mainnet".into(),
                    })?;
        }
        if let Some(v) = var("GANGLION_DATA_DIR") {
            self.daemon.data_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = var("GANGLION_N2C") {
            self.daemon.chain.n2c = Some(v);
        }
        if let Some(v) = var("GANGLION_RPC_LISTEN") {
            self.daemon.rpc.listen =
                v.parse()
                    .map_err(|e: std::net::AddrParseError| Error::Env {
                        var: "GANGLION_RPC_LISTEN",
                        value: v.clone(),
                        reason: e.to_string(),
                    })?;
        }
        if let Some(v) = var("GANGLION_METRICS_LISTEN") {
            self.daemon.metrics.listen = if v == "off" {
                None
            } else {
                Some(
                    v.parse()
                        .map_err(|e: std::net::AddrParseError| Error::Env {
                            var: "GANGLION_METRICS_LISTEN",
                            value: v.clone(),
                            reason: format!("{e} (an address, or `off`)"),
                        })?,
                )
            };
        }
        Ok(())
    }

    /// The network.
    pub fn network(&self) -> Network {
        self.node.network
    }

    /// The data dir: configured, or `$HOME/.ganglion/<network>`.
    ///
    /// # Errors
    /// [`Error::NoDataDir`].
    pub fn data_dir(&self) -> Result<PathBuf, Error> {
        match &self.daemon.data_dir {
            Some(d) => Ok(d.clone()),
            None => std::env::var_os("HOME")
                .map(|h| {
                    PathBuf::from(h)
                        .join(".ganglion")
                        .join(self.network().to_string())
                })
                .ok_or(Error::NoDataDir),
        }
    }

    /// The N2C endpoint: `host:port` when it parses as a socket address, else a socket path.
    ///
    /// # Errors
    /// [`Error::NoN2c`].
    pub fn n2c(&self) -> Result<N2cEndpoint, Error> {
        let s = self.daemon.chain.n2c.as_deref().ok_or(Error::NoN2c)?;
        Ok(match s.parse::<SocketAddr>() {
            Ok(a) => N2cEndpoint::Tcp(a),
            Err(_) => N2cEndpoint::Unix(PathBuf::from(s)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const FILE: &str = r#"
network = "preprod"
data_dir = "/srv/ganglion"
[chain]
n2c = "/run/node.socket"
[rpc]
listen = "127.0.0.1:9000"
[deployment]
ntx = { policy = "00000000000000000000000000000000000000000000000000000001", name = "4e5458" }
min_bond_per_gpu = 5
unbonding_delay_ms = 6
slash_bps = 7
[gpus]
sysfs_root = "/sys"
"#;

    #[test]
    fn file_sections_are_split_between_node_and_daemon() {
        let s = Settings::from_toml(FILE).expect("valid");
        assert_eq!(s.network(), Network::Preprod);
        assert_eq!(s.data_dir().expect("dir"), PathBuf::from("/srv/ganglion"));
        assert_eq!(
            s.n2c().expect("n2c"),
            N2cEndpoint::Unix("/run/node.socket".into())
        );
        assert_eq!(s.daemon.rpc.listen.port(), 9000);
        let d = s.daemon.deployment.expect("deployment");
        assert_eq!(d.ntx.name, b"NTX".to_vec());
        assert_eq!(d.slash_bps, 7);
    }

    #[test]
    fn environment_overrides_win_over_the_file() {
        let mut s = Settings::from_toml(FILE).expect("valid");
        let env: HashMap<&str, &str> = [
            ("GANGLION_NETWORK", "devnet"),
            ("GANGLION_DATA_DIR", "/tmp/g"),
            ("GANGLION_N2C", "127.0.0.1:3001"),
            ("GANGLION_RPC_LISTEN", "127.0.0.1:9999"),
            ("GANGLION_METRICS_LISTEN", "127.0.0.1:9464"),
        ]
        .into();
        s.apply_env(|k| env.get(k).map(|v| v.to_string()))
            .expect("overrides");
        assert_eq!(s.network(), Network::Devnet);
        assert_eq!(s.data_dir().expect("dir"), PathBuf::from("/tmp/g"));
        assert_eq!(
            s.n2c().expect("n2c"),
            N2cEndpoint::Tcp("127.0.0.1:3001".parse().expect("addr"))
        );
        assert_eq!(s.daemon.rpc.listen.port(), 9999);
        assert_eq!(s.daemon.metrics.listen.map(|a| a.port()), Some(9464));
        s.apply_env(|k| (k == "GANGLION_METRICS_LISTEN").then(|| "off".to_string()))
            .expect("off");
        assert_eq!(s.daemon.metrics.listen, None);
    }

    #[test]
    fn bad_environment_values_are_named() {
        let mut s = Settings::from_toml("").expect("empty is valid");
        let e = s
            .apply_env(|k| (k == "GANGLION_NETWORK").then(|| "moonnet".to_string()))
            .expect_err("unknown network");
        assert!(
            matches!(
                e,
                Error::Env {
                    var: "GANGLION_NETWORK",
                    ..
                }
            ),
            "{e}"
        );
        let e = s
            .apply_env(|k| (k == "GANGLION_RPC_LISTEN").then(|| "localhost".to_string()))
            .expect_err("not an address");
        assert!(e.to_string().contains("GANGLION_RPC_LISTEN"), "{e}");
        let e = s
            .apply_env(|k| (k == "GANGLION_METRICS_LISTEN").then(|| "9464".to_string()))
            .expect_err("not an address");
        assert!(e.to_string().contains("GANGLION_METRICS_LISTEN"), "{e}");
    }

    #[test]
    fn bad_toml_and_unknown_keys_are_named_errors() {
        let e = Settings::from_toml("network = ").expect_err("syntax");
        assert!(matches!(e, Error::Parse { .. }), "{e}");
        let e = Settings::from_toml("[rpc]\nlisten = \"127.0.0.1:1\"\nlsiten = 3\n")
            .expect_err("typo in a daemon section");
        assert!(e.to_string().contains("lsiten"), "{e}");
        let e = Settings::from_toml("netwrk = \"devnet\"").expect_err("typo at the top");
        assert!(e.to_string().contains("netwrk"), "{e}");
        let e = Settings::from_toml("network = \"moonnet\"").expect_err("bad value");
        assert!(e.to_string().contains("moonnet"), "{e}");
    }

    #[test]
    fn the_default_rpc_listen_address_is_localhost() {
        let s = Settings::from_toml("").expect("empty");
        assert!(s.daemon.rpc.listen.ip().is_loopback());
        assert_eq!(s.daemon.rpc.listen.to_string(), DEFAULT_RPC_LISTEN);
        assert!(matches!(s.n2c(), Err(Error::NoN2c)));
    }
}
