//! Errors of the overlay.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// What went wrong building or running a job's overlay.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// The configured pool is unusable (the message names the rule).
    #[error("overlay pool {pool}: {reason}")]
    Pool {
        /// The pool as configured.
        pool: Ipv4Net,
        /// Which rule it breaks.
        reason: String,
    },
    /// A config value is out of range (`[overlay]`).
    #[error("{key}: {reason}")]
    Config {
        /// The key, e.g. `overlay.mtu`.
        key: &'static str,
        /// The rule it breaks.
        reason: String,
    },
    /// `[overlay] mtu` is larger than any WireGuard packet the path can carry: above the path
    /// MTU − 60 (IPv4 20 + UDP 8 + WireGuard 32; `overlay::config::overlay_mtu`).
    #[error(
        "{key}: {mtu} bytes is above the path MTU {path_mtu} ({from}) less 60 bytes of IPv4, UDP \
         and WireGuard framing = {max}; leave {key} unset to use the path MTU less 80"
    )]
    MtuAbovePath {
        /// `overlay.mtu`.
        key: &'static str,
        /// The configured MTU, bytes.
        mtu: u32,
        /// The path MTU it was checked against, bytes.
        path_mtu: u32,
        /// Where that path MTU came from (`overlay.path_mtu`, an interface, the default).
        from: String,
        /// The largest MTU accepted, bytes (path − 60).
        max: u32,
    },
    /// Every subnet of the pool is held by a running job.
    #[error("overlay pool {pool} is exhausted ({subnets} subnets in use)")]
    PoolExhausted {
        /// The pool.
        pool: Ipv4Net,
        /// How many subnets it has.
        subnets: u64,
    },
    /// The job has more containers than its subnet has host addresses.
    #[error("world size {world} does not fit in a /{prefix} subnet ({capacity} addresses)")]
    WorldTooLarge {
        /// Containers in the job.
        world: u32,
        /// The per-job prefix length.
        prefix: u8,
        /// Host addresses in such a subnet.
        capacity: u64,
    },
    /// A peer was configured with an address outside the job's subnet, or twice.
    #[error("peer address {0} is outside the job subnet or already taken")]
    BadPeer(Ipv4Addr),
    /// A peer's `cluster` hello breaks a rule (the message names it).
    #[error("bad cluster hello: {0}")]
    BadHello(String),
    /// The `cluster` exchange with a peer failed.
    #[error("cluster exchange with {peer}: {reason}")]
    Exchange {
        /// The peer id.
        peer: String,
        /// Why.
        reason: String,
    },
    /// The job is already (or not) set up on this node.
    #[error("job {0}: {1}")]
    Job(String, &'static str),
    /// The node ran out of 24-bit receiver indices.
    #[error("no free receiver index")]
    IndicesExhausted,
    /// The overlay's UDP port could not be bound (`[overlay] listen_port`; another node's
    /// overlay on this host holds it?).
    #[error(
        "cannot bind the overlay's UDP port {port} ([overlay] listen_port; every provider node \
         on a host needs its own): {source}"
    )]
    Bind {
        /// The port asked for.
        port: u16,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A system call (TUN, ioctl, setns, socket) failed.
    #[error("{operation}: {source}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The Docker Engine refused a call.
    #[error("{operation}: {source}")]
    Engine {
        /// What was being done.
        operation: &'static str,
        /// The engine's error.
        source: bollard::errors::Error,
    },
    /// The relay fallback's protocol is already registered on the swarm (one overlay node per
    /// swarm).
    #[error("overlay relay: {0}")]
    Relay(#[source] libp2p_stream::AlreadyRegistered),
    /// The relay fallback of this overlay node is already set up.
    #[error("overlay relay: already set up on this overlay node")]
    RelayAlreadySet,
    /// A sandbox container is not running (no PID, so no namespace to join).
    #[error("sandbox container {0} is not running")]
    SandboxNotRunning(String),
    /// One of the node's driver loops (UDP receive, timer) ended: they end only by panicking
    /// or being cancelled, and the overlay moves no packet without them.
    #[error("the overlay's {which} loop stopped ({how})")]
    DriverStopped {
        /// `receive` or `timer`.
        which: &'static str,
        /// `panicked`, `cancelled` or `returned`.
        how: &'static str,
    },
}

impl OverlayError {
    /// A mapper for `map_err` naming the failed operation.
    pub(crate) fn io(operation: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { operation, source }
    }
}
