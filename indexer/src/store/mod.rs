//! The indexer's storage: one ordered key space with atomic, durable batches.
//!
//! Three implementations share [`Kv`] and one conformance suite: [`MemoryKv`], the readable
//! spec, [`SledKv`] on disk (embedded, one process) and [`PgKv`] in PostgreSQL (one writer,
//! readers in other processes, SQL over the whole history). [`Store`] is whichever of the
//! last two a configuration names. The indexer's whole state — cursor, undo records, live
//! script UTxOs, events, job views — lives in this one key space, so one batch moves it
//! atomically from one block to the next, and a crash leaves either the old or the new state.

mod any;
mod memory;
mod postgres;
mod sled;

pub use any::{Store, StoreSpec};
pub use memory::MemoryKv;
pub use postgres::{PgKv, WRITER_WAIT_S};
pub use sled::SledKv;

use ganglion_contracts::params::KeyHash;

use crate::error::Result;
use crate::query::PaymentRecord;
use crate::view::{JobStatus, JobView};

/// A write: `Some(value)` puts, `None` deletes.
pub type Write = (Vec<u8>, Option<Vec<u8>>);

/// An ordered byte-key store.
pub trait Kv: Send + Sync {
    /// The value at `key`.
    ///
    /// # Errors
    /// Store I/O errors.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Entries whose key starts with `prefix`, in key order.
    ///
    /// # Errors
    /// Store I/O errors.
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// Entries with `from <= key < to`, in key order.
    ///
    /// # Errors
    /// Store I/O errors.
    fn range(&self, from: &[u8], to: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// The values at `keys`, in order (one round trip where the store has them).
    ///
    /// # Errors
    /// Store I/O errors.
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Pay to `payee` from its claims, newest first (slot, then position in the block),
    /// `take` after skipping `skip` — when the store keeps an index of payments
    /// (PostgreSQL's `payments` table). `Ok(None)`: it keeps none, and
    /// [`crate::Indexer::payments_to`] reads the payee's jobs instead.
    ///
    /// # Errors
    /// Store I/O errors.
    fn payments_to(
        &self,
        _payee: &KeyHash,
        _skip: usize,
        _take: usize,
    ) -> Result<Option<Vec<PaymentRecord>>> {
        Ok(None)
    }

    /// Job views in job-id order (descending when `desc`), only those in `status` when given,
    /// `take` after skipping `skip` — when the store can page them by an index (PostgreSQL's
    /// `jobs` table). `Ok(None)`: it cannot, and [`crate::Indexer::jobs_page`] reads them all.
    ///
    /// # Errors
    /// Store I/O errors, [`crate::Error::Corrupt`].
    fn jobs_page(
        &self,
        _status: Option<JobStatus>,
        _skip: usize,
        _take: usize,
        _desc: bool,
    ) -> Result<Option<Vec<JobView>>> {
        Ok(None)
    }

    /// Applies all writes atomically: after a crash either all or none are visible.
    ///
    /// # Errors
    /// Store I/O errors.
    fn commit(&self, writes: Vec<Write>) -> Result<()>;

    /// Makes committed batches durable (fsync).
    ///
    /// # Errors
    /// Store I/O errors.
    fn flush(&self) -> Result<()>;
}
