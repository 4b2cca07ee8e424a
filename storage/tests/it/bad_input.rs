//! Bad input returns typed errors and loses or corrupts nothing ("Bad input").

use std::sync::Arc;

use ganglion_storage::block::{self, BlockError};
use ganglion_storage::blockstore::{self, Blockstore, MemoryBlockstore, SledBlockstore};
use ganglion_storage::car;
use ganglion_storage::pin::{self, Embedded, Kubo, Pinner};
use ganglion_storage::test_utils::Generated;
use ganglion_storage::unixfs::{self, ImportOptions};
use tokio::io::AsyncReadExt;

use crate::car::export_vector;

fn two_chunk_car() -> (cid::Cid, Vec<u8>) {
    let v = serde_json::json!({"generator": "pat251", "size": 262_145});
    let (_, root, bytes) = export_vector(&v, "cidv1");
    (root, bytes)
}

#[tokio::test]
async fn truncated_car_is_an_error_at_every_cut() {
    let (_, bytes) = two_chunk_car();
    // Cut inside the header, inside a section's length, inside a block, and between sections.
    let header_len = 1 + bytes[0] as usize;
    let first_section = header_len + 2 + 36 + 262_144 + 2; // varint(2 bytes) + CIDv1 raw + data
    for cut in [
        0,
        5,
        header_len,
        header_len + 1,
        header_len + 40,
        first_section - 1,
        bytes.len() - 1,
    ] {
        let store = MemoryBlockstore::new();
        let result = car::import(&store, &bytes[..cut]).await;
        assert!(result.is_err(), "cut at {cut} of {} accepted", bytes.len());
    }
}

#[tokio::test]
async fn corrupt_block_in_car_is_refused_and_not_stored() {
    let (root, mut bytes) = two_chunk_car();
    // Flip a byte inside the last block (the root is first in pre-order, leaves follow).
    let at = bytes.len() - 10;
    bytes[at] ^= 0xff;
    let store = MemoryBlockstore::new();
    let err = car::import(&store, bytes.as_slice())
        .await
        .expect_err("corrupt");
    assert!(
        matches!(
            err,
            car::Error::InvalidBlock {
                source: BlockError::HashMismatch { .. },
                ..
            }
        ),
        "{err}"
    );
    // The corrupt block is not there; the store holds only verified blocks.
    for cid in store.all_blocks().expect("all") {
        let data = store.get(&cid).expect("get").expect("present");
        block::verify(&cid, &data).expect("only verified blocks stored");
    }
    assert!(blockstore::pin_recursive(&store, &root).is_err());
}

#[tokio::test]
async fn corrupt_car_header_is_malformed() {
    let (_, mut bytes) = two_chunk_car();
    bytes[3] ^= 0x55;
    let err = car::import(&MemoryBlockstore::new(), bytes.as_slice())
        .await
        .expect_err("bad header");
    assert!(matches!(err, car::Error::Malformed(_)), "{err}");
}

#[test]
fn block_that_does_not_match_its_cid() {
    let cid = block::cid_v1(block::RAW, b"abc");
    let dir = tempfile::tempdir().expect("tempdir");
    let sled = SledBlockstore::open(dir.path()).expect("open");
    let memory = MemoryBlockstore::new();
    for store in [&memory as &dyn Blockstore, &sled] {
        assert!(matches!(
            store.put(&cid, b"abd"),
            Err(blockstore::Error::InvalidBlock(
                BlockError::HashMismatch { .. }
            ))
        ));
    }
}

#[test]
fn cid_strings_that_are_not_cids() {
    for bad in [
        "",
        "hello",
        "Qm",
        "bafy!",
        "/ipfs/",
        "zzzz",
        "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5oX",
    ] {
        let err = block::parse_cid(bad).expect_err(bad);
        assert_eq!(err.input, bad);
    }
}

#[tokio::test]
async fn pin_of_unknown_cid() {
    let pinner = Embedded::new(Arc::new(MemoryBlockstore::new()));
    let unknown = block::cid_v1(block::RAW, b"unknown");
    let err = pinner.pin(&unknown).await.expect_err("unknown");
    assert!(
        matches!(err, pin::Error::Store(blockstore::Error::IncompleteDag { missing, .. }) if missing == unknown),
        "{err}"
    );
    assert!(pinner.pins().await.expect("pins").is_empty());
}

#[tokio::test]
async fn kubo_daemon_down_is_unavailable_and_retryable() {
    // Port 9 (discard) has no listener here: connection refused.
    let kubo = Kubo::new("http://127.0.0.1:9").expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, b"hello world\n").expect("write");
    let err = kubo
        .add_file(&path, &ImportOptions::cid_v1())
        .await
        .expect_err("down");
    assert!(matches!(err, pin::Error::Unavailable { .. }), "{err}");
    assert!(err.is_retryable());
    assert!(matches!(
        kubo.pins().await,
        Err(pin::Error::Unavailable { .. })
    ));
}

/// A fault double at the RPC boundary (named as such): a daemon that answers every request with
/// the `add` line of *another* file, as a misconfigured Kubo (other chunker) would.
async fn lying_daemon() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                // Read until the request body is in (enough for a small multipart upload).
                let mut seen = Vec::new();
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(4).any(|w| w == b"--\r\n")
                        || seen.ends_with(b"\r\n\r\n") && !seen.starts_with(b"POST /api/v0/add")
                    {
                        break;
                    }
                }
                let body = br#"{"Name":"f","Hash":"QmPeaZux8qE8eZibqtC1v6h1pBFvVBz2YkSAdwU8VBXJNR","Size":"1011"}"#;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                use tokio::io::AsyncWriteExt;
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn kubo_returning_another_cid_is_refused() {
    let kubo = Kubo::new(&lying_daemon().await).expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hello");
    std::fs::write(&path, b"hello world\n").expect("write");
    let err = kubo
        .add_file(&path, &ImportOptions::kubo_default())
        .await
        .expect_err("lie");
    match err {
        pin::Error::CidMismatch { expected, returned } => {
            assert_eq!(
                expected.to_string(),
                "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"
            );
            assert_eq!(returned, "QmPeaZux8qE8eZibqtC1v6h1pBFvVBz2YkSAdwU8VBXJNR");
        }
        other => panic!("expected CidMismatch, got {other}"),
    }
}

/// A real full disk: a 96 MiB tmpfs under the sled store (needs root to mount; skipped loudly
/// otherwise). The store keeps its default 64 MiB reserve, so a 64 MiB import fails with
/// `DiskFull` before sled meets ENOSPC (which sled 0.34 never recovers from: its flush waits
/// forever). What was pinned before stays readable after reopening. The scenario runs on its own
/// thread under a 60 s limit so a hang fails the test instead of stalling the run.
#[test]
fn full_disk_under_sled_is_out_of_space_and_keeps_pinned_data() {
    let mnt = tempfile::tempdir().expect("tempdir");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=96m", "tmpfs"])
        .arg(mnt.path())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("\n*** SKIPPED full_disk test: cannot mount a tmpfs (not root?)\n");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.path().to_path_buf());
    let db = mnt.path().join("db");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(full_disk_scenario(&db))
        }));
        let _ = done_tx.send(outcome);
    });
    match done_rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(Ok(())) => {}
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("full-disk scenario hung for 60 s (sled blocked on ENOSPC?)"),
    }
}

async fn full_disk_scenario(db: &std::path::Path) {
    let pinned = {
        let pinner = Embedded::new(Arc::new(SledBlockstore::open(db).expect("open")));
        let tmp = tempfile::tempdir().expect("tempdir on the real disk");
        let small = tmp.path().join("small");
        std::fs::write(&small, Generated::new("pat251", 300_000).to_vec()).expect("write");
        let added = pinner
            .add_file(&small, &ImportOptions::cid_v1())
            .await
            .expect("small add");
        let big = tmp.path().join("big");
        std::fs::write(&big, Generated::new("pat251", 64 << 20).to_vec()).expect("write");
        let err = pinner
            .add_file(&big, &ImportOptions::cid_v1())
            .await
            .expect_err("64 MiB into 96 MiB with a 64 MiB reserve");
        assert!(
            matches!(
                err,
                pin::Error::Import(unixfs::Error::Store(blockstore::Error::DiskFull { .. }))
            ),
            "{err}"
        );
        assert!(err.is_retryable());
        assert_eq!(pinner.pins().await.expect("pins"), vec![added.root]);
        // GC drops the partial import.
        assert!(pinner.gc().await.expect("gc").removed_blocks > 0);
        added.root
    };
    // Reopen: the pinned file is intact.
    let store = SledBlockstore::open(db).expect("reopen");
    assert_eq!(store.pins().expect("pins"), vec![pinned]);
    let mut out = Vec::new();
    unixfs::cat(&store, &pinned, &mut out).expect("cat");
    assert_eq!(out, Generated::new("pat251", 300_000).to_vec());
}

#[test]
fn kubo_endpoint_that_is_not_a_url() {
    let err = Kubo::new("not a url").expect_err("bad endpoint");
    assert!(matches!(err, pin::Error::InvalidEndpoint { .. }), "{err}");
}
