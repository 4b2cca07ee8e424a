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

    /// The PostgreSQL store failed (connection, SQL).
    #[error("postgres: {0}")]
    Postgres(#[from] postgres::Error),

    /// The PostgreSQL schema could not be migrated (refinery).
    #[error("migrating the PostgreSQL schema: {0}")]
    Migration(#[source] Box<refinery::Error>),

    /// Another follower holds the database's writer lock: one writer per database.
    #[error(
        "another ganglion-indexer follower writes this database (its writer lock is held); stop it, or open this one read-only"
    )]
    WriterLocked,

    /// A commit on a store opened read-only.
    #[error("this store is open read-only (a serve process): only the follower writes")]
    ReadOnly,

    /// The store's connections are gone (it was dropped, or a connection thread ended).
    #[error("the store's connections are closed")]
    StoreClosed,

    /// A store thread could not be started.
    #[error("starting a store thread: {0}")]
    Thread(String),

    /// A number too large for its SQL column (slots, heights and indexes are `bigint`).
    #[error("{what} {value} does not fit a bigint column")]
    Unrepresentable {
        /// What it is.
        what: &'static str,
        /// The value.
        value: u64,
    },

    /// Rows built for one SQL table disagree in their columns (a bug in the row builders).
    #[error("rows for table {0} disagree in their columns")]
    RowShape(&'static str),

    /// A store location that is neither a folder nor a `postgres://` URL.
    #[error("store {0:?}: expected a folder (sled) or a postgres:// URL")]
    StoreSpec(String),

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
