//! The on-disk store: one sled tree; each commit is one atomic `apply_batch`.

use std::path::Path;

use super::{Kv, Write};
use crate::error::Result;

/// A [`Kv`] in a sled database. sled keeps batches atomic across crashes: after `kill -9`
/// the store holds a prefix of the committed batches, never part of one.
#[derive(Debug, Clone)]
pub struct SledKv {
    db: sled::Db,
    tree: sled::Tree,
}

impl SledKv {
    /// Opens (or creates) the database in folder `path` ([`ganglion_sled::open`]: a lock this
    /// process is still releasing is waited for).
    ///
    /// # Errors
    /// sled I/O errors (permissions, a database locked by another process).
    pub fn open(path: &Path) -> Result<Self> {
        let db = ganglion_sled::open(path)?;
        let tree = db.open_tree("ganglion-indexer")?;
        Ok(Self { db, tree })
    }
}

fn pairs(
    iter: impl Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    iter.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(Into::into))
        .collect()
}

impl Kv for SledKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tree.get(key)?.map(|v| v.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        pairs(self.tree.scan_prefix(prefix))
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        pairs(self.tree.range(from..to))
    }

    fn commit(&self, writes: Vec<Write>) -> Result<()> {
        let mut batch = sled::Batch::default();
        for (k, v) in writes {
            match v {
                Some(v) => batch.insert(k, v),
                None => batch.remove(k),
            }
        }
        self.tree.apply_batch(batch)?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}
