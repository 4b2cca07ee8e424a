//! The config sections only `ganglion node run` reads: `[p2p]`, `[bond]`, `[validator]`,
//! `[engine]`, `[metrics]`, `[console]` and `[storage]` (parsed by [`crate::settings`],
//! which refuses unknown keys in each).
//!
//! ```toml
//! [p2p]
//! listen = ["/ip4/0.0.0.0/tcp/7071"]          # multiaddrs; port 0 = any free port
//! bootstrap = ["/ip4/10.0.0.5/tcp/7071/p2p/12D3KooW…"]   # peers dialled at start
//! relay_server = false                         # serve as a circuit relay (public nodes)
//! relay_via_bootstrap = false                  # behind a NAT: be reachable through them
//!
//! [bond]                                       # provider only: posted at start when the chain
//! stake_ntx = 5000000                          # has no live bond for this key; NTX base units
//! gpus = 1                                     # GPUs the bond backs (default: all pooled)
//!
//! [validator]                                  # where the validator's reference script is
//! reference = { tx_hash = "<64 hex>", index = 0 }   # optional: else found at the validator's address
//!
//! [engine]
//! confirmation_depth = 0                       # blocks; default the network preset's
//! poll_ms = 250                                # ms between passes over unfinished jobs
//! validity_slots = 120                         # slots a lock/assign stays valid
//! receipt_interval_ms = 10000                  # ms between receipts this node's locks ask for
//! missed_receipts = 3                          # intervals without a receipt before a provider stops
//!
//! [metrics]                                    # off unless set: GET /metrics (OpenMetrics)
//! listen = "127.0.0.1:9464"                    # port 0 = any free port (see node.json)
//!
//! [console]                                    # off unless set: the web console
//! listen = "127.0.0.1:7080"                    # port 0 = any free port (see node.json)
//!
//! [storage]                                    # provider: a second source for job content
//! kubo_rpc = "http://127.0.0.1:5001"           # a Kubo RPC (no /api/v0); off unless set
//! ```

use ganglion_contracts::tx::TxoRef;
use libp2p::Multiaddr;
use serde::{Deserialize, Serialize};

/// `[p2p]`: where the swarm listens and whom it dials first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct P2pSection {
    /// Listen multiaddrs (default `/ip4/0.0.0.0/tcp/0`: every interface, any free port).
    #[serde(with = "multiaddrs")]
    pub listen: Vec<Multiaddr>,
    /// Bootstrap peers, each ending in `/p2p/<peer id>`; dialled at start and given to
    /// Kademlia.
    #[serde(with = "multiaddrs")]
    pub bootstrap: Vec<Multiaddr>,
    /// Serve as a circuit-relay v2 relay (default false): for a node with a public address.
    /// Its bound listen addresses are then declared external (a relay only serves
    /// reservations for a confirmed address), so list only reachable ones in `listen`.
    pub relay_server: bool,
    /// For a node behind a NAT (default false): reserve a relay slot on every bootstrap peer
    /// and reach peers without a direct route through them; DCUtR then tries a direct
    /// upgrade ([`ganglion_p2p::relayed`]). The bootstrap peers must run with `relay_server`.
    pub relay_via_bootstrap: bool,
}

impl Default for P2pSection {
    fn default() -> Self {
        Self {
            listen: vec!["/ip4/0.0.0.0/tcp/0".parse().expect("literal multiaddr")],
            bootstrap: Vec::new(),
            relay_server: false,
            relay_via_bootstrap: false,
        }
    }
}

/// `[bond]`: the bond a provider posts at start when the chain holds no live bond naming this
/// node's payment key, attest key and peer id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BondSection {
    /// NTX base units staked (at least the deployment's `min_bond_per_gpu × gpus`).
    pub stake_ntx: u64,
    /// GPUs the bond backs; absent = every pooled GPU.
    #[serde(default)]
    pub gpus: Option<u64>,
}

/// `[validator]`: the deployed validator's reference-script UTxO (its parameters are
/// `[deployment]`, or the network preset's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorSection {
    /// The UTxO at the script address holding the reference script.
    pub reference: TxoRef,
}

/// `[engine]`: job engine timing (see [`crate::job::EngineConfig`]; absent keys keep its
/// defaults, `confirmation_depth` the network preset's).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    /// Blocks on top of an event before acting on it. The devnet forges only when a
    /// transaction is pending, so a devnet node runs with 0.
    pub confirmation_depth: Option<u64>,
    /// Milliseconds between passes over unfinished jobs.
    pub poll_ms: Option<u64>,
    /// Validity window of lock transactions, slots.
    pub validity_slots: Option<u64>,
    /// The receipt interval this node's locks ask for, ms (escrow v2; default 10 000).
    pub receipt_interval_ms: Option<u64>,
    /// Devnet only, for `ganglion devnet demo --scenario cheating-provider`: this provider
    /// claims this many times the GPU-ms it measured, past the receipts' bound (a cheating
    /// provider; the validator refuses its claim). Ignored, with a warning, on other networks.
    pub overclaim_factor: Option<u64>,
    /// Receipt intervals without a new receipt after which a provider stops its containers
    /// (default 3).
    pub missed_receipts: Option<u32>,
}

impl EngineSection {
    /// The engine's timing: these keys over [`crate::job::EngineConfig`]'s defaults, the
    /// confirmation depth over `preset`'s. `overclaim_factor` counts on the devnet only (on
    /// another network it is ignored with a warning); declared GPUs are allowed on the
    /// devnet only.
    pub fn resolve(&self, preset: &crate::network::NetworkPreset) -> crate::job::EngineConfig {
        use crate::config::Network;
        let d = crate::job::EngineConfig::default();
        crate::job::EngineConfig {
            depth: self.confirmation_depth.unwrap_or(preset.confirmation_depth),
            poll: self
                .poll_ms
                .map_or(d.poll, std::time::Duration::from_millis),
            validity_slots: self.validity_slots.unwrap_or(d.validity_slots),
            receipt_interval_ms: self.receipt_interval_ms.unwrap_or(d.receipt_interval_ms),
            missed_receipts: self.missed_receipts.unwrap_or(d.missed_receipts),
            overclaim_factor: match self.overclaim_factor {
                Some(f) if preset.network == Network::Devnet => f,
                Some(_) => {
                    tracing::warn!(
                        "[engine] overclaim_factor is for the devnet demo only: ignored"
                    );
                    1
                }
                None => d.overclaim_factor,
            },
            allow_declared_gpus: preset.network == Network::Devnet,
            ..d
        }
    }

    /// Every key set to the value the engine runs with ([`EngineSection::resolve`]), for
    /// `ganglion node config --print`.
    pub fn filled(&self, preset: &crate::network::NetworkPreset) -> Self {
        let c = self.resolve(preset);
        Self {
            confirmation_depth: Some(c.depth),
            poll_ms: Some(u64::try_from(c.poll.as_millis()).unwrap_or(u64::MAX)),
            validity_slots: Some(c.validity_slots),
            receipt_interval_ms: Some(c.receipt_interval_ms),
            overclaim_factor: Some(c.overclaim_factor),
            missed_receipts: Some(c.missed_receipts),
        }
    }
}

/// `[metrics]`: the Prometheus endpoint ([`crate::metrics`]). Off by default; with `listen`
/// set the node serves `GET /metrics` there (no token: read-only, keep it on localhost or
/// behind a firewall) and writes the bound address to `node.json` (`metrics`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSection {
    /// Listen address (`GANGLION_METRICS_LISTEN` overrides it); `None` = no endpoint.
    pub listen: Option<std::net::SocketAddr>,
}

/// `[console]`: the web console ([`crate::console`]). Off by default; with `listen` set the
/// node serves its pages there and writes the bound address to `node.json` (`console`).
/// Read-only pages need no token, so keep it on localhost (or behind a proxy) unless the
/// node's market and jobs may be public; stopping a job asks for the RPC cookie's token.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSection {
    /// Listen address (`GANGLION_CONSOLE__LISTEN` overrides it); `None` = no console.
    pub listen: Option<std::net::SocketAddr>,
}

/// `[gateway]`: the service gateway ([`super::services`]). Off by default; with `listen` set
/// the node routes `http://<listen>/<service>/…` to the replicas of the services it
/// orchestrates (`<service>`: the first 16 hex digits of the job id), reaching them through
/// their providers' nodes over libp2p, and writes the bound address to `node.json`
/// (`gateway`). No token: anyone who reaches the address uses the services, so keep it on
/// localhost or behind a proxy unless they are public.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewaySection {
    /// Listen address (`GANGLION_GATEWAY__LISTEN` overrides it); `None` = no gateway.
    pub listen: Option<std::net::SocketAddr>,
}

/// `[indexer]`: where the node keeps its chain index, and whether it serves the index's
/// read API ([`ganglion_indexer::http`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexerSection {
    /// `"sled"` (the default: `indexer.sled/` in the data directory) or a PostgreSQL URL
    /// (`postgres://user@host/db`; the node is its one writer, `ganglion-indexer serve`
    /// processes can read it beside the node).
    pub store: Option<String>,
    /// Listen address of the index's read API (`GET /jobs/{id}`, `/providers/{key}`, …, in
    /// Blockfrost's conventions); `None` = not served. Read-only, no token.
    pub listen: Option<std::net::SocketAddr>,
}

impl IndexerSection {
    /// The store this section names, `data_sled` when it names none or `"sled"`.
    ///
    /// # Errors
    /// A value that is neither `"sled"`, a folder nor a `postgres://` URL.
    pub fn store_spec(
        &self,
        data_sled: std::path::PathBuf,
    ) -> Result<ganglion_indexer::store::StoreSpec, ganglion_indexer::Error> {
        match self.store.as_deref().map(str::trim) {
            None | Some("sled") => Ok(ganglion_indexer::store::StoreSpec::Sled(data_sled)),
            Some(other) => other.parse(),
        }
    }
}

/// `[storage]`: where a provider fetches a job's content besides the orchestrator's node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSection {
    /// A Kubo RPC endpoint (`http://host:port`, without `/api/v0`; Kubo's `docs/http-rpc`),
    /// e.g. the operator's own Kubo daemon or a pinning service's. When set, a job's inputs
    /// and image archive that the orchestrator's node does not serve over bitswap are fetched
    /// from it (`dag/export`), every block checked against its CID. `None` = bitswap only.
    pub kubo_rpc: Option<String>,
}

/// Multiaddrs as TOML strings (libp2p's serde feature is off).
mod multiaddrs {
    use libp2p::Multiaddr;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[Multiaddr], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(ToString::to_string))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Multiaddr>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|a| {
                a.parse()
                    .map_err(|e| serde::de::Error::custom(format!("multiaddr {a:?}: {e}")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::settings::Settings;

    #[test]
    fn daemon_sections_parse_and_refuse_unknown_keys() {
        let s = Settings::from_toml(
            r#"
[p2p]
listen = ["/ip4/127.0.0.1/tcp/0"]
bootstrap = ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"]
[bond]
stake_ntx = 5000000
[validator]
reference = { tx_hash = "0101010101010101010101010101010101010101010101010101010101010101", index = 2 }
[engine]
confirmation_depth = 0
[metrics]
listen = "127.0.0.1:0"
[console]
listen = "127.0.0.1:0"
[indexer]
store = "postgres://ix@db.example/ix"
listen = "127.0.0.1:0"
"#,
        )
        .expect("parses");
        assert_eq!(s.p2p.bootstrap.len(), 1);
        assert_eq!(s.bond.as_ref().map(|b| b.stake_ntx), Some(5_000_000));
        assert_eq!(s.validator.as_ref().map(|v| v.reference.index), Some(2));
        assert_eq!(s.engine.confirmation_depth, Some(0));
        assert_eq!(
            s.metrics.listen,
            Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert_eq!(
            Settings::from_toml("").expect("empty").metrics.listen,
            None,
            "metrics are off by default"
        );
        assert_eq!(s.console.listen.map(|a| a.port()), Some(0));
        let sled = std::path::PathBuf::from("/data/indexer.sled");
        assert_eq!(
            s.indexer.store_spec(sled.clone()).ok(),
            Some(ganglion_indexer::store::StoreSpec::Postgres(
                "postgres://ix@db.example/ix".into()
            ))
        );
        assert_eq!(
            Settings::from_toml("")
                .expect("empty")
                .indexer
                .store_spec(sled.clone())
                .ok(),
            Some(ganglion_indexer::store::StoreSpec::Sled(sled)),
            "sled in the data directory by default"
        );
        let e = Settings::from_toml("[indexer]\nstore = \"mysql://db\"")
            .expect_err("refused at load")
            .to_string();
        assert!(
            e.contains("indexer.store") && e.contains("postgres://"),
            "{e}"
        );
        assert_eq!(
            Settings::from_toml("").expect("empty").console.listen,
            None,
            "the console is off by default"
        );
        for bad in [
            "[p2p]\nlisten = [\"/ip4/127.0.0.1/tcp/0\"]\nport = 1",
            "[bond]\nstake_ntx = 1\ncolour = 2",
            "[engine]\npoll = 3",
            "[p2p]\nlisten = [\"not a multiaddr\"]",
            "[validator]\nreference = \"abcd#0\"",
            "[metrics]\nlisten = \"localhost\"",
            "[metrics]\nport = 9464",
            "[console]\nlisten = \"localhost\"",
            "[console]\nport = 7080",
        ] {
            assert!(Settings::from_toml(bad).is_err(), "accepted: {bad}");
        }
    }
}
