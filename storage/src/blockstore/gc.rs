//! Recursive pins and mark-and-sweep garbage collection over any [`Blockstore`].
//!
//! Semantics follow Kubo's `ipfs pin add` (recursive by default: the whole DAG must be present
//! and is kept) and `ipfs repo gc` (every block not reachable from a recursive pin is removed).

use std::collections::HashSet;

use cid::Cid;

use super::{Blockstore, Error, block_key};
use crate::dag::Walker;

/// What a [`gc`] run removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Blocks deleted.
    pub removed_blocks: u64,
    /// Bytes of block data freed.
    pub freed_bytes: u64,
}

/// Pins `root` recursively after checking that its whole DAG is stored.
///
/// # Errors
/// [`Error::IncompleteDag`] naming the first missing block (nothing is recorded then).
pub fn pin_recursive(store: &impl Blockstore, root: &Cid) -> Result<(), Error> {
    let mut walker = Walker::new(*root);
    while walker.next_block(store)?.is_some() {}
    store.insert_pin(root)
}

/// Removes the recursive pin on `root`; its blocks stay until the next [`gc`].
///
/// # Errors
/// [`Error::NotPinned`] when `root` is not pinned.
pub fn unpin(store: &impl Blockstore, root: &Cid) -> Result<(), Error> {
    if store.remove_pin(root)? {
        Ok(())
    } else {
        Err(Error::NotPinned(*root))
    }
}

/// The blocks of `root`'s DAG that are not stored (reading as far as the stored blocks allow).
///
/// # Errors
/// Storage failures and undecodable blocks.
pub fn missing_blocks(store: &impl Blockstore, root: &Cid) -> Result<Vec<Cid>, Error> {
    let mut missing = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![*root];
    while let Some(cid) = stack.pop() {
        if !seen.insert(cid) {
            continue;
        }
        match store.get(&cid)? {
            None => missing.push(cid),
            Some(data) => stack.extend(crate::dag::links(&cid, &data)?.into_iter().rev()),
        }
    }
    Ok(missing)
}

/// Deletes every block not reachable from a recursive pin.
///
/// The caller must keep writers out while this runs (a block written between mark and sweep and
/// pinned afterwards would be lost): [`crate::pin::Embedded`] holds its write lock around it.
///
/// # Errors
/// Storage failures; [`Error::IncompleteDag`] when a pinned DAG lost a block (nothing is deleted
/// then, since the mark is incomplete).
pub fn gc(store: &impl Blockstore) -> Result<GcStats, Error> {
    let mut live: HashSet<Vec<u8>> = HashSet::new();
    for root in store.pins()? {
        let mut walker = Walker::new(root);
        while let Some((cid, _)) = walker.next_block(store)? {
            live.insert(block_key(&cid));
        }
    }
    let mut stats = GcStats::default();
    for cid in store.all_blocks()? {
        if live.contains(&block_key(&cid)) {
            continue;
        }
        let size = store.get(&cid)?.map_or(0, |d| d.len() as u64);
        if store.delete(&cid)? {
            stats.removed_blocks += 1;
            stats.freed_bytes += size;
        }
    }
    Ok(stats)
}
