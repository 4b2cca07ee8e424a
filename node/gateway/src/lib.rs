//! The service gateway: HTTP requests for a `kind: service` job forwarded to its replicas.
//!
//! Any node can route `/{service}/…` on its gateway listener to the replicas of a service
//! (each one provider's container, reached at its cluster address and `serve.port`). The
//! pieces, each with one job:
//!
//! - [`route`]: the choice of replica for one request — healthy, untried, below its
//!   in-flight limit; fewest outstanding requests, then lowest RTT.
//! - [`pool`]: a service's replicas, their health, outstanding requests and usage
//!   (requests, bytes), the load over a window (in flight, requests/s, p50/p90), and the
//!   [`pool::Lease`] a forwarded request holds.
//! - [`connect`]: how a replica is reached — directly over TCP, or through its provider's
//!   node over a libp2p stream ([`p2p`], `/ganglion/service/1`: both ends of the protocol).
//! - [`forward`]: one request forwarded, retried where safe, back-pressure (`503` +
//!   `Retry-After`), timeouts (`504`), hop-by-hop headers dropped.
//! - [`body`]: the replica's response streamed through (chunked, server-sent events),
//!   metered on the lease, cut off at the deadline.
//! - [`health`]: the health prober (`serve.health`).
//! - [`scale`]: the autoscaler's rule (`replicas`, `scale`) and its control loop, which asks
//!   a [`scale::Fleet`] (the engine, or a test's container engine) for one replica more or
//!   fewer.
//! - [`server`]: the service table and the HTTP listener (`GET /_gateway/services`).
//! - `test_utils` (feature `test-utils`): a minimal stream-only libp2p swarm for tests and
//!   benches.

pub mod body;
pub mod connect;
pub mod error;
pub mod forward;
pub mod health;
pub mod p2p;
pub mod pool;
pub mod route;
pub mod scale;
pub mod server;
#[cfg(feature = "test-utils")]
pub mod test_utils;

pub use connect::Endpoint;
pub use error::GatewayError;
pub use pool::{Health, Load, Pool, Replica, ReplicaView, Usage};
pub use scale::{Autoscaler, Controller, Decision, Fleet};
pub use server::{Gateway, Listening, ServiceStatus, listen};
