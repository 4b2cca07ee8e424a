//! The gateway against real HTTP servers on loopback (`support::TestReplica`: a small hyper
//! server standing in for a service's container, with switches for health, delay and
//! failure) and, in `embed`, against the real embedding model's containers.

mod embed;
mod forwarding;
mod support;
