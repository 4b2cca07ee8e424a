//! The attestations this node received for jobs it settles: per job, one per provider.
//!
//! Answering `Stored` promises the provider that its attestation will reach the settle
//! transaction, so with an [`AttestationLog`] the message is on disk (sled, flushed) before the
//! answer goes out: an orchestrator killed (`kill -9`) right after a provider attested still
//! settles with that attestation when it restarts. At most
//! [`MAX_ATTEST_JOBS`](super::MAX_ATTEST_JOBS) jobs are kept; the oldest job is forgotten first
//! (on disk too).

use std::collections::{HashMap, VecDeque};

use ganglion_contracts::datum::JobId;
use ganglion_contracts::params::KeyHash;

use super::protocols::AttestMessage;

/// Errors of the on-disk log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The sled tree failed (disk full, I/O).
    #[error("attestation log: {0}")]
    Sled(#[from] sled::Error),
    /// A stored entry does not decode (written by an incompatible version).
    #[error("attestation log entry: {0}")]
    Decode(#[from] serde_json::Error),
}

/// The durable half: a sled tree keyed by `job id (32 bytes) ‖ provider key hash (28 bytes)`,
/// values JSON [`AttestMessage`]s. Cheap to clone (a sled handle).
#[derive(Clone)]
pub struct AttestationLog {
    tree: sled::Tree,
}

impl std::fmt::Debug for AttestationLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttestationLog")
            .field("entries", &self.tree.len())
            .finish()
    }
}

impl AttestationLog {
    /// The tree named `attestations` in `db` (the node's job store database).
    ///
    /// # Errors
    /// [`LogError::Sled`].
    pub fn open(db: &sled::Db) -> Result<Self, LogError> {
        Ok(Self {
            tree: db.open_tree("attestations")?,
        })
    }

    fn key(job: &JobId, provider: &KeyHash) -> Vec<u8> {
        let mut k = job.0.to_vec();
        k.extend_from_slice(provider);
        k
    }

    /// Writes `msg` and flushes the database: on return it survives `kill -9`.
    fn put(&self, msg: &AttestMessage) -> Result<(), LogError> {
        self.tree.insert(
            Self::key(&msg.job_id, &msg.provider),
            serde_json::to_vec(msg)?,
        )?;
        self.tree.flush()?;
        Ok(())
    }

    fn forget(&self, job: &JobId) -> Result<(), LogError> {
        for kv in self.tree.scan_prefix(job.0) {
            self.tree.remove(kv?.0)?;
        }
        Ok(())
    }

    fn load(&self) -> Result<Vec<AttestMessage>, LogError> {
        self.tree
            .iter()
            .map(|kv| Ok(serde_json::from_slice(&kv?.1)?))
            .collect()
    }
}

/// The attestations held, in memory and (with a log) on disk.
#[derive(Debug, Default)]
pub struct AttestationBook {
    by_job: HashMap<JobId, HashMap<KeyHash, AttestMessage>>,
    order: VecDeque<JobId>,
    log: Option<AttestationLog>,
}

impl AttestationBook {
    /// A book over `log` (none: memory only), with what the log already holds.
    ///
    /// # Errors
    /// [`LogError`] reading the log.
    pub fn open(log: Option<AttestationLog>) -> Result<Self, LogError> {
        let mut book = Self {
            log: None,
            ..Self::default()
        };
        if let Some(l) = &log {
            for msg in l.load()? {
                book.remember(msg);
            }
        }
        book.log = log;
        Ok(book)
    }

    /// Keeps `msg` (replacing an earlier one from the same provider for the same job); durable
    /// when this returns `Ok` and the book has a log.
    ///
    /// # Errors
    /// [`LogError`] writing the log; the message is then not kept.
    pub fn store(&mut self, msg: AttestMessage) -> Result<(), LogError> {
        if let Some(l) = &self.log {
            l.put(&msg)?;
        }
        if let Some(old) = self.remember(msg)
            && let Some(l) = &self.log
            && let Err(e) = l.forget(&old)
        {
            tracing::warn!(job = %old, error = %e, "could not drop an old job's attestations");
        }
        Ok(())
    }

    /// The attestations held for `job`, in no particular order.
    pub fn of(&self, job: &JobId) -> Vec<AttestMessage> {
        self.by_job
            .get(job)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds `msg` in memory; returns the job evicted to make room, if any.
    fn remember(&mut self, msg: AttestMessage) -> Option<JobId> {
        let mut evicted = None;
        if !self.by_job.contains_key(&msg.job_id) {
            if self.order.len() >= super::MAX_ATTEST_JOBS
                && let Some(old) = self.order.pop_front()
            {
                self.by_job.remove(&old);
                evicted = Some(old);
            }
            self.order.push_back(msg.job_id);
        }
        self.by_job
            .entry(msg.job_id)
            .or_default()
            .insert(msg.provider, msg);
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(job: u8, provider: u8, gpu_seconds: u64) -> AttestMessage {
        AttestMessage {
            job_id: JobId([job; 32]),
            provider: [provider; 28],
            result: vec![1],
            logs: vec![2],
            gpu_seconds,
            exit_code: 0,
            signature: vec![0; 64],
        }
    }

    /// Copies the files of `from` into `to`: what a crash right now would leave on disk.
    fn snapshot(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("read dir") {
            let e = e.expect("entry");
            let dest = to.join(e.file_name());
            if e.file_type().expect("type").is_dir() {
                snapshot(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), dest).expect("copy");
            }
        }
    }

    #[test]
    fn stored_attestations_are_on_disk_when_store_returns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = dir.path().join("live");
        let db = sled::open(&live).expect("open");
        let mut book =
            AttestationBook::open(Some(AttestationLog::open(&db).expect("log"))).expect("book");
        book.store(msg(1, 7, 10)).expect("store");
        book.store(msg(1, 8, 20)).expect("store");
        book.store(msg(1, 7, 30)).expect("store (replaces)");
        book.store(msg(2, 7, 40)).expect("store");
        // The files as a `kill -9` now would leave them (the live database stays open).
        let crashed = dir.path().join("crashed");
        snapshot(&live, &crashed);
        let db2 = sled::open(&crashed).expect("open the copy");
        let book2 =
            AttestationBook::open(Some(AttestationLog::open(&db2).expect("log"))).expect("book");
        let mut one: Vec<u64> = book2
            .of(&JobId([1; 32]))
            .iter()
            .map(|m| m.gpu_seconds)
            .collect();
        one.sort_unstable();
        assert_eq!(one, vec![20, 30]);
        assert_eq!(book2.of(&JobId([2; 32])), vec![msg(2, 7, 40)]);
        assert!(book2.of(&JobId([3; 32])).is_empty());
        drop(db);
    }

    #[test]
    fn the_oldest_job_is_forgotten_first_in_memory_and_on_disk() {
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary db");
        let log = AttestationLog::open(&db).expect("log");
        let mut book = AttestationBook::open(Some(log.clone())).expect("book");
        let jobs = super::super::MAX_ATTEST_JOBS;
        for j in 0..=jobs {
            let mut m = msg(0, 1, j as u64);
            m.job_id.0[..8].copy_from_slice(&(j as u64).to_be_bytes());
            book.store(m).expect("store");
        }
        let mut first = JobId([0; 32]);
        first.0[..8].copy_from_slice(&0u64.to_be_bytes());
        assert!(book.of(&first).is_empty(), "the first job was evicted");
        assert_eq!(log.load().expect("load").len(), jobs);
        let reopened = AttestationBook::open(Some(log)).expect("book");
        assert!(reopened.of(&first).is_empty());
    }
}
