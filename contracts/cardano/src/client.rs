//! Client facades for the devnet and a cardano-node — what the wallet and the indexer
//! connect with:
//! - [`N2cClient`] (node-to-client, a node's socket): handshake, chainsync (whole blocks),
//!   local-state-query and local-tx-submission with readable rejections;
//! - [`N2nClient`] (node-to-node, a relay's TCP port): handshake, chainsync (headers),
//!   blockfetch and the keep-alive a relay expects.
//!
//! The mini-protocol clients are pallas' own, so any pallas `NodeClient`/`PeerClient` user
//! can follow the devnet too (the devnet's interoperability tests use those on purpose);
//! submission needs this facade to read rejections ([`crate::localtx`]). Handshakes:
//! node-to-client versions 10 and above, node-to-node 7 and above, with the network magic
//! (ouroboros-network `NodeToClientVersion`, `NodeToNodeVersion`).

use std::path::Path;
use std::time::Duration;

use pallas_network::facades::{KeepAliveHandle, KeepAliveLoop};
use pallas_network::miniprotocols::handshake::{self, n2c, n2n};
use pallas_network::miniprotocols::localstate;
use pallas_network::miniprotocols::localtxsubmission::{EraTx, Response};
use pallas_network::miniprotocols::{
    PROTOCOL_N2C_CHAIN_SYNC, PROTOCOL_N2C_HANDSHAKE, PROTOCOL_N2C_STATE_QUERY,
    PROTOCOL_N2C_TX_SUBMISSION, PROTOCOL_N2N_BLOCK_FETCH, PROTOCOL_N2N_CHAIN_SYNC,
    PROTOCOL_N2N_HANDSHAKE, PROTOCOL_N2N_KEEP_ALIVE,
};
use pallas_network::miniprotocols::{blockfetch, chainsync, keepalive};
use pallas_network::multiplexer::{Bearer, Plexer, RunningPlexer};
use tokio::net::ToSocketAddrs;

use crate::localtx::{self, CONWAY_TX_ERA, WireRejection};

/// Client errors: connecting, the handshake, the submission protocol, a rejection.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting failed.
    #[error("cannot connect: {0}")]
    Connect(#[source] std::io::Error),
    /// The handshake failed (connection, protocol).
    #[error("handshake failed: {0}")]
    Handshake(#[source] pallas_network::miniprotocols::handshake::Error),
    /// The node refused every version offered (its answer, as pallas prints it).
    #[error("handshake refused: {0}")]
    HandshakeRefused(String),
    /// The submission protocol failed (connection closed, agency).
    #[error("local-tx-submission")]
    Protocol(#[from] pallas_network::miniprotocols::localtxsubmission::Error),
    /// The devnet rejected the transaction.
    #[error("rejected: {0}")]
    Rejected(WireRejection),
    /// A node rejected the transaction with a reason not in the devnet's format (a real
    /// cardano-node sends its Conway `HardForkApplyTxErr`): the reason's raw CBOR, for a
    /// decoder of that encoding (the node's `wallet::rejection`).
    #[error("rejected (reason CBOR {})", hex::encode(.0))]
    RejectedCbor(Vec<u8>),
}

/// An N2C connection (to the devnet or a cardano-node) with its three mini-protocol clients.
pub struct N2cClient {
    /// `None` once closed (taken by [`N2cClient::close`] or the drop).
    plexer: Option<RunningPlexer>,
    chainsync: chainsync::N2CClient,
    statequery: localstate::Client,
    submission: localtx::Client,
}

impl N2cClient {
    /// Connect over a node's Unix socket (the devnet's `n2c.socket`, cardano-node's
    /// `node.socket`) and hand-shake with network `magic`.
    ///
    /// # Errors
    /// [`ClientError::Connect`], [`ClientError::Handshake`], [`ClientError::HandshakeRefused`].
    pub async fn connect_unix(path: &Path, magic: u64) -> Result<Self, ClientError> {
        let bearer = Bearer::connect_unix(path)
            .await
            .map_err(ClientError::Connect)?;
        Self::handshake(bearer, magic).await
    }

    /// Connect over an N2C TCP port (`host:port`; the devnet's — cardano-node serves N2C on a
    /// socket only) and hand-shake with network `magic`.
    ///
    /// # Errors
    /// [`ClientError::Connect`], [`ClientError::Handshake`], [`ClientError::HandshakeRefused`].
    pub async fn connect_tcp(addr: impl ToSocketAddrs, magic: u64) -> Result<Self, ClientError> {
        let bearer = Bearer::connect_tcp(addr)
            .await
            .map_err(ClientError::Connect)?;
        Self::handshake(bearer, magic).await
    }

    async fn handshake(bearer: Bearer, magic: u64) -> Result<Self, ClientError> {
        let mut plexer = Plexer::new(bearer);
        let mut hs: handshake::N2CClient =
            handshake::Client::new(plexer.subscribe_client(PROTOCOL_N2C_HANDSHAKE));
        let chainsync = chainsync::N2CClient::new(plexer.subscribe_client(PROTOCOL_N2C_CHAIN_SYNC));
        let statequery = localstate::Client::new(plexer.subscribe_client(PROTOCOL_N2C_STATE_QUERY));
        let submission = localtx::Client::new(plexer.subscribe_client(PROTOCOL_N2C_TX_SUBMISSION));
        let plexer = plexer.spawn();
        let answer = hs.handshake(n2c::VersionTable::v10_and_above(magic)).await;
        Ok(Self {
            plexer: Some(accepted(answer, plexer).await?),
            chainsync,
            statequery,
            submission,
        })
    }

    /// Submit a Conway transaction (raw CBOR).
    ///
    /// # Errors
    /// [`ClientError::Rejected`] with the devnet's rule and reason,
    /// [`ClientError::RejectedCbor`] with any other node's reason; [`ClientError::Protocol`].
    pub async fn submit(&mut self, tx: &[u8]) -> Result<(), ClientError> {
        match self
            .submission
            .submit_tx(EraTx(CONWAY_TX_ERA, tx.to_vec()))
            .await?
        {
            Response::Accepted => Ok(()),
            Response::Rejected(r) => Err(match r.devnet() {
                Some(w) => ClientError::Rejected(w),
                None => ClientError::RejectedCbor(r.0),
            }),
        }
    }

    /// The chainsync client (whole blocks).
    pub fn chainsync(&mut self) -> &mut chainsync::N2CClient {
        &mut self.chainsync
    }

    /// The local-state-query client.
    pub fn statequery(&mut self) -> &mut localstate::Client {
        &mut self.statequery
    }

    /// Close the connection.
    pub async fn close(mut self) {
        if let Some(plexer) = self.plexer.take() {
            plexer.abort().await;
        }
    }
}

impl Drop for N2cClient {
    /// A dropped client (a follower reconnecting) stops its multiplexer tasks rather than
    /// leave them holding the connection until the node closes it.
    fn drop(&mut self) {
        abort_now(self.plexer.take());
    }
}

/// Aborts `plexer`'s tasks now. `RunningPlexer::abort` only aborts the two tasks' handles and
/// awaits nothing: one poll runs it to the end, no runtime needed (a `Drop` cannot await).
fn abort_now(plexer: Option<RunningPlexer>) {
    if let Some(plexer) = plexer {
        let abort = std::pin::pin!(plexer.abort());
        let _ = std::future::Future::poll(
            abort,
            &mut std::task::Context::from_waker(std::task::Waker::noop()),
        );
    }
}

/// The connection `plexer` once the handshake's `answer` accepted a version; otherwise the
/// connection is closed and the refusal or failure returned.
async fn accepted<D: std::fmt::Debug + Clone>(
    answer: Result<handshake::Confirmation<D>, handshake::Error>,
    plexer: RunningPlexer,
) -> Result<RunningPlexer, ClientError> {
    let refused = match answer {
        Ok(handshake::Confirmation::Accepted(..)) => return Ok(plexer),
        Ok(other) => ClientError::HandshakeRefused(format!("{other:?}")),
        Err(e) => ClientError::Handshake(e),
    };
    plexer.abort().await;
    Err(refused)
}

/// Seconds between keep-alive pings on an N2N connection (pallas' default; a cardano-node
/// relay drops a peer that stays silent for long).
pub const KEEP_ALIVE_INTERVAL_S: u64 = pallas_network::facades::DEFAULT_KEEP_ALIVE_INTERVAL_SEC;

/// An N2N connection to a relay (the devnet's N2N port, a cardano-node relay) with its
/// chainsync (headers) and blockfetch clients; a keep-alive task pings it every
/// [`KEEP_ALIVE_INTERVAL_S`] seconds until [`N2nClient::close`].
pub struct N2nClient {
    /// `None` once closed (taken by [`N2nClient::close`] or the drop).
    plexer: Option<RunningPlexer>,
    keepalive: KeepAliveHandle,
    chainsync: chainsync::N2NClient,
    blockfetch: blockfetch::Client,
}

impl N2nClient {
    /// Connect to a relay at `addr` (`host:port`) and hand-shake with network `magic`
    /// (node-to-node versions 7 and above), then start the keep-alive.
    ///
    /// # Errors
    /// [`ClientError::Connect`], [`ClientError::Handshake`], [`ClientError::HandshakeRefused`].
    pub async fn connect(addr: impl ToSocketAddrs, magic: u64) -> Result<Self, ClientError> {
        let bearer = Bearer::connect_tcp(addr)
            .await
            .map_err(ClientError::Connect)?;
        let mut plexer = Plexer::new(bearer);
        let mut hs: handshake::Client<n2n::VersionData> =
            handshake::Client::new(plexer.subscribe_client(PROTOCOL_N2N_HANDSHAKE));
        let chainsync = chainsync::N2NClient::new(plexer.subscribe_client(PROTOCOL_N2N_CHAIN_SYNC));
        let blockfetch = blockfetch::Client::new(plexer.subscribe_client(PROTOCOL_N2N_BLOCK_FETCH));
        let keepalive = keepalive::Client::new(plexer.subscribe_client(PROTOCOL_N2N_KEEP_ALIVE));
        let plexer = plexer.spawn();
        let answer = hs.handshake(n2n::VersionTable::v7_and_above(magic)).await;
        let plexer = accepted(answer, plexer).await?;
        Ok(Self {
            plexer: Some(plexer),
            keepalive: KeepAliveLoop::client(keepalive, Duration::from_secs(KEEP_ALIVE_INTERVAL_S))
                .spawn(),
            chainsync,
            blockfetch,
        })
    }

    /// The chainsync client (headers).
    pub fn chainsync(&mut self) -> &mut chainsync::N2NClient {
        &mut self.chainsync
    }

    /// The blockfetch client.
    pub fn blockfetch(&mut self) -> &mut blockfetch::Client {
        &mut self.blockfetch
    }

    /// Stop the keep-alive and close the connection.
    pub async fn close(mut self) {
        self.keepalive.abort();
        if let Some(plexer) = self.plexer.take() {
            plexer.abort().await;
        }
    }
}

impl Drop for N2nClient {
    /// A dropped client (a follower reconnecting) stops its keep-alive and multiplexer tasks
    /// rather than leave them pinging a relay nobody reads from.
    fn drop(&mut self) {
        self.keepalive.abort();
        abort_now(self.plexer.take());
    }
}
