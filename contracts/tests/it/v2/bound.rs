//! G1 as a property: a claim is accepted iff its GPU-ms are within
//! `v2::rules::claim_bound_gpu_ms` (receipt + interval, the claim's lower bound, the
//! deadline). Few cases: each runs the validator and the ledger.

use ganglion_contracts::Error;
use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::rules::claim_bound_gpu_ms;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[test]
fn a_claim_is_accepted_iff_within_the_claim_bound() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    let start = h.world.slot;
    let started = job.started_at_ms.expect("assigned");
    let gpus = h.providers[0].gpus;
    let party = h.providers[0].party.clone();
    let end = job.claim_end_slot();
    let strategy = (
        // receipt: none, or acknowledged until 100 s before the start .. 8 000 s after
        prop::option::of(-100i64..8_000),
        // the claim's lower bound: 100 slots before the start .. the end of the window
        (start - 100)..end,
        // gpu_ms: near the bound, or anywhere
        (any::<bool>(), -3i64..=3, 0u64..20_000_000),
    );
    let mut runner = TestRunner::new(Config {
        cases: 16,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |(ack_s, lower, (near, delta, anywhere))| {
            let ack_ms = ack_s.map(|s| started.checked_add_signed(s * 1000).expect("time"));
            let lower_ms = h.ms(lower);
            let bound = claim_bound_gpu_ms(
                gpus,
                started,
                job.deadline_ms,
                job.receipt_interval_ms,
                ack_ms,
                lower_ms,
            );
            let gpu_ms = if near {
                bound.saturating_add_signed(delta)
            } else {
                anywhere
            };
            let mut h = h.clone();
            h.world.slot = lower.max(start);
            let mut req = h.claim_request(&job, 0, 0, gpu_ms, ack_ms);
            req.valid_from_slot = lower;
            let draft = build::claim(&h.dep, h.env(), &req).expect("draft");
            match h.balance(draft.clone(), &party) {
                Ok(_) => {
                    prop_assert!(gpu_ms <= bound, "accepted {gpu_ms} > bound {bound}");
                    h.judge(draft, &party, &[]).expect("the ledger accepts it");
                }
                Err(Error::ScriptFailed { .. }) => {
                    prop_assert!(gpu_ms > bound, "refused {gpu_ms} <= bound {bound}");
                }
                Err(e) => panic!("unexpected error: {e}"),
            }
            Ok(())
        })
        .expect("the validator follows rules::claim_bound_gpu_ms");
}
