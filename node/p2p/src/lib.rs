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
//! **Protocols**: identify, ping (RTT windows, [`rtt`](crate::rtt); each provider gossips its
//! row inside its offer, [`links`](crate::links), and orchestrators assemble the matrix,
//! [`matrix`](crate::matrix)), Kademlia (`/ganglion/kad/1`), AutoNAT
//! v1, DCUtR, relay client (server opt-in), gossipsub offers ([`offers`](crate::offers)) on
//! `ganglion/offers/1/<magic>`, and the request-response protocols of [`protocols`](crate::protocols):
//! `/ganglion/accept/2`, `/ganglion/cluster/1`, `/ganglion/heartbeat/1`
//! (escrow v2 receipts, [`protocols::heartbeat`]); bitswap
//! (`/ipfs/bitswap/1.2.0`, [`bitswap`](crate::bitswap)) over the storage crate's blockstore;
//! raw streams (`libp2p-stream`, [`Client::streams`](crate::Client::streams)) for the
//! overlay's relay fallback (`/ganglion/overlay-relay/1`, `ganglion_dispatch::overlay::relay`)
//! and the throughput probes between providers (`/ganglion/probe/1`, [`probe`](crate::probe)).
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
//! request-response protocol. Accept requests, cluster hellos and heartbeats go, each with its
//! response channel, to the job engine ([`inbound`](crate::inbound)), where the node decides;
//! the loop owns the swarm and the pending requests and keeps no job state.
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
//! Modules:
//! - `config`: [`Config`], its defaults, [`now_ms`] (the default clock).
//! - `swarm`: [`new`] builds the swarm and returns its [`Parts`].
//! - [`event_loop`]: owns the swarm and the pending requests.
//! - [`client`]: commands to the loop, oneshot replies.
//! - `event`: [`Event`], [`log_events`].
//! - `error`: [`Error`].
//! - [`inbound`]: requests handed to the job engine with their response channel.
//! - [`behaviour`]: the composed behaviour (the derive).
//! - [`protocols`]: codecs and messages of the request-response protocols.
//! - [`offers`]: signed gossip, the live market.
//! - [`bonds`]: indexer → bond snapshot.
//! - [`bitswap`]: serve and fetch blocks.
//! - [`limits`]: rate limits, in-flight caps.
//! - [`rtt`]: this node's row of the latency matrix (ping RTT windows, p50/p90).
//! - [`links`]: that row as the signed offer carries it.
//! - [`matrix`]: the provider-to-provider matrix assembled from the offers' links.
//! - [`probe`]: throughput probes between providers (`/ganglion/probe/1`).
//! - [`mesh`]: a provider keeps connections to the other providers (so that ping measures
//!   the paths a job would use).
//! - [`relayed`]: reaching peers through the bootstrap relays.
//! - `listen`: when a listen on 0.0.0.0 is answered (after its routable address, so dials
//!   reuse its port).
//! - [`identity`]: the node key in the data dir.
//! - `test_utils` (feature `test-utils`): test identities, live bonds, event waits.

pub mod behaviour;
pub mod bitswap;
pub mod bonds;
pub mod client;
mod config;
mod error;
mod event;
pub mod event_loop;
pub mod identity;
pub mod inbound;
pub mod limits;
pub mod links;
mod listen;
pub mod matrix;
pub mod mesh;
pub mod offers;
pub mod probe;
pub mod protocols;
pub mod relayed;
pub mod rtt;
mod swarm;
#[cfg(any(test, feature = "test-utils"))]
pub mod test_utils;

pub use client::{COMMAND_CHANNEL, Client};
pub use config::{Config, now_ms};
pub use error::Error;
pub use event::{EVENT_CHANNEL, Event, log_events};
pub use event_loop::EventLoop;
pub use limits::{MAX_CONCURRENT_STREAMS, MAX_HEARTBEATS_IN_FLIGHT};
pub use offers::INVALID_OFFER_WEIGHT;
pub use swarm::{Parts, new};
