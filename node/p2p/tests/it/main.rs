//! Integration tests of `ganglion-p2p`, one binary (STYLE §3): real swarms on loopback (port 0),
//! every wait for an event or a reply under a timeout.
//!
//! - `swarm`: offers, rejection, the accept round trip through the escrow validator, cluster
//!   hellos, attestations, expiry, RTT, rate limits, relay and DCUtR.
//! - `heartbeat`: heartbeats answered with signed receipts or typed refusals; back-pressure
//!   from the engine's channel, floods and the per-peer cap on heartbeats in flight.
//! - `discovery`: QUIC alongside TCP, Kademlia, AutoNAT.
//! - `links`: ping windows as the signed links of offers, the latency matrix assembled from
//!   them, throughput probes and their rate limits, providers connecting to each other.
//! - `bitswap`: a UnixFS DAG handed over between nodes and with Kubo's own core.
//! - `bonds`: offers against the indexer's active bonds over real devnet blocks.
//!
//! The NAT test (two nodes behind MASQUERADE NATs in network namespaces, root) stays in
//! `node/tests/p2p_nat.rs`: it runs the node's `p2p_peer` example as a process in each
//! namespace.

mod bitswap;
mod bonds;
mod discovery;
mod heartbeat;
mod links;
mod swarm;
