//! Accept paths of protocol v2: every honest action passes the ledger and moves exactly
//! what the spec says, to the base unit (fees compared against the balanced transactions).

use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_contracts::test_utils::{NTX, ntx};
use ganglion_contracts::v2::build::{self, job_tag};
use ganglion_contracts::v2::datum::{GanglionDatum, JobState};
use ganglion_contracts::v2::rules::{claim_bound_gpu_ms, pay_for};

use super::{PAY_FOR_AN_HOUR, TWO_GPU_HOURS_MS, books};

#[test]
fn lock_assign_every_provider_claims_and_the_last_claim_refunds_and_burns() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let before = books(&h);
    let (mut job, lock) = h.lock(1_000 * NTX, 7200);
    let assign = h.assign(&mut job);
    let started = job.started_at_ms.expect("assigned");
    assert_eq!(started, h.world.now_ms());
    h.world.slot += 3600;
    let now = h.world.now_ms();

    // Provider 0 (paid at its base address) claims the hour its receipt acknowledges.
    let c0 = h
        .claim(&mut job, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claim 0");
    let payout = h.output(&c0, 0);
    assert_eq!(
        payout.output.address,
        h.providers[0].payout_address(h.env())
    );
    assert_eq!(payout.output.datum, Some(job_tag(&job.id)));
    assert_eq!(payout.output.value.quantity_of(&ntx()), PAY_FOR_AN_HOUR);
    let JobState::Assigned { claimed, paid, .. } = h.escrow_datum(&job).state else {
        panic!("still assigned")
    };
    assert_eq!((claimed, paid), (vec![0], PAY_FOR_AN_HOUR));
    assert_eq!(
        job.escrow.output.value.quantity_of(&ntx()),
        1_000 * NTX - PAY_FOR_AN_HOUR
    );

    // Provider 1 claims 50 minutes a minute later, with an older receipt: the last claim.
    h.world.slot += 60;
    let gpu_ms = 2 * 3_000_000;
    let c1 = h
        .claim(&mut job, 1, gpu_ms, Some(now - 600_000))
        .expect("claim 1");
    let pay1 = pay_for(gpu_ms, h.providers[1].rate);
    assert_eq!(pay1, 3_333_333, "floor of 3.33 NTX");
    assert_eq!(h.token_holders(&job), 0, "the thread token is burnt");
    let refund = h.output(&c1, 1);
    assert_eq!(refund.output.address, h.orch.address);
    assert_eq!(refund.output.datum, Some(job_tag(&job.id)));
    assert_eq!(
        refund.output.value.quantity_of(&ntx()),
        1_000 * NTX - PAY_FOR_AN_HOUR - pay1
    );
    assert_eq!(
        refund.output.value.lovelace,
        job.escrow.output.value.lovelace
    );

    let after = books(&h);
    assert_eq!(
        after.orch,
        (
            before.orch.0 - lock.fee - assign.fee,
            before.orch.1 - PAY_FOR_AN_HOUR - pay1
        )
    );
    assert_eq!(
        after.providers[0],
        (
            before.providers[0].0 - c0.fee,
            before.providers[0].1 + PAY_FOR_AN_HOUR
        )
    );
    assert_eq!(
        after.providers[1],
        (before.providers[1].0 - c1.fee, before.providers[1].1 + pay1)
    );
    assert_eq!(after.third, before.third);
}

/// Lock → assign → every provider claims an hour with its receipt, for `n` providers: each
/// paid exactly, the last claim refunds the rest and burns the thread token.
fn lock_assign_claim(n: usize) {
    let mut h = Harness::new(n);
    h.post_bonds();
    let before = books(&h);
    let (mut job, lock) = h.lock(1_000 * NTX, 7200);
    let assign = h.assign(&mut job);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let mut fees = Vec::new();
    for i in 0..n {
        let c = h
            .claim(&mut job, i, TWO_GPU_HOURS_MS, Some(now))
            .expect("claims");
        fees.push(c.fee);
    }
    assert_eq!(h.token_holders(&job), 0, "the thread token is burnt");
    let paid = n as u64 * PAY_FOR_AN_HOUR;
    let after = books(&h);
    assert_eq!(
        after.orch,
        (before.orch.0 - lock.fee - assign.fee, before.orch.1 - paid)
    );
    for (i, fee) in fees.into_iter().enumerate() {
        assert_eq!(
            after.providers[i],
            (
                before.providers[i].0 - fee,
                before.providers[i].1 + PAY_FOR_AN_HOUR
            )
        );
    }
    assert_eq!(after.third, before.third);
}

#[test]
fn lock_assign_claim_with_1_provider() {
    lock_assign_claim(1);
}

#[test]
fn lock_assign_claim_with_8_providers() {
    lock_assign_claim(8);
}

#[test]
fn four_providers_claim_in_any_order() {
    let mut h = Harness::with_gpus(&[1, 2, 3, 4]);
    h.post_bonds();
    let before = books(&h);
    let (mut job, lock) = h.lock(1_000 * NTX, 7200);
    let assign = h.assign(&mut job);
    let started = job.started_at_ms.expect("assigned");
    h.world.slot += 1800;
    let mut paid = 0;
    for i in [2, 0, 3, 1] {
        let gpus = h.providers[i].gpus;
        let lower = h.world.now_ms();
        let bound = claim_bound_gpu_ms(
            gpus,
            started,
            job.deadline_ms,
            job.receipt_interval_ms,
            Some(lower),
            lower,
        );
        assert_eq!(bound, gpus * (lower - started));
        let b = h.claim(&mut job, i, bound, Some(lower)).expect("claims");
        let pay = pay_for(bound, h.providers[i].rate);
        assert_eq!(
            h.provider_holdings(i),
            (before.providers[i].0 - b.fee, before.providers[i].1 + pay)
        );
        paid += pay;
        h.world.slot += 7;
    }
    assert_eq!(h.token_holders(&job), 0);
    assert_eq!(
        h.orch_holdings(),
        (before.orch.0 - lock.fee - assign.fee, before.orch.1 - paid)
    );
}

#[test]
fn cancel_of_an_open_escrow_refunds_everything() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let before = books(&h);
    let (job, lock) = h.lock(100 * NTX, 3600);
    assert_eq!(h.orch_holdings().1, before.orch.1 - 100 * NTX);
    let cancel = h.cancel(&job).expect("cancel applies");
    assert_eq!(h.token_holders(&job), 0);
    let after = books(&h);
    assert_eq!(
        after.orch,
        (before.orch.0 - lock.fee - cancel.fee, before.orch.1)
    );
    assert_eq!(after.providers, before.providers);
    assert_eq!(after.third, before.third);
}

#[test]
fn expire_of_an_open_escrow_after_the_claim_window_refunds_everything() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let before = books(&h);
    let (job, lock) = h.lock(100 * NTX, 3600);
    h.world.slot = job.claim_end_slot() + 1;
    let (expire, outcome) = h.expire(&job, &[]).expect("expire applies");
    assert_eq!(outcome.refund, 100 * NTX);
    assert_eq!(outcome.burnt, 0);
    assert_eq!(h.token_holders(&job), 0);
    let after = books(&h);
    assert_eq!(after.orch, (before.orch.0 - lock.fee, before.orch.1));
    assert_eq!(after.third, (before.third.0 - expire.fee, before.third.1));
    assert_eq!(after.providers, before.providers);
}

#[test]
fn expire_with_defaulters_slashes_them_proportionally() {
    let mut h = Harness::new(3);
    h.post_bonds();
    let stake = 200 * NTX;
    let before = books(&h);
    let (mut job, lock) = h.lock(1_000 * NTX, 7200);
    let assign = h.assign(&mut job);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let c0 = h
        .claim(&mut job, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claim 0");
    h.world.slot = job.claim_end_slot() + 1;
    let (expire, outcome) = h.expire(&job, &[1, 2]).expect("expire applies");
    // Each defaulter: 2 GPUs × 2 NTX/h × the 2 h window = 8 NTX (below its 200 NTX stake).
    assert_eq!(outcome.slashes, vec![8 * NTX, 8 * NTX]);
    // The orchestrator recovers what it paid (4 NTX); the other 12 NTX are burnt.
    assert_eq!(outcome.burnt, 12 * NTX);
    assert_eq!(
        outcome.refund,
        1_000 * NTX - PAY_FOR_AN_HOUR + PAY_FOR_AN_HOUR
    );
    let burnt = h.output(&expire, 1);
    assert_eq!(burnt.output.address, h.dep.address(h.env()));
    assert_eq!(
        burnt.output.datum,
        Some(GanglionDatum::Burnt(job.id).to_plutus_data())
    );
    assert_eq!(burnt.output.value.quantity_of(&ntx()), 12 * NTX);
    for i in [1, 2] {
        let bond = h.providers[i].bond.clone().expect("bond continues");
        assert_eq!(bond.output.value.quantity_of(&ntx()), stake - 8 * NTX);
        assert_eq!(
            bond.output
                .value
                .quantity(&h.dep.script.hash, &h.providers[i].party.hash),
            1
        );
    }
    assert_eq!(
        h.providers[0]
            .bond
            .as_ref()
            .expect("bond")
            .output
            .value
            .quantity_of(&ntx()),
        stake,
        "the claimant's bond is whole"
    );
    assert_eq!(h.token_holders(&job), 0);
    let after = books(&h);
    assert_eq!(
        after.orch,
        (before.orch.0 - lock.fee - assign.fee, before.orch.1)
    );
    assert_eq!(
        after.providers[0],
        (
            before.providers[0].0 - c0.fee,
            before.providers[0].1 + PAY_FOR_AN_HOUR
        )
    );
    assert_eq!(after.providers[1], before.providers[1]);
    assert_eq!(after.providers[2], before.providers[2]);
    assert_eq!(
        after.third,
        (
            before.third.0 - expire.fee - burnt.output.value.lovelace,
            before.third.1
        )
    );
}

/// An assigned job of `n` providers where the first `n / 2` claim an hour and the rest
/// default: after the claim window the expire slashes every defaulter (2 GPUs × 2 NTX/h ×
/// the 2 h window = 8 NTX each), the orchestrator recovers at most what it paid, the rest is
/// burnt, and each slashed bond continues with its stake less its slash.
fn expire_with_defaulters(n: usize) {
    let mut h = Harness::new(n);
    h.post_bonds();
    let stake = 200 * NTX;
    let budget = 1_000 * NTX;
    let (mut job, _) = h.lock(budget, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let claimed = n / 2;
    for i in 0..claimed {
        h.claim(&mut job, i, TWO_GPU_HOURS_MS, Some(now))
            .expect("claims");
    }
    let paid = claimed as u64 * PAY_FOR_AN_HOUR;
    let defaulters: Vec<usize> = (claimed..n).collect();
    let before = books(&h);
    h.world.slot = job.claim_end_slot() + 1;
    let (expire, outcome) = h.expire(&job, &defaulters).expect("expire applies");
    assert_eq!(outcome.slashes, vec![8 * NTX; defaulters.len()]);
    let slashed = 8 * NTX * defaulters.len() as u64;
    let recovered = slashed.min(paid);
    assert_eq!(outcome.burnt, slashed - recovered);
    assert_eq!(outcome.refund, budget - paid + recovered);
    assert_eq!(h.token_holders(&job), 0);
    for i in 0..n {
        let bond = h.providers[i].bond.clone().expect("bond");
        let want = if i < claimed { stake } else { stake - 8 * NTX };
        assert_eq!(bond.output.value.quantity_of(&ntx()), want, "bond {i}");
    }
    let after = books(&h);
    let burnt_lovelace = if outcome.burnt > 0 {
        h.output(&expire, 1).output.value.lovelace
    } else {
        0
    };
    assert_eq!(
        after.third,
        (before.third.0 - expire.fee - burnt_lovelace, before.third.1)
    );
    assert_eq!(after.orch.1, before.orch.1 + outcome.refund);
    assert_eq!(
        after.providers, before.providers,
        "defaulters lose only bond NTX"
    );
}

#[test]
fn expire_with_a_single_defaulter_slashes_it() {
    expire_with_defaulters(1);
}

#[test]
fn expire_with_4_of_8_providers_defaulting_slashes_them() {
    expire_with_defaulters(8);
}

#[test]
fn bond_post_unbond_withdraw() {
    let mut h = Harness::new(1);
    let before = books(&h);
    let req = h.bond_request(0);
    assert!(
        req.payout.stake.is_some(),
        "provider 0 bonds a base address"
    );
    let post = h.post_bond_with(0, &req).expect("bond posts");
    let bond = h.providers[0].bond.clone().expect("bond");
    assert_eq!(bond.output.value.quantity_of(&ntx()), 200 * NTX);
    assert_eq!(
        h.provider_holdings(0),
        (
            before.providers[0].0 - post.fee - bond.output.value.lovelace,
            before.providers[0].1 - 200 * NTX
        )
    );
    let p = h.providers[0].party.clone();
    let until = h.world.slot + 60;
    let unbond = h
        .run(
            build::unbond(&h.dep, h.env(), &bond, h.world.slot, until).expect("unbond draft"),
            &p,
            &[],
        )
        .expect("unbond applies");
    let unbonding = h.output(&unbond, 0);
    let ready = until + h.dep.params.unbonding_delay_ms / 1000;
    h.world.slot = ready - 1;
    let early = build::withdraw(&h.dep, h.env(), &unbonding, ready - 1).expect("draft");
    ganglion_contracts::test_utils::assert_script_fails(h.balance(early, &p));
    h.world.slot = ready;
    let withdraw = h
        .run(
            build::withdraw(&h.dep, h.env(), &unbonding, ready).expect("withdraw draft"),
            &p,
            &[],
        )
        .expect("withdraw applies");
    assert_eq!(
        h.provider_holdings(0),
        (
            before.providers[0].0 - post.fee - unbond.fee - withdraw.fee,
            before.providers[0].1
        )
    );
}

#[test]
fn bond_top_up_adds_to_the_stake_and_keeps_the_datum() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let bond = h.providers[0].bond.clone().expect("bond");
    let stake = bond.output.value.quantity_of(&ntx());
    let before = h.provider_holdings(0);
    let p = h.providers[0].party.clone();
    let topped = h
        .run(
            build::top_up(&h.dep, h.env(), &bond, 50 * NTX).expect("top-up draft"),
            &p,
            &[],
        )
        .expect("top-up applies");
    let next = h.output(&topped, 0);
    assert_eq!(next.output.value.quantity_of(&ntx()), stake + 50 * NTX);
    assert_eq!(
        next.output.datum, bond.output.datum,
        "the datum is unchanged"
    );
    assert_eq!(next.output.address, bond.output.address);
    let lovelace_in = next.output.value.lovelace - bond.output.value.lovelace;
    assert_eq!(
        h.provider_holdings(0),
        (before.0 - topped.fee - lovelace_in, before.1 - 50 * NTX)
    );
}
