//! Indexer throughput against bare block decoding, measured in the same run
//! (`cargo run -p ganglion-indexer --example replay --release`).
//!
//! Three workloads: the real blocks in `shared/fixtures/cardano/` (repeated; each applied to a
//! fresh in-memory indexer, since they do not chain); a chain of devnet-assembled Conway
//! blocks full of escrow transactions (locks built by `ganglion-contracts`, 20 per block: the
//! worst case); and a mainnet-like chain whose blocks each hold all the real transactions of
//! the fixture blocks that read as Conway ones plus one escrow lock. The chains are replayed
//! into fresh indexers — in memory, in sled (a temporary folder) and in PostgreSQL (a
//! throwaway server, `ganglion_testnet::postgres`; skipped, saying so, when PostgreSQL is not
//! installed) — a commit per block (as at the tip) and a commit per run (as a follower
//! catching up). For each: blocks/s, events/s, and the ratio to `MultiEraBlock::decode` of
//! the same bytes. Targets: memory and sled at least 50 %, PostgreSQL at least 25 % of bare
//! decode speed; a missed target is printed and makes the exit status 1.

use std::path::Path;
use std::time::{Duration, Instant};

use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_indexer::store::{Kv, MemoryKv, PgKv, SledKv};
use ganglion_indexer::sync::CATCH_UP_RUN;
use ganglion_indexer::{Indexer, Watch};
use pallas_traverse::MultiEraBlock;

fn time<F: FnMut() -> usize>(min: Duration, mut f: F) -> (f64, usize, u32) {
    let start = Instant::now();
    let mut rounds = 0u32;
    let mut events = 0usize;
    while start.elapsed() < min {
        events += f();
        rounds += 1;
    }
    (start.elapsed().as_secs_f64(), events, rounds)
}

/// Times `run` (one pass over `blocks`, returning its events) for 2 s; prints the rate
/// against bare decoding and returns the ratio.
fn report(name: &str, watch: &Watch, run: impl Fn(&Watch) -> usize, blocks: &[Vec<u8>]) -> f64 {
    let (t_ix, events, r_ix) = time(Duration::from_secs(2), || run(watch));
    let ix_bps = (blocks.len() as f64 * f64::from(r_ix)) / t_ix;
    let dec_bps = decode_rate(blocks);
    let ratio = ix_bps / dec_bps;
    println!(
        "{name}: indexer {ix_bps:>10.0} blocks/s, {:>10.0} events/s | bare decode {dec_bps:>10.0} blocks/s | ratio {:.1} %",
        events as f64 / t_ix,
        100.0 * ratio
    );
    ratio
}

/// Escrow locks in the synthetic chain, 20 per block.
const LOCKS: usize = 1_000;

/// Blocks in the mainnet-like chain.
const MIXED_BLOCKS: usize = 100;

/// Bare decoding of `blocks`, blocks/s.
fn decode_rate(blocks: &[Vec<u8>]) -> f64 {
    let (t, _, rounds) = time(Duration::from_secs(2), || {
        for b in blocks {
            std::hint::black_box(MultiEraBlock::decode(b).map(|b| b.tx_count()).unwrap_or(0));
        }
        0
    });
    blocks.len() as f64 * f64::from(rounds) / t
}

/// Replays `chain` into fresh stores from `open` (opening is not timed) until 2 s of applying
/// have passed, at most 40 rounds, in runs of `run` blocks per commit (1: block by block, as
/// at the tip; [`CATCH_UP_RUN`]: as a follower catching up); prints the rate against bare
/// decoding and returns the ratio.
fn report_store<S: Kv>(
    name: &str,
    watch: &Watch,
    chain: &[Vec<u8>],
    run: usize,
    mut open: impl FnMut() -> S,
) -> f64 {
    let mut applying = Duration::ZERO;
    let (mut rounds, mut events) = (0u32, 0usize);
    while applying < Duration::from_secs(2) && rounds < 40 {
        let ix = Indexer::new(open(), watch.clone(), 2160);
        let start = Instant::now();
        for blocks in chain.chunks(run) {
            events += ix
                .apply_blocks(blocks)
                .map(|a| a.iter().map(|a| a.records.len()).sum())
                .unwrap_or(0);
        }
        ix.flush().expect("flush");
        applying += start.elapsed();
        rounds += 1;
    }
    let t = applying.as_secs_f64();
    let ix_bps = chain.len() as f64 * f64::from(rounds) / t;
    let dec_bps = decode_rate(chain);
    let ratio = ix_bps / dec_bps;
    println!(
        "{name}: indexer {ix_bps:>10.0} blocks/s, {:>10.0} events/s | bare decode {dec_bps:>10.0} blocks/s | ratio {:.1} %",
        events as f64 / t,
        100.0 * ratio
    );
    ratio
}

fn main() {
    // Workload 1: the real fixtures.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/cardano");
    let fixtures: Vec<Vec<u8>> = [
        "conway1", "conway2", "conway3", "conway4", "babbage1", "babbage7", "babbage9",
    ]
    .iter()
    .map(|f| {
        let text = std::fs::read_to_string(dir.join(format!("{f}.block"))).expect("fixture");
        hex::decode(text.trim()).expect("hex")
    })
    .collect();

    // Workload 2: devnet blocks full of escrow locks.
    let mut h = Harness::new(1);
    for _ in 0..LOCKS.div_ceil(33) {
        let _ = h.world.fund(
            &h.orch.address.clone(),
            ganglion_contracts::tx::Value::lovelace(1_000_000_000)
                .with_class(&h.dep.params.ntx, 1_000 * NTX),
        );
    }
    let skip = h.world.applied.len();
    for _ in 0..LOCKS {
        h.lock(NTX, 7200);
    }
    let txs: Vec<&[u8]> = h.world.applied[skip..].iter().map(Vec::as_slice).collect();
    let mut prev = None;
    let chain: Vec<Vec<u8>> = txs
        .chunks(20)
        .enumerate()
        .map(|(i, chunk)| {
            let b = ganglion_testnet::producer::assemble(
                i as u64 + 1,
                10 + i as u64,
                prev,
                (10, 0),
                chunk,
            )
            .expect("assembles");
            prev = Some(b.hash);
            b.wrapped
        })
        .collect();
    let watch = Watch::v2(h.dep.script.hash, h.dep.params.clone());

    // Workload 3: a mainnet-like chain — every block holds all the real transactions of the
    // fixture blocks that read as Conway ones (re-assembled, so that the blocks chain) and
    // one escrow lock.
    let foreign: Vec<Vec<u8>> = fixtures
        .iter()
        .filter_map(|b| MultiEraBlock::decode(b).ok())
        .flat_map(|b| b.txs().iter().map(|t| t.encode()).collect::<Vec<_>>())
        .filter(|tx| {
            // Babbage transactions that also read as Conway ones (most do).
            ganglion_testnet::producer::assemble(1, 1, None, (10, 0), &[tx])
                .ok()
                .and_then(|b| {
                    MultiEraBlock::decode(&b.wrapped)
                        .ok()
                        .map(|b| b.tx_count() == 1)
                })
                .unwrap_or(false)
        })
        .collect();
    let mut prev = None;
    let mixed: Vec<Vec<u8>> = txs
        .iter()
        .take(MIXED_BLOCKS)
        .enumerate()
        .map(|(i, lock)| {
            let mut body: Vec<&[u8]> = foreign.iter().map(Vec::as_slice).collect();
            body.push(lock);
            let b = ganglion_testnet::producer::assemble(
                i as u64 + 1,
                10 + i as u64,
                prev,
                (10, 0),
                &body,
            )
            .expect("assembles");
            prev = Some(b.hash);
            b.wrapped
        })
        .collect();

    let r1 = report(
        "real fixtures (7 blocks)",
        &watch,
        |w| {
            fixtures
                .iter()
                .map(|b| {
                    let ix = Indexer::new(MemoryKv::new(), w.clone(), 2160);
                    ix.apply_block(b).map(|a| a.records.len()).unwrap_or(0)
                })
                .sum()
        },
        &fixtures,
    );
    let r2 = report_store(
        "escrow-full chain (50 blocks x 20 locks), memory",
        &watch,
        &chain,
        1,
        MemoryKv::new,
    );
    let r5 = report_store(
        &format!(
            "mainnet-like chain ({MIXED_BLOCKS} blocks x {} real txs + 1 lock), memory",
            foreign.len()
        ),
        &watch,
        &mixed,
        1,
        MemoryKv::new,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut n = 0;
    let mut sled = |blocks: &[Vec<u8>], run: usize, name: &str| {
        report_store(name, &watch, blocks, run, || {
            n += 1;
            SledKv::open(&tmp.path().join(format!("ix{n}"))).expect("sled opens")
        })
    };
    let r3 = sled(&chain, 1, "escrow-full chain into sled, a commit per block");
    let r3b = sled(
        &chain,
        CATCH_UP_RUN,
        "escrow-full chain into sled, catching up (one commit per run)",
    );
    let r6 = sled(
        &mixed,
        1,
        "mainnet-like chain into sled, a commit per block",
    );
    let r6b = sled(
        &mixed,
        CATCH_UP_RUN,
        "mainnet-like chain into sled, catching up (one commit per run)",
    );
    let (r4, r4b, r7, r7b) = match ganglion_testnet::postgres::Cluster::start() {
        Ok(cluster) => {
            let pg = |blocks: &[Vec<u8>], run: usize, name: &str| {
                report_store(name, &watch, blocks, run, || {
                    let url = cluster.create_database().expect("createdb");
                    PgKv::open(&url).expect("PostgreSQL store opens")
                })
            };
            (
                Some(pg(
                    &chain,
                    1,
                    "escrow-full chain into PostgreSQL, a commit per block",
                )),
                Some(pg(
                    &chain,
                    CATCH_UP_RUN,
                    "escrow-full chain into PostgreSQL, catching up (one commit per run)",
                )),
                Some(pg(
                    &mixed,
                    1,
                    "mainnet-like chain into PostgreSQL, a commit per block",
                )),
                Some(pg(
                    &mixed,
                    CATCH_UP_RUN,
                    "mainnet-like chain into PostgreSQL, catching up (one commit per run)",
                )),
            )
        }
        Err(e) => {
            println!("PostgreSQL: SKIPPED ({e})");
            (None, None, None, None)
        }
    };
    let mut missed = false;
    for (name, ratio, goal) in [
        ("real fixtures, memory", Some(r1), 0.5),
        ("escrow chain, memory", Some(r2), 0.5),
        ("escrow chain, sled, per block", Some(r3), 0.5),
        ("escrow chain, sled, catching up", Some(r3b), 0.5),
        ("escrow chain, PostgreSQL, per block", r4, 0.25),
        ("escrow chain, PostgreSQL, catching up", r4b, 0.25),
        ("mainnet-like chain, memory", Some(r5), 0.5),
        ("mainnet-like chain, sled, per block", Some(r6), 0.5),
        ("mainnet-like chain, sled, catching up", Some(r6b), 0.5),
        ("mainnet-like chain, PostgreSQL, per block", r7, 0.25),
        ("mainnet-like chain, PostgreSQL, catching up", r7b, 0.25),
    ] {
        if let Some(r) = ratio.filter(|r| *r < goal) {
            println!(
                "TARGET MISSED: {name} at {:.1} % of bare decode speed (goal {:.0} %)",
                100.0 * r,
                100.0 * goal
            );
            missed = true;
        }
    }
    if missed {
        std::process::exit(1);
    }
}
