//! The node's one composed libp2p behaviour.
//!
//! Every protocol of the node is a field here, driven by the one swarm the
//! [`super::EventLoop`] owns. Optional parts sit in a [`Toggle`]: the relay *server* (opt-in,
//! [`super::Config::relay_server`]) and bitswap (`beetswap` 0.5, built on libp2p-swarm 0.47 =
//! libp2p 0.56, over the storage crate's blockstore; on when [`super::Config::blockstore`] is set).

// `#[derive(NetworkBehaviour)]` generates `BehaviourEvent`, one undocumented variant per
// field (every item written here is documented).
#![allow(missing_docs)]

use libp2p::swarm::NetworkBehaviour;
use libp2p::swarm::behaviour::toggle::Toggle;
use libp2p::{autonat, dcutr, gossipsub, identify, kad, ping, relay, request_response};

use super::protocols::{
    AcceptRequest, AcceptResponse, CborCodec, ClusterHello, ClusterResponse, HeartbeatRequest,
    HeartbeatResponse,
};

/// `accept` behaviour (orchestrator → provider).
pub type AcceptBehaviour = request_response::Behaviour<CborCodec<AcceptRequest, AcceptResponse>>;
/// `cluster` behaviour (between the nodes of a job).
pub type ClusterBehaviour = request_response::Behaviour<CborCodec<ClusterHello, ClusterResponse>>;
/// `heartbeat` behaviour (provider → the job's orchestrator, answered with receipts).
pub type HeartbeatBehaviour =
    request_response::Behaviour<CborCodec<HeartbeatRequest, HeartbeatResponse>>;

/// The composed behaviour. Field order is poll order.
#[derive(NetworkBehaviour)]
pub struct Behaviour {
    /// Circuit relay v2 client: reservations on relays, dialing through them.
    pub relay_client: relay::client::Behaviour,
    /// Circuit relay v2 server: opt-in.
    pub relay_server: Toggle<relay::Behaviour>,
    /// Hole punching over a relayed connection.
    pub dcutr: dcutr::Behaviour,
    /// Reachability probes (v1).
    pub autonat: autonat::Behaviour,
    /// Peer discovery (`/ganglion/kad/1`).
    pub kad: kad::Behaviour<kad::store::MemoryStore>,
    /// Listen and observed addresses, protocols (`/ganglion/id/1`).
    pub identify: identify::Behaviour,
    /// RTT samples for the latency matrix.
    pub ping: ping::Behaviour,
    /// Signed offers, one topic per network magic.
    pub gossipsub: gossipsub::Behaviour,
    /// `/ganglion/accept/2`.
    pub accept: AcceptBehaviour,
    /// `/ganglion/cluster/1`.
    pub cluster: ClusterBehaviour,
    /// `/ganglion/heartbeat/1`.
    pub heartbeat: HeartbeatBehaviour,
    /// Bitswap (`/ipfs/bitswap/1.2.0`): serves the blockstore, fetches DAGs ([`super::bitswap`]).
    pub bitswap: Toggle<super::bitswap::Bitswap>,
    /// Raw streams (`libp2p-stream`): the overlay's relay fallback
    /// (`/ganglion/overlay-relay/1`, `ganglion_dispatch::overlay::relay`) opens and accepts them through
    /// [`super::Client::streams`].
    pub streams: libp2p_stream::Behaviour,
}
