//! Rescale (issue #24): a running escrow whose assignments change. The honest path of an
//! inference service — it starts with its minimum, adds a provider as load grows, releases
//! one as it falls, each provider paid its own receipted window — and the adversary suite
//! of the rule, one test per attack: each shows the honest transaction passing the ledger
//! and the attack, built around the builder, refused by the validator (and by the builder,
//! where it can tell), moving nobody's holdings.

use ganglion_contracts::test_utils::harness_v2::{
    CLAIM_WINDOW_MS, Harness, Job, RATE, RECEIPT_INTERVAL_MS, RESCALE_SLOTS, escrow_of,
};
use ganglion_contracts::test_utils::{NTX, assert_script_fails, ntx};
use ganglion_contracts::tx::{Draft, Output};
use ganglion_contracts::v2::build::{self, ExpireRequest, RescaleRequest, job_tag};
use ganglion_contracts::v2::datum::{
    Assignment, BondDatum, Commitment, EscrowDatum, GanglionDatum, JobState,
};
use ganglion_contracts::v2::payout::Payout;
use ganglion_contracts::v2::redeemer::SpendRedeemer;
use ganglion_contracts::v2::rules::{assignment_bound_gpu_ms, assignment_slash, pay_for};
use ganglion_contracts::{Error, Result};

use super::{books, faked, passes_then_rejected, respend};

/// A named change to an escrow's assignments, as an attack makes it.
type Edit = Box<dyn Fn(&mut Vec<Assignment>)>;

#[track_caller]
fn assert_invalid_request<T: std::fmt::Debug>(r: Result<T>) {
    assert!(matches!(r, Err(Error::InvalidRequest(_))), "{r:?}");
}

fn rescale_draft(h: &Harness, req: &RescaleRequest) -> Draft {
    build::rescale(&h.dep, h.env(), req).expect("rescale draft")
}

fn escrow_in(o: &Output) -> EscrowDatum {
    match GanglionDatum::from_plutus_data(o.datum.as_ref().expect("inline datum")) {
        Ok(GanglionDatum::Escrow(e)) => e,
        other => panic!("not an escrow: {other:?}"),
    }
}

fn bond_in(o: &Output) -> BondDatum {
    match GanglionDatum::from_plutus_data(o.datum.as_ref().expect("inline datum")) {
        Ok(GanglionDatum::Bond(b)) => b,
        other => panic!("not a bond: {other:?}"),
    }
}

fn assignments_of(e: &EscrowDatum) -> &[Assignment] {
    match &e.state {
        JobState::Assigned { assignments, .. } => assignments,
        JobState::Open => panic!("not assigned"),
    }
}

/// `d` with the continuing escrow's (`outputs[0]`) assignments rewritten by `f`.
fn with_assignments(d: &Draft, f: impl FnOnce(&mut Vec<Assignment>)) -> Draft {
    let mut d = d.clone();
    let mut e = escrow_in(&d.outputs[0]);
    let JobState::Assigned { assignments, .. } = &mut e.state else {
        panic!("assigned")
    };
    f(assignments);
    d.outputs[0].datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    d
}

/// Providers of `gpus` GPUs each, bonded for `jobs` jobs at once; a 4-GPU job of `budget`
/// with a deadline in 2 h assigned to provider 0 alone (a service at its minimum); the world
/// 30 minutes later.
fn running(gpus: &[u64], jobs: u64, budget: u64) -> (Harness, Job) {
    let mut h = Harness::with_gpus(gpus);
    h.post_bonds_for(jobs);
    let (mut job, _) = h
        .lock_with(4, budget, 7200, RECEIPT_INTERVAL_MS)
        .expect("lock");
    let req = h.assign_request_for(&job, &[0]);
    h.assign_with(&mut job, &req).expect("assign");
    h.world.slot += 1800;
    (h, job)
}

/// The earliest end a release in a rescale valid from now may give.
fn notice(h: &Harness, job: &Job) -> u64 {
    h.release_notice_ms(job, h.world.slot + RESCALE_SLOTS)
}

// ---- the honest path -----------------------------------------------------------------

#[test]
fn a_service_grows_then_shrinks_and_each_provider_is_paid_its_own_window() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let before = books(&h);
    let budget = 1_000 * NTX;
    let (mut job, lock) = h
        .lock_with(4, budget, 7200, RECEIPT_INTERVAL_MS)
        .expect("lock");
    // A service of two 2-GPU replicas starts with its minimum: provider 0, 2 GPUs of 4.
    let req = h.assign_request_for(&job, &[0]);
    let assign = h
        .assign_with(&mut job, &req)
        .expect("an assign of fewer GPUs than the escrow's");
    let s0 = job.started_at_ms.expect("assigned");
    let start_slot = h.world.slot;

    // Half an hour later the load grows: provider 1 joins.
    h.world.slot = start_slot + 1800;
    let s1 = h.world.now_ms();
    let req = h.rescale_request(&job, &[1], &[]);
    let grow = h.rescale_with(&mut job, &req).expect("the rescale adds");
    let e = h.escrow_datum(&job);
    let JobState::Assigned {
        assignments,
        started_at_ms,
        claimed,
        paid,
    } = &e.state
    else {
        panic!("assigned")
    };
    assert_eq!(*started_at_ms, s0, "the job's first start is kept");
    assert!(claimed.is_empty() && *paid == 0);
    assert_eq!(assignments.len(), 2);
    assert_eq!(
        (assignments[0].started_at_ms, assignments[0].until_ms),
        (s0, job.deadline_ms)
    );
    assert_eq!(assignments[1].provider, h.providers[1].party.hash);
    assert_eq!(
        (assignments[1].started_at_ms, assignments[1].until_ms),
        (s1, job.deadline_ms),
        "the joiner's window starts at the rescale's lower bound"
    );
    assert_eq!(job.escrow.output.value.quantity_of(&ntx()), budget);
    let bond1 = h.providers[1].bond.clone().expect("bond");
    assert_eq!(
        bond_in(&bond1.output).commitments,
        vec![Commitment {
            job_id: job.id,
            gpus: 2,
            until_ms: job.deadline_ms + CLAIM_WINDOW_MS,
        }]
    );

    // Another half hour: the load falls, provider 0 is released with one receipt interval
    // of notice after the rescale's validity end.
    h.world.slot = start_slot + 3600;
    let valid_until = h.world.slot + RESCALE_SLOTS;
    let until0 = h.release_notice_ms(&job, valid_until);
    assert_eq!(until0, h.ms(valid_until) + RECEIPT_INTERVAL_MS);
    let req = h.rescale_request(&job, &[], &[(0, until0)]);
    let shrink = h
        .rescale_with(&mut job, &req)
        .expect("the rescale releases");
    let e = h.escrow_datum(&job);
    let a = assignments_of(&e).to_vec();
    assert_eq!(a[0].until_ms, until0, "released");
    assert_eq!(a[1].until_ms, job.deadline_ms, "still running");
    assert_eq!(job.escrow.output.value.quantity_of(&ntx()), budget);

    // Provider 0 ran to its end; its last receipt acknowledges it one interval before.
    h.world.slot = valid_until + 120;
    let ack0 = until0 - RECEIPT_INTERVAL_MS;
    let gpu_ms0 = 2 * (until0 - s0);
    assert_eq!(
        assignment_bound_gpu_ms(&a[0], RECEIPT_INTERVAL_MS, Some(ack0), h.world.now_ms()),
        gpu_ms0
    );
    let c0 = h
        .claim_as(&mut job, 0, 0, gpu_ms0, Some(ack0))
        .expect("provider 0 claims its window");
    let pay0 = pay_for(gpu_ms0, RATE);
    assert_eq!(pay0, 4_133_333, "3 720 s of 2 GPUs at 2 NTX/h, floor");

    // Provider 1 runs on, an hour after it joined; its receipts acknowledge it.
    h.world.slot = start_slot + 1800 + 3600;
    let now = h.world.now_ms();
    let ack1 = now - RECEIPT_INTERVAL_MS;
    let gpu_ms1 = 2 * (now - s1);
    assert_eq!(
        assignment_bound_gpu_ms(&a[1], RECEIPT_INTERVAL_MS, Some(ack1), now),
        gpu_ms1
    );
    let c1 = h
        .claim_as(&mut job, 1, 1, gpu_ms1, Some(ack1))
        .expect("provider 1 claims, the last claim");
    let pay1 = pay_for(gpu_ms1, RATE);
    assert_eq!(pay1, 4 * NTX);
    assert_eq!(h.token_holders(&job), 0, "the last claim burns the token");
    let refund = h.output(&c1, 1);
    assert_eq!(refund.output.address, h.orch.address);
    assert_eq!(refund.output.datum, Some(job_tag(&job.id)));
    assert_eq!(
        refund.output.value.quantity_of(&ntx()),
        budget - pay0 - pay1
    );
    assert_eq!(
        refund.output.value.lovelace,
        job.escrow.output.value.lovelace
    );
    for p in &h.providers {
        let b = p.bond.clone().expect("bond");
        assert!(
            !bond_in(&b.output).commits_to(&job.id),
            "each claim released its bond"
        );
    }

    let after = books(&h);
    assert_eq!(
        after.orch,
        (
            before.orch.0 - lock.fee - assign.fee - grow.fee - shrink.fee,
            before.orch.1 - pay0 - pay1
        )
    );
    assert_eq!(
        after.providers[0],
        (before.providers[0].0 - c0.fee, before.providers[0].1 + pay0)
    );
    assert_eq!(
        after.providers[1],
        (before.providers[1].0 - c1.fee, before.providers[1].1 + pay1)
    );
    assert_eq!(after.third, before.third);
}

#[test]
fn a_lost_provider_is_replaced_in_one_rescale() {
    // Provider 0 is released and provider 2 added in the same transaction: the escrow's 4
    // GPUs are never exceeded by the running assignments.
    let (mut h, mut job) = running(&[2, 2, 2], 1, 1_000 * NTX);
    let req = h.rescale_request(&job, &[1], &[]);
    h.rescale_with(&mut job, &req).expect("grow");
    h.world.slot += 600;
    let until0 = notice(&h, &job);
    let req = h.rescale_request(&job, &[2], &[(0, until0)]);
    let b = h.rescale_with(&mut job, &req).expect("replace");
    let e = h.escrow_datum(&job);
    let a = assignments_of(&e);
    assert_eq!(a.len(), 3);
    assert_eq!(a[0].until_ms, until0);
    assert_eq!(a[2].provider, h.providers[2].party.hash);
    assert_eq!(a[2].started_at_ms, h.world.now_ms());
    // outputs[1] continues the added provider's bond, committed.
    assert_eq!(
        h.output(&b, 1).reference,
        h.providers[2].bond.clone().expect("bond").reference
    );
    assert!(bond_in(&h.output(&b, 1).output).commits_to(&job.id));
}

// ---- releases ------------------------------------------------------------------------

#[test]
fn orchestrator_releases_without_a_receipt_intervals_notice() {
    let (h, job) = running(&[2, 2], 1, 1_000 * NTX);
    let orch = h.orch.clone();
    let until = notice(&h, &job);
    let good = rescale_draft(&h, &h.rescale_request(&job, &[], &[(0, until)]));
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[], &[(0, until - 1)]),
    ));
    // One millisecond less notice: refused.
    let short = with_assignments(&good, |a| a[0].until_ms = until - 1);
    passes_then_rejected(&h, &orch, good.clone(), short);
    // Backdated to the rescale's lower bound plus an interval (the orchestrator controls the
    // lower bound): refused.
    let backdated = with_assignments(&good, |a| {
        a[0].until_ms = h.world.now_ms() + RECEIPT_INTERVAL_MS;
    });
    passes_then_rejected(&h, &orch, good, backdated);
    // Notice counted from an early upper bound, the transaction then stretched to land
    // later: the validator counts from the upper bound the transaction carries.
    let mut early = h.rescale_request(&job, &[], &[]);
    early.valid_until_slot = h.world.slot + 1;
    early.releases = vec![(0, h.release_notice_ms(&job, early.valid_until_slot))];
    let mut stretched = rescale_draft(&h, &early);
    h.judge(stretched.clone(), &orch, &[])
        .expect("with its own upper bound it passes");
    stretched.valid_until_slot = Some(h.world.slot + RESCALE_SLOTS);
    let before = books(&h);
    assert_script_fails(h.balance(stretched, &orch));
    assert_eq!(books(&h), before);
}

#[test]
fn orchestrator_releases_a_claimed_assignment() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut job, _) = h
        .lock_with(4, 1_000 * NTX, 7200, RECEIPT_INTERVAL_MS)
        .expect("lock");
    h.assign(&mut job);
    h.world.slot += 1800;
    let now = h.world.now_ms();
    h.claim(&mut job, 0, 2 * 1_800_000, Some(now))
        .expect("provider 0 claims");
    let orch = h.orch.clone();
    let until = notice(&h, &job);
    let good = rescale_draft(&h, &h.rescale_request(&job, &[], &[(1, until)]));
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[], &[(0, until)]),
    ));
    let broken = with_assignments(&good, |a| a[0].until_ms = until);
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn orchestrator_changes_a_kept_assignment() {
    let (h, job) = running(&[2, 2], 1, 1_000 * NTX);
    let orch = h.orch.clone();
    let good = rescale_draft(&h, &h.rescale_request(&job, &[1], &[]));
    let elsewhere = Payout::enterprise(h.orch.hash);
    let edits: Vec<(&str, Edit)> = vec![
        ("rate", Box::new(|a| a[0].rate += 1)),
        ("gpus", Box::new(|a| a[0].gpus = 1)),
        ("payout", Box::new(move |a| a[0].payout = elsewhere)),
        ("accept_by", Box::new(|a| a[0].accept_by_ms += 1)),
        ("started_at", Box::new(|a| a[0].started_at_ms -= 60_000)),
        ("until, later", Box::new(|a| a[0].until_ms += 1)),
        (
            "dropped",
            Box::new(|a| {
                a.remove(0);
            }),
        ),
    ];
    for (what, edit) in edits {
        let broken = with_assignments(&good, |a| edit(a));
        let before = books(&h);
        assert_script_fails(h.balance(broken, &orch));
        assert_eq!(books(&h), before, "{what}");
    }
    h.judge(good, &orch, &[])
        .expect("the honest rescale passes");
}

// ---- additions -----------------------------------------------------------------------

#[test]
fn orchestrator_adds_above_the_gpu_cap() {
    // Provider 1 has 3 GPUs: with provider 0's 2 running, 5 of the escrow's 4.
    let (h, job) = running(&[2, 3], 1, 1_000 * NTX);
    let orch = h.orch.clone();
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[1], &[]),
    ));
    // Released, provider 0 no longer counts: 3 of 4.
    let until = notice(&h, &job);
    let good = rescale_draft(&h, &h.rescale_request(&job, &[1], &[(0, until)]));
    let deadline = job.deadline_ms;
    let broken = with_assignments(&good, |a| a[0].until_ms = deadline);
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn orchestrator_adds_beyond_the_budget_left() {
    // 10 NTX: provider 0's 2 h of 2 GPUs at 2 NTX/h cost 8.
    let (mut h, mut job) = running(&[2, 2, 2], 1, 10 * NTX);
    let orch = h.orch.clone();
    let s0 = job.started_at_ms.expect("assigned");
    // Provider 1 for the last 1.5 h costs 6 NTX: 14 with provider 0 running on.
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[1], &[]),
    ));
    // Provider 0 released after 32 minutes (2.13 NTX): 8.13 NTX.
    let until0 = notice(&h, &job);
    let req = h.rescale_request(&job, &[1], &[(0, until0)]);
    let good = rescale_draft(&h, &req);
    let deadline = job.deadline_ms;
    let broken = with_assignments(&good, |a| a[0].until_ms = deadline);
    passes_then_rejected(&h, &orch, good, broken);
    h.rescale_with(&mut job, &req).expect("rescale");
    let s1 = h.world.now_ms();

    // Provider 0 claims its window: 2 × 1 920 s = 2 133 333 paid.
    h.world.slot += 600;
    let gpu_ms0 = 2 * (until0 - s0);
    h.claim_as(&mut job, 0, 0, gpu_ms0, Some(until0 - RECEIPT_INTERVAL_MS))
        .expect("provider 0 claims");
    let paid = pay_for(gpu_ms0, RATE);
    assert_eq!(paid, 2_133_333);

    // An hour before the deadline: provider 2 for that hour costs 4 NTX. With provider 1
    // running on (6 NTX from its start), 10 NTX — the budget, but not what is left of it
    // (10 − 2.13): refused. Provider 1 released (2.13 NTX): 6.13 NTX, payable.
    h.world.slot += 1200;
    assert_eq!(deadline - h.world.now_ms(), 3_600_000);
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[2], &[]),
    ));
    let until1 = notice(&h, &job);
    assert_eq!(until1 - s1, 1_920_000);
    let good = rescale_draft(&h, &h.rescale_request(&job, &[2], &[(1, until1)]));
    let broken = with_assignments(&good, |a| a[1].until_ms = deadline);
    passes_then_rejected(&h, &orch, good, broken);
}

/// A view of the escrow where assignment 0 names another provider, for the builder to draft
/// adding provider 0 again; the real escrow is put back into the draft and its assignment
/// 0 into the continuing datum.
fn readding_provider_0(h: &Harness, job: &Job, releases: &[(u64, u64)]) -> Draft {
    let real = escrow_of(&job.escrow);
    let view = faked(&job.escrow, |e| {
        if let JobState::Assigned { assignments, .. } = &mut e.state {
            assignments[0].provider = [0xee; 28];
        }
    });
    let req = RescaleRequest {
        escrow: view,
        ..h.rescale_request(job, &[0], releases)
    };
    let mut d = rescale_draft(h, &req);
    respend(&mut d, &job.escrow);
    let real0 = assignments_of(&real)[0].clone();
    with_assignments(&d, |a| a[0].provider = real0.provider)
}

#[test]
fn orchestrator_adds_a_provider_already_in_the_escrow() {
    // Bonds with room for two jobs: only the one-provider-per-escrow rule stands in the way.
    let (mut h, mut job) = running(&[2, 2, 2], 2, 1_000 * NTX);
    let orch = h.orch.clone();
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[0], &[]),
    ));
    let good = rescale_draft(&h, &h.rescale_request(&job, &[1], &[]));
    let until = notice(&h, &job);
    let broken = readding_provider_0(&h, &job, &[(0, until)]);
    passes_then_rejected(&h, &orch, good, broken);

    // Released, then claimed (its claim dropped its bond's commitments to the job): still
    // never added again.
    let req = h.rescale_request(&job, &[1], &[(0, until)]);
    h.rescale_with(&mut job, &req).expect("rescale");
    h.world.slot += 300;
    let s0 = job.started_at_ms.expect("assigned");
    h.claim_as(
        &mut job,
        0,
        0,
        2 * (until - s0),
        Some(until - RECEIPT_INTERVAL_MS),
    )
    .expect("provider 0 claims");
    let bond0 = h.providers[0].bond.clone().expect("bond");
    assert!(!bond_in(&bond0.output).commits_to(&job.id));
    assert_invalid_request(build::rescale(
        &h.dep,
        h.env(),
        &h.rescale_request(&job, &[0], &[]),
    ));
    let good = rescale_draft(&h, &h.rescale_request(&job, &[2], &[]));
    let broken = readding_provider_0(&h, &job, &[]);
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn orchestrator_adds_a_provider_with_another_window() {
    let (h, job) = running(&[2, 2], 1, 1_000 * NTX);
    let orch = h.orch.clone();
    let good = rescale_draft(&h, &h.rescale_request(&job, &[1], &[]));
    let now = h.world.now_ms();
    let deadline = job.deadline_ms;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "started ten minutes before the rescale",
            Box::new(move |a| a[1].started_at_ms = now - 600_000),
        ),
        (
            "started after it",
            Box::new(move |a| a[1].started_at_ms = now + 1000),
        ),
        (
            "until before the deadline",
            Box::new(move |a| a[1].until_ms = deadline - 1000),
        ),
        (
            "until after the deadline",
            Box::new(move |a| a[1].until_ms = deadline + 1000),
        ),
    ];
    for (what, edit) in edits {
        let broken = with_assignments(&good, |a| edit(a));
        let before = books(&h);
        assert_script_fails(h.balance(broken, &orch));
        assert_eq!(books(&h), before, "{what}");
    }
    h.judge(good, &orch, &[])
        .expect("the honest rescale passes");
}

#[test]
fn someone_else_rescales_the_job() {
    let (h, job) = running(&[2, 2], 1, 1_000 * NTX);
    let orch = h.orch.clone();
    let third = h.third.clone();
    let until = notice(&h, &job);
    let good = rescale_draft(&h, &h.rescale_request(&job, &[1], &[(0, until)]));
    h.judge(good.clone(), &orch, &[])
        .expect("signed by the orchestrator, it passes");
    let mut unsigned = good;
    unsigned.required_signers.clear();
    let before = books(&h);
    assert_script_fails(h.balance(unsigned, &third));
    assert_eq!(books(&h), before);
}

#[test]
fn rescale_with_a_bond_not_committed_another_taken_or_a_second_escrow() {
    let (mut h, job) = running(&[2, 2, 2], 1, 1_000 * NTX);
    // A second job of the same orchestrator, assigned to provider 2.
    let (mut other, _) = h
        .lock_with(2, 1_000 * NTX, 7200, RECEIPT_INTERVAL_MS)
        .expect("lock");
    let req = h.assign_request_for(&other, &[2]);
    h.assign_with(&mut other, &req).expect("assign");
    let orch = h.orch.clone();
    let good = rescale_draft(&h, &h.rescale_request(&job, &[1], &[]));
    // The bond continues without the commitment.
    let spent = h.providers[1].bond.clone().expect("bond");
    let mut uncommitted = good.clone();
    uncommitted.outputs[1].datum = spent.output.datum.clone();
    passes_then_rejected(&h, &orch, good.clone(), uncommitted);
    // The bond not spent at all.
    let mut unbonded = good.clone();
    unbonded.inputs.remove(&spent.reference);
    unbonded.outputs.remove(1);
    passes_then_rejected(&h, &orch, good.clone(), unbonded);
    // Another provider's bond spent beside as a `Commit` (which anyone may do beside its
    // job's escrow: the escrow's rule checks the bonds) and taken.
    let mut taken = good.clone();
    let loot = h.providers[0].bond.clone().expect("bond");
    taken.spend_script(
        loot.clone(),
        SpendRedeemer::Commit { job_id: job.id }.to_plutus_data(),
    );
    let mut to_orch = loot.output.clone();
    to_orch.address = h.orch.address.clone();
    to_orch.datum = None;
    taken.pay(to_orch);
    passes_then_rejected(&h, &orch, good.clone(), taken);
    // A second escrow rescaled in the same transaction.
    let until = notice(&h, &other);
    let second = rescale_draft(&h, &h.rescale_request(&other, &[], &[(0, until)]));
    h.judge(second.clone(), &orch, &[])
        .expect("the second rescale alone passes");
    let mut both = good.clone();
    for (r, (u, red)) in &second.inputs {
        both.inputs.insert(*r, (u.clone(), red.clone()));
    }
    both.outputs.extend(second.outputs.iter().cloned());
    passes_then_rejected(&h, &orch, good, both);
}

// ---- claims and expiry of a rescaled escrow -------------------------------------------

#[test]
fn a_late_joiner_claims_from_the_escrows_start() {
    let (mut h, mut job) = running(&[2, 2], 1, 1_000 * NTX);
    let s0 = job.started_at_ms.expect("assigned");
    let req = h.rescale_request(&job, &[1], &[]);
    h.rescale_with(&mut job, &req).expect("rescale");
    let s1 = h.world.now_ms();
    h.world.slot += 1800;
    let now = h.world.now_ms();
    let own = 2 * (now - s1);
    let p = h.providers[1].party.clone();
    let good = build::claim(
        &h.dep,
        h.env(),
        &h.claim_request(&job, 1, 1, own, Some(now)),
    )
    .expect("draft");
    for over in [own + 1, 2 * (now - s0)] {
        let broken = build::claim(
            &h.dep,
            h.env(),
            &h.claim_request(&job, 1, 1, over, Some(now)),
        )
        .expect("draft");
        passes_then_rejected(&h, &p, good.clone(), broken);
    }
    let before = books(&h);
    let c = h.claim_as(&mut job, 1, 1, own, Some(now)).expect("claims");
    let pay = pay_for(own, RATE);
    assert_eq!(pay, 2 * NTX);
    let mut expected = before.clone();
    expected.providers[1] = (before.providers[1].0 - c.fee, before.providers[1].1 + pay);
    assert_eq!(books(&h), expected);
}

#[test]
fn a_late_joiner_of_a_silent_orchestrator_claims_one_interval() {
    // No receipt ever came: one receipt interval from its own start, not from the job's.
    let (mut h, mut job) = running(&[2, 2], 1, 1_000 * NTX);
    let req = h.rescale_request(&job, &[1], &[]);
    h.rescale_with(&mut job, &req).expect("rescale");
    h.world.slot += 1800;
    let bound = 2 * RECEIPT_INTERVAL_MS;
    let p = h.providers[1].party.clone();
    let good =
        build::claim(&h.dep, h.env(), &h.claim_request(&job, 1, 1, bound, None)).expect("draft");
    let over = build::claim(
        &h.dep,
        h.env(),
        &h.claim_request(&job, 1, 1, bound + 1, None),
    )
    .expect("draft");
    passes_then_rejected(&h, &p, good, over);
    let before = books(&h);
    let c = h.claim_as(&mut job, 1, 1, bound, None).expect("claims");
    let pay = pay_for(bound, RATE);
    assert_eq!(pay, 66_666);
    let mut expected = before.clone();
    expected.providers[1] = (before.providers[1].0 - c.fee, before.providers[1].1 + pay);
    assert_eq!(books(&h), expected);
}

#[test]
fn a_released_provider_claims_past_its_until() {
    let (mut h, mut job) = running(&[2, 2], 1, 1_000 * NTX);
    let s0 = job.started_at_ms.expect("assigned");
    let until = notice(&h, &job);
    let req = h.rescale_request(&job, &[], &[(0, until)]);
    h.rescale_with(&mut job, &req).expect("released");
    h.world.slot += 1800;
    // The orchestrator's receipt acknowledges provider 0 until now: its release still ends
    // its pay.
    let now = h.world.now_ms();
    let own = 2 * (until - s0);
    let p = h.providers[0].party.clone();
    let good = build::claim(
        &h.dep,
        h.env(),
        &h.claim_request(&job, 0, 0, own, Some(now)),
    )
    .expect("draft");
    for over in [own + 1, 2 * (now - s0)] {
        let broken = build::claim(
            &h.dep,
            h.env(),
            &h.claim_request(&job, 0, 0, over, Some(now)),
        )
        .expect("draft");
        passes_then_rejected(&h, &p, good.clone(), broken);
    }
    let before = books(&h);
    let escrow_lovelace = job.escrow.output.value.lovelace;
    let c = h.claim_as(&mut job, 0, 0, own, Some(now)).expect("claims");
    let pay = pay_for(own, RATE);
    assert_eq!(pay, 2_133_333);
    // Its only assignment: the claim closes the escrow and refunds the rest.
    assert_eq!(h.token_holders(&job), 0);
    let after = books(&h);
    assert_eq!(
        after.providers[0],
        (before.providers[0].0 - c.fee, before.providers[0].1 + pay)
    );
    assert_eq!(
        after.orch,
        (
            before.orch.0 + escrow_lovelace,
            before.orch.1 + 1_000 * NTX - pay
        )
    );
    assert_eq!(after.third, before.third);
}

#[test]
fn a_released_defaulter_is_slashed_only_for_its_own_window() {
    // Provider 0 released, provider 1 added: neither ever claims.
    let (mut h, mut job) = running(&[2, 2], 1, 1_000 * NTX);
    let s0 = job.started_at_ms.expect("assigned");
    let until0 = notice(&h, &job);
    let req = h.rescale_request(&job, &[1], &[(0, until0)]);
    h.rescale_with(&mut job, &req).expect("rescale");
    let s1 = h.world.now_ms();
    h.world.slot = job.claim_end_slot() + 1;
    let third = h.third.clone();
    let a = assignments_of(&escrow_of(&job.escrow)).to_vec();
    let stake = 200 * NTX;
    // 2 GPUs × 2 NTX/h × 1 920 s, and × 5 400 s.
    assert_eq!(until0 - s0, 1_920_000);
    assert_eq!(job.deadline_ms - s1, 5_400_000);
    let slashes = vec![
        assignment_slash(&a[0], stake),
        assignment_slash(&a[1], stake),
    ];
    assert_eq!(slashes, vec![2_133_333, 6 * NTX]);
    let req = h.expire_request(&job, &[0, 1]);
    let (good, outcome) = build::expire(&h.dep, h.env(), &req).expect("draft");
    assert_eq!(outcome.slashes, slashes);
    // Slashed as if assigned the escrow's whole window: refused, for either.
    let deadline = job.deadline_ms;
    for i in [0, 1] {
        let view = faked(&job.escrow, |e| {
            if let JobState::Assigned { assignments, .. } = &mut e.state {
                if i == 0 {
                    assignments[0].until_ms = deadline;
                } else {
                    assignments[1].started_at_ms = s0;
                }
            }
        });
        let (mut broken, wider) = build::expire(
            &h.dep,
            h.env(),
            &ExpireRequest {
                escrow: view,
                ..req.clone()
            },
        )
        .expect("draft");
        assert_eq!(wider.slashes[i], 8 * NTX);
        respend(&mut broken, &job.escrow);
        passes_then_rejected(&h, &third, good.clone(), broken);
    }
    let before = books(&h);
    let escrow_lovelace = job.escrow.output.value.lovelace;
    let (b, outcome) = h.expire(&job, &[0, 1]).expect("expire");
    assert_eq!(outcome.slashes, slashes);
    // Nothing was paid: nothing to recover, all of it burnt.
    assert_eq!(outcome.burnt, slashes.iter().sum::<u64>());
    assert_eq!(outcome.refund, 1_000 * NTX);
    for (i, s) in slashes.iter().enumerate() {
        let bond = h.providers[i].bond.clone().expect("bond");
        assert_eq!(bond.output.value.quantity_of(&ntx()), stake - s);
    }
    let burnt = h.output(&b, 1).output.value.lovelace;
    let after = books(&h);
    assert_eq!(
        after.orch,
        (before.orch.0 + escrow_lovelace, before.orch.1 + 1_000 * NTX)
    );
    assert_eq!(
        after.providers, before.providers,
        "defaulters lose bond NTX only"
    );
    assert_eq!(
        after.third,
        (before.third.0 - b.fee - burnt, before.third.1)
    );
}

// ---- the builder ---------------------------------------------------------------------

#[test]
fn the_rescale_builder_refuses_what_the_validator_would() {
    let (mut h, job) = running(&[2, 2, 2], 1, 1_000 * NTX);
    let until = notice(&h, &job);
    let refused = |h: &Harness, req: &RescaleRequest| {
        assert_invalid_request(build::rescale(&h.dep, h.env(), req));
    };
    let ok = h.rescale_request(&job, &[1], &[(0, until)]);
    rescale_draft(&h, &ok);
    // Releases: unknown index, twice, never later.
    refused(
        &h,
        &RescaleRequest {
            releases: vec![(5, until)],
            ..ok.clone()
        },
    );
    refused(
        &h,
        &RescaleRequest {
            releases: vec![(0, until), (0, until + 1)],
            ..ok.clone()
        },
    );
    refused(
        &h,
        &RescaleRequest {
            releases: vec![(0, job.deadline_ms)],
            ..ok.clone()
        },
    );
    // Additions: a missing or a forged acceptance, a missing bond, an accept-by before the
    // validity end, a rate above the maximum, no GPU, the same provider twice.
    refused(
        &h,
        &RescaleRequest {
            acceptances: vec![],
            ..ok.clone()
        },
    );
    let mut forged = ok.clone();
    forged.acceptances[0][0] ^= 1;
    refused(&h, &forged);
    refused(
        &h,
        &RescaleRequest {
            bonds: vec![],
            ..ok.clone()
        },
    );
    let mut late = ok.clone();
    late.added[0].accept_by_ms = h.ms(late.valid_until_slot) - 1;
    refused(&h, &late);
    let mut twice = h.rescale_request(&job, &[1, 1], &[(0, until)]);
    twice.bonds.truncate(1);
    refused(&h, &twice);
    h.providers[1].rate = ganglion_contracts::test_utils::harness_v2::MAX_RATE + 1;
    refused(&h, &h.rescale_request(&job, &[1], &[(0, until)]));
    h.providers[1].rate = RATE;
    h.providers[1].gpus = 0;
    refused(&h, &h.rescale_request(&job, &[1], &[(0, until)]));
    h.providers[1].gpus = 2;
    // A lower bound at the deadline; an open escrow.
    let mut after = ok.clone();
    after.valid_from_slot = job.deadline_slot;
    after.valid_until_slot = job.deadline_slot + 1;
    refused(&h, &after);
    let (open, _) = h
        .lock_with(4, 1_000 * NTX, 7200, RECEIPT_INTERVAL_MS)
        .expect("lock");
    refused(&h, &h.rescale_request(&open, &[1], &[]));
}
