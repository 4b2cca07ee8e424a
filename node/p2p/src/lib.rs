//! The node's peer-to-peer layer: one libp2p swarm, one event loop, a cloneable client.
//!
//! **libp2p version.** The workspace uses libp2p **0.56** throughout (lead's decision, DESIGN §9):
//! bitswap is `beetswap` 0.5, built on libp2p-swarm 0.47, in this same swarm
//! ([`bitswap`](crate::bitswap); on when [`Config::blockstore`](crate::Config::blockstore) is set).
//!
//! **Shape** (rust-libp2p `examples/file-sharing`, STYLE §1): [`new`](crate::new) builds the swarm and returns
//! a [`Client`](crate::Client) (cloneable; commands with oneshot replies over a bounded channel), an
//! [`EventLoop`](crate::EventLoop) (owns the `Swarm`; spawn [`EventLoop::run`](crate::EventLoop::run)) and a bounded receiver of
//! [`Event`](crate::Event)s. The loop ends when every `Client` is dropped.
//!
//! **Transports**: TCP and QUIC, noise, yamux, plus the circuit-relay v2 client transport.
//! **Protocols**: identify, ping (RTT matrix, [`rtt`](crate::rtt)), Kademlia (`/ganglion/kad/1`), AutoNAT
//! v1, DCUtR, relay client (server opt-in), gossipsub offers ([`offers`](crate::offers)) on
//! `ganglion/offers/1/<magic>`, and the request-response protocols of [`protocols`](crate::protocols):
//! `/ganglion/accept/2`, `/ganglion/cluster/1`, `/ganglion/heartbeat/1`
//! (escrow v2 receipts, [`protocols::heartbeat`]); bitswap
//! (`/ipfs/bitswap/1.2.0`, [`bitswap`](crate::bitswap)) over the storage crate's blockstore;
//! raw streams (`libp2p-stream`, [`Client::streams`](crate::Client::streams)) for the
//! overlay's relay fallback (`/ganglion/overlay-relay/1`, `ganglion_dispatch::overlay::relay`).
//!
//! **Artifact hand-over (`fetch`)** is bitswap: job inputs, image archives and outputs are
//! UnixFS DAGs in the blockstore; a peer fetches one by root CID with
//! [`Client::fetch_dag`](crate::Client::fetch_dag) from the orchestrator's node, a provider's
//! node or any IPFS node, every block verified against its CID. There is no separate `fetch`
//! protocol.
//!
//! **Validation.** Gossipsub runs in strict signed mode with application validation: an offer is
//! forwarded only after [`offers::verify_offer`](crate::offers::verify_offer) passed against the [`offers::BondSnapshot`](crate::offers::BondSnapshot)
//! (from the indexer's `active_bonds()` through [`bonds`](crate::bonds), refreshed with [`bonds::refresh`](crate::bonds::refresh)); a failing offer
//! is reported `Reject`, which lowers the sender's gossipsub peer score (P4, weight
//! [`INVALID_OFFER_WEIGHT`](crate::INVALID_OFFER_WEIGHT)).
//!
//! **Caps.** Offers ≤ [`offers::MAX_OFFER_BYTES`](crate::offers::MAX_OFFER_BYTES); request-response frames ≤ the per-protocol
//! caps in [`protocols`](crate::protocols), refused before being buffered; inbound requests per peer are limited
//! by a token bucket ([`limits`](crate::limits)), and a peer has at most
//! [`MAX_HEARTBEATS_IN_FLIGHT`](crate::MAX_HEARTBEATS_IN_FLIGHT) heartbeats waiting for the job engine; at most [`MAX_CONCURRENT_STREAMS`](crate::MAX_CONCURRENT_STREAMS) concurrent streams per
//! request-response protocol; cluster registrations are capped. Accept requests and
//! heartbeats are answered by the job engine ([`inbound`](crate::inbound)), which keeps the
//! records; the loop keeps no job state.
//!
//! **Tests and numbers.** `tests/it/` (swarms on loopback, port 0, waits on events under a
//! timeout): `swarm` (offers, accept, cluster, relay, DCUtR, rate limits), `heartbeat`
//! (receipts, refusals, back-pressure, floods), `discovery`
//! (QUIC, Kademlia lookup, AutoNAT), `bonds` (offers against the indexer's bonds over real
//! devnet blocks), `bitswap` (DAG hand-over between nodes and with Kubo's core); in the node,
//! `node/tests/p2p_nat.rs` (root: runs `node/tests/p2p_nat.sh`, two nodes behind MASQUERADE
//! NATs in network namespaces meet through a relay, then DCUtR upgrades them) and
//! `cargo run --release -p ganglion-node --example p2p_bench` (offer propagation over a 5-node
//! line, offers verified per second).
//!
//! Modules: [`behaviour`](crate::behaviour) (the derive), [`bitswap`](crate::bitswap) (serve and fetch blocks), [`bonds`](crate::bonds) (indexer → bond snapshot), [`event_loop`](crate::event_loop) (owns the swarm), [`client`](crate::client) (commands),
//! [`offers`](crate::offers) (signed gossip, live market), [`protocols`](crate::protocols) (codecs and messages), [`inbound`](crate::inbound)
//! (requests handed to the job engine with their response channel), [`rtt`](crate::rtt) (latency matrix), [`limits`](crate::limits) (rate limits), `listen` (when a listen on 0.0.0.0 is answered: after its routable address, so dials reuse its port),
//! [`identity`](crate::identity) (the node key in the data dir).

pub mod behaviour;
pub mod bitswap;
pub mod bonds;
pub mod client;
pub mod event_loop;
pub mod identity;
pub mod inbound;
pub mod limits;
mod listen;
pub mod offers;
pub mod protocols;
pub mod relayed;
pub mod rtt;

use std::time::Duration;

use libp2p::{Multiaddr, PeerId};

pub use client::Client;
pub use event_loop::EventLoop;

use ganglion_contracts::params::KeyHash;

/// Capacity of the command channel (Client → EventLoop). Commands are small and the loop handles
/// each in microseconds; 256 absorbs a burst of parallel requests while still applying
/// back-pressure to a runaway caller.
pub const COMMAND_CHANNEL: usize = 256;
/// Capacity of the event channel (EventLoop → application). Events are notifications; the state
/// they announce stays queryable through the [`Client`], so when the application falls 1024
/// events behind, newer events are dropped (counted in the log) rather than stalling the swarm.
pub const EVENT_CHANNEL: usize = 1024;
/// Concurrent inbound + outbound streams per request-response protocol and connection.
pub const MAX_CONCURRENT_STREAMS: usize = 32;
/// Heartbeats one peer may have with the job engine, unanswered, at once. A provider sends one
/// per job per receipt interval and the engine answers in milliseconds, so 8 covers a provider
/// on 8 jobs of one orchestrator whose heartbeats coincide; a flood cannot take more than 8 of
/// the [`inbound::INBOUND_CHANNEL`] places.
pub const MAX_HEARTBEATS_IN_FLIGHT: usize = 8;
/// Gossipsub P4 weight for an invalid offer (score −10 × count² per offence; graylisted at −80).
pub const INVALID_OFFER_WEIGHT: f64 = -10.0;
/// Most jobs with registered cluster info.
pub const MAX_CLUSTER_JOBS: usize = 256;

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

/// Errors of the p2p layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The swarm could not be built (transport or behaviour configuration).
    #[error("building the swarm: {0}")]
    Build(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Listening failed.
    #[error("listen: {0}")]
    Listen(#[from] libp2p::TransportError<std::io::Error>),
    /// A listener closed before reporting an address.
    #[error("listener closed before it had an address")]
    ListenerClosed,
    /// Dialing failed.
    #[error("dial: {0}")]
    Dial(#[from] libp2p::swarm::DialError),
    /// Publishing an offer failed (e.g. no peer on the topic yet).
    #[error("publish: {0}")]
    Publish(#[from] libp2p::gossipsub::PublishError),
    /// Subscribing to the offer topic failed.
    #[error("subscribe: {0}")]
    Subscribe(#[from] libp2p::gossipsub::SubscriptionError),
    /// A request to a peer failed (dial, timeout, unsupported protocol, connection closed, codec).
    #[error("request to {peer}: {source}")]
    Request {
        /// The peer.
        peer: PeerId,
        /// Why.
        #[source]
        source: libp2p::request_response::OutboundFailure,
    },
    /// A DAG fetch over bitswap failed.
    #[error("fetch: {0}")]
    Fetch(Box<bitswap::FetchError>),
    /// Reading the live bonds from the indexer failed.
    #[error("bonds from the indexer: {0}")]
    Bonds(#[source] Box<ganglion_indexer::Error>),
    /// The event loop has stopped.
    #[error("the p2p event loop has stopped")]
    Stopped,
    /// Reading or writing the node key.
    #[error("node key {path}: {source}")]
    Key {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The node key file does not hold a valid key.
    #[error("node key {path}: {source}")]
    KeyDecode {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: libp2p::identity::DecodingError,
    },
}

impl From<bitswap::FetchError> for Error {
    fn from(e: bitswap::FetchError) -> Self {
        Error::Fetch(Box::new(e))
    }
}

/// What the p2p layer tells the application. Past tense.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Event {
    /// A verified offer entered (or refreshed) the live market.
    OfferAccepted {
        /// The provider.
        provider: KeyHash,
        /// The offer's peer.
        peer: PeerId,
        /// The gossip neighbour that delivered it.
        via: PeerId,
    },
    /// An offer failed verification; the neighbour's score went down.
    OfferRejected {
        /// The gossip neighbour that delivered it.
        via: PeerId,
        /// Why.
        reason: offers::OfferRejection,
    },
    /// A provider's offer expired (or its bond went) and it left the market.
    OfferExpired {
        /// The provider.
        provider: KeyHash,
    },
    /// A peer joined the offer topic (gossip can now reach it).
    TopicPeerJoined {
        /// The peer.
        peer: PeerId,
    },
    /// A connection to a peer was established (first connection only).
    PeerConnected {
        /// The peer.
        peer: PeerId,
    },
    /// The last connection to a peer closed.
    PeerDisconnected {
        /// The peer.
        peer: PeerId,
    },
    /// A ping round trip was measured.
    RttMeasured {
        /// The peer.
        peer: PeerId,
        /// Round-trip time.
        rtt: Duration,
    },
    /// A peer of a job sent its cluster hello.
    ClusterHelloReceived {
        /// The peer.
        peer: PeerId,
        /// Its hello.
        hello: protocols::ClusterHello,
    },
    /// A DCUtR hole punch over a relayed connection finished.
    HolePunchFinished {
        /// The remote peer.
        peer: PeerId,
        /// Whether a direct connection was established.
        succeeded: bool,
    },
    /// AutoNAT's view of this node's reachability changed (`Public(addr)`: a peer dialled `addr`
    /// back; `Private`: probes failed).
    NatStatusChanged {
        /// The new status.
        status: libp2p::autonat::NatStatus,
    },
    /// An AutoNAT probe of this node's addresses failed (the peer refused to dial back, as a
    /// node without [`Config::autonat_server`] does, or could not reach us).
    NatProbeFailed {
        /// The peer asked, if any was.
        peer: Option<PeerId>,
        /// Why, in libp2p's words.
        reason: String,
    },
    /// A connection was established through a relay (`/p2p-circuit`).
    RelayedConnection {
        /// The remote peer.
        peer: PeerId,
    },
    /// An inbound request was refused by the rate limit.
    RateLimited {
        /// The peer.
        peer: PeerId,
    },
}

/// The parts [`new`] returns: the client, the event loop to spawn, the swarm's events and the
/// inbound requests the job engine answers ([`inbound`]).
pub type Parts = (
    Client,
    EventLoop,
    tokio::sync::mpsc::Receiver<Event>,
    tokio::sync::mpsc::Receiver<inbound::Inbound>,
);

/// Builds the swarm from `keypair` and `config`; `bonds` is the initial live-bond snapshot.
/// Spawn [`EventLoop::run`] on a tokio runtime; it subscribes to the offer topic, listens on
/// `config.listen` and dials `config.bootstrap`. Drain the inbound receiver (the job engine
/// does): while it is full, the loop refuses accept requests and heartbeats as
/// rate-limited.
///
/// # Errors
/// [`Error::Build`] when a transport or behaviour cannot be built, [`Error::Subscribe`].
pub fn new(
    keypair: libp2p::identity::Keypair,
    config: Config,
    bonds: offers::BondSnapshot,
) -> Result<Parts, Error> {
    let swarm = event_loop::build_swarm(keypair, &config)?;
    let streams = swarm.behaviour().streams.new_control();
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::channel(COMMAND_CHANNEL);
    let (ev_tx, ev_rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL);
    let (in_tx, in_rx) = tokio::sync::mpsc::channel(inbound::INBOUND_CHANNEL);
    let event_loop = EventLoop::new(swarm, config, bonds, cmd_rx, ev_tx, in_tx)?;
    Ok((Client::new(cmd_tx, streams), event_loop, ev_rx, in_rx))
}

/// Drains the swarm's events into the log (debug level; rate-limited peers and NAT changes at
/// info) until the event loop stops. Spawn it when nothing else reads the events, so the
/// loop never counts them as dropped.
pub async fn log_events(mut events: tokio::sync::mpsc::Receiver<Event>) {
    while let Some(e) = events.recv().await {
        match &e {
            Event::RateLimited { .. } | Event::NatStatusChanged { .. } => {
                tracing::info!(target: "p2p", event = ?e, "p2p event")
            }
            _ => tracing::debug!(target: "p2p", event = ?e, "p2p event"),
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
