//! In-memory blockstore: the readable specification of [`Blockstore`], used in tests and for
//! hash-only work. Same semantics as the sled store, including the optional capacity.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{PoisonError, RwLock};

use cid::Cid;

use super::{Blockstore, Error, block_key, cid_from_key};

#[derive(Default)]
struct Inner {
    blocks: BTreeMap<Vec<u8>, Vec<u8>>,
    pins: BTreeSet<Vec<u8>>,
    size: u64,
}

/// A [`Blockstore`] held in RAM.
#[derive(Default)]
pub struct MemoryBlockstore {
    inner: RwLock<Inner>,
    capacity_bytes: Option<u64>,
}

impl MemoryBlockstore {
    /// An empty store without a size limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that refuses writes past `capacity_bytes` of block data
    /// ([`Error::Full`]).
    pub fn with_capacity_bytes(capacity_bytes: u64) -> Self {
        Self {
            capacity_bytes: Some(capacity_bytes),
            ..Self::default()
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated (each method updates
        // it in one step), so a poisoned lock is still consistent.
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Blockstore for MemoryBlockstore {
    fn put(&self, cid: &Cid, data: &[u8]) -> Result<bool, Error> {
        crate::block::verify(cid, data)?;
        let key = block_key(cid);
        let mut inner = self.write();
        if inner.blocks.contains_key(&key) {
            return Ok(false);
        }
        let needed = data.len() as u64;
        if let Some(capacity) = self.capacity_bytes {
            let available = capacity.saturating_sub(inner.size);
            if needed > available {
                return Err(Error::Full {
                    needed,
                    available,
                    capacity,
                });
            }
        }
        inner.blocks.insert(key, data.to_vec());
        inner.size += needed;
        Ok(true)
    }

    fn get(&self, cid: &Cid) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.read().blocks.get(&block_key(cid)).cloned())
    }

    fn has(&self, cid: &Cid) -> Result<bool, Error> {
        Ok(self.read().blocks.contains_key(&block_key(cid)))
    }

    fn delete(&self, cid: &Cid) -> Result<bool, Error> {
        let mut inner = self.write();
        match inner.blocks.remove(&block_key(cid)) {
            Some(data) => {
                inner.size -= data.len() as u64;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn size_bytes(&self) -> Result<u64, Error> {
        Ok(self.read().size)
    }

    fn block_count(&self) -> Result<u64, Error> {
        Ok(self.read().blocks.len() as u64)
    }

    fn all_blocks(&self) -> Result<Vec<Cid>, Error> {
        self.read().blocks.keys().map(|k| cid_from_key(k)).collect()
    }

    fn insert_pin(&self, cid: &Cid) -> Result<(), Error> {
        self.write().pins.insert(cid.to_bytes());
        Ok(())
    }

    fn remove_pin(&self, cid: &Cid) -> Result<bool, Error> {
        Ok(self.write().pins.remove(&cid.to_bytes()))
    }

    fn pins(&self) -> Result<Vec<Cid>, Error> {
        self.read()
            .pins
            .iter()
            .map(|b| {
                Cid::try_from(b.as_slice())
                    .map_err(|e| Error::CorruptRecord(format!("pin record is not a CID: {e}")))
            })
            .collect()
    }

    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }
}
