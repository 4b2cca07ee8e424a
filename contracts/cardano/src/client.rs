//! An N2C client facade for the devnet and a cardano-node: handshake, chainsync (whole
//! blocks), local-state-query and local-tx-submission with readable rejections — what the
//! wallet, the indexer and the devnet's own tests connect with.
//!
//! Chainsync and local-state-query are pallas' own clients, so any pallas `NodeClient`
//! user can follow the devnet; only submission needs this facade to read rejections
//! ([`crate::localtx`]). Handshake: node-to-client versions 10 and above with the network
//! magic (ouroboros-network `NodeToClientVersion`).

use std::net::SocketAddr;
use std::path::Path;

use pallas_network::miniprotocols::chainsync;
use pallas_network::miniprotocols::handshake::{self, n2c};
use pallas_network::miniprotocols::localstate;
use pallas_network::miniprotocols::localtxsubmission::{EraTx, Response};
use pallas_network::miniprotocols::{
    PROTOCOL_N2C_CHAIN_SYNC, PROTOCOL_N2C_HANDSHAKE, PROTOCOL_N2C_STATE_QUERY,
    PROTOCOL_N2C_TX_SUBMISSION,
};
use pallas_network::multiplexer::{Bearer, Plexer, RunningPlexer};

use crate::localtx::{self, CONWAY_TX_ERA, WireRejection};

/// Client errors: connecting, the handshake, the submission protocol, a rejection.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting failed.
    #[error("cannot connect")]
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
    plexer: RunningPlexer,
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

    /// Connect over an N2C TCP port (the devnet's; cardano-node serves N2C on a socket only)
    /// and hand-shake with network `magic`.
    ///
    /// # Errors
    /// [`ClientError::Connect`], [`ClientError::Handshake`], [`ClientError::HandshakeRefused`].
    pub async fn connect_tcp(addr: SocketAddr, magic: u64) -> Result<Self, ClientError> {
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
        match hs.handshake(n2c::VersionTable::v10_and_above(magic)).await {
            Ok(handshake::Confirmation::Accepted(..)) => Ok(Self {
                plexer,
                chainsync,
                statequery,
                submission,
            }),
            Ok(other) => {
                plexer.abort().await;
                Err(ClientError::HandshakeRefused(format!("{other:?}")))
            }
            Err(e) => {
                plexer.abort().await;
                Err(ClientError::Handshake(e))
            }
        }
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
    pub async fn close(self) {
        self.plexer.abort().await;
    }
}
