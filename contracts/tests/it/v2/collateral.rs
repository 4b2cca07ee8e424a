//! G5, collateral is real (DESIGN §3.1): across live commitments a bond backs at most its
//! GPUs, and it cannot unbond or withdraw from under an assignment that may still be
//! slashed. Each attack is refused by the builder (named) and, drafted by hand, by the
//! validator, and moves nobody's holdings.

use ganglion_contracts::Error;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_contracts::test_utils::{NTX, assert_script_fails};
use ganglion_contracts::tx::Utxo;
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::datum::{BondDatum, Commitment, GanglionDatum};

use super::{books, faked_bond, respend};

fn bond_of(u: &Utxo) -> BondDatum {
    bond_in(&u.output)
}

fn bond_in(o: &ganglion_contracts::tx::Output) -> BondDatum {
    match GanglionDatum::from_plutus_data(o.datum.as_ref().expect("datum")) {
        Ok(GanglionDatum::Bond(b)) => b,
        other => panic!("not a bond: {other:?}"),
    }
}

#[track_caller]
fn assert_invalid_request<T: std::fmt::Debug>(r: ganglion_contracts::Result<T>) {
    assert!(matches!(r, Err(Error::InvalidRequest(_))), "{r:?}");
}

#[test]
fn an_assign_commits_each_bond_and_leaves_its_stake_and_lovelace() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let bonds_before: Vec<Utxo> = h
        .providers
        .iter()
        .map(|p| p.bond.clone().expect("bond"))
        .collect();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    let until = h.escrow_datum(&job).deadline_ms + h.dep.params.claim_window_ms;
    for (p, before) in h.providers.iter().zip(&bonds_before) {
        let after = p.bond.clone().expect("bond");
        assert_eq!(
            bond_of(&after).commitments,
            vec![Commitment {
                job_id: job.id,
                gpus: p.gpus,
                until_ms: until
            }]
        );
        // Sized at post for its widest datum: the orchestrator never tops a bond up.
        assert_eq!(after.output.value, before.output.value);
    }
}

#[test]
fn one_bond_accepted_into_more_jobs_than_its_gpus() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut first, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut first);
    // A second job for the same GPUs, its deadline past the first's commitments.
    let (mut second, _) = h.lock(1_000 * NTX, 7200 * 4);
    let orch = h.orch.clone();
    let mut req = h.assign_request(&second);
    assert_invalid_request(build::assign(&h.dep, h.env(), &req));
    // Drafted from views of the bonds without their commitment; the real bonds are spent.
    let real = req.bonds.clone();
    req.bonds = real
        .iter()
        .map(|b| faked_bond(b, |d| d.commitments.clear()))
        .collect();
    let mut broken = build::assign(&h.dep, h.env(), &req).expect("draft");
    for b in &real {
        respend(&mut broken, b);
    }
    let before = books(&h);
    assert_script_fails(h.balance(broken, &orch));
    assert_eq!(books(&h), before);
    // Once the first job's commitment lapsed (its deadline + claim window passed), the
    // same bonds back the second job, and the lapsed commitment is dropped.
    h.world.slot = first.claim_end_slot() + 1;
    h.assign(&mut second);
    for p in &h.providers {
        let commitments = bond_of(p.bond.as_ref().expect("bond")).commitments;
        assert_eq!(commitments.len(), 1);
        assert_eq!(commitments[0].job_id, second.id);
    }
}

#[test]
fn a_bond_backs_jobs_side_by_side_within_its_gpus() {
    let mut h = Harness::new(2);
    // Each provider bonds twice the GPUs it offers a job.
    h.post_bonds_for(2);
    let (mut a, _) = h.lock(1_000 * NTX, 7200);
    let (mut b, _) = h.lock(1_000 * NTX, 7200);
    let (c, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut a);
    h.assign(&mut b);
    for p in &h.providers {
        let bond = bond_of(p.bond.as_ref().expect("bond"));
        assert_eq!(bond.committed_gpus(h.world.now_ms()), bond.gpus, "full");
    }
    assert_invalid_request(build::assign(&h.dep, h.env(), &h.assign_request(&c)));
}

#[test]
fn provider_unbonds_during_a_job() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    let bond = h.providers[1].bond.clone().expect("bond");
    let p = h.providers[1].party.clone();
    let slot = h.world.slot;
    assert_invalid_request(build::unbond(&h.dep, h.env(), &bond, slot, slot + 60));
    let view = faked_bond(&bond, |b| b.commitments.clear());
    let mut broken = build::unbond(&h.dep, h.env(), &view, slot, slot + 60).expect("draft");
    respend(&mut broken, &bond);
    // The continuing datum must keep the commitments: put them back, as an honest
    // unbond would have to.
    let mut kept = bond_of(&bond);
    kept.unbonding_since_ms = Some(h.ms(slot + 60));
    broken.outputs[0].datum = Some(GanglionDatum::Bond(kept).to_plutus_data());
    let before = books(&h);
    assert_script_fails(h.balance(broken, &p));
    assert_eq!(books(&h), before);
    // Still refused on the last slot the job can be slashed; allowed just after it.
    h.world.slot = job.claim_end_slot();
    assert_invalid_request(h.unbond(1));
    h.world.slot = job.claim_end_slot() + 1;
    h.unbond(1).expect("unbond once the commitment lapsed");
}

#[test]
fn provider_withdraws_during_a_job() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    let bond = h.providers[1].bond.clone().expect("bond");
    let p = h.providers[1].party.clone();
    let slot = h.world.slot;
    assert_invalid_request(build::withdraw(&h.dep, h.env(), &bond, slot));
    // Drafted from a view of the bond as unbonding since long ago: the real bond never
    // started unbonding (it could not, G5), so the validator refuses.
    let view = faked_bond(&bond, |b| b.unbonding_since_ms = Some(0));
    let mut broken = build::withdraw(&h.dep, h.env(), &view, slot).expect("draft");
    respend(&mut broken, &bond);
    let before = books(&h);
    assert_script_fails(h.balance(broken, &p));
    assert_eq!(books(&h), before);
}

#[test]
fn a_withdrawn_defaulters_bond_does_not_block_the_expire_after_the_unbonding_delay() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    h.claim(&mut job, 0, 2 * 3_600_000, Some(now))
        .expect("claim 0");
    // Nobody expires in time; the defaulter unbonds as soon as it may and withdraws.
    h.world.slot = job.claim_end_slot() + 1;
    h.unbond(1).expect("unbond");
    let unbonding = h.providers[1].bond.clone().expect("bond");
    let since = bond_of(&unbonding).unbonding_since_ms.expect("unbonding");
    let ready = ganglion_cardano::time::posix_ms_to_slot(
        &h.env().slot_config,
        since + h.dep.params.unbonding_delay_ms,
    )
    .expect("in range");
    h.world.slot = ready + 1;
    let p = h.providers[1].party.clone();
    let w = build::withdraw(&h.dep, h.env(), &unbonding, h.world.slot).expect("draft");
    h.run(w, &p, &[]).expect("withdraw");
    // The escrow still closes: its rest goes back to the orchestrator.
    let rest = job.escrow.output.value.quantity_of(&h.dep.params.ntx);
    let (_, outcome) = h
        .expire(&job, &[])
        .expect("expire without the vanished bond");
    assert_eq!(outcome.refund, rest);
    assert_eq!(h.token_holders(&job), 0);
}

#[test]
fn a_claim_frees_its_bonds_gpus_for_the_next_job_at_once() {
    let mut h = Harness::new(2);
    // Each bond backs exactly the GPUs of one job.
    h.post_bonds();
    let (mut first, _) = h.lock(1_000 * NTX, 7200);
    let (mut second, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut first);
    assert_invalid_request(build::assign(&h.dep, h.env(), &h.assign_request(&second)));
    h.world.slot += 600;
    let now = h.world.now_ms();
    for i in 0..2 {
        // Each provider's own claim releases its bond (the provider signs and pays).
        h.claim(&mut first, i, 1_000, Some(now)).expect("claim");
        assert!(
            bond_of(h.providers[i].bond.as_ref().expect("bond"))
                .commitments
                .is_empty()
        );
    }
    // Long before the first job's deadline + claim window, the same bonds back the second.
    assert!(h.world.slot < first.claim_end_slot());
    h.assign(&mut second);
    for p in &h.providers {
        let commitments = bond_of(p.bond.as_ref().expect("bond")).commitments;
        assert_eq!(commitments.len(), 1);
        assert_eq!(commitments[0].job_id, second.id);
    }
}

#[test]
fn a_provider_unbonds_as_soon_as_it_claimed() {
    let (mut h, mut job) = super::assigned(2);
    assert_invalid_request(h.unbond(1));
    let now = h.world.now_ms();
    h.claim(&mut job, 1, 1_000, Some(now)).expect("claim 1");
    h.unbond(1)
        .expect("unbond once its only commitment is released");
    // Provider 0 did not claim: its bond still backs the job.
    assert_invalid_request(h.unbond(0));
}

/// Provider 0's honest claim of `job`, submitted by anyone, without a release.
fn claim_of_0(
    h: &Harness,
    job: &ganglion_contracts::test_utils::harness_v2::Job,
) -> build::ClaimRequest {
    let now = h.world.now_ms();
    h.claim_request(job, 0, 0, 1_000, Some(now))
}

#[test]
fn provider_releases_its_commitment_on_a_co_providers_claim() {
    // Provider 1 never claims (it will be a defaulter) and tries to free its bond from the
    // job by riding on provider 0's claim: the claim accepts only the claimant's own bond.
    let (h, job) = super::assigned(2);
    let mut req = claim_of_0(&h, &job);
    let good = build::claim(&h.dep, h.env(), &req).expect("draft");
    let bond1 = h.providers[1].bond.clone().expect("bond");
    req.release = Some(bond1.clone());
    assert_invalid_request(build::claim(&h.dep, h.env(), &req));
    // Drafted from a view of the escrow naming provider 1 as assignment 0; the real
    // escrow is spent and the escrow's outputs are the honest claim's.
    let p1 = h.providers[1].party.hash;
    req.escrow = super::faked(&job.escrow, |e| {
        if let ganglion_contracts::v2::datum::JobState::Assigned { assignments, .. } = &mut e.state
        {
            assignments[0].provider = p1;
        }
    });
    let mut broken = build::claim(&h.dep, h.env(), &req).expect("draft");
    respend(&mut broken, &job.escrow);
    broken.outputs[0] = good.outputs[0].clone();
    broken.outputs[1] = good.outputs[1].clone();
    let attacker = h.providers[1].party.clone();
    super::passes_then_rejected(&h, &attacker, good, broken);
}

#[test]
fn third_party_releases_a_providers_commitment_without_its_signature() {
    let (h, job) = super::assigned(2);
    let mut req = claim_of_0(&h, &job);
    let good = build::claim(&h.dep, h.env(), &req).expect("draft");
    req.release = h.providers[0].bond.clone();
    let mut broken = build::claim(&h.dep, h.env(), &req).expect("draft");
    broken.required_signers.clear();
    let third = h.third.clone();
    super::passes_then_rejected(&h, &third, good, broken);
}

#[test]
fn a_release_that_drops_another_jobs_commitment_or_takes_stake() {
    let mut h = Harness::new(2);
    h.post_bonds_for(2);
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    let (mut other, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.assign(&mut other);
    h.world.slot += 600;
    let mut req = claim_of_0(&h, &job);
    req.release = h.providers[0].bond.clone();
    let good = build::claim(&h.dep, h.env(), &req).expect("draft");
    let released = bond_in(&good.outputs[2]);
    assert_eq!(
        released.commitments.len(),
        1,
        "the other job's commitment stays"
    );
    assert_eq!(released.commitments[0].job_id, other.id);
    let payer = h.providers[0].party.clone();
    // The continuation drops the other job's commitment too.
    let mut dropped = good.clone();
    let mut all_gone = released.clone();
    all_gone.commitments.clear();
    dropped.outputs[2].datum = Some(GanglionDatum::Bond(all_gone).to_plutus_data());
    super::passes_then_rejected(&h, &payer, good.clone(), dropped);
    // The continuation keeps the bond token but not the stake.
    let mut robbed = good.clone();
    let ntx = h.dep.params.ntx.clone();
    robbed.outputs[2]
        .value
        .take_asset(&ntx.policy, &ntx.name, NTX);
    super::passes_then_rejected(&h, &payer, good, robbed);
}

#[test]
fn a_bond_released_without_its_jobs_escrow() {
    let (h, job) = super::assigned(2);
    let bond = h.providers[0].bond.clone().expect("bond");
    let b = bond_of(&bond);
    let mut d = ganglion_contracts::tx::Draft::default();
    d.spend_script(
        bond.clone(),
        ganglion_contracts::v2::redeemer::SpendRedeemer::Release { job_id: job.id }
            .to_plutus_data(),
    )
    .pay(ganglion_contracts::tx::Output {
        address: bond.output.address.clone(),
        value: bond.output.value.clone(),
        datum: Some(GanglionDatum::Bond(b.released(&job.id)).to_plutus_data()),
        script_ref: None,
    })
    .reference(h.dep.reference.clone())
    .signer(b.provider)
    .validity(Some(h.world.slot), Some(h.world.slot + 60));
    let payer = h.providers[0].party.clone();
    let before = books(&h);
    assert_script_fails(h.balance(d, &payer));
    assert_eq!(books(&h), before);
}

/// One provider with two identical bonds (posted twice: two bond tokens of one name).
fn twice_bonded() -> (Harness, Utxo, Utxo) {
    let mut h = Harness::new(1);
    let req = h.bond_request(0);
    h.post_bond_with(0, &req).expect("first bond");
    let first = h.providers[0].bond.clone().expect("bond");
    h.post_bond_with(0, &req).expect("second bond");
    let second = h.providers[0].bond.clone().expect("bond");
    assert_eq!(bond_of(&first), bond_of(&second));
    (h, first, second)
}

#[test]
fn provider_unbonds_two_bonds_with_one_continuation() {
    // Both bonds spent, one continuation (it matches either's datum and value): the second
    // bond token would leave for the provider's wallet, free to back a bond `post` never
    // checked.
    let (h, first, second) = twice_bonded();
    let slot = h.world.slot;
    let good = build::unbond(&h.dep, h.env(), &first, slot, slot + 60).expect("draft");
    let other = build::unbond(&h.dep, h.env(), &second, slot, slot + 60).expect("draft");
    let mut broken = good.clone();
    broken.inputs.extend(other.inputs);
    let p = h.providers[0].party.clone();
    super::passes_then_rejected(&h, &p, good, broken);
}

#[test]
fn provider_withdraws_two_bonds_burning_one_token() {
    let (mut h, first, second) = twice_bonded();
    let mut unbonding = Vec::new();
    for bond in [first, second] {
        h.providers[0].bond = Some(bond);
        h.unbond(0).expect("unbond");
        unbonding.push(h.providers[0].bond.clone().expect("bond"));
    }
    let since = bond_of(&unbonding[1])
        .unbonding_since_ms
        .expect("unbonding");
    h.world.slot = ganglion_cardano::time::posix_ms_to_slot(
        &h.env().slot_config,
        since + h.dep.params.unbonding_delay_ms,
    )
    .expect("in range")
        + 1;
    let slot = h.world.slot;
    let good = build::withdraw(&h.dep, h.env(), &unbonding[0], slot).expect("draft");
    let other = build::withdraw(&h.dep, h.env(), &unbonding[1], slot).expect("draft");
    let mut broken = good.clone();
    broken.inputs.extend(other.inputs);
    let p = h.providers[0].party.clone();
    super::passes_then_rejected(&h, &p, good, broken);
}

/// A bond spent alone, its redeemer naming the bond's *own* token (28 bytes) as the job:
/// `Commit` (constructor 7) or `Release` (constructor 8); its token and stake go to the
/// spender's address.
fn bond_taken_with(
    h: &Harness,
    redeemer: u64,
    spender_address: Vec<u8>,
) -> ganglion_contracts::tx::Draft {
    use ganglion_contracts::data::{bytes, constr};
    let bond = h.providers[0].bond.clone().expect("bond");
    let b = bond_of(&bond);
    let mut d = ganglion_contracts::tx::Draft::default();
    d.spend_script(
        bond.clone(),
        constr(redeemer, vec![bytes(b.provider.to_vec())]),
    )
    .pay(ganglion_contracts::tx::Output {
        address: spender_address,
        value: bond.output.value.clone(),
        datum: None,
        script_ref: None,
    })
    .reference(h.dep.reference.clone())
    .signer(b.provider)
    .validity(Some(h.world.slot), Some(h.world.slot + 60));
    d
}

#[test]
fn anyone_takes_a_bond_committing_it_to_its_own_token() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let third = h.third.clone();
    let mut d = bond_taken_with(&h, 7, third.address.clone());
    d.required_signers.clear();
    let before = books(&h);
    assert_script_fails(h.balance(d, &third));
    assert_eq!(books(&h), before);
}

#[test]
fn provider_takes_its_committed_bond_releasing_it_to_its_own_token() {
    let (h, _job) = super::assigned(1);
    let p = h.providers[0].party.clone();
    let d = bond_taken_with(&h, 8, p.address.clone());
    let before = books(&h);
    assert_script_fails(h.balance(d, &p));
    assert_eq!(books(&h), before);
}
