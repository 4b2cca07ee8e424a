//! A scripted marketplace run: bonds, a job every provider claims, an expired job with
//! two defaulters slashed, a cancelled job, an unbond + withdraw, and junk at the script
//! address.

use ganglion_contracts::data::{bytes, int, list};
use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_contracts::tx::{Draft, Output, Value};
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::store::MemoryKv;
use ganglion_indexer::{Event, Indexer, JobStatus, Watch};

/// The scenario's transactions as blocks, and the facts to check.
pub(crate) struct Run {
    pub watch: Watch,
    pub blocks: Vec<Vec<u8>>,
    pub harness: Harness,
    pub claimed: JobId,
    pub expired: JobId,
    pub cancelled: JobId,
}

/// Each transaction in its own Conway block, chained from block 1.
pub(crate) fn blocks_of(txs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    ganglion_testnet::producer::chain_of(txs).expect("blocks assemble")
}

/// Two GPUs for one hour, in GPU-ms: what each provider claims (4 NTX at the default rate).
const ONE_HOUR_ON_TWO_GPUS: u64 = 2 * 3_600_000;

pub(crate) fn run() -> Run {
    let mut h = Harness::new(4);
    // Each bond backs both jobs at once.
    h.post_bonds_for(2);

    // A job every provider claims, each with a receipt for the hour it ran.
    let (mut a, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut a);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    for i in 0..4 {
        h.claim(&mut a, i, ONE_HOUR_ON_TWO_GPUS, Some(now))
            .expect("claim");
    }

    // A job where providers 0 and 1 claim, 2 and 3 default and are slashed after the
    // deadline and the claim window.
    let (mut b, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut b);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    for i in 0..2 {
        h.claim(&mut b, i, ONE_HOUR_ON_TWO_GPUS, Some(now))
            .expect("claim");
    }
    h.world.slot = b.claim_end_slot() + 1;
    h.expire(&b, &[2, 3]).expect("expire");

    // A cancelled job.
    let (c, _) = h.lock(10 * NTX, 600);
    h.cancel(&c).expect("cancel");

    // Provider 0 unbonds (its commitments have lapsed) and withdraws.
    let p0 = h.providers[0].party.clone();
    h.unbond(0).expect("unbond");
    let unbonding = h.providers[0].bond.clone().expect("bond");
    h.world.slot += 60 + h.dep.params.unbonding_delay_ms / 1000;
    let slot = h.world.slot;
    h.run(
        build::withdraw(&h.dep, h.env(), &unbonding, slot).expect("withdraw"),
        &p0,
        &[],
    )
    .expect("withdraw");

    // Junk at the script address: a datum of the wrong shape, no token.
    let mut junk = Draft::default();
    junk.pay(
        Output::new(h.dep.address(h.env()), Value::lovelace(3_000_000))
            .with_datum(list(vec![int(1), bytes(b"not a ganglion datum".to_vec())])),
    );
    let orch = h.orch.clone();
    h.run(junk, &orch, &[]).expect("junk payment");

    let watch = Watch::v2(h.dep.script.hash, h.dep.params.clone());
    Run {
        watch,
        blocks: blocks_of(&h.world.applied),
        claimed: a.id,
        expired: b.id,
        cancelled: c.id,
        harness: h,
    }
}

#[test]
fn every_event_of_a_scripted_run_is_extracted() {
    let r = run();
    let ix = Indexer::new(MemoryKv::new(), r.watch.clone(), 10);
    let mut events = Vec::new();
    for b in &r.blocks {
        let applied = ix.apply_block(b).expect("block applies");
        assert_eq!(applied.tx_count, 1);
        events.extend(applied.records.into_iter().map(|rec| rec.event));
    }
    let count = |f: fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
    assert_eq!(count(|e| matches!(e, Event::BondPosted { .. })), 4);
    assert_eq!(count(|e| matches!(e, Event::JobLocked { .. })), 3);
    assert_eq!(count(|e| matches!(e, Event::JobAssigned { .. })), 2);
    assert_eq!(count(|e| matches!(e, Event::JobClaimed { .. })), 6);
    assert_eq!(count(|e| matches!(e, Event::JobExpired { .. })), 1);
    assert_eq!(count(|e| matches!(e, Event::BondSlashed { .. })), 2);
    assert_eq!(count(|e| matches!(e, Event::JobCancelled { .. })), 1);
    assert_eq!(count(|e| matches!(e, Event::BondUnbonding { .. })), 1);
    assert_eq!(count(|e| matches!(e, Event::BondWithdrawn { .. })), 1);
    // The reference-script output (no datum) and the junk output are ignored, with reasons.
    let ignored: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Ignored { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(ignored.len(), 2, "{ignored:?}");
    assert!(ignored.iter().any(|r| r.contains("no inline datum")));
    assert!(ignored.iter().any(|r| r.contains("GanglionDatum")));

    // Queries.
    let claimed = ix.job(&r.claimed, 1).expect("query").expect("job known");
    assert_eq!(claimed.value.status, JobStatus::Claimed);
    assert_eq!(
        claimed.value.history.len(),
        6,
        "locked, assigned, four claims"
    );
    assert_eq!(claimed.value.payments.len(), 4);
    for (p, pay) in r.harness.providers.iter().zip(&claimed.value.payments) {
        assert_eq!(pay.to, p.party.hash);
        assert_eq!(pay.ntx, p.gpus * p.rate, "one hour per GPU");
    }
    assert!(!claimed.tentative, "many blocks deep");
    let expired = ix.job(&r.expired, 1).expect("query").expect("job known");
    assert_eq!(expired.value.status, JobStatus::Expired);
    assert_eq!(
        expired.value.defaulters(),
        vec![
            r.harness.providers[2].party.hash,
            r.harness.providers[3].party.hash
        ]
    );
    assert_eq!(
        ix.job(&r.cancelled, 1)
            .expect("query")
            .expect("known")
            .value
            .status,
        JobStatus::Cancelled
    );

    let p2 = ix
        .provider(&r.harness.providers[2].party.hash)
        .expect("provider");
    assert_eq!(p2.defaults, vec![r.expired]);
    assert_eq!(p2.jobs.len(), 2);
    assert!(p2.slashed > 0);
    assert_eq!(
        p2.earnings,
        r.harness.providers[2].gpus * r.harness.providers[2].rate
    );
    let p0 = ix
        .provider(&r.harness.providers[0].party.hash)
        .expect("provider");
    assert!(p0.bonds.is_empty(), "withdrawn");
    // Provider 0 withdrew; providers 2 and 3 were slashed below the minimum stake.
    let active = ix.active_bonds().expect("bonds");
    assert_eq!(active.len(), 1);
    assert_eq!(
        ix.live_utxos().expect("utxos").len(),
        3,
        "slashed bonds are still tracked"
    );
    assert!(
        active.iter().all(|b| b.free_gpus == b.datum.gpus),
        "no job is still assigned"
    );
    assert_eq!(
        ix.jobs_by_orchestrator(&r.harness.orch.hash)
            .expect("jobs")
            .len(),
        3
    );
    assert_eq!(
        ix.jobs_by_status(JobStatus::Claimed).expect("jobs").len(),
        1
    );

    // Events by slot range: everything, then only the first block's.
    let all = ix.events(0, u64::MAX).expect("events");
    assert_eq!(all.len(), events.len());
    let first_slot = all[0].meta.slot;
    assert!(
        ix.events(first_slot, first_slot)
            .expect("events")
            .iter()
            .all(|e| e.meta.slot == first_slot)
    );
}

#[test]
fn tentative_until_deep_enough() {
    let r = run();
    let ix = Indexer::new(MemoryKv::new(), r.watch.clone(), 10);
    for b in &r.blocks {
        ix.apply_block(b).expect("applies");
    }
    // The cancelled job's last event is a few blocks below the tip.
    let c = ix.job(&r.cancelled, 1).expect("q").expect("known");
    assert!(c.confirmations >= 1);
    let deep = ix
        .job(&r.cancelled, c.confirmations + 1)
        .expect("q")
        .expect("known");
    assert!(deep.tentative);
    assert!(
        !ix.job(&r.cancelled, c.confirmations)
            .expect("q")
            .expect("known")
            .tentative
    );
}

#[test]
fn subscribers_hear_every_block_in_order() {
    let r = run();
    let ix = Indexer::new(MemoryKv::new(), r.watch.clone(), 10);
    let rx = ix.subscribe();
    for b in &r.blocks[..3] {
        ix.apply_block(b).expect("applies");
    }
    ix.roll_back_to(None).expect("roll back to start");
    let heights: Vec<String> = rx
        .try_iter()
        .map(|n| match n {
            ganglion_indexer::Notification::Applied { point, .. } => format!("+{}", point.height),
            ganglion_indexer::Notification::RolledBack { to } => {
                format!("-{}", to.map(|p| p.height).unwrap_or(0))
            }
            ganglion_indexer::Notification::Intersected { .. } => "follow".to_string(),
        })
        .collect();
    assert_eq!(heights, ["+1", "+2", "+3", "-2", "-1", "-0"]);
}

#[test]
fn a_block_that_does_not_extend_the_tip_is_refused() {
    let r = run();
    let ix = Indexer::new(MemoryKv::new(), r.watch.clone(), 10);
    ix.apply_block(&r.blocks[0]).expect("first");
    let err = ix.apply_block(&r.blocks[2]).expect_err("gap");
    assert!(
        matches!(err, ganglion_indexer::Error::NotNext { .. }),
        "{err}"
    );
    // Re-delivery of the tip changes nothing.
    assert!(!ix.apply_block(&r.blocks[0]).expect("again").fresh);
    assert!(matches!(
        ix.apply_block(b"\x00garbage"),
        Err(ganglion_indexer::Error::BlockDecode { .. })
    ));
}
