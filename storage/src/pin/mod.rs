//! Pinning services behind one trait: [`Embedded`] (the node's own blockstore, the default) and
//! [`Kubo`] (a Kubo daemon's HTTP RPC, when configured). Both pass the conformance suite in
//! `tests/it/pinner.rs`.

mod embedded;
mod kubo;

pub use self::embedded::Embedded;
pub use self::kubo::Kubo;

use std::future::Future;
use std::path::Path;

use cid::Cid;
use tokio::io::AsyncWrite;

use crate::unixfs::ImportOptions;

/// Errors of a [`Pinner`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// UnixFS import failed (input unreadable, store full…).
    #[error(transparent)]
    Import(#[from] crate::unixfs::Error),
    /// The blockstore failed; [`crate::blockstore::Error::IncompleteDag`] when pinning a CID whose
    /// blocks are not stored.
    #[error(transparent)]
    Store(#[from] crate::blockstore::Error),
    /// CAR export failed.
    #[error(transparent)]
    Car(#[from] crate::car::Error),
    /// Unpinning a CID that is not pinned.
    #[error("{0} is not pinned")]
    NotPinned(Cid),
    /// The configured Kubo RPC address is not a URL.
    #[error("invalid Kubo RPC endpoint {endpoint:?}: {source}")]
    InvalidEndpoint {
        /// What was configured.
        endpoint: String,
        /// The URI parser's complaint.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The Kubo daemon cannot be reached (down, wrong address). Retryable.
    #[error("Kubo RPC at {endpoint} is unreachable: {source}")]
    Unavailable {
        /// The RPC base URL.
        endpoint: String,
        /// The client error.
        #[source]
        source: ipfs_api_backend_hyper::Error,
    },
    /// The Kubo daemon answered with an error.
    #[error("Kubo RPC {operation} failed: {source}")]
    Rpc {
        /// The RPC path, e.g. `/pin/add`.
        operation: &'static str,
        /// The client error (the daemon's message is inside).
        #[source]
        source: ipfs_api_backend_hyper::Error,
    },
    /// The daemon's answer does not parse.
    #[error("Kubo RPC {operation} returned an unexpected body: {detail}")]
    BadResponse {
        /// The RPC path.
        operation: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Kubo computed another CID than ours for the same bytes and options: the pin is refused
    /// (and Kubo's pin of its CID removed again).
    #[error("Kubo returned CID {returned}, expected {expected}")]
    CidMismatch {
        /// The CID computed locally.
        expected: Cid,
        /// What Kubo returned.
        returned: String,
    },
    /// The operation took longer than allowed (e.g. pinning a CID no reachable node has).
    #[error("{operation} did not finish within {limit_ms} ms")]
    Timeout {
        /// The operation.
        operation: &'static str,
        /// The limit in milliseconds.
        limit_ms: u64,
    },
    /// Writing the output (cat, CAR) or reading the input file failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A blocking task panicked or was cancelled.
    #[error("background task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Error {
    /// Whether retrying later may succeed (daemon down, timeout, store out of space).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unavailable { .. } | Error::Timeout { .. } => true,
            Error::Store(e) => e.is_out_of_space(),
            Error::Import(crate::unixfs::Error::Store(e)) => e.is_out_of_space(),
            _ => false,
        }
    }
}

/// What an `add` produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Added {
    /// Root CID (checked to be the one computed locally).
    pub root: Cid,
    /// File bytes.
    pub content_bytes: u64,
    /// The root's cumulative DAG size (`Size` in Kubo's `add` output).
    pub cumulative_size: u64,
}

/// A place that keeps DAGs available: imports files, pins, unpins, lists, serves content and CARs.
///
/// Every method is cancel-safe in the sense that dropping its future leaves the pin set
/// consistent (an interrupted `add` leaves unpinned blocks for GC).
pub trait Pinner: Send + Sync {
    /// Imports the file at `path` as UnixFS with `options` and pins the root recursively.
    ///
    /// # Errors
    /// Import or store failures; for Kubo also [`Error::CidMismatch`], [`Error::Unavailable`].
    fn add_file(
        &self,
        path: &Path,
        options: &ImportOptions,
    ) -> impl Future<Output = Result<Added, Error>> + Send;

    /// Pins `cid` recursively; its DAG must be available.
    ///
    /// # Errors
    /// [`Error::Store`] (`IncompleteDag`) or [`Error::Timeout`] for an unknown CID.
    fn pin(&self, cid: &Cid) -> impl Future<Output = Result<(), Error>> + Send;

    /// Removes the recursive pin on `cid`.
    ///
    /// # Errors
    /// [`Error::NotPinned`].
    fn unpin(&self, cid: &Cid) -> impl Future<Output = Result<(), Error>> + Send;

    /// The recursive pins.
    ///
    /// # Errors
    /// Store or RPC failures.
    fn pins(&self) -> impl Future<Output = Result<Vec<Cid>, Error>> + Send;

    /// Streams the content of the UnixFS file `cid` into `out`; returns the bytes written.
    ///
    /// # Errors
    /// Unknown CID, not a file, write failures.
    fn cat<W: AsyncWrite + Send + Unpin>(
        &self,
        cid: &Cid,
        out: W,
    ) -> impl Future<Output = Result<u64, Error>> + Send;

    /// Streams the CAR v1 of `cid`'s DAG into `out`; returns the CAR bytes written.
    ///
    /// # Errors
    /// Unknown CID, write failures.
    fn export_car<W: AsyncWrite + Send + Unpin>(
        &self,
        cid: &Cid,
        out: W,
    ) -> impl Future<Output = Result<u64, Error>> + Send;
}
