//! The indexer's error type.

/// What can go wrong while indexing or querying.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The block bytes do not decode (pallas-traverse).
    #[error("block at slot {slot:?} does not decode: {reason}")]
    BlockDecode {
        /// Slot, when known.
        slot: Option<u64>,
        /// Decoder message.
        reason: String,
    },

    /// A block does not extend the cursor (its parent is not the tip).
    #[error("block {hash} (height {height}) does not extend the tip at height {tip}")]
    NotNext {
        /// Block hash hex.
        hash: String,
        /// Block height.
        height: u64,
        /// Tip height.
        tip: u64,
    },

    /// A rollback target older than the undo window (k blocks).
    #[error("cannot roll back to slot {slot}: beyond the {k}-block undo window")]
    RollbackTooDeep {
        /// Target slot.
        slot: u64,
        /// Undo window.
        k: u64,
    },

    /// The rollback target is not a block the indexer applied.
    #[error("unknown rollback point: slot {slot}, hash {hash}")]
    UnknownPoint {
        /// Target slot.
        slot: u64,
        /// Target hash hex.
        hash: String,
    },

    /// The store failed (sled I/O).
    #[error("store: {0}")]
    Store(#[from] sled::Error),

    /// A stored record does not decode (corruption or a format change).
    #[error("stored {what} is corrupt: {source}")]
    Corrupt {
        /// Which record.
        what: &'static str,
        /// Decoder error.
        #[source]
        source: serde_json::Error,
    },
}

/// Result with the indexer's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
