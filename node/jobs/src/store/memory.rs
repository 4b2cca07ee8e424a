//! The in-memory backend: the trees as `BTreeMap`s behind one lock. The readable spec of
//! [`Backend`]; nothing survives the process.

use std::collections::BTreeMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::StoreError;
use super::backend::{Backend, Entry, Swap};

type Tree = BTreeMap<Vec<u8>, Vec<u8>>;

/// A [`Backend`] in memory (lost on exit). Never fails.
#[derive(Default)]
pub struct MemoryBackend {
    trees: RwLock<BTreeMap<String, Tree>>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("trees", &self.read().keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    // A panic while the lock was held cannot leave a tree half-written (each write is one
    // `BTreeMap` call), so a poisoned lock is taken over.
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Tree>> {
        self.trees.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Tree>> {
        self.trees.write().unwrap_or_else(|p| p.into_inner())
    }
}

fn entries<'a>(iter: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>) -> Vec<Entry> {
    iter.map(|(k, v)| (k.clone(), v.clone())).collect()
}

impl Backend for MemoryBackend {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.read().get(tree).and_then(|t| t.get(key)).cloned())
    }

    fn insert(
        &self,
        tree: &str,
        key: &[u8],
        value: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .write()
            .entry(tree.to_owned())
            .or_default()
            .insert(key.to_vec(), value))
    }

    fn remove(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.write().get_mut(tree).and_then(|t| t.remove(key)))
    }

    fn compare_and_swap(
        &self,
        tree: &str,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<Swap, StoreError> {
        // One write guard over the comparison and the swap: that is the atomicity.
        let mut trees = self.write();
        let t = trees.entry(tree.to_owned()).or_default();
        let current = t.get(key);
        if current.map(Vec::as_slice) != expected {
            return Ok(Swap::Conflict {
                current: current.cloned(),
            });
        }
        match new {
            Some(v) => t.insert(key.to_vec(), v),
            None => t.remove(key),
        };
        Ok(Swap::Swapped)
    }

    fn iter(&self, tree: &str) -> Result<Vec<Entry>, StoreError> {
        Ok(self
            .read()
            .get(tree)
            .map(|t| entries(t.iter()))
            .unwrap_or_default())
    }

    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<Vec<Entry>, StoreError> {
        Ok(self
            .read()
            .get(tree)
            .map(|t| {
                entries(
                    t.range(prefix.to_vec()..)
                        .take_while(|(k, _)| k.starts_with(prefix)),
                )
            })
            .unwrap_or_default())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
