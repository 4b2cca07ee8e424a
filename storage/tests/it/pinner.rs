//! One conformance suite for both pinners: embedded (memory and sled stores) and Kubo RPC
//! (against a real js-ipfs daemon, see `daemon.rs`).

use std::path::Path;
use std::sync::Arc;

use ganglion_storage::block::{RAW, cid_v1, parse_cid};
use ganglion_storage::blockstore::{MemoryBlockstore, SledBlockstore};
use ganglion_storage::pin::{Embedded, Error, Kubo, Pinner};
use ganglion_storage::test_utils::{Generated, fixture_json};
use ganglion_storage::unixfs::ImportOptions;
use sha2::{Digest, Sha256};

use crate::unixfs::options_for;

fn vector(name: &str) -> serde_json::Value {
    fixture_json("ipfs/kubo-cids.json")["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .find(|v| v["name"] == name)
        .expect("vector")
        .clone()
}

fn write_input(dir: &Path, v: &serde_json::Value) -> std::path::PathBuf {
    let path = dir.join(v["name"].as_str().expect("name"));
    std::fs::write(&path, crate::unixfs::input_of(v).to_vec()).expect("write input");
    path
}

/// The suite. Every step is an observable behaviour of `ipfs add/pin/cat/dag export`.
pub(crate) async fn conformance(pinner: &impl Pinner) {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = pinner.pins().await.expect("pins");

    // add in several profiles: CIDs are the vectors'.
    let big = vector("pat251-2621457.bin");
    let big_path = write_input(dir.path(), &big);
    for variant in [
        "kubo_default",
        "cidv1",
        "cidv1_no_raw_leaves",
        "cidv0_raw_leaves",
    ] {
        let added = pinner
            .add_file(&big_path, &options_for(variant))
            .await
            .unwrap_or_else(|e| panic!("add {variant}: {e}"));
        assert_eq!(
            added.root.to_string(),
            big["cids"][variant].as_str().expect("cid"),
            "{variant}"
        );
        assert_eq!(added.content_bytes, 2_621_457);
        assert!(
            pinner.pins().await.expect("pins").contains(&added.root),
            "{variant} pinned"
        );
    }
    let root = parse_cid(big["cids"]["kubo_default"].as_str().expect("cid")).expect("cid");

    // cat gives the bytes back.
    let mut content = Vec::new();
    let n = pinner.cat(&root, &mut content).await.expect("cat");
    assert_eq!(n, 2_621_457);
    assert!(
        content == Generated::new("pat251", 2_621_457).to_vec(),
        "cat content"
    );

    // dag export is the vector's CAR.
    let mut car = Vec::new();
    let n = pinner.export_car(&root, &mut car).await.expect("export");
    assert_eq!(n, car.len() as u64);
    assert_eq!(
        hex::encode(Sha256::digest(&car)),
        big["car"]["kubo_default"]["sha256"].as_str().expect("sha")
    );

    // unpin, unpin again, pin again (blocks are still there).
    pinner.unpin(&root).await.expect("unpin");
    assert!(!pinner.pins().await.expect("pins").contains(&root));
    let err = pinner.unpin(&root).await.expect_err("second unpin");
    assert!(matches!(err, Error::NotPinned(c) if c == root), "{err}");
    pinner.pin(&root).await.expect("re-pin");
    assert!(pinner.pins().await.expect("pins").contains(&root));

    // A CID nobody has cannot be pinned and changes nothing.
    let unknown = cid_v1(RAW, b"ganglion: a block no node has");
    let pins = pinner.pins().await.expect("pins");
    let err = pinner.pin(&unknown).await.expect_err("unknown CID");
    assert!(
        matches!(
            err,
            Error::Store(_) | Error::Timeout { .. } | Error::Rpc { .. }
        ),
        "{err}"
    );
    assert_eq!(pinner.pins().await.expect("pins"), pins);

    // Clean up what this suite pinned. `cidv1` and `cidv0_raw_leaves` roots are the same bytes
    // (raw leaves, so identical parent nodes) under CIDv1 and CIDv0: js-ipfs keys pins by
    // multihash and drops both with the first unpin; the embedded pinner keys them by CID.
    let mut unpinned: Vec<cid::Cid> = Vec::new();
    for variant in [
        "kubo_default",
        "cidv1",
        "cidv1_no_raw_leaves",
        "cidv0_raw_leaves",
    ] {
        let c = parse_cid(big["cids"][variant].as_str().expect("cid")).expect("cid");
        match pinner.unpin(&c).await {
            Ok(()) => {}
            Err(Error::NotPinned(_)) if unpinned.iter().any(|u| u.hash() == c.hash()) => {}
            Err(e) => panic!("unpin {variant}: {e}"),
        }
        unpinned.push(c);
    }
    assert_eq!(pinner.pins().await.expect("pins"), before);
}

#[tokio::test]
async fn embedded_memory_conforms() {
    conformance(&Embedded::new(Arc::new(MemoryBlockstore::new()))).await;
}

#[tokio::test]
async fn embedded_sled_conforms_and_gc_frees_unpinned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pinner = Embedded::new(Arc::new(SledBlockstore::open(dir.path()).expect("open")));
    conformance(&pinner).await;
    let stats = pinner.gc().await.expect("gc");
    assert!(stats.removed_blocks > 0);
    use ganglion_storage::blockstore::Blockstore;
    assert_eq!(pinner.store().size_bytes().expect("size"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubo_rpc_conforms_against_js_ipfs() {
    let daemon = match crate::daemon::start().await {
        Ok(d) => d,
        Err(why) => return crate::daemon::unavailable(&why),
    };
    let kubo = Kubo::new(&daemon.endpoint).expect("client");
    let version = kubo.version().await.expect("version");
    eprintln!("js-ipfs at {} reports version {version}", daemon.endpoint);
    conformance(&kubo.with_pin_timeout(std::time::Duration::from_secs(3))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubo_fetch_into_a_blockstore_verifies_every_block() {
    let daemon = match crate::daemon::start().await {
        Ok(d) => d,
        Err(why) => return crate::daemon::unavailable(&why),
    };
    let kubo = Kubo::new(&daemon.endpoint).expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let big = vector("pat251-2621457.bin");
    let path = write_input(dir.path(), &big);
    let added = kubo
        .add_file(&path, &options_for("cidv1"))
        .await
        .expect("add");
    let limit = std::time::Duration::from_secs(20);

    // Fetched into an empty store: the whole DAG, each block checked, readable as the file.
    let store = MemoryBlockstore::new();
    let got = kubo
        .fetch_into(&added.root, &store, limit)
        .await
        .expect("fetched");
    assert_eq!(got.roots, vec![added.root]);
    assert!(got.blocks > 1, "{got:?}");
    let mut content = Vec::new();
    let n = ganglion_storage::unixfs::cat(&store, &added.root, &mut content).expect("cat");
    assert_eq!(n, 2_621_457);
    assert_eq!(content, std::fs::read(&path).expect("input"));

    // A CID the daemon does not hold (offline): a named error within the bound, nothing kept.
    let absent = cid_v1(RAW, b"no daemon holds these bytes");
    let empty = MemoryBlockstore::new();
    let e = kubo
        .fetch_into(&absent, &empty, std::time::Duration::from_secs(3))
        .await
        .expect_err("absent");
    assert!(
        matches!(e, Error::Timeout { .. } | Error::Rpc { .. } | Error::Car(_)),
        "{e}"
    );
    use ganglion_storage::blockstore::Blockstore;
    assert_eq!(empty.size_bytes().expect("size"), 0);
}

#[tokio::test]
async fn kubo_refuses_options_it_cannot_express() {
    let kubo = Kubo::new("http://127.0.0.1:9").expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_input(dir.path(), &vector("hello-world.txt"));
    let err = kubo
        .add_file(&path, &ImportOptions::unixfs_v1_2025())
        .await
        .expect_err("1024 links");
    assert!(matches!(err, Error::Import(_)), "{err}");
}
