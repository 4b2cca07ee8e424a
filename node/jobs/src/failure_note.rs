//! The log a provider attests for a share of a job that failed or never ran: the container's
//! log (when the executor pinned one) followed by one line saying why, in the node's words
//! (`[ganglion] node rank 1: image unavailable: …`), imported as a UnixFS file (CIDv1, raw
//! leaves: `ImportOptions::cid_v1`) and pinned in the node's blockstore.
//!
//! Its CID goes into the signed attestation in place of the container's log, so the reason
//! reaches the orchestrator (`ganglion job logs`, fetched over bitswap) and every auditor with
//! the same guarantee as the log itself: the provider signed it, and anyone can check the CID.
//! Without it, a share that never started (missing image, input not fetched, terms refused)
//! attested no log at all and the reason lived only in the provider's own log file.

use cid::Cid;
use ganglion_storage::blockstore::{self, Blockstore};
use ganglion_storage::unixfs::{self, ImportOptions};

/// The prefix of the reason line, so a reader (and `job status`) can find it in a log.
pub const PREFIX: &str = "[ganglion] ";

/// The line appended for node rank `index` (`None`: the share had no rank yet).
pub fn line(index: Option<u64>, why: &str) -> String {
    match index {
        Some(i) => format!("{PREFIX}node rank {i}: {why}\n"),
        None => format!("{PREFIX}{why}\n"),
    }
}

/// Pins `container_log` (binary CID bytes, empty when none) followed by [`line`]`(index, why)`
/// as one file in `store` and returns the new file's binary CID.
///
/// # Errors
/// The container's log cannot be read (a block missing or undecodable), or the note cannot be
/// imported, pinned or flushed: the caller attests the container's log unchanged then.
pub fn pin(
    store: &std::sync::Arc<dyn Blockstore>,
    container_log: &[u8],
    index: Option<u64>,
    why: &str,
) -> Result<Vec<u8>, String> {
    append(store, container_log, &line(index, why))
}

/// Pins `container_log` (binary CID bytes, empty when none) followed by `line` (which ends
/// with a newline) as one file in `store` and returns the new file's binary CID: the failure
/// note's [`line`], or a service replica's usage ([`crate::usage::line`]).
///
/// # Errors
/// As [`pin`].
pub fn append(
    store: &std::sync::Arc<dyn Blockstore>,
    container_log: &[u8],
    line: &str,
) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    if !container_log.is_empty() {
        let cid = Cid::try_from(container_log).map_err(|e| format!("log CID: {e}"))?;
        unixfs::cat(store, &cid, &mut text).map_err(|e| format!("reading log {cid}: {e}"))?;
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
    }
    text.extend_from_slice(line.as_bytes());
    let imported = unixfs::import_bytes(&text, &ImportOptions::cid_v1(), store)
        .map_err(|e| format!("importing the note: {e}"))?;
    blockstore::pin_recursive(store, &imported.root).map_err(|e| format!("pinning: {e}"))?;
    store.flush().map_err(|e| format!("flushing: {e}"))?;
    Ok(imported.root.to_bytes())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ganglion_storage::blockstore::MemoryBlockstore;

    use super::*;

    fn text(store: &Arc<dyn Blockstore>, cid: &[u8]) -> String {
        let mut out = Vec::new();
        unixfs::cat(store, &Cid::try_from(cid).expect("cid"), &mut out).expect("cat");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn a_share_that_never_ran_attests_the_reason_alone() {
        let store: Arc<dyn Blockstore> = Arc::new(MemoryBlockstore::default());
        let cid = pin(&store, &[], Some(1), "image unavailable: no such image").expect("pinned");
        assert_eq!(
            text(&store, &cid),
            "[ganglion] node rank 1: image unavailable: no such image\n"
        );
        let root = Cid::try_from(cid.as_slice()).expect("cid");
        assert!(
            store.pins().expect("pins").contains(&root),
            "kept through GC"
        );
    }

    #[test]
    fn a_failed_run_keeps_its_container_log_and_adds_the_reason() {
        let store: Arc<dyn Blockstore> = Arc::new(MemoryBlockstore::default());
        let log = unixfs::import_bytes(b"Traceback\nValueError", &ImportOptions::cid_v1(), &store)
            .expect("imported")
            .root
            .to_bytes();
        let cid = pin(&store, &log, Some(0), "rank 0 exited with code 1").expect("pinned");
        assert_ne!(cid, log);
        assert_eq!(
            text(&store, &cid),
            "Traceback\nValueError\n[ganglion] node rank 0: rank 0 exited with code 1\n"
        );
    }

    #[test]
    fn an_unreadable_container_log_is_an_error_not_a_silent_drop() {
        let store: Arc<dyn Blockstore> = Arc::new(MemoryBlockstore::default());
        let missing = unixfs::import_bytes(
            b"elsewhere",
            &ImportOptions::cid_v1(),
            &MemoryBlockstore::default(),
        )
        .expect("imported")
        .root
        .to_bytes();
        let e = pin(&store, &missing, Some(0), "why").expect_err("block missing");
        assert!(e.contains("reading log"), "{e}");
    }
}
