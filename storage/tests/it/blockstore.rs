//! One conformance suite for both blockstores (memory = the readable spec, sled = the node's).

use ganglion_storage::block::{DAG_PB, RAW, cid_v1};
use ganglion_storage::blockstore::{
    self, Blockstore, Error, GcStats, MemoryBlockstore, SledBlockstore,
};
use ganglion_storage::test_utils::Generated;
use ganglion_storage::unixfs::{self, ImportOptions};

fn import(store: &impl Blockstore, generator: &str, size: u64, opts: &ImportOptions) -> cid::Cid {
    unixfs::import_file(Generated::new(generator, size), opts, store)
        .expect("import")
        .root
}

fn put_get_has_delete_and_size(store: &impl Blockstore) {
    let cid = cid_v1(RAW, b"hello world\n");
    assert!(!store.has(&cid).expect("has"));
    assert!(store.put(&cid, b"hello world\n").expect("put"), "new block");
    assert!(
        !store.put(&cid, b"hello world\n").expect("put again"),
        "already there"
    );
    assert_eq!(
        store.get(&cid).expect("get").as_deref(),
        Some(&b"hello world\n"[..])
    );
    assert_eq!(store.size_bytes().expect("size"), 12);
    assert_eq!(store.block_count().expect("count"), 1);
    // Same multihash under another codec is the same stored block (keyed by multihash).
    let as_pb = cid::Cid::new_v1(DAG_PB, *cid.hash());
    assert!(store.has(&as_pb).expect("has"));
    assert!(store.delete(&cid).expect("delete"));
    assert!(!store.delete(&cid).expect("delete again"));
    assert_eq!(store.size_bytes().expect("size"), 0);
    assert_eq!(store.get(&cid).expect("get"), None);
}

fn put_rejects_bytes_that_do_not_match_the_cid(store: &impl Blockstore) {
    let cid = cid_v1(RAW, b"hello world\n");
    let err = store.put(&cid, b"hello world!").expect_err("mismatch");
    assert!(matches!(err, Error::InvalidBlock(_)), "{err}");
    assert!(!store.has(&cid).expect("has"), "nothing stored");
    assert_eq!(store.size_bytes().expect("size"), 0);
}

fn pin_needs_the_whole_dag(store: &impl Blockstore) {
    let root = import(store, "pat251", 1_048_576, &ImportOptions::kubo_default());
    // Drop one leaf: pinning must fail and record nothing.
    let leaf = ganglion_storage::dag::links(&root, &store.get(&root).expect("get").expect("root"))
        .expect("links")[2];
    store.delete(&leaf).expect("delete leaf");
    let err = blockstore::pin_recursive(store, &root).expect_err("incomplete");
    assert!(
        matches!(err, Error::IncompleteDag { missing, .. } if missing == leaf),
        "{err}"
    );
    assert!(store.pins().expect("pins").is_empty());
    // An unknown CID is the extreme case.
    let unknown = cid_v1(RAW, b"never stored");
    assert!(matches!(
        blockstore::pin_recursive(store, &unknown),
        Err(Error::IncompleteDag { .. })
    ));
    assert!(matches!(
        blockstore::unpin(store, &unknown),
        Err(Error::NotPinned(_))
    ));
}

fn gc_keeps_pinned_dags_and_removes_the_rest(store: &impl Blockstore) {
    let opts = ImportOptions::cid_v1();
    // `kept` and `dropped` share their first chunk (same pat251 prefix of 256 KiB).
    let kept = import(store, "pat251", 600_000, &opts);
    let dropped = import(store, "pat251", 300_000, &opts);
    let lone = import(store, "text", 12, &opts);
    blockstore::pin_recursive(store, &kept).expect("pin");
    blockstore::pin_recursive(store, &lone).expect("pin");
    let before = store.size_bytes().expect("size");
    let stats = blockstore::gc(store).expect("gc");
    // `dropped` = shared chunk (kept) + its own 37856-byte leaf + its root.
    assert_eq!(stats.removed_blocks, 2, "{stats:?}");
    assert_eq!(
        store.size_bytes().expect("size"),
        before - stats.freed_bytes
    );
    assert!(!store.has(&dropped).expect("has"));
    let mut out = Vec::new();
    unixfs::cat(store, &kept, &mut out).expect("kept file readable");
    assert_eq!(out, Generated::new("pat251", 600_000).to_vec());
    // Unpin and collect again: only nothing of `kept` remains.
    blockstore::unpin(store, &kept).expect("unpin");
    blockstore::gc(store).expect("gc");
    assert_eq!(
        store.block_count().expect("count"),
        1,
        "only `lone` is left"
    );
    assert_eq!(blockstore::gc(store).expect("gc"), GcStats::default());
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[test] fn $name() { super::$name(&ganglion_storage::blockstore::MemoryBlockstore::new()); })*
        }
        mod sled {
            $(#[test] fn $name() {
                let dir = tempfile::tempdir().expect("tempdir");
                let store = ganglion_storage::blockstore::SledBlockstore::open(dir.path()).expect("open");
                super::$name(&store);
            })*
        }
    };
}

conformance!(
    put_get_has_delete_and_size,
    put_rejects_bytes_that_do_not_match_the_cid,
    pin_needs_the_whole_dag,
    gc_keeps_pinned_dags_and_removes_the_rest,
    capacity_limit_refuses_writes_and_keeps_existing_data,
);

fn capacity_limit_refuses_writes_and_keeps_existing_data(_unlimited: &impl Blockstore) {
    // The suite's store has no limit; check both kinds with one of 1 MiB.
    let dir = tempfile::tempdir().expect("tempdir");
    let sled = SledBlockstore::open_with_capacity(dir.path(), Some(1 << 20)).expect("open");
    let memory = MemoryBlockstore::with_capacity_bytes(1 << 20);
    fn check(store: &impl Blockstore) {
        let opts = ImportOptions::cid_v1();
        let small = import(store, "pat251", 500_000, &opts);
        blockstore::pin_recursive(store, &small).expect("pin");
        let used = store.size_bytes().expect("size");
        let err = unixfs::import_file(Generated::new("pat251", 2 << 20), &opts, store)
            .expect_err("over capacity");
        assert!(
            matches!(&err, unixfs::Error::Store(e @ Error::Full { .. }) if e.is_out_of_space()),
            "{err}"
        );
        // The pinned file is intact; GC removes the partial import's leftovers.
        blockstore::gc(store).expect("gc");
        assert_eq!(store.size_bytes().expect("size"), used);
        let mut out = Vec::new();
        unixfs::cat(store, &small, &mut out).expect("cat");
        assert_eq!(out, Generated::new("pat251", 500_000).to_vec());
    }
    check(&sled);
    check(&memory);
}

#[test]
fn sled_keeps_blocks_pins_and_size_across_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, size) = {
        let store = SledBlockstore::open(dir.path()).expect("open");
        let root = import(&store, "pat251", 1_048_576, &ImportOptions::kubo_default());
        blockstore::pin_recursive(&store, &root).expect("pin");
        store.flush().expect("flush");
        (root, store.size_bytes().expect("size"))
    };
    let store = SledBlockstore::open(dir.path()).expect("reopen");
    assert_eq!(store.pins().expect("pins"), vec![root]);
    assert_eq!(store.size_bytes().expect("size"), size);
    assert_eq!(blockstore::gc(&store).expect("gc").removed_blocks, 0);
    let mut out = Vec::new();
    unixfs::cat(&store, &root, &mut out).expect("cat");
    assert_eq!(out.len(), 1_048_576);
}
