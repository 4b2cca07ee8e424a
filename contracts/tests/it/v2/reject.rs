//! Reject paths kept from protocol v1's suite, each rule broken once against `ganglion_v2`:
//! the honest transaction passes the ledger, the broken one is refused by the validator
//! (or, drafted by hand, after the builder refused it), and nobody's holdings move.

use ed25519_dalek::SigningKey;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_contracts::test_utils::world::Party;
use ganglion_contracts::test_utils::{NTX, assert_script_fails, ntx};
use ganglion_contracts::tx::{Draft, Output};
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::datum::{GanglionDatum, JobState};
use ganglion_contracts::v2::redeemer::{MintRedeemer, SpendRedeemer};
use ganglion_contracts::v2::rules::slash_of;
use ganglion_contracts::v2::signed::sign;

use super::{TWO_GPU_HOURS_MS, assigned, books, faked, faked_bond, passes_then_rejected, respend};

fn assert_invalid_request<T: std::fmt::Debug>(r: ganglion_contracts::Result<T>) {
    assert!(
        matches!(r, Err(ganglion_contracts::Error::InvalidRequest(_))),
        "{r:?}"
    );
}

/// Adds `delta` NTX base units to `o` (removing the asset at zero).
fn ntx_delta(o: &mut Output, delta: i64) {
    let ntx = ntx();
    let q = i64::try_from(o.value.quantity_of(&ntx)).expect("small") + delta;
    let names = o.value.assets.entry(ntx.policy).or_default();
    if q > 0 {
        names.insert(ntx.name.clone(), u64::try_from(q).expect("positive"));
    } else {
        names.remove(&ntx.name);
    }
}

fn escrow_at(o: &Output) -> ganglion_contracts::v2::datum::EscrowDatum {
    match GanglionDatum::from_plutus_data(o.datum.as_ref().expect("datum")).expect("decodes") {
        GanglionDatum::Escrow(e) => e,
        other => panic!("not an escrow: {other:?}"),
    }
}

// ---- lock ----------------------------------------------------------------------------

/// A valid lock of 10 NTX for 2 GPUs by the orchestrator, not yet balanced.
fn lock_draft(h: &Harness) -> (Draft, ganglion_contracts::v2::datum::JobId) {
    let req = h.lock_request(2, 10 * NTX, 3600, 60_000);
    build::lock(&h.dep, h.env(), &req).expect("draft")
}

#[test]
fn lock_with_a_budget_that_is_not_in_the_escrow() {
    let h = Harness::new(1);
    let (good, _) = lock_draft(&h);
    let mut broken = good.clone();
    ntx_delta(&mut broken.outputs[0], -1);
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn lock_minting_two_thread_tokens() {
    let h = Harness::new(1);
    let (good, id) = lock_draft(&h);
    let mut broken = good.clone();
    *broken
        .mint
        .entry(h.dep.script.hash)
        .or_default()
        .entry(id.0.to_vec())
        .or_default() += 1;
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

// ---- assign --------------------------------------------------------------------------

#[test]
fn assign_with_an_acceptance_signed_by_another_key() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (job, _) = h.lock(1_000 * NTX, 7200);
    let mut req = h.assign_request(&job);
    let good = build::assign(&h.dep, h.env(), &req).expect("draft");
    // The exact terms provider 1 would sign, signed by a key its bond does not name.
    let msg = h.acceptance_message(&job, 1, req.assignments[1].accept_by_ms);
    req.acceptances[1] = sign(&SigningKey::from_bytes(&[0xee; 32]), &msg.signed_bytes());
    let forged = build::assign(&h.dep, h.env(), &req).expect("draft");
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, forged);
}

#[test]
fn assign_redirecting_the_refunds_to_someone_else() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(1_000 * NTX, 7200);
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    let attacker = Party::from_seed(h.env(), [0xaa; 32]);
    let mut broken = good.clone();
    // Same assignments, but refunds would now go to the attacker.
    let mut e = escrow_at(&broken.outputs[0]);
    e.orchestrator = attacker.hash;
    broken.outputs[0].datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn assign_stealing_the_thread_token() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(1_000 * NTX, 7200);
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    let mut broken = good.clone();
    // The token leaves the escrow (the balancer sends it to the orchestrator's change).
    broken.outputs[0].value.assets.remove(&h.dep.script.hash);
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

#[test]
fn assign_an_under_bonded_provider() {
    // The bond backs 2 GPUs (and stakes for 2); the job asks that provider for 4.
    let mut h = Harness::with_gpus(&[2]);
    h.post_bonds();
    let (two, _) = h.lock_with(2, 1_000 * NTX, 7200, 60_000).expect("lock");
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&two)).expect("draft");
    let (four, _) = h.lock_with(4, 1_000 * NTX, 7200, 60_000).expect("lock");
    h.providers[0].gpus = 4;
    let mut req = h.assign_request(&four);
    assert_invalid_request(build::assign(&h.dep, h.env(), &req));
    // Drafted from a view of the bond as backing (and staking for) 4 GPUs; the real bond is
    // spent.
    let real = req.bonds[0].clone();
    let mut view = faked_bond(&real, |b| b.gpus = 4);
    ntx_delta(
        &mut view.output,
        i64::try_from(2 * h.dep.params.min_bond_per_gpu).expect("small"),
    );
    req.bonds[0] = view;
    let mut broken = build::assign(&h.dep, h.env(), &req).expect("draft");
    respend(&mut broken, &real);
    let orch = h.orch.clone();
    passes_then_rejected(&h, &orch, good, broken);
}

// ---- claim ---------------------------------------------------------------------------

#[test]
fn claim_with_an_attestation_replayed_from_another_job() {
    let mut h = Harness::new(1);
    h.post_bonds_for(2);
    let (mut a, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut a);
    let (mut b, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut b);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let req = h.claim_request(&b, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    let good = build::claim(&h.dep, h.env(), &req).expect("draft");
    // Job A's attestation of the same work, in job B's claim.
    let mut replayed = req.clone();
    replayed.attestation = h.attest(&a, 0, TWO_GPU_HOURS_MS);
    let replayed = build::claim(&h.dep, h.env(), &replayed).expect("draft");
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, replayed);
}

#[test]
fn claim_with_an_untagged_payout() {
    let (h, job) = assigned(1);
    let now = h.world.now_ms();
    let req = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    let good = build::claim(&h.dep, h.env(), &req).expect("draft");
    let mut broken = good.clone();
    broken.outputs[0].datum = None;
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn slash_alongside_the_last_claim() {
    // Provider 1 has claimed; provider 0's claim is the last: it burns the thread token. A
    // bond's `Slash` must still refuse, the escrow is not expired.
    let (mut h, mut job) = assigned(2);
    let now = h.world.now_ms();
    h.claim(&mut job, 1, TWO_GPU_HOURS_MS, Some(now))
        .expect("claim 1");
    let req = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    let good = build::claim(&h.dep, h.env(), &req).expect("draft");
    assert!(
        good.mint.contains_key(&h.dep.script.hash),
        "the last claim burns"
    );
    let bond = h.providers[1].bond.clone().expect("bond");
    let JobState::Assigned {
        assignments,
        started_at_ms,
        ..
    } = h.escrow_datum(&job).state
    else {
        panic!("assigned")
    };
    let cut = slash_of(
        &assignments[1],
        bond.output.value.quantity_of(&ntx()),
        started_at_ms,
        job.deadline_ms,
    );
    assert!(cut > 0);
    let mut broken = good.clone();
    let mut kept = bond.output.clone();
    ntx_delta(&mut kept, -i64::try_from(cut).expect("small"));
    broken.spend_script(
        bond,
        SpendRedeemer::Slash { job_id: job.id }.to_plutus_data(),
    );
    // The cut goes to the orchestrator's refund.
    ntx_delta(&mut broken.outputs[1], i64::try_from(cut).expect("small"));
    broken.pay(kept);
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn slash_without_an_expire() {
    let (h, job) = assigned(1);
    let bond = h.providers[0].bond.clone().expect("bond");
    let mut kept = bond.output.clone();
    ntx_delta(&mut kept, -i64::try_from(NTX).expect("small"));
    let mut d = Draft::default();
    d.spend_script(
        bond,
        SpendRedeemer::Slash { job_id: job.id }.to_plutus_data(),
    )
    .pay(kept)
    .reference(h.dep.reference.clone());
    let orch = h.orch.clone();
    let before = books(&h);
    assert_script_fails(h.balance(d, &orch));
    assert_eq!(books(&h), before);
}

// ---- cancel --------------------------------------------------------------------------

#[test]
fn someone_else_cancels_the_job() {
    let mut h = Harness::new(1);
    let (job, _) = h.lock(50 * NTX, 600);
    let good = build::cancel(&h.dep, h.env(), &job.escrow).expect("draft");
    let orch = h.orch.clone();
    h.judge(good.clone(), &orch, &[])
        .expect("signed by the orchestrator, the cancel passes");
    let mut unsigned = good;
    unsigned.required_signers.clear();
    let third = h.third.clone();
    let before = books(&h);
    assert_script_fails(h.balance(unsigned, &third));
    assert_eq!(books(&h), before);
}

#[test]
fn orchestrator_cancels_an_assigned_job() {
    let (h, job) = assigned(1);
    assert_invalid_request(build::cancel(&h.dep, h.env(), &job.escrow));
    // Drafted from a view of the escrow as still open; the real, assigned escrow is spent.
    let view = faked(&job.escrow, |e| e.state = JobState::Open);
    let mut broken = build::cancel(&h.dep, h.env(), &view).expect("draft");
    respend(&mut broken, &job.escrow);
    let orch = h.orch.clone();
    let before = books(&h);
    assert_script_fails(h.balance(broken, &orch));
    assert_eq!(books(&h), before);
}

// ---- bonds ---------------------------------------------------------------------------

#[test]
fn post_bond_below_the_minimum_stake() {
    let h = Harness::new(1);
    let good = build::post_bond(&h.dep, h.env(), &h.bond_request(0)).expect("draft");
    let mut broken = good.clone();
    ntx_delta(&mut broken.outputs[0], -1);
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn post_bond_for_someone_else() {
    // Provider 0 posts a bond naming provider 1 (its token, its payout), signing itself.
    let h = Harness::new(2);
    let mut req = h.bond_request(1);
    req.attest_key = h.providers[0].attest_key();
    let mut draft = build::post_bond(&h.dep, h.env(), &req).expect("draft");
    draft.required_signers.clear();
    draft.signer(h.providers[0].party.hash);
    let p = h.providers[0].party.clone();
    let before = books(&h);
    assert_script_fails(h.balance(draft, &p));
    assert_eq!(books(&h), before);
}

/// A valid top-up of 1 NTX of provider 0's bond, and the harness.
fn top_up_draft() -> (Harness, Draft) {
    let mut h = Harness::new(2);
    h.post_bonds();
    let bond = h.providers[0].bond.clone().expect("bond");
    let d = build::top_up(&h.dep, h.env(), &bond, NTX).expect("draft");
    (h, d)
}

#[test]
fn top_up_that_takes_stake_out() {
    let (h, good) = top_up_draft();
    let mut broken = good.clone();
    // 2 NTX less than the honest continuation: 1 NTX below the stake it had.
    ntx_delta(
        &mut broken.outputs[0],
        -2 * i64::try_from(NTX).expect("small"),
    );
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn top_up_that_rewrites_the_datum() {
    let (h, good) = top_up_draft();
    let mut broken = good.clone();
    let d = GanglionDatum::from_plutus_data(broken.outputs[0].datum.as_ref().expect("datum"))
        .expect("decodes");
    let GanglionDatum::Bond(mut b) = d else {
        panic!("not a bond")
    };
    // One GPU more backed by the same stake, and the commitments wiped.
    b.gpus += 1;
    b.commitments.clear();
    broken.outputs[0].datum = Some(GanglionDatum::Bond(b).to_plutus_data());
    let p = h.providers[0].party.clone();
    passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn top_up_of_someone_elses_bond() {
    // Provider 1 "tops up" provider 0's bond, signing itself: were it allowed, it could
    // spend the bond under any continuation the other rules accept.
    let (h, good) = top_up_draft();
    let mut broken = good.clone();
    broken.required_signers.clear();
    broken.signer(h.providers[1].party.hash);
    let p0 = h.providers[0].party.clone();
    h.judge(good, &p0, &[])
        .expect("the provider's own top-up passes");
    let p1 = h.providers[1].party.clone();
    let before = books(&h);
    assert_script_fails(h.balance(broken, &p1));
    assert_eq!(books(&h), before);
}

#[test]
fn top_up_of_an_unbonding_bond() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let bond = h.providers[0].bond.clone().expect("bond");
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
    assert_invalid_request(build::top_up(&h.dep, h.env(), &unbonding, NTX));
    // Drafted by hand, the validator refuses it too.
    let live = build::top_up(&h.dep, h.env(), &bond, NTX).expect("draft of the live bond");
    let mut d = live;
    d.inputs.clear();
    d.spend_script(unbonding.clone(), SpendRedeemer::TopUp.to_plutus_data());
    let mut out = d.outputs[0].clone();
    out.value = unbonding.output.value.clone();
    out.value.add_asset(ntx().policy, &ntx().name, NTX);
    out.datum = unbonding.output.datum.clone();
    d.outputs[0] = out;
    let before = books(&h);
    assert_script_fails(h.balance(d, &p));
    assert_eq!(books(&h), before);
}

#[test]
fn withdraw_a_bond_that_is_not_unbonding() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let bond = h.providers[0].bond.clone().expect("bond");
    let slot = h.world.slot;
    assert_invalid_request(build::withdraw(&h.dep, h.env(), &bond, slot));
    let mut d = Draft::default();
    d.spend_script(bond, SpendRedeemer::Withdraw.to_plutus_data())
        .mint(
            h.dep.script.hash,
            &h.providers[0].party.hash,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        )
        .reference(h.dep.reference.clone())
        .signer(h.providers[0].party.hash)
        .validity(Some(slot), None);
    let p = h.providers[0].party.clone();
    let before = books(&h);
    assert_script_fails(h.balance(d, &p));
    assert_eq!(books(&h), before);
}
