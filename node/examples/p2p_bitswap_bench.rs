//! Bitswap numbers: a UnixFS DAG fetched between two nodes on loopback TCP, every
//! block verified and stored, against importing the same bytes locally (chunk + SHA-256 +
//! store: the work the fetching side repeats), reported as a ratio.
//!
//! `cargo run --release -p ganglion-node --example p2p_bitswap_bench` (`-- --quick`: 16 MiB,
//! default 128 MiB). Stores are in memory, so the numbers are the protocol and hashing cost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ganglion_p2p::offers::BondSnapshot;
use ganglion_p2p::{self as p2p, Client, Config};
use ganglion_storage::bitswap::BitswapStore;
use ganglion_storage::blockstore::{Blockstore, MemoryBlockstore};
use ganglion_storage::unixfs::{self, ImportOptions};
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId};

/// Deterministic pseudo-random bytes (xorshift64*), so chunks never repeat.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

async fn node(store: Arc<MemoryBlockstore>) -> (Client, PeerId, Multiaddr) {
    let key = Keypair::generate_ed25519();
    let peer = key.public().to_peer_id();
    let config = Config {
        listen: vec![],
        blockstore: Some(BitswapStore::new(store as Arc<dyn Blockstore>)),
        fetch_timeout: Duration::from_secs(60),
        ..Config::default()
    };
    let (client, event_loop, _events, _inbound) =
        p2p::new(key, config, BondSnapshot::default()).expect("swarm builds");
    tokio::spawn(event_loop.run());
    let addr = client
        .listen("/ip4/127.0.0.1/tcp/0".parse().expect("literal"))
        .await
        .expect("listens")
        .with(Protocol::P2p(peer));
    (client, peer, addr)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mib = if quick { 16 } else { 128 };
    let data = noise(mib << 20, 9);

    let a_store = Arc::new(MemoryBlockstore::new());
    let t = Instant::now();
    let imported =
        unixfs::import_bytes(&data, &ImportOptions::default(), &*a_store).expect("import");
    let import_s = t.elapsed().as_secs_f64();

    let (_a, a_peer, a_addr) = node(a_store.clone()).await;
    let b_store = Arc::new(MemoryBlockstore::new());
    let (b, _, _) = node(b_store.clone()).await;
    b.dial(a_addr).await.expect("dials");
    let t = Instant::now();
    let fetched = b
        .fetch_dag(imported.root, a_peer)
        .await
        .expect("fetch succeeds");
    let fetch_s = t.elapsed().as_secs_f64();
    assert_eq!(
        fetched.blocks,
        a_store.block_count().expect("count"),
        "whole DAG"
    );

    let mb = data.len() as f64 / 1e6;
    println!(
        "bitswap fetch: {mib} MiB, {} blocks over loopback TCP in {fetch_s:.3} s: {:.1} MB/s",
        fetched.blocks,
        mb / fetch_s
    );
    println!(
        "local import of the same bytes: {import_s:.3} s: {:.1} MB/s",
        mb / import_s
    );
    println!(
        "ratio fetch / local import: {:.2}",
        (mb / fetch_s) / (mb / import_s)
    );
}
