//! Inbound requests the node, not the swarm, answers: accept requests (a provider's decision:
//! capacity, price, reservations), cluster hellos (a provider's overlay keys and endpoints,
//! given only to the job's other assigned nodes) and heartbeats (an orchestrator's receipt for
//! a provider's work, escrow v2). The event loop rate-limits each peer, then hands the request
//! with its response channel to the job engine over a bounded channel and sends whatever the
//! engine answers through [`Client::respond_accept`], [`Client::respond_cluster`] or
//! [`Client::respond_heartbeat`] (rust-libp2p's file-sharing example shape: the swarm's owner
//! keeps no job state; every decision is taken where the job's state lives).
//!
//! When the engine's channel is full or closed the loop answers at once — `RateLimited` —
//! so no request waits for a timeout and no decision is taken twice. A peer has at most
//! [`MAX_HEARTBEATS_IN_FLIGHT`] heartbeats with the engine at once; more are answered
//! `RateLimited` too.

use libp2p::PeerId;
use libp2p::request_response::ResponseChannel;

use super::protocols::{
    AcceptRequest, AcceptResponse, ClusterHello, ClusterResponse, HeartbeatRequest,
    HeartbeatResponse,
};

#[cfg(doc)]
use super::{Client, MAX_HEARTBEATS_IN_FLIGHT};

/// Requests waiting for the engine at most (the channel's capacity).
pub const INBOUND_CHANNEL: usize = 64;

/// Where the answer to one inbound request goes. Opaque: hand it back to the
/// [`Client`] method that answers its protocol; dropped unanswered, the requester sees
/// its request fail.
#[derive(Debug)]
pub struct Responder<T>(pub(crate) ResponseChannel<T>);

/// An inbound request for the job engine.
#[derive(Debug)]
pub enum Inbound {
    /// An orchestrator asks this node (as a provider) for GPUs on a job.
    Accept {
        /// The requesting peer.
        peer: PeerId,
        /// What it asks.
        request: AcceptRequest,
        /// Answer with [`Client::respond_accept`].
        responder: Responder<AcceptResponse>,
    },
    /// Another node of a job sends this node (as a provider of the job) its cluster hello and
    /// asks for this node's: answered with this node's hello only when `peer` is assigned to
    /// the job, [`ClusterResponse::NotAssigned`] when it is not, and
    /// [`ClusterResponse::UnknownJob`] when this node has no hello for the job (yet).
    Cluster {
        /// The sending peer (noise-authenticated).
        peer: PeerId,
        /// Its hello.
        request: ClusterHello,
        /// Answer with [`Client::respond_cluster`].
        responder: Responder<ClusterResponse>,
    },
    /// A provider sends this node (as the job's orchestrator) its heartbeat and asks for a
    /// receipt ([`super::protocols::heartbeat`]).
    Heartbeat {
        /// The sending peer (noise-authenticated).
        peer: PeerId,
        /// The heartbeat.
        request: HeartbeatRequest,
        /// Answer with [`Client::respond_heartbeat`].
        responder: Responder<HeartbeatResponse>,
    },
}
