//! A rescaled escrow through the indexer (issue #24): a service assigned to provider 0, grown
//! by a Rescale adding provider 1, then one releasing provider 0 and adding provider 2; the
//! added provider's claim. Each Rescale is one `JobRescaled` event (the providers added, at
//! which index, the releases, the acceptances), the job's view follows the escrow's datum,
//! and the added providers' jobs are found by provider.

use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::{Harness, RATE, RECEIPT_INTERVAL_MS};
use ganglion_contracts::v2::datum::JobState;
use ganglion_contracts::v2::rules::pay_for;
use ganglion_indexer::store::MemoryKv;
use ganglion_indexer::{Event, Indexer, JobStatus, Released, Watch};

use crate::scenario::blocks_of;

#[test]
fn rescales_are_events_and_the_view_follows_the_escrow() {
    let mut h = Harness::new(3);
    h.post_bonds();
    let (mut job, _) = h
        .lock_with(4, 1_000 * NTX, 7200, RECEIPT_INTERVAL_MS)
        .expect("lock");
    let req = h.assign_request_for(&job, &[0]);
    h.assign_with(&mut job, &req).expect("assign");
    h.world.slot += 1800;
    let grow = h.rescale_request(&job, &[1], &[]);
    h.rescale_with(&mut job, &grow).expect("grow");
    let grown_at = h.world.applied.len() - 1;
    h.world.slot += 600;
    let until0 = h.release_notice_ms(&job, h.world.slot + 60);
    let replace = h.rescale_request(&job, &[2], &[(0, until0)]);
    let b = h.rescale_with(&mut job, &replace).expect("replace");
    h.world.slot += 600;
    let now = h.world.now_ms();
    let gpu_ms = 2 * 600_000;
    h.claim_as(&mut job, 2, 2, gpu_ms, Some(now))
        .expect("provider 2 claims");
    let JobState::Assigned { assignments, .. } = h.escrow_datum(&job).state else {
        panic!("assigned")
    };

    let watch = Watch::v2(h.dep.script.hash, h.dep.params.clone());
    let blocks = blocks_of(&h.world.applied);
    let ix = Indexer::new(MemoryKv::new(), watch, 20);
    for (i, block) in blocks.iter().enumerate() {
        ix.apply_block(block).expect("block applies");
        if i == grown_at {
            let v = ix.job(&job.id, 0).expect("query").expect("job").value;
            assert_eq!(v.assignments.len(), 2, "after the first rescale");
            assert_eq!(v.claims, vec![None, None]);
        }
    }
    let v = ix.job(&job.id, 0).expect("query").expect("job").value;
    assert_eq!(v.assignments, assignments, "the view is the escrow's datum");
    assert_eq!(v.status, JobStatus::Claiming);
    assert_eq!(v.claims.len(), 3);
    assert_eq!(v.claims[2].map(|c| c.paid), Some(pay_for(gpu_ms, RATE)));
    let rescaled: Vec<_> = v
        .history
        .iter()
        .filter_map(|r| match &r.event {
            Event::JobRescaled {
                added,
                first_added,
                released,
                escrow,
                acceptances,
                ..
            } => Some((
                added.clone(),
                *first_added,
                released.clone(),
                *escrow,
                acceptances.clone(),
                r.meta.tx_hash,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(rescaled.len(), 2);
    assert_eq!(rescaled[0].0, vec![assignments[1].clone()]);
    assert_eq!(rescaled[0].1, 1);
    assert!(rescaled[0].2.is_empty());
    assert_eq!(rescaled[0].4, grow.acceptances);
    assert_eq!(rescaled[1].0, vec![assignments[2].clone()]);
    assert_eq!(rescaled[1].1, 2);
    assert_eq!(
        rescaled[1].2,
        vec![Released {
            index: 0,
            provider: h.providers[0].party.hash,
            until_ms: until0,
        }]
    );
    assert_eq!(rescaled[1].3.tx_hash, b.hash);
    assert_eq!(rescaled[1].3.index, 0, "the escrow continues at outputs[0]");
    assert_eq!(rescaled[1].4, replace.acceptances);
    for p in &h.providers {
        let s = ix.provider(&p.party.hash).expect("provider");
        assert_eq!(s.jobs, vec![job.id], "found by provider");
    }
    assert_eq!(
        ix.provider(&h.providers[2].party.hash)
            .expect("provider")
            .earnings,
        pay_for(gpu_ms, RATE)
    );
}
