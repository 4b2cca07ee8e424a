//! [`Config`]: what a node's swarm is built with, each default documented; [`now_ms`], the
//! system clock the default [`Config::clock`] reads.

use std::time::Duration;

use libp2p::Multiaddr;

#[cfg(doc)]
use super::{Client, relayed};

/// P2P configuration. Defaults in [`Config::default`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Cardano network magic: selects the offer topic and the offers accepted.
    pub network_magic: u64,
    /// Addresses to listen on (default `/ip4/0.0.0.0/tcp/0` and `/ip4/0.0.0.0/udp/0/quic-v1`).
    pub listen: Vec<Multiaddr>,
    /// Bootstrap peers for Kademlia, each ending in `/p2p/<peer id>` (a devnet provides them).
    /// They are dialled at start and re-dialled every [`Config::redial_interval`] while not
    /// connected, so a bootstrap peer that restarts (e.g. after `kill -9`) is found again.
    pub bootstrap: Vec<Multiaddr>,
    /// How often unconnected bootstrap peers are re-dialled (default 5 s).
    pub redial_interval: Duration,
    /// Serve as a circuit-relay v2 relay for others (default off). A relay serves
    /// reservations only for a confirmed external address ([`Client::add_external_address`]).
    pub relay_server: bool,
    /// Behind a NAT: reserve a slot on every bootstrap peer and reach unconnected peers
    /// through them ([`relayed`]; default off). The bootstrap peers must be relays.
    pub relay_via_bootstrap: bool,
    /// Interval between pings on each connection (default 5 s).
    pub ping_interval: Duration,
    /// Gossipsub heartbeat (default 1 s).
    pub gossip_heartbeat: Duration,
    /// Timeout of one request-response exchange (default 10 s).
    pub request_timeout: Duration,
    /// How often expired offers are pruned from the market (default 1 s).
    pub prune_interval: Duration,
    /// Inbound requests a peer may send at once, over all request-response protocols (default 20).
    pub inbound_burst: u32,
    /// Sustained inbound requests per second per peer (default 10).
    pub inbound_per_second: u32,
    /// Idle connection timeout (default 60 s).
    pub idle_timeout: Duration,
    /// The clock offers, reservations and deadlines are judged by, POSIX ms (default the system
    /// clock; a devnet or a test may run on its own chain time).
    pub clock: fn() -> u64,
    /// The blockstore bitswap serves from and fetches into (default none: bitswap off).
    pub blockstore: Option<ganglion_storage::bitswap::BitswapStore>,
    /// A DAG fetch fails when no block arrived for this long (default 30 s).
    pub fetch_timeout: Duration,
    /// AutoNAT v1: answer other peers' dial-back probes (default off: serving is opt-in, as it
    /// makes this node dial addresses others name). The client side always runs.
    pub autonat_server: bool,
    /// AutoNAT: probe and dial back global IPs only (default true; a loopback test or a private
    /// devnet sets false).
    pub autonat_only_global_ips: bool,
    /// AutoNAT: delay before the first probe (default 15 s, libp2p's default).
    pub autonat_boot_delay: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            network_magic: 42,
            listen: vec![
                "/ip4/0.0.0.0/tcp/0".parse().expect("valid literal"),
                "/ip4/0.0.0.0/udp/0/quic-v1".parse().expect("valid literal"),
            ],
            bootstrap: Vec::new(),
            redial_interval: Duration::from_secs(5),
            relay_server: false,
            relay_via_bootstrap: false,
            ping_interval: Duration::from_secs(5),
            gossip_heartbeat: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
            prune_interval: Duration::from_secs(1),
            inbound_burst: 20,
            inbound_per_second: 10,
            idle_timeout: Duration::from_secs(60),
            clock: now_ms,
            blockstore: None,
            fetch_timeout: Duration::from_secs(30),
            autonat_server: false,
            autonat_only_global_ips: true,
            autonat_boot_delay: Duration::from_secs(15),
        }
    }
}

/// Now, POSIX ms.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
