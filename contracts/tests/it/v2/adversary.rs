//! The adversary suite (DESIGN §3.1): one test per attack, named after it. Each shows the
//! honest transaction passing the ledger, the attack refused, and every honest party's NTX
//! and lovelace exactly where they must be (fees compared against the balanced
//! transactions).

use ganglion_contracts::blueprint::key_hash;
use ganglion_contracts::test_utils::harness_v2::{Harness, Job, RATE};
use ganglion_contracts::test_utils::{NTX, assert_script_fails, ntx};
use ganglion_contracts::tx::{Draft, Utxo};
use ganglion_contracts::v2::build::{self, ClaimRequest};
use ganglion_contracts::v2::datum::{GanglionDatum, JobState};
use ganglion_contracts::v2::payout::{Payout, StakeCredential};
use ganglion_contracts::v2::redeemer::{MintRedeemer, SpendRedeemer};
use ganglion_contracts::v2::rules::{budget_covers, pay_for};
use ganglion_contracts::{Error, Result};

use super::{
    Books, PAY_FOR_AN_HOUR, TWO_GPU_HOURS_MS, assert_outside_validity, assigned, books, faked,
    faked_bond, passes_then_rejected, respend,
};

fn datum_at(o: &ganglion_contracts::tx::Output) -> GanglionDatum {
    GanglionDatum::from_plutus_data(o.datum.as_ref().expect("inline datum")).expect("decodes")
}

fn claim_draft(h: &Harness, req: &ClaimRequest) -> Draft {
    build::claim(&h.dep, h.env(), req).expect("claim draft")
}

fn expire_draft(h: &Harness, job: &Job, slash: &[usize]) -> Draft {
    build::expire(&h.dep, h.env(), &h.expire_request(job, slash))
        .expect("expire draft")
        .0
}

#[track_caller]
fn assert_invalid_request<T: std::fmt::Debug>(r: Result<T>) {
    assert!(matches!(r, Err(Error::InvalidRequest(_))), "{r:?}");
}

/// Provider `i`'s holdings after one claim paid `pay` with fee `fee`, from `before`.
fn paid(before: (u64, u64), fee: u64, pay: u64) -> (u64, u64) {
    (before.0 - fee, before.1 + pay)
}

/// What [`after_window_with_one_claim`] did: the books before the lock, the orchestrator's
/// lock and assign fees, provider 0's claim fee.
struct Setup {
    before: Books,
    fees: u64,
    claim_fee: u64,
}

impl Setup {
    /// Everybody's books after an expire the third party submitted (`spent`: its fee and
    /// the Burnt output's lovelace) that returned `recovered` NTX of slashes to the
    /// orchestrator; slashed bonds are not in the books (they sit at the script).
    fn after_expire(&self, spent: u64, recovered: u64) -> Books {
        let b = &self.before;
        let mut providers = b.providers.clone();
        providers[0] = paid(b.providers[0], self.claim_fee, PAY_FOR_AN_HOUR);
        Books {
            orch: (b.orch.0 - self.fees, b.orch.1 - PAY_FOR_AN_HOUR + recovered),
            providers,
            third: (b.third.0 - spent, b.third.1),
        }
    }
}

/// Providers bonded; the job assigned to all; provider 0 claimed the first hour with a
/// receipt; the world just after the claim window.
fn after_window_with_one_claim(h: &mut Harness) -> (Job, Setup) {
    h.post_bonds();
    let before = books(h);
    let (mut job, lock) = h.lock(1_000 * NTX, 7200);
    let assign = h.assign(&mut job);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let c0 = h
        .claim(&mut job, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claim 0");
    h.world.slot = job.claim_end_slot() + 1;
    (
        job,
        Setup {
            before,
            fees: lock.fee + assign.fee,
            claim_fee: c0.fee,
        },
    )
}

// ---- claims --------------------------------------------------------------------------

#[test]
fn provider_claims_before_working() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    let start_slot = h.world.slot;
    // At the start (lower bound = started_at) the bound is 0, whatever the receipt says.
    let p = h.providers[0].party.clone();
    let now = h.world.now_ms();
    let zero = claim_draft(&h, &h.claim_request(&job, 0, 0, 0, Some(now + 600_000)));
    let one = claim_draft(&h, &h.claim_request(&job, 0, 0, 1, Some(now + 600_000)));
    passes_then_rejected(&h, &p, zero, one);
    // Ten minutes later, a lower bound before the start still bounds the claim at 0.
    h.world.slot += 600;
    let now = h.world.now_ms();
    let mut early = h.claim_request(&job, 0, 0, 1, Some(now));
    early.valid_from_slot = start_slot - 1;
    assert_script_fails(h.balance(claim_draft(&h, &early), &p));
    // The honest claim of the ten acknowledged minutes is paid to the base unit.
    let before = books(&h);
    let c = h
        .claim(&mut job, 0, 2 * 600_000, Some(now))
        .expect("claims");
    let pay = pay_for(2 * 600_000, RATE);
    assert_eq!(pay, 666_666);
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(after.providers[0], paid(before.providers[0], c.fee, pay));
    assert_eq!(after.providers[1], before.providers[1]);
    assert_eq!(after.orch, before.orch);
}

#[test]
fn provider_claims_more_than_receipted() {
    let (mut h, mut job) = assigned(2);
    let started = job.started_at_ms.expect("assigned");
    let p = h.providers[0].party.clone();
    // Acknowledged until 30 minutes in; the world is one hour in: receipt + one interval.
    let ack = started + 1_800_000;
    let bound = 2 * (1_800_000 + job.receipt_interval_ms);
    let good = claim_draft(&h, &h.claim_request(&job, 0, 0, bound, Some(ack)));
    let over = claim_draft(&h, &h.claim_request(&job, 0, 0, bound + 1, Some(ack)));
    passes_then_rejected(&h, &p, good, over);
    let before = books(&h);
    let c = h.claim(&mut job, 0, bound, Some(ack)).expect("claims");
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(
        after.providers[0],
        paid(before.providers[0], c.fee, pay_for(bound, RATE))
    );
    assert_eq!(pay_for(bound, RATE), 2_066_666);
    assert_eq!(after.orch, before.orch);
    assert_eq!(after.providers[1], before.providers[1]);
}

#[test]
fn provider_claims_more_than_elapsed() {
    let (mut h, mut job) = assigned(2);
    let started = job.started_at_ms.expect("assigned");
    let p = h.providers[0].party.clone();
    // A receipt ten minutes ahead of the clock: the lower bound (now) is what bounds.
    let now = h.world.now_ms();
    let ack = now + 600_000;
    let bound = 2 * (now - started);
    let good = claim_draft(&h, &h.claim_request(&job, 0, 0, bound, Some(ack)));
    let over = claim_draft(&h, &h.claim_request(&job, 0, 0, bound + 1, Some(ack)));
    passes_then_rejected(&h, &p, good, over);
    // Moving the lower bound into the future to claim more: the ledger refuses it.
    let mut future = h.claim_request(&job, 0, 0, bound + 2 * 300_000, Some(ack));
    future.valid_from_slot = h.world.slot + 300;
    future.valid_until_slot = h.world.slot + 400;
    let before = books(&h);
    assert_outside_validity(h.run(claim_draft(&h, &future), &p, &[]));
    assert_eq!(books(&h), before);
    let c = h.claim(&mut job, 0, bound, Some(ack)).expect("claims");
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(
        after.providers[0],
        paid(before.providers[0], c.fee, PAY_FOR_AN_HOUR)
    );
    assert_eq!(after.orch, before.orch);
}

#[test]
fn provider_claims_twice() {
    let (mut h, mut job) = assigned(2);
    let now = h.world.now_ms();
    let before = books(&h);
    let c0 = h
        .claim(&mut job, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("first claim");
    h.world.slot += 60;
    let now = h.world.now_ms();
    // The builder refuses a second claim of index 0 …
    let again = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    assert_invalid_request(build::claim(&h.dep, h.env(), &again));
    // … and so does the validator, for a draft made from a view where 0 is unclaimed.
    let view = faked(&job.escrow, |e| {
        if let JobState::Assigned { claimed, paid, .. } = &mut e.state {
            claimed.clear();
            *paid = 0;
        }
    });
    let mut twice = claim_draft(
        &h,
        &ClaimRequest {
            escrow: view,
            ..again
        },
    );
    respend(&mut twice, &job.escrow);
    let p = h.providers[0].party.clone();
    let other = claim_draft(
        &h,
        &h.claim_request(&job, 1, 1, TWO_GPU_HOURS_MS, Some(now)),
    );
    passes_then_rejected(&h, &p, other, twice);
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(
        after.providers[0],
        paid(before.providers[0], c0.fee, PAY_FOR_AN_HOUR)
    );
    assert_eq!(after.orch, before.orch);
    assert_eq!(after.providers[1], before.providers[1]);
}

#[test]
fn provider_replays_another_jobs_receipt() {
    let mut h = Harness::new(2);
    h.post_bonds_for(2);
    let (mut j1, _) = h.lock(1_000 * NTX, 7200);
    let (mut j2, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut j1);
    h.assign(&mut j2);
    let started = j1.started_at_ms.expect("assigned");
    h.world.slot += 3600;
    let now = h.world.now_ms();
    // Job 1 acknowledged provider 0 for 10 minutes only; job 2 for the whole hour.
    let own = 2 * (600_000 + j1.receipt_interval_ms);
    let good = claim_draft(
        &h,
        &h.claim_request(&j1, 0, 0, own, Some(started + 600_000)),
    );
    let mut replay = h.claim_request(&j1, 0, 0, TWO_GPU_HOURS_MS, None);
    replay.receipt = Some(h.receipt(&j2, 0, now));
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, claim_draft(&h, &replay));
    let before = books(&h);
    let c = h
        .claim(&mut j1, 0, own, Some(started + 600_000))
        .expect("claims");
    let mut expected = before.clone();
    expected.providers[0] = paid(before.providers[0], c.fee, pay_for(own, RATE));
    assert_eq!(books(&h), expected);
}

#[test]
fn provider_uses_another_indexs_receipt() {
    let (mut h, mut job) = assigned(2);
    let started = job.started_at_ms.expect("assigned");
    let now = h.world.now_ms();
    let own = 2 * (600_000 + job.receipt_interval_ms);
    let good = claim_draft(
        &h,
        &h.claim_request(&job, 0, 0, own, Some(started + 600_000)),
    );
    let mut borrowed = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, None);
    borrowed.receipt = Some(h.receipt(&job, 1, now));
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, claim_draft(&h, &borrowed));
    let before = books(&h);
    let c = h
        .claim(&mut job, 0, own, Some(started + 600_000))
        .expect("claims");
    // Provider 1's own receipt still serves provider 1.
    let c1 = h
        .claim(&mut job, 1, TWO_GPU_HOURS_MS, Some(now))
        .expect("claims");
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(
        after.providers[0],
        paid(before.providers[0], c.fee, pay_for(own, RATE))
    );
    assert_eq!(
        after.providers[1],
        paid(before.providers[1], c1.fee, PAY_FOR_AN_HOUR)
    );
}

#[test]
fn forged_receipt() {
    let (mut h, mut job) = assigned(2);
    let started = job.started_at_ms.expect("assigned");
    let now = h.world.now_ms();
    let p = h.providers[0].party.clone();
    let good = claim_draft(
        &h,
        &h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now)),
    );
    // Signed by the provider's own attest key instead of the orchestrator's receipt key.
    let mut forged = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    forged.receipt.as_mut().expect("receipt").signature = ganglion_contracts::v2::signed::sign(
        &h.providers[0].attest,
        &ganglion_contracts::test_utils::harness_v2::receipt_message(job.id, 0, now),
    );
    passes_then_rejected(&h, &p, good.clone(), claim_draft(&h, &forged));
    // A genuine receipt for 10 minutes, its time moved to now.
    let mut moved = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(started + 600_000));
    moved
        .receipt
        .as_mut()
        .expect("receipt")
        .acknowledged_until_ms = now;
    passes_then_rejected(&h, &p, good, claim_draft(&h, &moved));
    let before = books(&h);
    let c = h
        .claim(&mut job, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claims");
    let mut expected = before.clone();
    expected.providers[0] = paid(before.providers[0], c.fee, PAY_FOR_AN_HOUR);
    assert_eq!(books(&h), expected);
}

// ---- orchestrator --------------------------------------------------------------------

#[test]
fn orchestrator_assigns_after_accept_by() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let before = books(&h);
    let (job, lock) = h.lock(1_000 * NTX, 7200);
    let s = h.world.slot;
    let orch = h.orch.clone();
    // Acceptances signed now, accept-by 600 slots later; the assign in time passes.
    let req = h.assign_request(&job);
    let accept_by = req.assignments[0].accept_by_ms;
    assert_eq!(accept_by, h.ms(s + 600));
    let good = build::assign(&h.dep, h.env(), &req).expect("draft");
    h.judge(good, &orch, &[]).expect("an assign in time passes");
    // At accept-by the providers may have given their GPUs to someone else.
    h.world.slot = s + 600;
    let mut late = req.clone();
    late.valid_from_slot = s + 600;
    late.valid_until_slot = s + 720;
    assert_invalid_request(build::assign(&h.dep, h.env(), &late));
    late.valid_until_slot = s + 600;
    let mut stretched = build::assign(&h.dep, h.env(), &late).expect("draft");
    stretched.valid_until_slot = Some(s + 720);
    assert_script_fails(h.balance(stretched, &orch));
    // An upper bound within accept-by is in the past now: the ledger refuses it.
    let mut stale = req;
    stale.valid_from_slot = s + 500;
    stale.valid_until_slot = s + 600;
    assert_outside_validity(h.run(
        build::assign(&h.dep, h.env(), &stale).expect("draft"),
        &orch,
        &[],
    ));
    // Nobody lost anything; the escrow is still open and its orchestrator cancels it.
    let cancel = h.cancel(&job).expect("cancel");
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(
        after.orch,
        (before.orch.0 - lock.fee - cancel.fee, before.orch.1)
    );
    assert_eq!(after.providers, before.providers);
    for p in &h.providers {
        let bond = p.bond.as_ref().expect("bond");
        assert!(h.world.get(&bond.reference).is_ok(), "bonds untouched");
    }
}

#[test]
fn orchestrator_omits_an_honest_providers_claim() {
    // Each provider claims for itself: provider 0 defaulting (or an orchestrator ignoring
    // provider 1) cannot stop provider 1's claim, even after the deadline, and the expiry
    // cannot slash provider 1.
    let (mut h, mut job) = assigned(2);
    let started = job.started_at_ms.expect("assigned");
    let before = books(&h);
    h.world.slot = job.deadline_slot + 1800;
    let full = 2 * (job.deadline_ms - started);
    let deadline = job.deadline_ms;
    let c1 = h
        .claim(&mut job, 1, full, Some(deadline))
        .expect("provider 1 claims after the deadline");
    assert_eq!(pay_for(full, RATE), 8 * NTX);
    h.world.slot = job.claim_end_slot() + 1;
    assert_invalid_request(build::expire(
        &h.dep,
        h.env(),
        &h.expire_request(&job, &[1]),
    ));
    let view = faked(&job.escrow, |e| {
        if let JobState::Assigned { claimed, .. } = &mut e.state {
            claimed.clear();
        }
    });
    let mut slash_claimant = build::expire(
        &h.dep,
        h.env(),
        &build::ExpireRequest {
            escrow: view,
            ..h.expire_request(&job, &[0, 1])
        },
    )
    .expect("draft")
    .0;
    respend(&mut slash_claimant, &job.escrow);
    let third = h.third.clone();
    passes_then_rejected(&h, &third, expire_draft(&h, &job, &[0]), slash_claimant);
    let escrow_lovelace = job.escrow.output.value.lovelace;
    let (eb, outcome) = h.expire(&job, &[0]).expect("expire");
    assert_eq!(
        outcome.burnt, 0,
        "the orchestrator paid 8 NTX: all of it comes back"
    );
    assert_eq!(outcome.slashes, vec![8 * NTX]);
    let after = books(&h);
    assert_eq!(
        after.providers[1],
        paid(before.providers[1], c1.fee, 8 * NTX)
    );
    assert_eq!(after.providers[0], before.providers[0]);
    assert_eq!(
        h.providers[1]
            .bond
            .as_ref()
            .expect("bond")
            .output
            .value
            .quantity_of(&ntx()),
        200 * NTX,
        "the claimant's bond is whole"
    );
    // The orchestrator paid 8 NTX and recovered 8 NTX from the defaulter.
    assert_eq!(
        after.orch,
        (before.orch.0 + escrow_lovelace, before.orch.1 + 1_000 * NTX)
    );
    assert_eq!(after.third, (before.third.0 - eb.fee, before.third.1));
}

#[test]
fn orchestrator_silent_provider_claims_one_interval() {
    let (mut h, mut job) = assigned(2);
    let p = h.providers[0].party.clone();
    // No receipt ever came: one interval of 2 GPUs.
    let bound = 2 * job.receipt_interval_ms;
    let good = claim_draft(&h, &h.claim_request(&job, 0, 0, bound, None));
    let over = claim_draft(&h, &h.claim_request(&job, 0, 0, bound + 1, None));
    passes_then_rejected(&h, &p, good, over);
    let before = books(&h);
    let c0 = h.claim(&mut job, 0, bound, None).expect("claims");
    let escrow_lovelace = job.escrow.output.value.lovelace;
    let c1 = h.claim(&mut job, 1, bound, None).expect("claims");
    let pay = pay_for(bound, RATE);
    assert_eq!(pay, 66_666);
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(after.providers[0], paid(before.providers[0], c0.fee, pay));
    assert_eq!(after.providers[1], paid(before.providers[1], c1.fee, pay));
    // The last claim refunded the rest: the orchestrator paid exactly the two intervals.
    assert_eq!(
        after.orch,
        (
            before.orch.0 + escrow_lovelace,
            before.orch.1 + 1_000 * NTX - 2 * pay
        )
    );
}

#[test]
fn budget_too_small_for_the_window() {
    let mut h = Harness::new(2);
    h.post_bonds();
    // 4 GPUs × 2 NTX/h over 7 100 s: 15.777 777… NTX, so 15 777 778 base units.
    let budget = 15_777_778;
    let before = books(&h);
    let (job, lock) = h.lock(budget, 7200);
    let s = h.world.slot;
    h.world.slot = s + 100;
    let req = h.assign_request(&job);
    assert!(budget_covers(
        &req.assignments,
        h.ms(s + 100),
        job.deadline_ms,
        budget
    ));
    assert!(!budget_covers(
        &req.assignments,
        h.ms(s + 99),
        job.deadline_ms,
        budget
    ));
    assert!(!budget_covers(
        &req.assignments,
        h.ms(s + 100),
        job.deadline_ms,
        budget - 1
    ));
    let good = build::assign(&h.dep, h.env(), &req).expect("draft");
    let mut early = req.clone();
    early.valid_from_slot = s + 99;
    assert_invalid_request(build::assign(&h.dep, h.env(), &early));
    // The same assign started one slot earlier: one second more to pay than the budget.
    let mut broken = good.clone();
    broken.valid_from_slot = Some(s + 99);
    let Some(GanglionDatum::Escrow(mut e)) = broken.outputs[0]
        .datum
        .as_ref()
        .map(|d| GanglionDatum::from_plutus_data(d).expect("decodes"))
    else {
        panic!("escrow")
    };
    if let JobState::Assigned { started_at_ms, .. } = &mut e.state {
        *started_at_ms = h.ms(s + 99);
    }
    broken.outputs[0].datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(
        after.orch,
        (
            before.orch.0 - lock.fee - job.escrow.output.value.lovelace,
            before.orch.1 - budget
        )
    );
    assert_eq!(after.providers, before.providers);
}

// ---- third parties -------------------------------------------------------------------

#[test]
fn third_party_puts_its_own_stake_key_on_the_payout() {
    let (mut h, job) = assigned(2);
    let now = h.world.now_ms();
    let third = h.third.clone();
    let req = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    let good = claim_draft(&h, &req);
    let provider0 = h.providers[0].payout;
    assert!(
        provider0.stake.is_some(),
        "provider 0 is paid at a base address"
    );
    let hijacked = Payout {
        key: provider0.key,
        stake: Some(StakeCredential::Key(key_hash(
            &third.key.verifying_key().to_bytes(),
        ))),
    };
    let mut broken = good.clone();
    broken.outputs[0].address = hijacked.address(h.env().network);
    passes_then_rejected(&h, &third, good.clone(), broken);
    // Nor may the stake part be dropped.
    let mut enterprise = good.clone();
    enterprise.outputs[0].address = Payout::enterprise(provider0.key).address(h.env().network);
    passes_then_rejected(&h, &third, good.clone(), enterprise);
    // The correct claim, submitted and paid for by the third party, pays provider 0.
    let before = books(&h);
    let b = h.run(good, &third, &[]).expect("claim applies");
    let payout = h.output(&b, 0);
    assert_eq!(payout.output.address, provider0.address(h.env().network));
    let after = books(&h);
    assert_eq!(
        after.providers[0],
        (
            before.providers[0].0 + payout.output.value.lovelace,
            before.providers[0].1 + PAY_FOR_AN_HOUR
        )
    );
    assert_eq!(
        after.third,
        (
            before.third.0 - b.fee - payout.output.value.lovelace,
            before.third.1
        )
    );
    assert_eq!(after.orch, before.orch);
    assert_eq!(after.providers[1], before.providers[1]);
}

// ---- time ----------------------------------------------------------------------------

#[test]
fn claim_after_deadline_and_claim_window() {
    let (mut h, mut job) = assigned(2);
    let started = job.started_at_ms.expect("assigned");
    let full = 2 * (job.deadline_ms - started);
    let p = h.providers[0].party.clone();
    let end = job.claim_end_slot();
    // In the last slot of the window a claim valid until its end passes …
    h.world.slot = end - 1;
    let good = h.claim_request(&job, 0, 0, full, Some(job.deadline_ms));
    assert_eq!(good.valid_until_slot, end);
    h.judge(claim_draft(&h, &good), &p, &[]).expect("in time");
    // … one slot later no claim can be valid: its upper bound lies after the window.
    h.world.slot = end;
    let mut late = good.clone();
    late.valid_from_slot = end;
    late.valid_until_slot = end + 60;
    let before = books(&h);
    assert_script_fails(h.balance(claim_draft(&h, &late), &p));
    assert_eq!(books(&h), before);
    h.world.slot = end - 1;
    let c = h.claim_with(&mut job, &good, &p).expect("claims in time");
    assert_eq!(
        books(&h).providers[0],
        paid(before.providers[0], c.fee, 8 * NTX)
    );
}

#[test]
fn expire_before_deadline_and_claim_window() {
    let mut h = Harness::new(2);
    let (job, setup) = after_window_with_one_claim(&mut h);
    let third = h.third.clone();
    let good = expire_draft(&h, &job, &[1]);
    let mut at_end = h.expire_request(&job, &[1]);
    at_end.valid_from_slot = job.claim_end_slot();
    let broken = build::expire(&h.dep, h.env(), &at_end).expect("draft").0;
    passes_then_rejected(&h, &third, good, broken);
    // Within the window, after the deadline: still refused.
    let mut in_window = h.expire_request(&job, &[1]);
    in_window.valid_from_slot = job.deadline_slot + 1;
    assert_script_fails(h.balance(
        build::expire(&h.dep, h.env(), &in_window).expect("draft").0,
        &third,
    ));
    let (b, outcome) = h.expire(&job, &[1]).expect("expire");
    assert_eq!(outcome.refund, 1_000 * NTX);
    let burnt = h.output(&b, 1).output.value.lovelace;
    assert_eq!(
        books(&h),
        setup.after_expire(b.fee + burnt, PAY_FOR_AN_HOUR)
    );
}

// ---- slashing ------------------------------------------------------------------------

#[test]
fn proportional_slash_orchestrator_recovers_at_most_what_it_paid() {
    let mut h = Harness::new(2);
    let (job, setup) = after_window_with_one_claim(&mut h);
    let third = h.third.clone();
    let good = expire_draft(&h, &job, &[1]);
    let (_, outcome) =
        build::expire(&h.dep, h.env(), &h.expire_request(&job, &[1])).expect("draft");
    // 8 NTX slashed: 4 NTX back to the orchestrator (what it paid), 4 NTX burnt.
    assert_eq!(outcome.slashes, vec![8 * NTX]);
    assert_eq!(outcome.burnt, 4 * NTX);
    assert_eq!(
        outcome.refund,
        1_000 * NTX - PAY_FOR_AN_HOUR + PAY_FOR_AN_HOUR
    );
    // The orchestrator takes the burnt part too (no Burnt output): refused.
    let mut greedy = good.clone();
    greedy.outputs.remove(1);
    greedy.outputs[0]
        .value
        .add_asset(ntx().policy, &ntx().name, 4 * NTX);
    passes_then_rejected(&h, &third, good.clone(), greedy);
    // One base unit moved from the Burnt output to the orchestrator: refused.
    let mut unit = good.clone();
    unit.outputs[1]
        .value
        .take_asset(&ntx().policy, &ntx().name, 1);
    unit.outputs[0]
        .value
        .add_asset(ntx().policy, &ntx().name, 1);
    passes_then_rejected(&h, &third, good, unit);
    let (b, _) = h.expire(&job, &[1]).expect("expire");
    let burnt = h.output(&b, 1);
    assert_eq!(burnt.output.value.quantity_of(&ntx()), 4 * NTX);
    // The orchestrator is whole again (it paid 4 NTX, got 4 NTX back), no more.
    assert_eq!(
        books(&h),
        setup.after_expire(b.fee + burnt.output.value.lovelace, PAY_FOR_AN_HOUR)
    );
    assert_eq!(
        h.providers[1]
            .bond
            .as_ref()
            .expect("bond")
            .output
            .value
            .quantity_of(&ntx()),
        192 * NTX
    );
}

#[test]
fn slash_capped_by_the_bond() {
    let mut h = Harness::new(2);
    h.providers[1].rate = 60 * NTX;
    let (job, setup) = after_window_with_one_claim(&mut h);
    // Provider 1's window is worth 2 GPUs × 60 NTX/h × 2 h = 240 NTX; its bond holds 200.
    let (b, outcome) = h.expire(&job, &[1]).expect("expire");
    assert_eq!(outcome.slashes, vec![200 * NTX]);
    assert_eq!(outcome.burnt, 196 * NTX);
    let bond = h.providers[1].bond.clone().expect("bond continues");
    assert_eq!(bond.output.value.quantity_of(&ntx()), 0);
    assert_eq!(
        bond.output
            .value
            .quantity(&h.dep.script.hash, &h.providers[1].party.hash),
        1
    );
    let burnt = h.output(&b, 1);
    assert_eq!(burnt.output.value.quantity_of(&ntx()), 196 * NTX);
    assert_eq!(
        books(&h),
        setup.after_expire(b.fee + burnt.output.value.lovelace, PAY_FOR_AN_HOUR)
    );
}

fn slash_again(h: &Harness, job: &Job, bond: &Utxo, cut: u64, burn: bool) -> Draft {
    let mut kept = bond.output.clone();
    kept.value.take_asset(&ntx().policy, &ntx().name, cut);
    let mut d = Draft::default();
    d.spend_script(
        bond.clone(),
        SpendRedeemer::Slash { job_id: job.id }.to_plutus_data(),
    )
    .pay(kept)
    .reference(h.dep.reference.clone());
    if burn {
        d.mint(
            h.dep.script.hash,
            &job.id.0,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        );
    }
    d
}

#[test]
fn defaulter_slashed_twice() {
    let mut h = Harness::new(2);
    let (job, setup) = after_window_with_one_claim(&mut h);
    let (b, _) = h.expire(&job, &[1]).expect("the first slash");
    let spent = b.fee + h.output(&b, 1).output.value.lovelace;
    let bond = h.providers[1].bond.clone().expect("bond");
    assert_eq!(bond.output.value.quantity_of(&ntx()), 192 * NTX);
    let orch = h.orch.clone();
    let mid = books(&h);
    // Without the thread token burnt the bond's Slash refuses …
    assert_script_fails(h.balance(slash_again(&h, &job, &bond, 8 * NTX, false), &orch));
    // … and the token is gone: nobody can burn it again.
    let r = h.balance(slash_again(&h, &job, &bond, 8 * NTX, true), &orch);
    assert!(matches!(r, Err(Error::Unbalanceable { .. })), "{r:?}");
    // The escrow itself is spent: the expire cannot run twice.
    let again = build::expire(&h.dep, h.env(), &h.expire_request(&job, &[1]));
    let r = again.and_then(|(d, _)| h.clone().run(d, &orch, &[]));
    assert!(r.is_err(), "{r:?}");
    assert_eq!(books(&h), mid);
    assert_eq!(mid, setup.after_expire(spent, PAY_FOR_AN_HOUR));
}

#[test]
fn claimant_cannot_be_slashed() {
    let mut h = Harness::new(2);
    let (job, setup) = after_window_with_one_claim(&mut h);
    let third = h.third.clone();
    assert_invalid_request(build::expire(
        &h.dep,
        h.env(),
        &h.expire_request(&job, &[0, 1]),
    ));
    let view = faked(&job.escrow, |e| {
        if let JobState::Assigned { claimed, .. } = &mut e.state {
            claimed.clear();
        }
    });
    let mut broken = build::expire(
        &h.dep,
        h.env(),
        &build::ExpireRequest {
            escrow: view,
            ..h.expire_request(&job, &[0, 1])
        },
    )
    .expect("draft")
    .0;
    respend(&mut broken, &job.escrow);
    passes_then_rejected(&h, &third, expire_draft(&h, &job, &[1]), broken);
    let (b, _) = h.expire(&job, &[1]).expect("expire");
    let spent = b.fee + h.output(&b, 1).output.value.lovelace;
    assert_eq!(
        h.providers[0]
            .bond
            .as_ref()
            .expect("bond")
            .output
            .value
            .quantity_of(&ntx()),
        200 * NTX
    );
    assert_eq!(books(&h), setup.after_expire(spent, PAY_FOR_AN_HOUR));
}

#[test]
fn burnt_output_can_never_be_spent() {
    let mut h = Harness::new(2);
    let (job, _) = after_window_with_one_claim(&mut h);
    let (b, _) = h.expire(&job, &[1]).expect("expire");
    let burnt = h.output(&b, 1);
    assert_eq!(
        burnt.output.datum,
        Some(GanglionDatum::Burnt(job.id).to_plutus_data())
    );
    let third = h.third.clone();
    let before = books(&h);
    let attestation = h.attest(&job, 0, 0);
    for redeemer in [
        SpendRedeemer::Expire,
        SpendRedeemer::Cancel,
        SpendRedeemer::Unbond,
        SpendRedeemer::Withdraw,
        SpendRedeemer::Slash { job_id: job.id },
        SpendRedeemer::Claim {
            index: 0,
            attestation: attestation.clone(),
            receipt: None,
        },
        SpendRedeemer::Assign {
            acceptances: vec![],
        },
        SpendRedeemer::Rescale {
            acceptances: vec![],
        },
    ] {
        let mut d = Draft::default();
        d.spend_script(burnt.clone(), redeemer.to_plutus_data())
            .reference(h.dep.reference.clone())
            .validity(Some(h.world.slot), Some(h.world.slot + 60));
        assert_script_fails(h.balance(d, &third));
    }
    assert_eq!(books(&h), before);
    assert!(
        h.world.get(&burnt.reference).is_ok(),
        "still there, forever"
    );
}

// ---- pay -----------------------------------------------------------------------------

#[test]
fn equal_work_equal_pay() {
    let (mut h, mut job) = assigned(2);
    assert_eq!(h.providers[0].gpus, h.providers[1].gpus);
    let now = h.world.now_ms();
    let gpu_ms = 5_555_555;
    let before = books(&h);
    let c0 = h.claim(&mut job, 0, gpu_ms, Some(now)).expect("claims");
    let c1 = h.claim(&mut job, 1, gpu_ms, Some(now)).expect("claims");
    let pay = pay_for(gpu_ms, RATE);
    assert_eq!(pay, 3_086_419);
    let after = books(&h);
    assert_eq!(after.third, before.third);
    assert_eq!(after.providers[0].1 - before.providers[0].1, pay);
    assert_eq!(after.providers[1].1 - before.providers[1].1, pay);
    assert_eq!(after.providers[0], paid(before.providers[0], c0.fee, pay));
    assert_eq!(after.providers[1], paid(before.providers[1], c1.fee, pay));
}

#[test]
fn double_satisfaction_two_escrows_claims_in_one_tx() {
    let mut h = Harness::new(2);
    h.post_bonds_for(2);
    let (mut j1, _) = h.lock(1_000 * NTX, 7200);
    let (mut j2, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut j1);
    h.assign(&mut j2);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let p = h.providers[0].party.clone();
    let d1 = claim_draft(&h, &h.claim_request(&j1, 0, 0, TWO_GPU_HOURS_MS, Some(now)));
    let d2 = claim_draft(&h, &h.claim_request(&j2, 0, 0, TWO_GPU_HOURS_MS, Some(now)));
    h.judge(d2.clone(), &p, &[])
        .expect("job 2's claim alone passes");
    let mut both = d1.clone();
    for (r, (u, red)) in &d2.inputs {
        both.inputs.insert(*r, (u.clone(), red.clone()));
    }
    both.outputs.extend(d2.outputs.iter().cloned());
    passes_then_rejected(&h, &p, d1.clone(), both);
    // One payout shared by both claims (job 2's escrow continuing second): refused too.
    let mut shared = d1;
    for (r, (u, red)) in &d2.inputs {
        shared.inputs.insert(*r, (u.clone(), red.clone()));
    }
    shared.outputs.push(d2.outputs[1].clone());
    assert_script_fails(h.balance(shared, &p));
    let before = books(&h);
    let c = h
        .claim(&mut j1, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claims");
    let c2 = h
        .claim(&mut j2, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claims");
    let mut expected = before.clone();
    expected.providers[0] = (
        before.providers[0].0 - c.fee - c2.fee,
        before.providers[0].1 + 2 * PAY_FOR_AN_HOUR,
    );
    assert_eq!(books(&h), expected);
}

// ---- claim outputs -------------------------------------------------------------------

/// Provider 0's honest claim of an hour, drafted for the third party to submit.
fn honest_claim(h: &Harness, job: &Job) -> Draft {
    let now = h.world.now_ms();
    claim_draft(h, &h.claim_request(job, 0, 0, TWO_GPU_HOURS_MS, Some(now)))
}

#[test]
fn submitter_redirects_the_pay_to_itself() {
    let (h, job) = assigned(2);
    let third = h.third.clone();
    let good = honest_claim(&h, &job);
    let mut broken = good.clone();
    broken.outputs[0].address = third.address.clone();
    passes_then_rejected(&h, &third, good, broken);
}

#[test]
fn claim_pays_more_than_its_attestation() {
    let (h, job) = assigned(2);
    let p = h.providers[0].party.clone();
    let good = honest_claim(&h, &job);
    let mut broken = good.clone();
    broken.outputs[0]
        .value
        .add_asset(ntx().policy, &ntx().name, 1);
    broken.outputs[1]
        .value
        .take_asset(&ntx().policy, &ntx().name, 1);
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn claim_hides_its_pay_from_the_continuing_datum() {
    // `paid` feeds the orchestrator's recovery at expiry: it must grow by exactly the pay.
    let (h, job) = assigned(2);
    let p = h.providers[0].party.clone();
    let good = honest_claim(&h, &job);
    let mut broken = good.clone();
    let mut e = ganglion_contracts::test_utils::harness_v2::escrow_of(&job.escrow);
    if let JobState::Assigned { claimed, .. } = &mut e.state {
        claimed.insert(0, 0);
    }
    broken.outputs[1].datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn claim_steals_the_thread_token() {
    let (h, job) = assigned(2);
    let p = h.providers[0].party.clone();
    let good = honest_claim(&h, &job);
    let mut broken = good.clone();
    broken.outputs[1].value.assets.remove(&h.dep.script.hash);
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn last_claim_shorts_the_refund() {
    let (mut h, mut job) = assigned(2);
    let now = h.world.now_ms();
    h.claim(&mut job, 0, TWO_GPU_HOURS_MS, Some(now))
        .expect("claim 0");
    let p = h.providers[1].party.clone();
    let good = claim_draft(
        &h,
        &h.claim_request(&job, 1, 1, TWO_GPU_HOURS_MS, Some(now)),
    );
    let mut broken = good.clone();
    broken.outputs[1]
        .value
        .take_asset(&ntx().policy, &ntx().name, 1);
    passes_then_rejected(&h, &p, good.clone(), broken);
    let mut keep_token = good.clone();
    keep_token.mint.clear();
    keep_token.mint_redeemers.clear();
    keep_token.outputs[1]
        .value
        .add_asset(h.dep.script.hash, &job.id.0, 1);
    passes_then_rejected(&h, &p, good, keep_token);
}

// ---- known gap of the v2 spec ----------------------------------------------------------

/// The defaulter submits the expire itself, without its bond, to keep its stake: refused
/// while its bond must still exist (its commitment kept it from unbonding, G5), by the
/// builder and by the validator; the honest expire then slashes it.
#[test]
fn a_defaulter_expires_first_without_its_bond() {
    let mut h = Harness::new(2);
    let (job, setup) = after_window_with_one_claim(&mut h);
    let defaulter = h.providers[1].party.clone();
    assert_invalid_request(build::expire(&h.dep, h.env(), &h.expire_request(&job, &[])));
    // Drafted as if past the unbonding delay, submitted now.
    let mut req = h.expire_request(&job, &[]);
    let now = req.valid_from_slot;
    req.valid_from_slot = job.claim_end_slot() + h.dep.params.unbonding_delay_ms / 1000 + 2;
    let (mut early, _) = build::expire(&h.dep, h.env(), &req).expect("draft");
    early.valid_from_slot = Some(now);
    let before = books(&h);
    assert_script_fails(h.balance(early, &defaulter));
    assert_eq!(books(&h), before);
    // The honest expire slashes the defaulter: 8 NTX, 4 back to the orchestrator.
    let (b, outcome) = h
        .expire(&job, &[1])
        .expect("expire with the defaulter's bond");
    assert_eq!(outcome.slashes, vec![8 * NTX]);
    let burnt = h.output(&b, 1).output.value.lovelace;
    assert_eq!(
        books(&h),
        setup.after_expire(b.fee + burnt, PAY_FOR_AN_HOUR)
    );
}

// ---- assign --------------------------------------------------------------------------

/// Two bonded providers and an open 1 000 NTX job; the honest assign draft.
fn open_job() -> (Harness, Job, Draft) {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (job, _) = h.lock(1_000 * NTX, 7200);
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    (h, job, good)
}

#[test]
fn orchestrator_assigns_with_a_payout_other_than_the_bonds() {
    // The acceptance does not sign the payout: the bond's is the only one allowed.
    let (h, job, good) = open_job();
    let mut req = h.assign_request(&job);
    let elsewhere = Payout::enterprise(h.orch.hash);
    req.assignments[1].payout = elsewhere;
    assert_invalid_request(build::assign(&h.dep, h.env(), &req));
    let real = req.bonds[1].clone();
    req.bonds[1] = faked_bond(&real, |b| b.payout = elsewhere);
    let mut broken = build::assign(&h.dep, h.env(), &req).expect("draft");
    respend(&mut broken, &real);
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn orchestrator_assigns_an_unbonding_provider() {
    let (mut h, job, good) = open_job();
    let orch = h.orch.clone();
    h.judge(good, &orch, &[]).expect("passes while bonded");
    h.unbond(1).expect("unbond");
    let unbonding = h.providers[1].bond.clone().expect("bond");
    let mut req = h.assign_request(&job);
    assert_invalid_request(build::assign(&h.dep, h.env(), &req));
    // Drafted from a view of the bond as if live; the real, unbonding bond is spent.
    req.bonds[1] = faked_bond(&unbonding, |b| b.unbonding_since_ms = None);
    let mut broken = build::assign(&h.dep, h.env(), &req).expect("draft");
    respend(&mut broken, &unbonding);
    let before = books(&h);
    assert_script_fails(h.balance(broken, &orch));
    assert_eq!(books(&h), before);
}

#[test]
fn orchestrator_assigns_a_rate_above_max_rate() {
    let (mut h, job, good) = open_job();
    let orch = h.orch.clone();
    h.judge(good, &orch, &[])
        .expect("passes at the default rate");
    h.providers[1].rate = ganglion_contracts::test_utils::harness_v2::MAX_RATE + 1;
    let req = h.assign_request(&job);
    let before = books(&h);
    assert_script_fails(h.balance(build::assign(&h.dep, h.env(), &req).expect("draft"), &orch));
    assert_eq!(books(&h), before);
}

#[test]
fn orchestrator_assigns_the_same_provider_twice() {
    let (h, job, good) = open_job();
    let req = h.assign_request_for(&job, &[0, 0]);
    assert_invalid_request(build::assign(&h.dep, h.env(), &req));
    // By hand: the one bond continued once, with both commitments.
    let mut broken = good.clone();
    let GanglionDatum::Escrow(mut e) = datum_at(&broken.outputs[0]) else {
        panic!("escrow first")
    };
    let JobState::Assigned { assignments, .. } = &mut e.state else {
        panic!("assigned")
    };
    assignments[1] = assignments[0].clone();
    broken.outputs[0].datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    // Room for the (larger) datum's min-UTxO.
    broken.outputs[0].value.lovelace += 1_000_000;
    let (_, (_, redeemer)) = broken
        .inputs
        .iter_mut()
        .find(|(_, (u, _))| u.reference == job.escrow.reference)
        .expect("escrow spent");
    *redeemer = Some(
        SpendRedeemer::Assign {
            acceptances: req.acceptances.clone(),
        }
        .to_plutus_data(),
    );
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn someone_else_assigns_the_job() {
    let (h, _job, good) = open_job();
    let third = h.third.clone();
    let orch = h.orch.clone();
    h.judge(good.clone(), &orch, &[])
        .expect("signed by the orchestrator, it passes");
    let mut unsigned = good;
    unsigned.required_signers.clear();
    let before = books(&h);
    assert_script_fails(h.balance(unsigned, &third));
    assert_eq!(books(&h), before);
}
