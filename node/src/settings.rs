//! The node's settings: one config root ([`Settings`], a section per reader), read from the
//! config file, then `GANGLION_*` environment overrides, which win, then checked once (a
//! `[provider]` or `[overlay]` value no node could run with is an error at load, naming the
//! key).
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
//! claim_window_ms = 3600000
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
//! [console]                           # the web console; off unless set
//! listen = "127.0.0.1:7080"
//! [gateway]                           # route /<service>/… to this node's services; off unless set
//! listen = "127.0.0.1:8080"
//! [storage]                           # provider: job content from a Kubo RPC too
//! kubo_rpc = "http://127.0.0.1:5001"
//! [indexer]                           # the chain index: sled (default) or PostgreSQL
//! store = "postgres://ganglion@localhost/ganglion"
//! listen = "127.0.0.1:3000"           # its read API over HTTP; off unless set
//! ```
//!
//! **Environment.** Every key of every section has a variable, `GANGLION_<SECTION>__<KEY>`
//! (read as a TOML value, else as a string; it replaces the file's value before the sections
//! are parsed), and the usual keys also short names applied last ([`Settings::apply_env`]).
//! The variables are documented for users in one place: `docs/provider-guide.md`
//! (the table after "The daemon's own keys").
//!
//! `ganglion node config --print` shows the effective config, each value with where it came
//! from ([`Sources`]).
//!
//! Every section rejects unknown keys, so a typo is a named error, never a silent default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ganglion_contracts::v2::params::Params;
use serde::{Deserialize, Serialize};

pub use ganglion_wallet::chain::N2cEndpoint;

use ganglion_dispatch::overlay::OverlayError;
use ganglion_dispatch::overlay::config::OverlayConfig;
use ganglion_market::limits::{LimitsError, ProviderLimits};

use crate::config::{GpusConfig, Network};
use crate::daemon::config::{
    BondSection, ConsoleSection, EngineSection, GatewaySection, IndexerSection, MetricsSection,
    P2pSection, StorageSection, ValidatorSection,
};

/// The short variables and the key each overrides (applied after the `__` layer).
const SHORT_VARS: [(&str, &str); 5] = [
    ("GANGLION_NETWORK", "network"),
    ("GANGLION_DATA_DIR", "data_dir"),
    ("GANGLION_N2C", "chain.n2c"),
    ("GANGLION_RPC_LISTEN", "rpc.listen"),
    ("GANGLION_METRICS_LISTEN", "metrics.listen"),
];

/// Where a config value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Nobody set it: the section's default.
    Default,
    /// The config file.
    File(PathBuf),
    /// An environment variable, named.
    Env(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File(p) => write!(f, "{}", p.display()),
            Self::Env(v) => f.write_str(v),
        }
    }
}

/// The source of each key set by the file or the environment, by dotted path
/// (`provider.max_concurrent_jobs`); every other key is [`Source::Default`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources(std::collections::BTreeMap<String, Source>);

impl Sources {
    /// Where the value at dotted `path` came from; a key inside a table set as a whole (an
    /// inline table, an array of tables) reports the table's source.
    pub fn of(&self, path: &str) -> Source {
        let mut p = path;
        loop {
            if let Some(s) = self.0.get(p) {
                return s.clone();
            }
            match p.rfind('.') {
                Some(i) => p = &p[..i],
                None => return Source::Default,
            }
        }
    }

    fn file(&mut self, table: &toml::Table, prefix: &str, path: &Path) {
        for (k, v) in table {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(t) => self.file(t, &key, path),
                _ => {
                    self.0.insert(key, Source::File(path.to_path_buf()));
                }
            }
        }
    }
}

/// Applies every `GANGLION_<SECTION>__<KEY>` variable of `vars` to `table` (see the module
/// docs) and records it in `sources`. Variables without `__` are not config keys (the short
/// names, `GANGLION_CONFIG`, …) and are left alone.
///
/// # Errors
/// [`Error::Env`] when a variable would set a key inside a value that is not a table.
fn env_layer(
    table: &mut toml::Table,
    vars: impl IntoIterator<Item = (String, String)>,
    sources: &mut Sources,
) -> Result<(), Error> {
    let mut vars: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| k.starts_with("GANGLION_") && k.contains("__"))
        .collect();
    vars.sort();
    for (var, raw) in vars {
        let path: Vec<String> = var["GANGLION_".len()..]
            .split("__")
            .map(str::to_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            return Err(Error::Env {
                var: var.clone(),
                value: raw,
                reason: "an empty key between `__`".into(),
            });
        }
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.clone()));
        let Some((last, sections)) = path.split_last() else {
            continue;
        };
        let mut at = &mut *table;
        for (depth, section) in sections.iter().enumerate() {
            let entry = at
                .entry(section.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            at = entry.as_table_mut().ok_or_else(|| Error::Env {
                var: var.clone(),
                value: raw.clone(),
                reason: format!("`{}` is not a section", path[..=depth].join(".")),
            })?;
        }
        at.insert(last.clone(), value);
        sources.0.insert(path.join("."), Source::Env(var));
    }
    Ok(())
}

/// Everything the daemon and the CLI read from config and environment: the one config root,
/// a section per reader.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The chain; default devnet.
    pub network: Network,
    /// The data directory; `None` = `$HOME/.ganglion/<network>`.
    pub data_dir: Option<PathBuf>,
    /// `[chain]`.
    pub chain: ChainSection,
    /// `[rpc]`.
    pub rpc: RpcSection,
    /// `[deployment]`: validator parameters (required on public networks).
    pub deployment: Option<Params>,
    /// `[gpus]`: inventory settings (detection roots, declared GPUs).
    pub gpus: GpusConfig,
    /// `[provider]`: pooling, price and job limits; absent = this node offers nothing.
    pub provider: Option<ProviderLimits>,
    /// `[overlay]`: the per-job private network; defaults when absent.
    pub overlay: OverlayConfig,
    /// `[p2p]`: listen addresses and bootstrap peers (`ganglion node run`).
    pub p2p: P2pSection,
    /// `[bond]`: the bond a provider posts at start when it has none.
    pub bond: Option<BondSection>,
    /// `[validator]`: the reference-script UTxO of the deployment.
    pub validator: Option<ValidatorSection>,
    /// `[engine]`: job engine timing.
    pub engine: EngineSection,
    /// `[metrics]`: the Prometheus endpoint (off unless `listen` is set).
    pub metrics: MetricsSection,
    /// `[console]`: the web console (off unless `listen` is set).
    pub console: ConsoleSection,
    /// `[gateway]`: the service gateway (off unless `listen` is set).
    pub gateway: GatewaySection,
    /// `[storage]`: a Kubo RPC a provider also fetches job content from (off unless set).
    pub storage: StorageSection,
    /// `[indexer]`: the chain index's store (sled by default) and its read API (off unless
    /// `listen` is set).
    pub indexer: IndexerSection,
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
    /// `127.0.0.1:7070`: localhost only.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
        }
    }
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
        var: String,
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
    /// The network's preset could not be built.
    #[error(transparent)]
    Preset(#[from] crate::network::Error),
    /// Parsed, but a `[provider]` value is impossible.
    #[error("config {path}: {source}")]
    Limits {
        /// The file (empty for text parsed directly).
        path: PathBuf,
        /// The rule broken (names the key).
        #[source]
        source: LimitsError,
    },
    /// Parsed, but an `[overlay]` value is impossible.
    #[error("config {path}: {source}")]
    Overlay {
        /// The file (empty for text parsed directly).
        path: PathBuf,
        /// The rule broken (names the key).
        #[source]
        source: OverlayError,
    },
}

impl Settings {
    /// Parses config text (no environment applied).
    ///
    /// # Errors
    /// [`Error::Parse`] with an empty path.
    pub fn from_toml(text: &str) -> Result<Self, Error> {
        Self::from_table(table_of(text, Path::new(""))?, Path::new(""))
    }

    fn from_table(table: toml::Table, path: &Path) -> Result<Self, Error> {
        let s: Self = table
            .try_into()
            .map_err(|e: toml::de::Error| Error::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        s.validate(path)?;
        Ok(s)
    }

    /// The checks serde cannot make: `[provider]` limits, `[overlay]` values, the
    /// `[storage] kubo_rpc` URL and the `[indexer] store`.
    fn validate(&self, path: &Path) -> Result<(), Error> {
        if let Some(limits) = &self.provider {
            limits.validate().map_err(|source| Error::Limits {
                path: path.to_path_buf(),
                source,
            })?;
        }
        self.overlay.validate().map_err(|source| Error::Overlay {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(endpoint) = &self.storage.kubo_rpc {
            ganglion_storage::pin::Kubo::new(endpoint).map_err(|e| Error::Parse {
                path: path.to_path_buf(),
                message: format!("storage.kubo_rpc: {e} (e.g. \"http://127.0.0.1:5001\")"),
            })?;
        }
        self.indexer
            .store_spec(PathBuf::new())
            .map_err(|e| Error::Parse {
                path: path.to_path_buf(),
                message: format!("indexer.store: {e}"),
            })?;
        Ok(())
    }

    /// Loads the config file at `path` (defaults when `None`), then applies the process
    /// environment.
    ///
    /// # Errors
    /// [`Error::Read`], [`Error::Parse`], [`Error::Env`].
    pub fn load(path: Option<&Path>) -> Result<Self, Error> {
        Ok(Self::load_with_sources(path)?.0)
    }

    /// [`Settings::load`], and where each value came from (`ganglion node config --print`).
    ///
    /// # Errors
    /// As [`Settings::load`].
    pub fn load_with_sources(path: Option<&Path>) -> Result<(Self, Sources), Error> {
        Self::layered(path, std::env::vars())
    }

    /// The config file at `path` (none: all defaults), then the `__` variables of `vars`,
    /// then the short ones.
    fn layered(
        path: Option<&Path>,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(Self, Sources), Error> {
        let vars: Vec<(String, String)> = vars.into_iter().collect();
        let mut sources = Sources::default();
        let (mut table, file, text) = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| Error::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                let table = table_of(&text, p)?;
                sources.file(&table, "", p);
                (table, p.to_path_buf(), text)
            }
            None => (toml::Table::new(), PathBuf::new(), String::new()),
        };
        env_layer(&mut table, vars.iter().cloned(), &mut sources)?;
        let mut s = Self::from_table(table, &file).map_err(|e| match e {
            // Serde lost the position (the file went through a table first): find the key.
            Error::Parse { path: p, message } => Error::Parse {
                path: p,
                message: match line_of_unknown_key(&text, &message) {
                    Some(n) => format!("line {n}: {message}"),
                    None => message,
                },
            },
            e => e,
        })?;
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        s.apply_env(get)?;
        for (var, key) in SHORT_VARS {
            if get(var).is_some() {
                sources
                    .0
                    .insert(key.to_string(), Source::Env(var.to_string()));
            }
        }
        Ok((s, sources))
    }

    /// The effective config as TOML, every key with its [`Source`] as a trailing comment
    /// (`# default`, `# <file>`, `# GANGLION_…`); unset optional keys are left out.
    ///
    /// # Errors
    /// [`Error::Parse`] when a section cannot be written as TOML (not expected).
    pub fn to_annotated_toml(&self, sources: &Sources) -> Result<String, Error> {
        let to_table = |v: Result<toml::Table, toml::ser::Error>| {
            v.map_err(|e| Error::Parse {
                path: PathBuf::new(),
                message: e.to_string(),
            })
        };
        let table = to_table(toml::Table::try_from(self))?;
        let mut out = String::new();
        let mut sections = Vec::new();
        for (k, v) in &table {
            match v {
                toml::Value::Table(t) => sections.push((k.clone(), t)),
                _ => annotate(&mut out, k, k, v, sources),
            }
        }
        for (name, t) in sections {
            write_section(&mut out, &name, t, sources);
        }
        Ok(out)
    }

    /// Applies `GANGLION_*` overrides read through `var` (the process environment in
    /// [`Settings::load`]; a map in tests).
    ///
    /// # Errors
    /// [`Error::Env`] for a value that does not parse.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), Error> {
        if let Some(v) = var("GANGLION_NETWORK") {
            self.network = toml::Value::String(v.clone())
                .try_into()
                .map_err(|_| Error::Env {
                    var: "GANGLION_NETWORK".into(),
                    value: v,
                    reason: "expected devnet, preview, preprod or mainnet".into(),
                })?;
        }
        if let Some(v) = var("GANGLION_DATA_DIR") {
            self.data_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = var("GANGLION_N2C") {
            self.chain.n2c = Some(v);
        }
        if let Some(v) = var("GANGLION_RPC_LISTEN") {
            self.rpc.listen = v
                .parse()
                .map_err(|e: std::net::AddrParseError| Error::Env {
                    var: "GANGLION_RPC_LISTEN".into(),
                    value: v.clone(),
                    reason: e.to_string(),
                })?;
        }
        if let Some(v) = var("GANGLION_METRICS_LISTEN") {
            self.metrics.listen = if v == "off" {
                None
            } else {
                Some(
                    v.parse()
                        .map_err(|e: std::net::AddrParseError| Error::Env {
                            var: "GANGLION_METRICS_LISTEN".into(),
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
        self.network
    }

    /// The data dir: configured (a leading `~` is `$HOME`, as in a shell), or
    /// `$HOME/.ganglion/<network>`.
    ///
    /// # Errors
    /// [`Error::NoDataDir`].
    pub fn data_dir(&self) -> Result<PathBuf, Error> {
        match &self.data_dir {
            // `~/…` is under HOME, as a shell would expand it (sample configs use it).
            Some(d) if d.starts_with("~") => {
                let home = std::env::var_os("HOME").ok_or(Error::NoDataDir)?;
                Ok(PathBuf::from(home).join(d.strip_prefix("~").unwrap_or(d)))
            }
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

    /// These settings with every default that depends on where the node runs filled in:
    /// `data_dir` (from `HOME` and the network) and every `[engine]` key (the engine's defaults
    /// and the network preset's confirmation depth). What `ganglion node config --print`
    /// shows; keys with no default (`[chain] n2c`, `[metrics] listen`, …) stay unset.
    ///
    /// # Errors
    /// [`Error::NoDataDir`]; [`Error::Preset`] when the network's preset cannot be built.
    pub fn effective(&self) -> Result<Self, Error> {
        let preset = crate::network::NetworkPreset::of(self.network());
        Ok(Self {
            data_dir: Some(self.data_dir()?),
            engine: self.engine.filled(&preset),
            ..self.clone()
        })
    }

    /// The N2C endpoint: `host:port` when it parses as a socket address, else a socket path.
    ///
    /// # Errors
    /// [`Error::NoN2c`].
    pub fn n2c(&self) -> Result<N2cEndpoint, Error> {
        let s = self.chain.n2c.as_deref().ok_or(Error::NoN2c)?;
        Ok(match s.parse::<SocketAddr>() {
            Ok(a) => N2cEndpoint::Tcp(a),
            Err(_) => N2cEndpoint::Unix(PathBuf::from(s)),
        })
    }
}

/// The 1-based line of `text` where the key a serde "unknown field `k`" `message` names is
/// written (`k = …`, `[k]`, `[[k]]` or `[section.k]`), if the message is one.
fn line_of_unknown_key(text: &str, message: &str) -> Option<usize> {
    let key = message.strip_prefix("unknown field `")?.split('`').next()?;
    text.lines()
        .position(|l| {
            let l = l.trim();
            let header = l.trim_start_matches('[').trim_end_matches(']');
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
                || (l.starts_with('[') && header.rsplit('.').next() == Some(key))
        })
        .map(|i| i + 1)
}

/// `text` (the file at `path`) as a TOML table.
fn table_of(text: &str, path: &Path) -> Result<toml::Table, Error> {
    toml::from_str(text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn annotate(out: &mut String, key: &str, path: &str, v: &toml::Value, sources: &Sources) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "{key} = {v}  # {}", sources.of(path));
}

fn write_section(out: &mut String, name: &str, t: &toml::Table, sources: &Sources) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "\n[{name}]");
    if t.is_empty() {
        let _ = writeln!(out, "# nothing set, and no key of it has a default");
    }
    let mut nested = Vec::new();
    for (k, v) in t {
        match v {
            toml::Value::Table(inner) => nested.push((format!("{name}.{k}"), inner)),
            _ => annotate(out, k, &format!("{name}.{k}"), v, sources),
        }
    }
    for (n, inner) in nested {
        write_section(out, &n, inner, sources);
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
claim_window_ms = 7
[gpus]
sysfs_root = "/sys"
"#;

    #[test]
    fn one_root_holds_every_section_of_the_file() {
        let s = Settings::from_toml(FILE).expect("valid");
        assert_eq!(s.network(), Network::Preprod);
        assert_eq!(s.data_dir().expect("dir"), PathBuf::from("/srv/ganglion"));
        assert_eq!(
            s.n2c().expect("n2c"),
            N2cEndpoint::Unix("/run/node.socket".into())
        );
        assert_eq!(s.rpc.listen.port(), 9000);
        let d = s.deployment.expect("deployment");
        assert_eq!(d.ntx.name, b"NTX".to_vec());
        assert_eq!(d.claim_window_ms, 7);
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line_and_every_valid_key() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("typo.toml");
        std::fs::write(
            &path,
            "network = \"devnet\"\n\n[provder]\nprice_ntx_per_gpu_hour = 1\n",
        )
        .expect("write");
        let e = Settings::layered(Some(&path), [])
            .expect_err("typo")
            .to_string();
        assert!(e.contains("line 3: unknown field `provder`"), "{e}");
        assert!(e.contains("`provider`") && e.contains("`metrics`"), "{e}");
        std::fs::write(
            &path,
            "[provider]\nprice_ntx_per_gpu_hour = 1\nmax_jobs = 2\n",
        )
        .expect("write");
        let e = Settings::layered(Some(&path), [])
            .expect_err("typo")
            .to_string();
        assert!(e.contains("line 3: unknown field `max_jobs`"), "{e}");
        assert!(e.contains("`max_concurrent_jobs`"), "{e}");
    }

    #[test]
    fn a_kubo_rpc_must_be_a_url() {
        let s = Settings::from_toml("[storage]\nkubo_rpc = \"http://127.0.0.1:5001\"\n")
            .expect("valid");
        assert_eq!(s.storage.kubo_rpc.as_deref(), Some("http://127.0.0.1:5001"));
        let e = Settings::from_toml("[storage]\nkubo_rpc = \"not a url\"\n")
            .expect_err("refused")
            .to_string();
        assert!(e.contains("storage.kubo_rpc"), "{e}");
        assert_eq!(Settings::default().storage.kubo_rpc, None);
    }

    #[test]
    fn a_leading_tilde_in_data_dir_is_home() {
        let s = Settings::from_toml("data_dir = \"~/.ganglion/orchestrator\"").expect("valid");
        let home = std::env::var_os("HOME").expect("HOME is set in tests");
        assert_eq!(
            s.data_dir().expect("dir"),
            PathBuf::from(home).join(".ganglion/orchestrator")
        );
        let s = Settings::from_toml("data_dir = \"/srv/~x\"").expect("valid");
        assert_eq!(s.data_dir().expect("dir"), PathBuf::from("/srv/~x"));
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
        assert_eq!(s.rpc.listen.port(), 9999);
        assert_eq!(s.metrics.listen.map(|a| a.port()), Some(9464));
        s.apply_env(|k| (k == "GANGLION_METRICS_LISTEN").then(|| "off".to_string()))
            .expect("off");
        assert_eq!(s.metrics.listen, None);
    }

    #[test]
    fn bad_environment_values_are_named() {
        let mut s = Settings::from_toml("").expect("empty is valid");
        let e = s
            .apply_env(|k| (k == "GANGLION_NETWORK").then(|| "moonnet".to_string()))
            .expect_err("unknown network");
        assert!(
            matches!(&e, Error::Env { var, .. } if var == "GANGLION_NETWORK"),
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

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_key_has_a_variable_typed_as_toml_and_named_as_its_source() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("node.toml");
        std::fs::write(&file, FILE).expect("write");
        let (s, src) = Settings::layered(
            Some(&file),
            vars(&[
                ("GANGLION_OVERLAY__MTU", "1380"),
                ("GANGLION_OVERLAY__DIRECT", "true"),
                ("GANGLION_P2P__BOOTSTRAP", r#"["/ip4/10.0.0.1/tcp/4001"]"#),
                ("GANGLION_CHAIN__N2C", "/run/other.socket"),
                ("GANGLION_RPC_LISTEN", "127.0.0.1:9999"),
                ("GANGLION_CONFIG", "/not/a/key"),
            ]),
        )
        .expect("layers");
        assert_eq!(s.overlay.mtu, Some(1380));
        assert!(s.overlay.direct);
        assert_eq!(s.p2p.bootstrap.len(), 1);
        assert_eq!(
            s.n2c().expect("n2c"),
            N2cEndpoint::Unix("/run/other.socket".into())
        );
        // The short name is applied after the `__` layer.
        assert_eq!(s.rpc.listen.port(), 9999);
        assert_eq!(
            src.of("overlay.mtu"),
            Source::Env("GANGLION_OVERLAY__MTU".into())
        );
        assert_eq!(
            src.of("rpc.listen"),
            Source::Env("GANGLION_RPC_LISTEN".into())
        );
        assert_eq!(src.of("network"), Source::File(file.clone()));
        assert_eq!(src.of("deployment.ntx.policy"), Source::File(file.clone()));
        assert_eq!(src.of("engine.confirmation_depth"), Source::Default);

        let text = s.to_annotated_toml(&src).expect("printable");
        assert!(
            text.contains("mtu = 1380  # GANGLION_OVERLAY__MTU"),
            "{text}"
        );
        assert!(
            text.contains(&format!("network = \"preprod\"  # {}", file.display())),
            "{text}"
        );
        assert!(text.contains("[engine]"), "{text}");
        // What it prints parses back to the same settings.
        let back = Settings::from_toml(&text).expect("the printout is a config");
        assert_eq!(back, s);
    }

    #[test]
    fn a_variable_for_an_unknown_key_or_a_wrong_type_is_the_files_error() {
        let e = Settings::layered(
            None,
            vars(&[("GANGLION_PROVIDER__MAX_CONCURENT_JOBS", "2")]),
        )
        .expect_err("typo");
        assert!(e.to_string().contains("max_concurent_jobs"), "{e}");
        let e = Settings::layered(None, vars(&[("GANGLION_OVERLAY__MTU", "big")]))
            .expect_err("not a number");
        assert!(e.to_string().contains("mtu"), "{e}");
        let e = Settings::layered(None, vars(&[("GANGLION_NETWORK__X", "1")]))
            .expect_err("network is not a section");
        assert!(e.to_string().contains("network"), "{e}");
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("node.toml");
        std::fs::write(&file, FILE).expect("write");
        let e = Settings::layered(Some(&file), vars(&[("GANGLION_NETWORK__X", "1")]))
            .expect_err("the file's network is a string");
        assert!(e.to_string().contains("GANGLION_NETWORK__X"), "{e}");
    }

    #[test]
    fn the_default_rpc_listen_address_is_localhost() {
        let s = Settings::from_toml("").expect("empty");
        assert!(s.rpc.listen.ip().is_loopback());
        assert_eq!(s.rpc.listen.to_string(), "127.0.0.1:7070");
        assert!(matches!(s.n2c(), Err(Error::NoN2c)));
    }

    #[test]
    fn the_printed_config_shows_the_engine_defaults_the_node_runs_with() {
        let text = "data_dir = \"/srv/g\"\n[engine]\npoll_ms = 750\n";
        let file = tempfile::NamedTempFile::new().expect("temp");
        std::fs::write(file.path(), text).expect("write");
        let (s, sources) = Settings::layered(Some(file.path()), vars(&[])).expect("loads");
        let effective = s.effective().expect("devnet preset");
        let d = crate::job::EngineConfig::default();
        // Set in the file: kept, with its source.
        assert_eq!(effective.engine.poll_ms, Some(750));
        // Unset: the value the engine runs with (the devnet preset's depth, the defaults).
        let preset = crate::network::NetworkPreset::of(Network::Devnet);
        assert_eq!(
            effective.engine.confirmation_depth,
            Some(preset.confirmation_depth)
        );
        assert_eq!(effective.engine.validity_slots, Some(d.validity_slots));
        assert_eq!(effective.engine.missed_receipts, Some(d.missed_receipts));
        let printed = effective.to_annotated_toml(&sources).expect("toml");
        assert!(printed.contains("poll_ms = 750  # "), "{printed}");
        assert!(
            printed.contains(&format!("validity_slots = {}  # default", d.validity_slots)),
            "{printed}"
        );
        assert!(printed.contains("receipt_interval_ms = "), "{printed}");
        assert!(printed.contains("data_dir = \"/srv/g\"  # "), "{printed}");
    }
}
