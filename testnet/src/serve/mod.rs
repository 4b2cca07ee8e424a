//! Ouroboros servers: N2N over TCP, N2C over a Unix socket and TCP; and the HTTP API in
//! Blockfrost's and Kupo's conventions ([`blockfrost`]).
//!
//! Each accept loop runs until cancelled and tracks its connection tasks; a connection
//! that breaks a protocol (garbage bytes, wrong agency, handshake timeout) is closed on its
//! own without affecting the others. Nothing here panics on input.

pub mod blockfetch;
pub mod blockfrost;
pub mod chainsync;
pub mod localstate;
pub mod localtx;
pub mod n2c;
pub mod n2n;

use std::time::Duration;

/// How long a new connection may take to complete its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors ending one connection (never the server).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The handshake protocol failed (decoding, a closed channel).
    #[error("handshake failed: {0}")]
    Handshake(#[from] pallas_network::miniprotocols::handshake::Error),
    /// The client offered no version this server speaks (or another network magic).
    #[error("handshake failed: no common version (or another network magic)")]
    NoCommonVersion,
    /// The client did not complete the handshake within [`HANDSHAKE_TIMEOUT`].
    #[error("handshake failed: timed out after {} s", HANDSHAKE_TIMEOUT.as_secs())]
    HandshakeTimeout,
    /// Chainsync protocol error (agency, decoding, closed channel).
    #[error("chainsync")]
    ChainSync(#[from] pallas_network::miniprotocols::chainsync::ServerError),
    /// Blockfetch protocol error.
    #[error("blockfetch")]
    BlockFetch(#[from] pallas_network::miniprotocols::blockfetch::ServerError),
    /// Keepalive protocol error.
    #[error("keepalive")]
    KeepAlive(#[from] pallas_network::miniprotocols::keepalive::ServerError),
    /// Local-tx-submission protocol error.
    #[error("local-tx-submission")]
    LocalTx(#[from] pallas_network::miniprotocols::localtxsubmission::Error),
    /// Local-state-query protocol error.
    #[error("local-state-query")]
    LocalState(#[from] pallas_network::miniprotocols::localstate::Error),
    /// The store failed while serving.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}
