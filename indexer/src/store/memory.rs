//! The in-memory store: a `BTreeMap` behind a lock. The readable spec of [`super::Kv`].

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::{Kv, Write};
use crate::error::Result;

/// A [`Kv`] in memory (lost on exit).
#[derive(Debug, Default)]
pub struct MemoryKv {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemoryKv {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Kv for MemoryKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.read().get(key).cloned())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .read()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        Ok(self
            .read()
            .range(from.to_vec()..to.to_vec())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn commit(&self, writes: Vec<Write>) -> Result<()> {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (k, v) in writes {
            match v {
                Some(v) => map.insert(k, v),
                None => map.remove(&k),
            };
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}
