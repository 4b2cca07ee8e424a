//! The gateway against real HTTP servers on loopback (`support::TestReplica`: a small hyper
//! server standing in for a service's container, with switches for health, delay and
//! failure) and, in `embed`, against the real embedding model's containers; in `p2p`, through
//! a provider's node over real libp2p swarms (TCP, noise, yamux).

mod embed;
mod forwarding;
mod p2p;
mod support;
