//! The per-job private layer-3 overlay (DESIGN §6): gloo and NCCL publish each rank's
//! own interface address and open random ports, so every job gets its own routed subnet carried
//! by WireGuard-protocol tunnels between the job's nodes.
//!
//! - [`addressing`]: the job's subnet from a configurable pool, one address per container
//!   (rank 0 first), hostnames and `extra_hosts`.
//! - [`config`]: the `[overlay]` config section (pool, port, MTU, keepalive, relay fallback,
//!   link timeout, whether to relay, declared direct reachability).
//! - [`keys`]: ephemeral x25519 keys per job.
//! - [`router`]: the WireGuard state of one node (boringtun's noise `Tunn` per peer), pure
//!   (no I/O): one UDP socket's datagrams told apart by receiver index, `allowed_ips` enforced.
//! - [`tun`]: a TUN interface and its address, MTU and up flag (Linux ioctls).
//! - [`netns`]: running set-up code inside another network namespace on a dedicated OS thread.
//! - [`node`]: the I/O driver: one UDP socket per node, one TUN per job, the timer tick, and
//!   hole punching (a handshake initiation to every peer as a job's tunnels start).
//! - [`relay`]: the relay fallback's transport: datagrams over libp2p streams
//!   (`/ganglion/overlay-relay/1`) when a link has no direct handshake in time.
//! - [`pod`]: the pod model: the TUN inside a sandbox container's namespace.
//! - [`sweep`]: removing orphaned pods (sandboxes and joined workloads) on restart.
//! - [`network`]: the overlay as the executor's `ClusterNetwork` (sandbox + TUN + tunnels).
//! - [`error`]: the overlay's errors, [`OverlayError`].
//!
//! The exchange of keys, addresses and endpoint candidates over the p2p `cluster` protocol,
//! bound to the job's assignment, is the node's (`ganglion-node`'s `daemon::exchange` and
//! `daemon::overlay`); it hands this crate a [`network::JobSetup`] per job
//! ([`network::OverlayNetwork::prepare`]).
//!
//! Tests: `node/tests/overlay.rs` (root; loud SKIP otherwise): tunnels between namespaces, pods,
//! isolation between two jobs, the sweep after a crash, the exchange over p2p, DDP across two
//! NATed hosts, the port-forwarding counter-test, and the relay fallback with the direct UDP
//! path blocked. Numbers: `node/examples/overlay_bench.rs`.
//!
//! Relay fallback: [`node::OverlayNode::set_relay`] with the swarm's stream control (the
//! node's `p2p::Client::streams`); peers learnt in the node's cluster exchange name their relay
//! node; [`node::OverlayNode::links`] reports each link `Direct`, `Relayed` or `Pending`
//! ([`router`] has the rules).

pub mod addressing;
pub mod config;
pub mod error;
pub mod keys;
pub mod netns;
pub mod network;
pub mod node;
pub mod pod;
pub mod relay;
pub mod router;
pub mod sweep;
pub mod tun;

pub use error::OverlayError;
