//! Accept paths: every redeemer, with 1, 4 and 8 providers where providers matter.

use ganglion_contracts::build::{self, ExpireRequest, pay_for};
use ganglion_contracts::datum::{GanglionDatum, JobState};
use ganglion_contracts::time::slot_to_posix_ms;

use ganglion_contracts::test_utils::harness::{Harness, Job, NTX};

fn escrow_state(job: &Job) -> JobState {
    let d = job.escrow.output.datum.as_ref().expect("inline datum");
    match GanglionDatum::from_plutus_data(d).expect("datum decodes") {
        GanglionDatum::Escrow(e) => e.state,
        GanglionDatum::Bond(_) => panic!("not an escrow"),
    }
}

/// Lock → assign → settle with `n` providers; checks every payment and the burn.
fn lock_assign_settle(n: usize) {
    let mut h = Harness::new(n);
    h.post_bonds();
    let budget = 1_000 * NTX;
    let (mut job, _) = h.lock(budget, 7200);
    assert!(matches!(escrow_state(&job), JobState::Open));
    assert_eq!(h.token_holders(&job), 1);

    let before: Vec<u64> = h.providers.iter().map(|p| h.ntx_at(&p.party)).collect();
    let orch_before = h.ntx_at(&h.orch);
    h.assign(&mut job);
    match escrow_state(&job) {
        JobState::Assigned {
            assignments,
            started_at_ms,
        } => {
            assert_eq!(assignments.len(), n);
            assert_eq!(started_at_ms, h.world.now_ms());
        }
        JobState::Open => panic!("escrow still open"),
    }

    // An hour later, every provider attests one hour on each of its GPUs.
    h.world.slot += 3600;
    let req = h.settle_request(&job, 3600);
    let draft = build::settle(&h.dep, h.env(), &req).expect("settle draft");
    let orch = h.orch.clone();
    let settled = h.run(draft, &orch, &[]).expect("settle applies");

    let mut paid = 0;
    for (i, p) in h.providers.iter().enumerate() {
        let pay = pay_for(p.gpus * 3600, p.rate);
        assert_eq!(pay, p.gpus * p.rate, "one hour per GPU at the rate");
        assert_eq!(h.ntx_at(&p.party), before[i] + pay, "provider {i} paid");
        paid += pay;
        let payout = h.output(&settled, i as u64);
        assert_eq!(
            payout.output.datum,
            Some(build::job_tag(&job.id)),
            "payout tagged with the job id"
        );
    }
    assert_eq!(
        h.ntx_at(&h.orch),
        orch_before + budget - paid,
        "orchestrator refunded the rest"
    );
    assert_eq!(h.token_holders(&job), 0, "thread token burnt");
    assert!(
        h.world
            .at(&h.dep.address(h.env()))
            .iter()
            .all(|u| u.reference != job.escrow.reference)
    );
}

#[test]
fn lock_assign_settle_with_1_provider() {
    lock_assign_settle(1);
}

#[test]
fn lock_assign_settle_with_4_providers() {
    lock_assign_settle(4);
}

#[test]
fn lock_assign_settle_with_8_providers() {
    lock_assign_settle(8);
}

#[test]
fn cancel_refunds_an_open_escrow() {
    let mut h = Harness::new(1);
    let orch_before = h.ntx_at(&h.orch);
    let (job, _) = h.lock(50 * NTX, 600);
    assert_eq!(h.ntx_at(&h.orch), orch_before - 50 * NTX);
    let draft = build::cancel(&h.dep, h.env(), &job.escrow).expect("cancel draft");
    let orch = h.orch.clone();
    h.run(draft, &orch, &[]).expect("cancel applies");
    assert_eq!(h.ntx_at(&h.orch), orch_before);
    assert_eq!(h.token_holders(&job), 0);
}

#[test]
fn expire_refunds_an_open_escrow_to_anyone_submitting() {
    let mut h = Harness::new(1);
    let orch_before = h.ntx_at(&h.orch);
    let (job, _) = h.lock(50 * NTX, 600);
    h.world.slot = job.deadline_slot + 1;
    let draft = build::expire(
        &h.dep,
        h.env(),
        &ExpireRequest {
            escrow: job.escrow.clone(),
            attestations: vec![],
            slash: vec![],
            valid_from_slot: h.world.slot,
        },
    )
    .expect("expire draft");
    // A provider submits it: no orchestrator signature is needed after the deadline.
    let payer = h.providers[0].party.clone();
    h.run(draft, &payer, &[]).expect("expire applies");
    assert_eq!(h.ntx_at(&h.orch), orch_before);
    assert_eq!(h.token_holders(&job), 0);
}

/// Expire an assigned job where the first half attested and the rest defaulted; slash them.
fn expire_with_defaulters(n: usize) {
    let mut h = Harness::new(n);
    h.post_bonds();
    let budget = 1_000 * NTX;
    let (mut job, _) = h.lock(budget, 7200);
    h.assign(&mut job);
    let attested = n.div_ceil(2);
    let before: Vec<u64> = h.providers.iter().map(|p| h.ntx_at(&p.party)).collect();
    let orch_before = h.ntx_at(&h.orch);
    h.world.slot = job.deadline_slot + 1;
    let atts: Vec<_> = (0..attested)
        .map(|i| h.attest(&job, i, h.providers[i].gpus * 1800))
        .collect();
    let slash: Vec<_> = h.providers[attested..]
        .iter()
        .filter_map(|p| p.bond.clone())
        .collect();
    let stakes: Vec<u64> = slash
        .iter()
        .map(|b| b.output.value.quantity_of(&h.dep.params.ntx))
        .collect();
    let draft = build::expire(
        &h.dep,
        h.env(),
        &ExpireRequest {
            escrow: job.escrow.clone(),
            attestations: atts,
            slash: slash.clone(),
            valid_from_slot: h.world.slot,
        },
    )
    .expect("expire draft");
    let orch = h.orch.clone();
    let b = h.run(draft, &orch, &[]).expect("expire applies");

    let mut paid = 0;
    for (i, p) in h.providers.iter().enumerate().take(attested) {
        let pay = pay_for(p.gpus * 1800, p.rate);
        assert_eq!(h.ntx_at(&p.party), before[i] + pay);
        paid += pay;
    }
    for (i, p) in h.providers.iter().enumerate().skip(attested) {
        assert_eq!(h.ntx_at(&p.party), before[i], "defaulter {i} paid nothing");
    }
    let slashed: u64 = stakes.iter().map(|s| h.dep.params.slash_amount(*s)).sum();
    assert_eq!(h.ntx_at(&h.orch), orch_before + budget - paid + slashed);
    // The slashed bonds continue with the rest of their stake.
    let outputs = b.outputs();
    for (k, stake) in stakes.iter().enumerate() {
        let kept = &outputs[attested + 1 + k];
        assert_eq!(kept.address, h.dep.address(h.env()));
        assert_eq!(
            kept.value.quantity_of(&h.dep.params.ntx),
            stake - h.dep.params.slash_amount(*stake)
        );
        assert_eq!(kept.datum, slash[k].output.datum);
    }
    assert_eq!(h.token_holders(&job), 0);
}

#[test]
fn expire_pays_attested_and_slashes_defaulters_with_1_provider() {
    // The single provider attests; `expire_with_a_single_defaulter_slashes_it` covers a default.
    expire_with_defaulters(1);
}

#[test]
fn expire_pays_attested_and_slashes_defaulters_with_4_providers() {
    expire_with_defaulters(4);
}

#[test]
fn expire_pays_attested_and_slashes_defaulters_with_8_providers() {
    expire_with_defaulters(8);
}

#[test]
fn expire_with_a_single_defaulter_slashes_it() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (mut job, _) = h.lock(100 * NTX, 600);
    h.assign(&mut job);
    let orch_before = h.ntx_at(&h.orch);
    h.world.slot = job.deadline_slot + 1;
    let bond = h.providers[0].bond.clone().expect("bond");
    let stake = bond.output.value.quantity_of(&h.dep.params.ntx);
    let draft = build::expire(
        &h.dep,
        h.env(),
        &ExpireRequest {
            escrow: job.escrow.clone(),
            attestations: vec![],
            slash: vec![bond],
            valid_from_slot: h.world.slot,
        },
    )
    .expect("expire draft");
    let orch = h.orch.clone();
    h.run(draft, &orch, &[]).expect("expire applies");
    assert_eq!(
        h.ntx_at(&h.orch),
        orch_before + 100 * NTX + h.dep.params.slash_amount(stake)
    );
}

#[test]
fn bond_unbond_withdraw() {
    let mut h = Harness::new(1);
    let p = h.providers[0].party.clone();
    let before = h.ntx_at(&p);
    h.post_bonds();
    let bond = h.providers[0].bond.clone().expect("bond");
    let stake = bond.output.value.quantity_of(&h.dep.params.ntx);
    assert_eq!(h.ntx_at(&p), before - stake);

    let until = h.world.slot + 60;
    let draft = build::unbond(&h.dep, h.env(), &bond, until).expect("unbond draft");
    let b = h.run(draft, &p, &[]).expect("unbond applies");
    let unbonding = h.output(&b, 0);
    match GanglionDatum::from_plutus_data(unbonding.output.datum.as_ref().expect("datum"))
        .expect("decodes")
    {
        GanglionDatum::Bond(d) => assert_eq!(
            d.unbonding_since_ms,
            Some(slot_to_posix_ms(&h.env().slot_config, until).expect("after zero"))
        ),
        GanglionDatum::Escrow(_) => panic!("not a bond"),
    }

    h.world.slot = until + h.dep.params.unbonding_delay_ms / 1000;
    let draft = build::withdraw(&h.dep, h.env(), &unbonding, h.world.slot).expect("withdraw draft");
    h.run(draft, &p, &[]).expect("withdraw applies");
    assert_eq!(h.ntx_at(&p), before, "stake returned");
    assert!(
        h.world
            .utxos
            .values()
            .all(|o| o.value.quantity(&h.dep.script.hash, &p.hash) == 0),
        "bond token burnt"
    );
}
