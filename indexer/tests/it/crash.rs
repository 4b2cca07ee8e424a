//! `kill -9` during sync: the `ganglion-indexer` process is killed at pseudo-random heights
//! while following a devnet, restarted, killed again; after a final catch-up its store (sled,
//! or PostgreSQL) equals a fresh replay — no event missing, none duplicated.

use std::process::Stdio;
use std::time::{Duration, Instant};

use ganglion_indexer::store::{Kv, MemoryKv, PgKv, SledKv};
use ganglion_indexer::sync::SyncConfig;
use ganglion_indexer::{Event, Indexer};
use tokio_util::sync::CancellationToken;

use crate::devnet::{
    Chain, caught_up, deploy, dev_party, lock_small, spawn_follower, spawn_indexer,
};

/// A small LCG: reproducible kill points from a printed seed.
fn next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

/// Runs the indexer binary until it prints `applied H` with H ≥ `target` (or 10 s pass),
/// then SIGKILLs it. Returns the last height it reported.
fn run_and_kill(args: &[String], target: u64) -> u64 {
    let (mut child, rx) = spawn_indexer(args, Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = 0;
    while Instant::now() < deadline && last < target {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100))
            && let Some(h) = line
                .strip_prefix("applied ")
                .and_then(|r| r.split(' ').next())
                .and_then(|h| h.parse().ok())
        {
            last = h;
        }
    }
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reaped");
    assert!(!status.success(), "the indexer was killed, not stopped");
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_sync_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("ix");
    let store = db.display().to_string();
    sigkill_during_sync(dir.path(), &store, move || {
        SledKv::open(&db).expect("store reopens after kill -9")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_sync_on_postgres_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = crate::postgres::cluster();
    let url = crate::postgres::database(&cluster);
    let store = url.clone();
    sigkill_during_sync(dir.path(), &store, move || {
        PgKv::open(&url).expect("store reopens after kill -9")
    })
    .await;
}

/// Follows a devnet into `store` (`--store`) with the binary, killing it four times; then
/// catches up in-process on the store `reopen` returns and compares it with a fresh replay.
async fn sigkill_during_sync<S: Kv + 'static>(
    dir: &std::path::Path,
    store: &str,
    reopen: impl FnOnce() -> S + Send + 'static,
) {
    let chain = Chain::start(dir).await;
    let (dep, watch) = deploy(&chain).await;
    // 30 blocks, one lock each.
    let orch = dev_party(&chain.env, 2);
    for _ in 0..30 {
        lock_small(&chain, &dep, &orch).await;
    }
    let tip = chain.handle.tip().expect("tip").number;

    let watch_file = dir.join("watch.json");
    std::fs::write(&watch_file, serde_json::to_string(&watch).expect("json")).expect("write watch");
    let n2c = chain.handle.n2c_tcp_addr().expect("n2c").to_string();
    let args: Vec<String> = [
        "follow",
        "--store",
        store,
        "--watch",
        &watch_file.display().to_string(),
        "--n2c-tcp",
        &n2c,
        "--magic",
        &chain.handle.magic().to_string(),
        "--k",
        "10",
        // Runs of three blocks while catching up: kills land between and inside runs.
        "--catch-up-run",
        "3",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let mut rng: u64 = std::env::var("GANGLION_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()));
    eprintln!("crash test seed: {rng} (set GANGLION_CRASH_SEED to replay)");
    for round in 1..=4u64 {
        let target = (tip * round / 5 + next(&mut rng) % 4).min(tip);
        let reached = tokio::task::spawn_blocking({
            let args = args.clone();
            move || run_and_kill(&args, target)
        })
        .await
        .expect("join");
        eprintln!("round {round}: killed after height {reached} (target {target})");
    }

    // Catch up in-process on the same store, then compare with a fresh replay.
    let cancel = CancellationToken::new();
    let reopened = tokio::task::spawn_blocking(reopen).await.expect("join");
    let (crashed, rx1, s1) = spawn_follower(
        Indexer::new(reopened, watch.clone(), 10),
        SyncConfig::new(chain.n2c()),
        &cancel,
    );
    let (fresh, rx2, s2) = spawn_follower(
        Indexer::new(MemoryKv::new(), watch, 10),
        SyncConfig::new(chain.n2c()),
        &cancel,
    );
    caught_up(&rx1, &chain, &crashed).await;
    caught_up(&rx2, &chain, &fresh).await;
    let locks = fresh
        .events(0, u64::MAX)
        .expect("events")
        .iter()
        .filter(|r| matches!(r.event, Event::JobLocked { .. }))
        .count();
    assert_eq!(locks, 30);
    assert_eq!(
        crashed.kv().scan_prefix(b"").expect("dump"),
        fresh.kv().scan_prefix(b"").expect("dump"),
        "after four kill -9s the store equals a fresh replay"
    );
    cancel.cancel();
    s1.await.expect("join").expect("sync");
    s2.await.expect("join").expect("sync");
    chain.handle.shutdown().await;
}
