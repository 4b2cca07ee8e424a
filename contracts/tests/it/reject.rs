//! Reject paths: a valid transaction is built, shown to pass, then one rule is broken and
//! the real evaluator must reject it.

use ganglion_contracts::build::{self, ExpireRequest, job_tag};
use ganglion_contracts::datum::{EscrowDatum, GanglionDatum};
use ganglion_contracts::redeemer::{MintRedeemer, SpendRedeemer};
use ganglion_contracts::signed::{Acceptance, sign};
use ganglion_contracts::test_utils::world::Party;
use ganglion_contracts::tx::{Draft, Output, Value};

use ganglion_contracts::test_utils::harness::{Harness, Job, NTX, assert_script_fails};

/// `draft` passes the devnet ledger; `draft` after `mutate` is rejected by a validator.
#[track_caller]
fn passes_then_rejected(h: &Harness, payer: &Party, draft: Draft, mutate: impl FnOnce(&mut Draft)) {
    let mut broken = draft.clone();
    h.judge(draft, payer, &[])
        .expect("the unbroken transaction passes the ledger");
    mutate(&mut broken);
    assert_script_fails(h.balance(broken, payer));
}

fn assigned_job(n: usize) -> (Harness, Job) {
    let mut h = Harness::new(n);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    (h, job)
}

fn settle_draft(h: &Harness, job: &Job) -> Draft {
    build::settle(&h.dep, h.env(), &h.settle_request(job, 3600)).expect("settle draft")
}

fn escrow_datum(job: &Job) -> EscrowDatum {
    match GanglionDatum::from_plutus_data(job.escrow.output.datum.as_ref().expect("datum"))
        .expect("decodes")
    {
        GanglionDatum::Escrow(e) => e,
        GanglionDatum::Bond(_) => panic!("not an escrow"),
    }
}

fn ntx_delta(o: &mut Output, ntx: &ganglion_contracts::params::AssetClass, delta: i64) {
    let q = o.value.quantity_of(ntx) as i64 + delta;
    let names = o.value.assets.entry(ntx.policy).or_default();
    if q > 0 {
        names.insert(ntx.name.clone(), q as u64);
    } else {
        names.remove(&ntx.name);
    }
}

// ---- Assign -------------------------------------------------------------------------------

#[test]
fn assign_with_forged_acceptance_signature() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 3600);
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    let mut req = h.assign_request(&job);
    let forger = ed25519_dalek::SigningKey::from_bytes(&[0xee; 32]);
    let msg = Acceptance {
        job_id: job.id,
        gpus: req.assignments[1].gpus,
        rate: req.assignments[1].rate,
        deadline_ms: job.deadline_ms,
    }
    .signed_bytes();
    req.acceptances[1] = sign(&forger, &msg);
    let forged = build::assign(&h.dep, h.env(), &req).expect("draft");
    passes_then_rejected(&h, &h.orch, good, |d| *d = forged);
}

#[test]
fn assign_without_orchestrator_signature() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 3600);
    let draft = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    // A provider tries to assign the job to itself, paying the fee from its own wallet.
    let provider = h.providers[0].party.clone();
    h.judge(draft.clone(), &h.orch, &[])
        .expect("signed by the orchestrator, it passes");
    let mut unsigned = draft;
    unsigned.required_signers.clear();
    assert_script_fails(h.balance(unsigned, &provider));
}

#[test]
fn assign_hijacking_the_datum() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 3600);
    let draft = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    let attacker = Party::from_seed(h.env(), [0xaa; 32]);
    let mut e = escrow_datum(&job);
    passes_then_rejected(&h, &h.orch, draft, |d| {
        // Same assignments, but refunds would now go to the attacker.
        let GanglionDatum::Escrow(next) =
            GanglionDatum::from_plutus_data(d.outputs[0].datum.as_ref().expect("datum"))
                .expect("decodes")
        else {
            panic!("escrow")
        };
        e.state = next.state;
        e.orchestrator = attacker.hash;
        d.outputs[0].datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    });
}

#[test]
fn assign_stealing_the_thread_token() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 3600);
    let draft = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    let policy = h.dep.script.hash;
    passes_then_rejected(&h, &h.orch, draft, |d| {
        // The token leaves the escrow (the balancer sends it to the orchestrator's change).
        d.outputs[0].value.assets.remove(&policy);
    });
}

#[test]
fn assign_an_unbonding_provider() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 3600);
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    h.judge(good, &h.orch, &[])
        .expect("assign passes while bonded");
    let bond = h.providers[0].bond.clone().expect("bond");
    let until = h.world.slot + 10;
    let draft = build::unbond(&h.dep, h.env(), &bond, until).expect("unbond draft");
    let p = h.providers[0].party.clone();
    let b = h.run(draft, &p, &[]).expect("unbond applies");
    h.providers[0].bond = Some(h.output(&b, 0));
    let draft = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    assert_script_fails(h.balance(draft, &h.orch));
}

#[test]
fn assign_an_under_bonded_provider() {
    // The bond backs 2 GPUs; the job asks that provider for 4.
    let mut h = Harness::with_gpus(&[2]);
    h.post_bonds();
    let (job, _) = h.lock_gpus(2, 100 * NTX, 3600);
    let good = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    h.judge(good, &h.orch, &[])
        .expect("2 GPUs on a 2-GPU bond pass");
    let (job4, _) = h.lock_gpus(4, 100 * NTX, 3600);
    h.providers[0].gpus = 4;
    let draft = build::assign(&h.dep, h.env(), &h.assign_request(&job4)).expect("draft");
    assert_script_fails(h.balance(draft, &h.orch));
}

#[test]
fn assign_at_a_rate_above_max_rate() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 3600);
    h.providers[0].rate = 3 * NTX + 1; // max_rate is 3 NTX
    let draft = build::assign(&h.dep, h.env(), &h.assign_request(&job)).expect("draft");
    assert_script_fails(h.balance(draft, &h.orch));
}

// ---- Settle -------------------------------------------------------------------------------

#[test]
fn settle_with_an_attestation_replayed_from_another_job() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (mut a, _) = h.lock(100 * NTX, 7200);
    h.assign(&mut a);
    let (mut b, _) = h.lock(100 * NTX, 7200);
    h.assign(&mut b);
    h.world.slot += 3600;
    let good = settle_draft(&h, &b);
    let mut req = h.settle_request(&b, 3600);
    req.attestations[0] = h.attest_as(a.id, 0, 0, h.providers[0].gpus * 3600);
    let replayed = build::settle(&h.dep, h.env(), &req).expect("draft");
    passes_then_rejected(&h, &h.orch, good, |d| *d = replayed);
}

#[test]
fn settle_overclaiming_gpu_seconds() {
    let (h, job) = assigned_job(1);
    let good = settle_draft(&h, &job);
    let mut req = h.settle_request(&job, 3600);
    // 2 GPUs for at most ~3660 s: claim 3 hours.
    req.attestations[0] = h.attest(&job, 0, 2 * 3 * 3600);
    let over = build::settle(&h.dep, h.env(), &req).expect("draft");
    passes_then_rejected(&h, &h.orch, good, |d| *d = over);
}

#[test]
fn settle_paying_the_wrong_payee() {
    let (h, job) = assigned_job(2);
    let thief = Party::from_seed(h.env(), [0xbb; 32]);
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| {
        d.outputs[1].address = thief.address
    });
}

#[test]
fn settle_paying_the_wrong_amount() {
    let (h, job) = assigned_job(2);
    let ntx = h.dep.params.ntx.clone();
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| {
        ntx_delta(&mut d.outputs[0], &ntx, -1)
    });
}

#[test]
fn settle_with_an_untagged_payout() {
    let (h, job) = assigned_job(1);
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| {
        d.outputs[0].datum = None
    });
}

#[test]
fn settle_short_changing_the_refund() {
    let (h, job) = assigned_job(1);
    let ntx = h.dep.params.ntx.clone();
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| {
        ntx_delta(&mut d.outputs[1], &ntx, -1)
    });
}

#[test]
fn settle_two_escrows_with_one_payout_double_satisfaction() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (mut a, _) = h.lock(100 * NTX, 7200);
    h.assign(&mut a);
    let (mut b, _) = h.lock(100 * NTX, 7200);
    h.assign(&mut b);
    h.world.slot += 3600;
    let da = settle_draft(&h, &a);
    let db = settle_draft(&h, &b);
    passes_then_rejected(&h, &h.orch, da, |d| {
        // Spend B too and burn its token, but pay only A's outputs: B's NTX would go to change.
        for (r, v) in db.inputs {
            d.inputs.insert(r, v);
        }
        for (p, names) in db.mint {
            for (n, q) in names {
                d.mint.entry(p).or_default().insert(n, q);
            }
        }
    });
}

#[test]
fn settle_after_the_deadline() {
    let (h, job) = assigned_job(1);
    let mut late = h.settle_request(&job, 3600);
    late.valid_until_slot = job.deadline_slot + 1;
    let late = build::settle(&h.dep, h.env(), &late).expect("draft");
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| *d = late);
}

#[test]
fn settle_stealing_the_thread_token() {
    let (h, job) = assigned_job(1);
    let policy = h.dep.script.hash;
    let id = job.id;
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| {
        d.mint.clear();
        d.mint_redeemers.clear();
        d.outputs[1].value.add_asset(policy, &id.0, 1);
    });
}

#[test]
fn settle_with_a_missing_attestation() {
    let (h, job) = assigned_job(2);
    let mut req = h.settle_request(&job, 3600);
    req.attestations.pop();
    let short = build::settle(&h.dep, h.env(), &req).expect("draft");
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| *d = short);
}

// ---- Cancel and Expire --------------------------------------------------------------------

#[test]
fn cancel_without_orchestrator_signature() {
    let mut h = Harness::new(1);
    let (job, _) = h.lock(50 * NTX, 600);
    let draft = build::cancel(&h.dep, h.env(), &job.escrow).expect("draft");
    h.judge(draft.clone(), &h.orch, &[])
        .expect("signed cancel passes");
    let mut unsigned = draft;
    unsigned.required_signers.clear();
    let other = h.providers[0].party.clone();
    assert_script_fails(h.balance(unsigned, &other));
}

#[test]
fn cancel_after_assignment() {
    let (h, job) = assigned_job(1);
    // Hand-built: the builder refuses, the validator must refuse too.
    let e = escrow_datum(&job);
    let mut d = Draft::default();
    d.spend_script(job.escrow.clone(), SpendRedeemer::Cancel.to_plutus_data())
        .pay(
            Output::new(
                h.orch.address.clone(),
                Value::lovelace(job.escrow.output.value.lovelace)
                    .with_class(&h.dep.params.ntx, job.budget),
            )
            .with_datum(job_tag(&job.id)),
        )
        .mint(
            h.dep.script.hash,
            &job.id.0,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        )
        .reference(h.dep.reference.clone())
        .signer(e.orchestrator);
    assert_script_fails(h.balance(d, &h.orch));
    assert!(
        build::cancel(&h.dep, h.env(), &job.escrow).is_err(),
        "the builder refuses too"
    );
}

fn expire_request(h: &Harness, job: &Job, from: u64, slash: usize) -> ExpireRequest {
    ExpireRequest {
        escrow: job.escrow.clone(),
        attestations: vec![h.attest(job, 0, 100)],
        slash: h.providers[1..1 + slash]
            .iter()
            .filter_map(|p| p.bond.clone())
            .collect(),
        valid_from_slot: from,
    }
}

#[test]
fn expire_before_the_deadline() {
    let (mut h, job) = assigned_job(2);
    // The ledger judges at the current slot: the first slot after the deadline.
    h.world.slot = job.deadline_slot + 1;
    let good = build::expire(
        &h.dep,
        h.env(),
        &expire_request(&h, &job, job.deadline_slot + 1, 1),
    )
    .expect("draft");
    let early = build::expire(
        &h.dep,
        h.env(),
        &expire_request(&h, &job, job.deadline_slot, 1),
    )
    .expect("draft");
    passes_then_rejected(&h, &h.orch, good, |d| *d = early);
}

#[test]
fn expire_slashing_a_provider_that_attested() {
    let (mut h, job) = assigned_job(2);
    // The ledger judges at the current slot: the first slot after the deadline.
    h.world.slot = job.deadline_slot + 1;
    let good = build::expire(
        &h.dep,
        h.env(),
        &expire_request(&h, &job, job.deadline_slot + 1, 0),
    )
    .expect("draft");
    let mut bad = expire_request(&h, &job, job.deadline_slot + 1, 0);
    bad.slash = vec![h.providers[0].bond.clone().expect("bond")];
    let bad = build::expire(&h.dep, h.env(), &bad).expect("draft");
    passes_then_rejected(&h, &h.orch, good, |d| *d = bad);
}

#[test]
fn expire_slashing_more_than_the_share() {
    let (mut h, job) = assigned_job(2);
    // The ledger judges at the current slot: the first slot after the deadline.
    h.world.slot = job.deadline_slot + 1;
    let ntx = h.dep.params.ntx.clone();
    let good = build::expire(
        &h.dep,
        h.env(),
        &expire_request(&h, &job, job.deadline_slot + 1, 1),
    )
    .expect("draft");
    // outputs: [payout 0, refund, kept bond 1]: the kept bond loses one more unit.
    passes_then_rejected(&h, &h.orch, good, |d| {
        ntx_delta(&mut d.outputs[2], &ntx, -1)
    });
}

// ---- Bonds --------------------------------------------------------------------------------

#[test]
fn post_bond_below_the_minimum_stake() {
    let h = Harness::new(1);
    let p = &h.providers[0];
    let req = build::BondRequest {
        provider: p.party.hash,
        attest_key: p.attest_key(),
        peer_id: vec![1],
        gpus: 2,
        stake: h.dep.params.min_bond_per_gpu * 2,
    };
    let draft = build::post_bond(&h.dep, h.env(), &req).expect("draft");
    let ntx = h.dep.params.ntx.clone();
    passes_then_rejected(&h, &p.party, draft, |d| {
        ntx_delta(&mut d.outputs[0], &ntx, -1)
    });
}

#[test]
fn post_bond_for_someone_else() {
    let h = Harness::new(2);
    let (a, b) = (&h.providers[0], &h.providers[1]);
    let req = build::BondRequest {
        provider: b.party.hash,
        attest_key: a.attest_key(),
        peer_id: vec![1],
        gpus: 1,
        stake: h.dep.params.min_bond_per_gpu,
    };
    let mut draft = build::post_bond(&h.dep, h.env(), &req).expect("draft");
    draft.required_signers.clear();
    draft.signer(a.party.hash);
    assert_script_fails(h.balance(draft, &a.party));
}

#[test]
fn withdraw_before_the_unbonding_delay() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let p = h.providers[0].party.clone();
    let until = h.world.slot + 60;
    let draft = build::unbond(
        &h.dep,
        h.env(),
        &h.providers[0].bond.clone().expect("bond"),
        until,
    )
    .expect("draft");
    let b = h.run(draft, &p, &[]).expect("unbond applies");
    let unbonding = h.output(&b, 0);
    let ready = until + h.dep.params.unbonding_delay_ms / 1000;
    h.world.slot = ready;
    let good = build::withdraw(&h.dep, h.env(), &unbonding, ready).expect("draft");
    let early = build::withdraw(&h.dep, h.env(), &unbonding, ready - 1).expect("draft");
    passes_then_rejected(&h, &p, good, |d| *d = early);
}

#[test]
fn withdraw_a_bond_that_is_not_unbonding() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let bond = h.providers[0].bond.clone().expect("bond");
    assert!(
        build::withdraw(&h.dep, h.env(), &bond, h.world.slot).is_err(),
        "the builder refuses"
    );
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
        .validity(Some(h.world.slot), None);
    assert_script_fails(h.balance(d, &h.providers[0].party));
}

#[test]
fn slash_without_a_matching_expire() {
    let (h, job) = assigned_job(1);
    let bond = h.providers[0].bond.clone().expect("bond");
    let stake = bond.output.value.quantity_of(&h.dep.params.ntx);
    let mut kept = bond.output.clone();
    ntx_delta(
        &mut kept,
        &h.dep.params.ntx,
        -(h.dep.params.slash_amount(stake) as i64),
    );
    let mut d = Draft::default();
    d.spend_script(
        bond,
        SpendRedeemer::Slash { job_id: job.id }.to_plutus_data(),
    )
    .pay(kept)
    .reference(h.dep.reference.clone());
    assert_script_fails(h.balance(d, &h.orch));
}

#[test]
fn slash_alongside_a_settle() {
    let (h, job) = assigned_job(1);
    let bond = h.providers[0].bond.clone().expect("bond");
    let stake = bond.output.value.quantity_of(&h.dep.params.ntx);
    let ntx = h.dep.params.ntx.clone();
    let cut = h.dep.params.slash_amount(stake);
    passes_then_rejected(&h, &h.orch, settle_draft(&h, &job), |d| {
        let mut kept = bond.output.clone();
        ntx_delta(&mut kept, &ntx, -(cut as i64));
        d.spend_script(
            bond,
            SpendRedeemer::Slash { job_id: job.id }.to_plutus_data(),
        );
        ntx_delta(&mut d.outputs[1], &ntx, cut as i64);
        d.pay(kept);
    });
}

/// A valid lock of 10 NTX for 2 GPUs, not yet balanced.
fn lock_draft(h: &Harness) -> (Draft, ganglion_contracts::datum::JobId) {
    let seed = h
        .world
        .at(&h.orch.address)
        .into_iter()
        .next()
        .expect("funds");
    let req = build::LockRequest {
        orchestrator: h.orch.hash,
        spec: vec![1, 2, 3],
        gpus: 2,
        max_rate: NTX,
        budget: 10 * NTX,
        deadline_ms: h.world.now_ms() + 3_600_000,
        seed,
        valid_until_slot: h.world.slot + 100,
    };
    build::lock(&h.dep, h.env(), &req).expect("draft")
}

#[test]
fn lock_with_a_budget_that_is_not_in_the_escrow() {
    let h = Harness::new(1);
    let (draft, _) = lock_draft(&h);
    let ntx = h.dep.params.ntx.clone();
    passes_then_rejected(&h, &h.orch, draft, |d| {
        ntx_delta(&mut d.outputs[0], &ntx, -1)
    });
}

#[test]
fn lock_minting_two_thread_tokens() {
    let h = Harness::new(1);
    let (draft, id) = lock_draft(&h);
    let policy = h.dep.script.hash;
    passes_then_rejected(&h, &h.orch, draft, |d| {
        *d.mint
            .entry(policy)
            .or_default()
            .entry(id.0.to_vec())
            .or_default() += 1;
    });
}
