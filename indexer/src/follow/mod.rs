//! Chain following over the Ouroboros mini-protocols (pallas-network, connected through
//! `ganglion-cardano`'s client facades), as a stream of
//! [`ChainEvent`]s: N2N (chainsync headers + blockfetch) to a relay, or N2C (chainsync with
//! full blocks) to a node socket. Works against a real cardano-node on preprod or mainnet
//! (give its address or socket and the network magic: 1 preprod, 764824073 mainnet) and
//! against the Ganglion devnet, which speaks the same protocols.

mod n2c;
mod n2n;

use std::path::PathBuf;

use pallas_network::miniprotocols::Point as WirePoint;
use pallas_network::miniprotocols::blockfetch;
use pallas_network::miniprotocols::chainsync::{self, NextResponse};

pub use n2c::N2cFollower;
pub use n2n::N2nFollower;

/// Where to follow the chain from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A relay's N2N TCP address (`host:port`).
    N2n {
        /// `host:port`.
        addr: String,
        /// Network magic.
        magic: u64,
    },
    /// A node's N2C Unix socket.
    N2cUnix {
        /// Socket path.
        socket: PathBuf,
        /// Network magic.
        magic: u64,
    },
    /// A node's N2C endpoint over TCP (the devnet offers one for convenience).
    N2cTcp {
        /// `host:port`.
        addr: String,
        /// Network magic.
        magic: u64,
    },
}

/// What the chain did next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainEvent {
    /// A new block.
    RollForward {
        /// HFC-wrapped CBOR `[era, block]`.
        block: Vec<u8>,
        /// The peer's tip is above this block (its chainsync tip says so): more blocks are
        /// ready without waiting, so a catching-up reader may batch its writes.
        more: bool,
    },
    /// The chain switched forks: undo every block after this point (`None` = origin).
    RollBackward(Option<(u64, [u8; 32])>),
}

/// Follower failures; all are retryable by reconnecting.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// Connecting or the handshake failed.
    #[error("connecting to {source_desc}: {source}")]
    Connect {
        /// The source.
        source_desc: String,
        /// Why.
        #[source]
        source: ganglion_cardano::client::ClientError,
    },
    /// Chainsync failed mid-stream (connection, agency, decoding).
    #[error("chainsync: {0}")]
    Chainsync(#[source] chainsync::ClientError),
    /// Blockfetch failed mid-stream.
    #[error("blockfetch: {0}")]
    Blockfetch(#[source] blockfetch::ClientError),
    /// The peer knows none of the points offered to intersect at.
    #[error("chainsync: no intersection with the given points")]
    NoIntersection,
    /// The peer sent a block that does not extend the indexer's tip (it skipped ahead).
    #[error("chainsync: the block does not extend the indexer's tip")]
    NotNext,
    /// A header the follower must decode did not decode.
    #[error("header does not decode: {0}")]
    Header(#[source] pallas_traverse::Error),
    /// A block the peer sent did not decode (the indexer's decoder message).
    #[error("block does not decode: {0}")]
    Block(String),
}

/// What a chainsync server says next, once it has something to say: content `C` (a block over
/// N2C, a header over N2N) or a rollback to a point (`None`: the origin).
pub(crate) enum Roll<C> {
    /// Content and the block number of the server's tip.
    Forward(C, u64),
    Backward(Option<(u64, [u8; 32])>),
}

/// The next roll forward or backward of `client`, waiting through the server's `Await`.
///
/// # Errors
/// [`FollowError::Chainsync`].
pub(crate) async fn next_roll<C>(client: &mut chainsync::Client<C>) -> Result<Roll<C>, FollowError>
where
    chainsync::Message<C>: pallas_codec::Fragment,
{
    loop {
        let r = client
            .request_or_await_next()
            .await
            .map_err(FollowError::Chainsync)?;
        match r {
            NextResponse::RollForward(content, tip) => return Ok(Roll::Forward(content, tip.1)),
            NextResponse::RollBackward(point, _) => return Ok(Roll::Backward(from_wire(&point))),
            NextResponse::Await => continue,
        }
    }
}

/// The block number in an HFC-wrapped Shelley-or-later block's header body
/// (`[era, [[[block_number, slot, …], sig], …]]`, the ledger specs' CDDL), read without
/// decoding the block; `None` for Byron blocks and anything else.
pub(crate) fn block_number(wrapped: &[u8]) -> Option<u64> {
    let mut d = pallas_codec::minicbor::Decoder::new(wrapped);
    d.array().ok()?;
    if d.u16().ok()? < 2 {
        return None;
    }
    d.array().ok()?; // block
    d.array().ok()?; // header
    d.array().ok()?; // header body
    d.u64().ok()
}

pub(crate) fn wire_point(p: Option<(u64, [u8; 32])>) -> WirePoint {
    match p {
        Some((slot, hash)) => WirePoint::Specific(slot, hash.to_vec()),
        None => WirePoint::Origin,
    }
}

pub(crate) fn from_wire(p: &WirePoint) -> Option<(u64, [u8; 32])> {
    match p {
        WirePoint::Origin => None,
        WirePoint::Specific(slot, hash) => Some((*slot, hash.as_slice().try_into().ok()?)),
    }
}

/// A live connection to a chain source.
pub enum Follower {
    /// Over N2N.
    N2n(N2nFollower),
    /// Over N2C.
    N2c(N2cFollower),
}

impl Follower {
    /// Connects to `source` and completes the handshake.
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect(source: &Source) -> Result<Self, FollowError> {
        Ok(match source {
            Source::N2n { addr, magic } => Self::N2n(N2nFollower::connect(addr, *magic).await?),
            Source::N2cUnix { socket, magic } => {
                Self::N2c(N2cFollower::connect_unix(socket, *magic).await?)
            }
            Source::N2cTcp { addr, magic } => {
                Self::N2c(N2cFollower::connect_tcp(addr, *magic).await?)
            }
        })
    }

    /// Intersects with the first of `points` (newest first) the peer knows and returns it
    /// (`None` = origin). An empty list starts from origin.
    ///
    /// # Errors
    /// [`FollowError::NoIntersection`] when no point is known, [`FollowError::Chainsync`].
    pub async fn intersect(
        &mut self,
        points: &[Option<(u64, [u8; 32])>],
    ) -> Result<Option<(u64, [u8; 32])>, FollowError> {
        let wire: Vec<WirePoint> = if points.is_empty() {
            vec![WirePoint::Origin]
        } else {
            points.iter().map(|p| wire_point(*p)).collect()
        };
        let found = match self {
            Self::N2n(f) => f.chainsync().find_intersect(wire).await,
            Self::N2c(f) => f.chainsync().find_intersect(wire).await,
        }
        .map_err(FollowError::Chainsync)?;
        match found.0 {
            Some(p) => Ok(from_wire(&p)),
            None => Err(FollowError::NoIntersection),
        }
    }

    /// Intersects at the peer's current tip and returns it.
    ///
    /// # Errors
    /// [`FollowError::Chainsync`].
    pub async fn intersect_tip(&mut self) -> Result<Option<(u64, [u8; 32])>, FollowError> {
        let p = match self {
            Self::N2n(f) => f.chainsync().intersect_tip().await,
            Self::N2c(f) => f.chainsync().intersect_tip().await,
        }
        .map_err(FollowError::Chainsync)?;
        Ok(from_wire(&p))
    }

    /// The next event, waiting at the tip for a new block. Not cancel-safe: dropping the
    /// future mid-message leaves the connection unusable (reconnect).
    ///
    /// # Errors
    /// [`FollowError`].
    pub async fn next(&mut self) -> Result<ChainEvent, FollowError> {
        match self {
            Self::N2n(f) => f.next().await,
            Self::N2c(f) => f.next().await,
        }
    }
}
