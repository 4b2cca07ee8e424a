//! [`Error`]: what the p2p layer's calls fail with.

use libp2p::PeerId;

use super::bitswap;

/// Errors of the p2p layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The swarm could not be built (transport or behaviour configuration).
    #[error("building the swarm: {0}")]
    Build(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Listening failed.
    #[error("listen: {0}")]
    Listen(#[from] libp2p::TransportError<std::io::Error>),
    /// A listener closed before reporting an address.
    #[error("listener closed before it had an address")]
    ListenerClosed,
    /// Dialing failed.
    #[error("dial: {0}")]
    Dial(#[from] libp2p::swarm::DialError),
    /// Publishing an offer failed (e.g. no peer on the topic yet).
    #[error("publish: {0}")]
    Publish(#[from] libp2p::gossipsub::PublishError),
    /// Subscribing to the offer topic failed.
    #[error("subscribe: {0}")]
    Subscribe(#[from] libp2p::gossipsub::SubscriptionError),
    /// A request to a peer failed (dial, timeout, unsupported protocol, connection closed, codec).
    #[error("request to {peer}: {source}")]
    Request {
        /// The peer.
        peer: PeerId,
        /// Why.
        #[source]
        source: libp2p::request_response::OutboundFailure,
    },
    /// A DAG fetch over bitswap failed.
    #[error("fetch: {0}")]
    Fetch(Box<bitswap::FetchError>),
    /// Reading the live bonds from the indexer failed.
    #[error("bonds from the indexer: {0}")]
    Bonds(#[source] Box<ganglion_indexer::Error>),
    /// The event loop has stopped.
    #[error("the p2p event loop has stopped")]
    Stopped,
    /// Reading or writing the node key.
    #[error("node key {path}: {source}")]
    Key {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The node key file does not hold a valid key.
    #[error("node key {path}: {source}")]
    KeyDecode {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: libp2p::identity::DecodingError,
    },
}

impl From<bitswap::FetchError> for Error {
    fn from(e: bitswap::FetchError) -> Self {
        Error::Fetch(Box::new(e))
    }
}
