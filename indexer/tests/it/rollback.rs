//! Rollback ≡ replay: after any interleaving of blocks and rollbacks of depth 1–10, the
//! store equals a fresh replay of the final chain.

use std::sync::OnceLock;

use ganglion_indexer::store::{Kv, MemoryKv};
use ganglion_indexer::{Error, Indexer, Watch};
use proptest::prelude::*;

use crate::scenario::run;

pub(crate) fn scenario() -> &'static (Watch, Vec<Vec<u8>>) {
    static S: OnceLock<(Watch, Vec<Vec<u8>>)> = OnceLock::new();
    S.get_or_init(|| {
        let r = run();
        (r.watch, r.blocks)
    })
}

pub(crate) fn replay(watch: &Watch, blocks: &[Vec<u8>], k: u64) -> Indexer<MemoryKv> {
    let ix = Indexer::new(MemoryKv::new(), watch.clone(), k);
    for b in blocks {
        ix.apply_block(b).expect("applies");
    }
    ix
}

pub(crate) fn all<S: Kv>(ix: &Indexer<S>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ix.kv().scan_prefix(b"").expect("scan")
}

/// The rollback ops strategy: each op applies `n` more blocks (or as many as are left) as one
/// run ([`Indexer::apply_blocks`], one commit), then rolls back `depth` blocks — often into
/// the middle of an earlier run.
pub(crate) fn ops() -> impl Strategy<Value = Vec<(usize, u64)>> {
    prop::collection::vec((1usize..6, 1u64..=10), 1..12)
}

/// Runs `ops` on `ix` (empty), then the rest of the chain, and compares the store with a
/// fresh replay. Like a node's immutable tip, the undo window is counted from the highest
/// block ever applied: a rollback past it is refused and changes nothing.
pub(crate) fn rollback_equals_replay_on<S: Kv>(
    ix: &Indexer<S>,
    ops: Vec<(usize, u64)>,
) -> Result<(), TestCaseError> {
    let (watch, blocks) = scenario();
    let k = 10;
    let mut height = 0usize;
    let mut highest = 0usize;
    for (n, depth) in ops {
        let run = &blocks[height..(height + n).min(blocks.len())];
        ix.apply_blocks(run).expect("applies");
        height += run.len();
        highest = highest.max(height);
        let depth = (depth as usize).min(height);
        let target = height - depth;
        let point = if target == 0 {
            None
        } else {
            let tip = replay(watch, &blocks[..target], k)
                .tip()
                .expect("tip")
                .expect("some");
            Some((tip.slot, tip.hash))
        };
        if target + (k as usize) < highest {
            let before = all(ix);
            let refused = ix.roll_back_to(point);
            prop_assert!(
                matches!(refused, Err(Error::RollbackTooDeep { .. })),
                "{refused:?}"
            );
            prop_assert_eq!(all(ix), before);
            continue;
        }
        ix.roll_back_to(point).expect("rollback within k");
        height = target;
    }
    ix.apply_blocks(&blocks[height..]).expect("applies");
    let fresh = replay(watch, blocks, k);
    prop_assert_eq!(all(ix), all(&fresh));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// After any interleaving of blocks and rollbacks the store equals a fresh replay.
    #[test]
    fn rollback_equals_replay(ops in ops()) {
        let (watch, _) = scenario();
        rollback_equals_replay_on(&Indexer::new(MemoryKv::new(), watch.clone(), 10), ops)?;
    }
}

/// A run with a block that does not extend the one before it commits nothing, not even the
/// blocks before that one; a good run is heard block by block, in order.
#[test]
fn a_run_is_applied_whole_or_not_at_all() {
    let (watch, blocks) = scenario();
    let ix = Indexer::new(MemoryKv::new(), watch.clone(), 10);
    ix.apply_blocks(&blocks[..2]).expect("applies");
    let before = all(&ix);
    let tip = ix.tip().expect("tip");
    let broken = [blocks[2].clone(), blocks[3].clone(), blocks[5].clone()];
    let refused = ix.apply_blocks(&broken);
    assert!(
        matches!(
            refused,
            Err(Error::NotNext {
                height: 6,
                tip: 4,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(all(&ix), before, "a refused run wrote something");
    assert_eq!(ix.tip().expect("tip"), tip);

    let heard = ix.subscribe();
    let applied = ix.apply_blocks(&blocks[2..6]).expect("applies");
    assert_eq!(applied.len(), 4);
    let heights: Vec<u64> = heard
        .try_iter()
        .map(|n| match n {
            ganglion_indexer::Notification::Applied { point, .. } => point.height,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let expected: Vec<u64> = applied.iter().map(|a| a.point.height).collect();
    assert_eq!(heights, expected);
    assert!(heights.windows(2).all(|w| w[1] == w[0] + 1), "{heights:?}");
    assert_eq!(all(&ix), all(&replay(watch, &blocks[..6], 10)));
}

#[test]
fn rollback_beyond_k_is_refused_and_changes_nothing() {
    let (watch, blocks) = scenario();
    let ix = replay(watch, blocks, 3);
    let before = all(&ix);
    let err = ix.roll_back_to(None).expect_err("too deep");
    assert!(matches!(err, Error::RollbackTooDeep { .. }), "{err}");
    assert_eq!(all(&ix), before, "a refused rollback undoes nothing");
    // Within the window it works.
    let target = replay(watch, &blocks[..blocks.len() - 3], 3)
        .tip()
        .expect("tip")
        .expect("some");
    ix.roll_back_to(Some((target.slot, target.hash)))
        .expect("3 blocks back");
    assert_eq!(ix.tip().expect("tip"), Some(target));
}

/// The intersection points a follower offers reach exactly as deep as an undo can: the tip,
/// every block with an undo record, and the block below the oldest one. Without that deepest
/// point a fork exactly k blocks deep found no intersection and the follower never recovered.
#[test]
fn recent_points_reach_the_deepest_block_an_undo_can_restore() {
    let (watch, blocks) = scenario();
    let k = 3u64;
    assert!(blocks.len() > k as usize + 1, "scenario long enough");
    let ix = replay(watch, blocks, k);
    let points = ix.recent_points().expect("points");
    assert_eq!(points.first().copied(), ix.tip().expect("tip"), "tip first");
    assert_eq!(
        points.len(),
        k as usize + 1,
        "k undone blocks + the block below"
    );
    let deepest = *points.last().expect("some");
    let below = replay(watch, &blocks[..blocks.len() - k as usize], k);
    let below_tip = below.tip().expect("tip").expect("some");
    assert_eq!(
        deepest, below_tip,
        "the deepest point is the block below the window"
    );
    let one_more = replay(watch, &blocks[..blocks.len() - 1 - k as usize], k)
        .tip()
        .expect("tip")
        .expect("some");
    let err = ix
        .roll_back_to(Some((one_more.slot, one_more.hash)))
        .expect_err("past the deepest point");
    assert!(matches!(err, Error::RollbackTooDeep { .. }), "{err}");
    ix.roll_back_to(Some((deepest.slot, deepest.hash)))
        .expect("every offered point can be rolled back to");
    assert_eq!(
        ix.recent_points().expect("points"),
        vec![deepest],
        "with no undo record left the tip is still offered"
    );
}

/// A store whose commits take a millisecond, like a disk under load: it widens the window
/// between a writer starting to move the cursor and the move being visible.
struct SlowCommits(MemoryKv);

impl Kv for SlowCommits {
    fn get(&self, key: &[u8]) -> ganglion_indexer::Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> ganglion_indexer::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.scan_prefix(prefix)
    }
    fn range(&self, from: &[u8], to: &[u8]) -> ganglion_indexer::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.range(from, to)
    }
    fn commit(&self, writes: Vec<ganglion_indexer::store::Write>) -> ganglion_indexer::Result<()> {
        std::thread::sleep(std::time::Duration::from_millis(1));
        self.0.commit(writes)
    }
    fn flush(&self) -> ganglion_indexer::Result<()> {
        self.0.flush()
    }
}

/// Readers on other threads (queries, the RPC, a test waiting for the tip) may ask for the tip
/// while the follower rolls back, typically woken by the previous step's notification. They
/// must never cache the pre-rollback cursor over the new one: the follower's next apply or
/// rollback would then start from a block whose undo record is gone (seen as "cannot roll
/// back: beyond the undo window" and a follower that stopped).
#[test]
fn concurrent_tip_readers_never_leave_a_stale_tip_behind() {
    let (watch, blocks) = scenario();
    let depth = 4;
    let (kept, rolled) = blocks.split_at(blocks.len() - depth);
    let ix = Indexer::new(SlowCommits(MemoryKv::new()), watch.clone(), 10);
    for b in kept {
        ix.apply_block(b).expect("applies");
    }
    let ix = std::sync::Arc::new(ix);
    let base = ix.tip().expect("tip").expect("some");
    let rx = ix.subscribe();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (ix, stop) = (ix.clone(), stop.clone());
        // Like a waiter: wake on each notification and read the tip at once.
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if rx
                    .recv_timeout(std::time::Duration::from_millis(50))
                    .is_ok()
                {
                    let _ = ix.tip();
                }
            }
        })
    };
    for round in 0..50 {
        for b in rolled {
            ix.apply_block(b)
                .unwrap_or_else(|e| panic!("round {round}: apply: {e}"));
        }
        ix.roll_back_to(Some((base.slot, base.hash)))
            .unwrap_or_else(|e| panic!("round {round}: rollback: {e}"));
        assert_eq!(ix.tip().expect("tip"), Some(base), "round {round}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().expect("reader");
}
