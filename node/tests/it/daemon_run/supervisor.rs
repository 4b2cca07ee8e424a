//! The node's critical tasks (`daemon::supervisor`): a node whose indexer store fails stops,
//! naming the indexer, instead of serving from a frozen view.
//!
//! The store is made to fail for real: the orchestrator's `indexer.sled` sits on its own
//! tmpfs, filled up once the node runs; the next block the indexer applies cannot be written
//! (ENOSPC). Mounting needs root (CI runs as root); elsewhere the test says SKIP and why.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ganglion_node::daemon::devnet;

use super::{Children, config, start, support};
use support::{Chain, dev_key};

/// A tmpfs mounted on a directory for the test's life; unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(at.to_path_buf())
    }

    /// Writes zeros into `<mount>/filler` until the file system is full.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).expect("filler");
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match f.write_all(&chunk).and_then(|()| f.sync_data()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return,
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_indexer_store_fails_stops_and_names_the_indexer() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIP a_node_whose_indexer_store_fails_stops_and_names_the_indexer: mounting the \
             tmpfs that makes the indexer's store fail needs root"
        );
        return;
    }
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let reference = devnet::deploy_validator(
        chain.handle.n2c_tcp_addr().expect("n2c"),
        &chain.deployment.params,
        &dev_key(3),
    )
    .await
    .expect("validator deployed");
    let node = config(&chain, reference, root.join("orch"), 0, vec![]);
    let store = Tmpfs::mount(&root.join("orch").join("indexer.sled"), "16m");
    let mut kids = Children::default();
    start(&mut kids, &node, "orchestrator");

    store.fill();
    // New blocks for the indexer to apply: one transaction each, until the node exits.
    let log = node.data_dir.with_extension("log");
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = kids.0[0].try_wait().expect("wait") {
            break status;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "the node still runs 90 s after its indexer store filled up\n--- log ---\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        support::fresh_seed(&chain, &dev_key(1)).await;
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "a non-zero exit: {status}\n{text}");
    assert!(
        text.contains("critical task `indexer sync` stopped"),
        "the exit names the indexer\n--- log ---\n{text}"
    );
}
