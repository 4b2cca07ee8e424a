//! [`Event`]: what the swarm tells the application, over a bounded channel of
//! [`EVENT_CHANNEL`] places; [`log_events`] drains it into the log when nothing else reads it.

use std::time::Duration;

use ganglion_contracts::params::KeyHash;
use libp2p::PeerId;

use super::offers;

#[cfg(doc)]
use super::{Client, Config};

/// Capacity of the event channel (EventLoop → application). Events are notifications; the state
/// they announce stays queryable through the [`Client`], so when the application falls 1024
/// events behind, newer events are dropped (counted in the log) rather than stalling the swarm.
pub const EVENT_CHANNEL: usize = 1024;

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
