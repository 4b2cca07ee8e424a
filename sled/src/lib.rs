//! Opening a sled database the way every durable store of Ganglion does (the indexer's, the
//! job store's, the executor's job table, the IPFS blockstore, the devnet's chain store).
//!
//! sled releases its folder lock only when its background threads let go of the database, a
//! moment *after* the last [`sled::Db`] handle is dropped. An in-process reopen right after a
//! drop (a restarted engine, a test that reopens to check durability) therefore fails now and
//! then with "could not acquire lock". [`open`] waits for that lock for a short while; a lock
//! held by another process is still refused, once the wait is over.

use std::path::Path;
use std::time::{Duration, Instant};

/// How long [`open`] waits for a lock being released by a dropped handle.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// How often [`open`] retries while it waits.
const RETRY_EVERY: Duration = Duration::from_millis(20);

/// Opens (or creates) the sled database in folder `path`, waiting up to [`LOCK_WAIT`] for a
/// folder lock that a dropped handle of this process is still releasing.
///
/// # Errors
/// sled's errors: I/O (permissions, a database locked by another process — after the wait),
/// corruption.
pub fn open(path: &Path) -> sled::Result<sled::Db> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match sled::open(path) {
            Err(sled::Error::Io(e)) if is_lock_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(RETRY_EVERY);
            }
            r => return r,
        }
    }
}

/// Whether `e` is sled's "could not acquire lock" (the folder's `flock` is held).
fn is_lock_busy(e: &std::io::Error) -> bool {
    e.to_string().contains("could not acquire lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_held_open_is_refused_after_the_wait_and_reopens_once_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path()).expect("open");
        db.insert(b"k", b"v".as_slice()).expect("insert");
        db.flush().expect("flush");
        // sled's lock is per open file description, so a second open in this process while
        // the first handle lives is refused like another process's would be.
        let started = Instant::now();
        let err = open(dir.path()).expect_err("the folder is locked");
        assert!(is_lock_busy(match &err {
            sled::Error::Io(e) => e,
            other => panic!("not an I/O error: {other:?}"),
        }));
        assert!(started.elapsed() >= LOCK_WAIT, "it waited before refusing");
        drop(db);
        // Reopened at once: the wait covers sled's background release.
        let db = open(dir.path()).expect("reopen right after the drop");
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(b"v".as_slice()));
    }
}
