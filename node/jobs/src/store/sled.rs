//! The on-disk backend: a sled database in one folder, each named tree a sled tree of the same
//! name. This is the layout a node's `jobs.sled` has always had, so an existing data dir opens
//! as it is.

use std::path::Path;

use super::StoreError;
use super::backend::{Backend, Entry, Swap};

/// A sled failure (I/O, corruption, the database locked by another process).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SledError(#[from] sled::Error);

fn failed(e: sled::Error) -> StoreError {
    StoreError::Sled(SledError(e))
}

/// A [`Backend`] in a sled database. Cheap to clone (sled handles).
#[derive(Clone)]
pub struct SledBackend {
    db: sled::Db,
}

impl std::fmt::Debug for SledBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledBackend").finish_non_exhaustive()
    }
}

impl SledBackend {
    /// Opens (or creates) the database in folder `path`, waiting briefly for a lock this
    /// process is still releasing ([`ganglion_sled::open`]).
    ///
    /// # Errors
    /// [`StoreError::Sled`] (e.g. another process holds it).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            db: ganglion_sled::open(path).map_err(failed)?,
        })
    }

    fn tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        self.db.open_tree(name).map_err(failed)
    }
}

fn entries(
    iter: impl Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>,
) -> Result<Vec<Entry>, StoreError> {
    iter.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(failed))
        .collect()
}

impl Backend for SledBackend {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .tree(tree)?
            .get(key)
            .map_err(failed)?
            .map(|v| v.to_vec()))
    }

    fn insert(
        &self,
        tree: &str,
        key: &[u8],
        value: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .tree(tree)?
            .insert(key, value)
            .map_err(failed)?
            .map(|v| v.to_vec()))
    }

    fn remove(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .tree(tree)?
            .remove(key)
            .map_err(failed)?
            .map(|v| v.to_vec()))
    }

    fn compare_and_swap(
        &self,
        tree: &str,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<Swap, StoreError> {
        Ok(
            match self
                .tree(tree)?
                .compare_and_swap(key, expected, new)
                .map_err(failed)?
            {
                Ok(()) => Swap::Swapped,
                Err(e) => Swap::Conflict {
                    current: e.current.map(|v| v.to_vec()),
                },
            },
        )
    }

    fn iter(&self, tree: &str) -> Result<Vec<Entry>, StoreError> {
        entries(self.tree(tree)?.iter())
    }

    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<Vec<Entry>, StoreError> {
        entries(self.tree(tree)?.scan_prefix(prefix))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(failed)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The on-disk layout is the one nodes already have: records written by the sled code
    //! before the backend existed open through [`JobStore::open`], and the reverse.

    use ganglion_contracts::v2::datum::JobId;

    use crate::state::OrchestratorState;
    use crate::store::{JobRecord, JobStore, Orchestrating, RecordOf};

    type O = Orchestrating<Vec<u8>>;

    #[test]
    fn a_data_dir_written_by_plain_sled_opens_unchanged() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("jobs");
        let job = JobId([5; 32]);
        let record: RecordOf<O> = JobRecord::new(job, OrchestratorState::Locked, vec![1], 10);
        {
            // What `JobStore` wrote before it had a backend: tree = role name, key = job id,
            // value = the record's JSON. Dropped before the store opens: `JobStore::open` waits
            // for the lock it is still releasing (it failed the reopen once in a CI run).
            let db = sled::open(&path).expect("open");
            db.open_tree("orchestrator")
                .expect("tree")
                .insert(job.0, serde_json::to_vec(&record).expect("json"))
                .expect("insert");
            db.flush().expect("flush");
        }
        let store = JobStore::open(&path).expect("reopen");
        assert_eq!(store.get::<O>(&job).expect("read"), Some(record.clone()));
        let mut changed = record;
        changed.detail.push(2);
        assert!(
            store
                .update_if::<O>(&job, |_| true, |r| r.detail.push(2))
                .expect("update")
        );
        drop(store);
        // The store's lock is released a moment after the drop (see `ganglion_sled::open`).
        let db = ganglion_sled::open(&path).expect("open again");
        let raw = db
            .open_tree("orchestrator")
            .expect("tree")
            .get(job.0)
            .expect("get")
            .expect("present");
        assert_eq!(raw.to_vec(), serde_json::to_vec(&changed).expect("json"));
    }
}
