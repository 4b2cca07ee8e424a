//! What [`super::JobStore`] needs from a database: named trees of byte keys and byte values,
//! each ordered by key (bytewise, shorter first on a common prefix), with an atomic
//! compare-and-swap and a flush that makes every earlier write durable.
//!
//! Two implementations share [`Backend`] and one conformance suite (the crate's
//! `store::conformance` tests, run on both): [`super::MemoryBackend`], the readable spec, and
//! [`super::SledBackend`], what a node runs. The store above them owns the meaning of keys and
//! values (JSON records, key layouts); a backend only moves bytes.

use super::StoreError;

/// One entry of a tree: `(key, value)`.
pub type Entry = (Vec<u8>, Vec<u8>);

/// The outcome of [`Backend::compare_and_swap`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Swap {
    /// The key held the expected value (or was absent, when absence was expected) and now
    /// holds the new one (or is absent, when `None` was given).
    Swapped,
    /// The key held something else; nothing was written.
    Conflict {
        /// What the key holds (`None`: absent).
        current: Option<Vec<u8>>,
    },
}

/// Named trees of ordered byte keys. A tree that was never written reads as empty; tree names
/// are the store's (`orchestrator`, `provider`, `receipts`).
///
/// Writes are visible to every later read of any handle on the same backend as soon as the
/// call returns; they are durable (survive `kill -9` and power loss, as far as the backend
/// persists at all) once a later [`Backend::flush`] has returned.
pub trait Backend: Send + Sync {
    /// The value at `key` in `tree`.
    ///
    /// # Errors
    /// Backend I/O errors.
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Sets `key` in `tree` to `value`; returns the value it replaced.
    ///
    /// # Errors
    /// Backend I/O errors.
    fn insert(&self, tree: &str, key: &[u8], value: Vec<u8>)
    -> Result<Option<Vec<u8>>, StoreError>;

    /// Removes `key` from `tree`; returns the value it held.
    ///
    /// # Errors
    /// Backend I/O errors.
    fn remove(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Atomically: if `key` in `tree` holds `expected` (`None`: is absent), sets it to `new`
    /// (`None`: removes it) and returns [`Swap::Swapped`]; otherwise writes nothing and
    /// returns [`Swap::Conflict`] with what it holds. No concurrent write lands between the
    /// comparison and the swap.
    ///
    /// # Errors
    /// Backend I/O errors.
    fn compare_and_swap(
        &self,
        tree: &str,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<Swap, StoreError>;

    /// Every entry of `tree`, in key order.
    ///
    /// # Errors
    /// Backend I/O errors.
    fn iter(&self, tree: &str) -> Result<Vec<Entry>, StoreError>;

    /// The entries of `tree` whose key starts with `prefix`, in key order.
    ///
    /// # Errors
    /// Backend I/O errors.
    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<Vec<Entry>, StoreError>;

    /// Makes every write made so far, in every tree, durable.
    ///
    /// # Errors
    /// Backend I/O errors (e.g. the disk is full).
    fn flush(&self) -> Result<(), StoreError>;
}
