//! Content-addressed block storage: the [`Blockstore`] trait, its two implementations
//! ([`MemoryBlockstore`], the readable spec, and [`SledBlockstore`], the node's disk store), the
//! recursive pin set and garbage collection ([`gc`]).
//!
//! Blocks are keyed by their multihash, as Kubo's blockstore does since v0.12, so the CIDv0 and a
//! CIDv1 of the same bytes name one stored block. Every `put` checks the bytes against the CID.

mod gc;
mod memory;
mod sled;

pub use self::gc::{GcStats, gc, missing_blocks, pin_recursive, unpin};
pub use self::memory::MemoryBlockstore;
pub use self::sled::{SledBlockstore, SledOptions};

use cid::Cid;

use crate::block::BlockError;
use crate::dagpb::DagPbError;

/// Errors of the blockstore, pin set and GC.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A block's bytes do not match its CID; nothing was written.
    #[error(transparent)]
    InvalidBlock(#[from] BlockError),
    /// Writing would exceed the store's configured capacity; nothing was written.
    #[error("blockstore full: {needed} bytes needed, {available} of {capacity} bytes left")]
    Full {
        /// Bytes the write needed.
        needed: u64,
        /// Bytes still free under the capacity.
        available: u64,
        /// The configured capacity in bytes.
        capacity: u64,
    },
    /// The filesystem under a disk store is nearly full: writing would eat into the reserve kept
    /// so that sled never meets `ENOSPC` (sled 0.34 cannot recover from it: its flush, including
    /// the one in `Drop`, waits forever). Nothing was written.
    #[error("disk nearly full: {needed} bytes needed, {free} free, {reserve} kept in reserve")]
    DiskFull {
        /// Bytes the write needed.
        needed: u64,
        /// Bytes the filesystem has free for unprivileged users (`statvfs` `f_bavail`).
        free: u64,
        /// The configured reserve in bytes.
        reserve: u64,
    },
    /// Asking the filesystem for its free space failed.
    #[error("statvfs: {0}")]
    FreeSpace(#[source] std::io::Error),
    /// A DAG walk (pin, CAR export, cat) needs a block that is not stored.
    #[error("DAG {root} is incomplete: block {missing} is not in the blockstore")]
    IncompleteDag {
        /// The root of the walk (boxed to keep the error small).
        root: Box<Cid>,
        /// The first missing block found.
        missing: Cid,
    },
    /// Unpinning a CID that is not pinned.
    #[error("{0} is not pinned")]
    NotPinned(Cid),
    /// A stored dag-pb block does not decode (disk corruption or a foreign block).
    #[error("block {cid} is not valid dag-pb")]
    CorruptNode {
        /// The block.
        cid: Cid,
        /// The decoder's complaint.
        #[source]
        source: DagPbError,
    },
    /// A link uses a codec this crate cannot traverse (only dag-pb and raw are).
    #[error("cannot traverse codec 0x{codec:x} of {cid}")]
    UnsupportedCodec {
        /// The CID.
        cid: Cid,
        /// Its codec.
        codec: u64,
    },
    /// A stored key or pin record is not a valid multihash or CID (disk corruption).
    #[error("corrupt blockstore record: {0}")]
    CorruptRecord(String),
    /// sled failed (I/O error, including a full disk; corruption).
    #[error("sled: {0}")]
    Sled(#[from] ::sled::Error),
}

impl Error {
    /// Whether the caller may retry after freeing space (`Full`, or an I/O error such as ENOSPC).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            Error::Full { .. } | Error::DiskFull { .. } => true,
            Error::Sled(::sled::Error::Io(io)) => {
                io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28)
            }
            _ => false,
        }
    }
}

/// A content-addressed block store with a persistent set of recursive pins.
///
/// Implementations keep blocks by multihash and verify every `put`. Pin records are stored by the
/// store; the *recursive* meaning (the whole DAG is kept) is given by [`pin_recursive`] and [`gc`],
/// which work over any implementation. The conformance suite in `tests/it/blockstore.rs` runs on
/// both implementations.
pub trait Blockstore: Send + Sync {
    /// Stores `data` under `cid` after checking the hash. Returns `true` when the block was new.
    ///
    /// # Errors
    /// [`Error::InvalidBlock`] when the bytes do not match; [`Error::Full`] over capacity.
    fn put(&self, cid: &Cid, data: &[u8]) -> Result<bool, Error>;

    /// The block's bytes, or `None` when absent.
    ///
    /// # Errors
    /// Storage failures only.
    fn get(&self, cid: &Cid) -> Result<Option<Vec<u8>>, Error>;

    /// Whether the block is stored.
    ///
    /// # Errors
    /// Storage failures only.
    fn has(&self, cid: &Cid) -> Result<bool, Error>;

    /// Removes a block regardless of pins (GC is the safe way). Returns `true` when it existed.
    ///
    /// # Errors
    /// Storage failures only.
    fn delete(&self, cid: &Cid) -> Result<bool, Error>;

    /// Sum of stored block sizes, in bytes.
    ///
    /// # Errors
    /// Storage failures only.
    fn size_bytes(&self) -> Result<u64, Error>;

    /// Number of stored blocks.
    ///
    /// # Errors
    /// Storage failures only.
    fn block_count(&self) -> Result<u64, Error>;

    /// Every stored block, named as CIDv1 `raw` of its multihash (the store does not remember the
    /// codec; GC only needs the multihash).
    ///
    /// # Errors
    /// Storage failures or a corrupt key.
    fn all_blocks(&self) -> Result<Vec<Cid>, Error>;

    /// Records `cid` as a recursive pin root (no DAG check: use [`pin_recursive`]).
    ///
    /// # Errors
    /// Storage failures only.
    fn insert_pin(&self, cid: &Cid) -> Result<(), Error>;

    /// Removes a pin record. Returns `true` when it existed.
    ///
    /// # Errors
    /// Storage failures only.
    fn remove_pin(&self, cid: &Cid) -> Result<bool, Error>;

    /// The recursive pin roots, in CID byte order.
    ///
    /// # Errors
    /// Storage failures or a corrupt record.
    fn pins(&self) -> Result<Vec<Cid>, Error>;

    /// Makes earlier writes durable (fsync for disk stores).
    ///
    /// # Errors
    /// Storage failures only.
    fn flush(&self) -> Result<(), Error>;
}

impl<T: Blockstore + ?Sized> Blockstore for std::sync::Arc<T> {
    fn put(&self, cid: &Cid, data: &[u8]) -> Result<bool, Error> {
        (**self).put(cid, data)
    }
    fn get(&self, cid: &Cid) -> Result<Option<Vec<u8>>, Error> {
        (**self).get(cid)
    }
    fn has(&self, cid: &Cid) -> Result<bool, Error> {
        (**self).has(cid)
    }
    fn delete(&self, cid: &Cid) -> Result<bool, Error> {
        (**self).delete(cid)
    }
    fn size_bytes(&self) -> Result<u64, Error> {
        (**self).size_bytes()
    }
    fn block_count(&self) -> Result<u64, Error> {
        (**self).block_count()
    }
    fn all_blocks(&self) -> Result<Vec<Cid>, Error> {
        (**self).all_blocks()
    }
    fn insert_pin(&self, cid: &Cid) -> Result<(), Error> {
        (**self).insert_pin(cid)
    }
    fn remove_pin(&self, cid: &Cid) -> Result<bool, Error> {
        (**self).remove_pin(cid)
    }
    fn pins(&self) -> Result<Vec<Cid>, Error> {
        (**self).pins()
    }
    fn flush(&self) -> Result<(), Error> {
        (**self).flush()
    }
}

/// The storage key of a block: its multihash bytes.
pub(crate) fn block_key(cid: &Cid) -> Vec<u8> {
    cid.hash().to_bytes()
}

/// Rebuilds a CID (v1, raw) from a stored multihash key.
pub(crate) fn cid_from_key(key: &[u8]) -> Result<Cid, Error> {
    let mh = cid::multihash::Multihash::<64>::from_bytes(key)
        .map_err(|e| Error::CorruptRecord(format!("block key is not a multihash: {e}")))?;
    Ok(Cid::new_v1(crate::block::RAW, mh))
}
