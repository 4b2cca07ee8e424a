//! Why an audit could not be made (as opposed to a check that failed, which is in the report).

use ganglion_contracts::v2::datum::JobId;

/// Audit failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The indexer has no job with this id (not locked, or not followed yet).
    #[error("job {0} is not on chain (as far as this node's indexer has followed it)")]
    UnknownJob(JobId),
    /// The indexer's store.
    #[error("indexer: {0}")]
    Indexer(#[from] ganglion_indexer::Error),
    /// The blockstore (boxed: its errors carry CIDs by value).
    #[error("blockstore: {0}")]
    Blockstore(Box<ganglion_storage::blockstore::Error>),
    /// No provider with this key hash or peer id is known on chain.
    #[error("no provider {0} on chain")]
    UnknownProvider(String),
    /// A market query on a node that runs no p2p swarm.
    #[error("this node runs no p2p swarm")]
    NoSwarm,
    /// The node's swarm did not answer (boxed: its errors are large).
    #[error("p2p: {0}")]
    Swarm(#[from] Box<ganglion_p2p::Error>),
    /// A query about this node as a provider on a node without a payment key.
    #[error("this node has no payment key: run `ganglion wallet new`")]
    NoPaymentKey,
}

impl From<ganglion_storage::blockstore::Error> for AuditError {
    fn from(e: ganglion_storage::blockstore::Error) -> Self {
        Self::Blockstore(Box::new(e))
    }
}
