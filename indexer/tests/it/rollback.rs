//! Rollback ≡ replay: after any interleaving of blocks and rollbacks of depth 1–10, the
//! store equals a fresh replay of the final chain.

use std::sync::OnceLock;

use ganglion_indexer::store::{Kv, MemoryKv};
use ganglion_indexer::{Error, Indexer, Watch};
use proptest::prelude::*;

use crate::scenario::run;

fn scenario() -> &'static (Watch, Vec<Vec<u8>>) {
    static S: OnceLock<(Watch, Vec<Vec<u8>>)> = OnceLock::new();
    S.get_or_init(|| {
        let r = run();
        (r.watch, r.blocks)
    })
}

fn replay(watch: &Watch, blocks: &[Vec<u8>], k: u64) -> Indexer<MemoryKv> {
    let ix = Indexer::new(MemoryKv::new(), watch.clone(), k);
    for b in blocks {
        ix.apply_block(b).expect("applies");
    }
    ix
}

fn all(ix: &Indexer<MemoryKv>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ix.kv().scan_prefix(b"").expect("scan")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// `ops`: each op applies `n` more blocks (or as many as are left), then rolls back
    /// `depth` blocks. Like a node's immutable tip, the undo window is counted from the
    /// highest block ever applied: a rollback past it is refused and changes nothing.
    #[test]
    fn rollback_equals_replay(ops in prop::collection::vec((1usize..6, 1u64..=10), 1..12)) {
        let (watch, blocks) = scenario();
        let k = 10;
        let ix = Indexer::new(MemoryKv::new(), watch.clone(), k);
        let mut height = 0usize;
        let mut highest = 0usize;
        for (n, depth) in ops {
            for b in blocks.iter().skip(height).take(n) {
                ix.apply_block(b).expect("applies");
                height += 1;
            }
            highest = highest.max(height);
            let depth = (depth as usize).min(height);
            let target = height - depth;
            let point = if target == 0 {
                None
            } else {
                let tip = replay(watch, &blocks[..target], k).tip().expect("tip").expect("some");
                Some((tip.slot, tip.hash))
            };
            if target + (k as usize) < highest {
                let before = all(&ix);
                let refused = ix.roll_back_to(point);
                prop_assert!(matches!(refused, Err(Error::RollbackTooDeep { .. })), "{refused:?}");
                prop_assert_eq!(all(&ix), before);
                continue;
            }
            ix.roll_back_to(point).expect("rollback within k");
            height = target;
        }
        for b in blocks.iter().skip(height) {
            ix.apply_block(b).expect("applies");
        }
        let fresh = replay(watch, blocks, k);
        prop_assert_eq!(all(&ix), all(&fresh));
    }
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
