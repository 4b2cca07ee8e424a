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
    match GanglionDatum::from_plutus_data(u.output.datum.as_ref().expect("datum")) {
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
