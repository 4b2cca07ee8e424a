//! One conformance suite for every store, and the sled store across reopen (PostgreSQL's:
//! `postgres.rs`).

use ganglion_indexer::Indexer;
use ganglion_indexer::store::{Kv, MemoryKv, SledKv};

use crate::scenario::run;

pub(crate) fn conformance(kv: &dyn Kv) {
    assert_eq!(kv.get(b"a").expect("get"), None);
    kv.commit(vec![
        (b"a/1".to_vec(), Some(b"one".to_vec())),
        (b"a/2".to_vec(), Some(b"two".to_vec())),
        (b"b/1".to_vec(), Some(b"three".to_vec())),
    ])
    .expect("commit");
    assert_eq!(kv.get(b"a/1").expect("get"), Some(b"one".to_vec()));
    let a: Vec<Vec<u8>> = kv
        .scan_prefix(b"a/")
        .expect("scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(a, [b"a/1".to_vec(), b"a/2".to_vec()]);
    assert_eq!(kv.range(b"a/2", b"b/2").expect("range").len(), 2);
    assert!(kv.range(b"b", b"a").expect("empty range").is_empty());
    kv.commit(vec![
        (b"a/1".to_vec(), None),
        (b"a/2".to_vec(), Some(b"2".to_vec())),
    ])
    .expect("commit");
    assert_eq!(kv.get(b"a/1").expect("get"), None);
    assert_eq!(kv.get(b"a/2").expect("get"), Some(b"2".to_vec()));
    kv.flush().expect("flush");
}

#[test]
fn memory_store_conforms() {
    conformance(&MemoryKv::new());
}

#[test]
fn sled_store_conforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    conformance(&SledKv::open(dir.path()).expect("open"));
}

/// Applies half the scenario into the store `open` returns, drops it, reopens it, applies the
/// rest, and compares everything with the in-memory spec.
pub(crate) fn agrees_with_memory_across_reopen<S: Kv>(open: impl Fn() -> S) {
    let r = run();
    let mem = Indexer::new(MemoryKv::new(), r.watch.clone(), 10);
    for b in &r.blocks {
        mem.apply_block(b).expect("applies");
    }
    let half = r.blocks.len() / 2;
    {
        let ix = Indexer::new(open(), r.watch.clone(), 10);
        for b in &r.blocks[..half] {
            ix.apply_block(b).expect("applies");
        }
        ix.flush().expect("flush");
    }
    let ix = Indexer::new(open(), r.watch.clone(), 10);
    let tip = ix.tip().expect("tip").expect("cursor survived");
    assert_eq!(tip.height, half as u64);
    for b in &r.blocks[half..] {
        ix.apply_block(b).expect("applies");
    }
    assert_eq!(
        ix.kv().scan_prefix(b"").expect("scan"),
        mem.kv().scan_prefix(b"").expect("scan")
    );
}

#[test]
fn sled_and_memory_indexers_agree_and_sled_resumes_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    agrees_with_memory_across_reopen(|| SledKv::open(dir.path()).expect("open"));
}
