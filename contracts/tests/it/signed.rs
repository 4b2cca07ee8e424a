//! The signed messages: off-chain bytes = on-chain `serialiseData`, signed off-chain,
//! verified on-chain.

use ganglion_contracts::build;
use ganglion_contracts::data::to_cbor;
use ganglion_contracts::datum::JobId;
use ganglion_contracts::signed::{Acceptance, AttestationBody, sign, verify};
use uplc::Fragment;
use uplc::ast::{Constant, DeBruijn, Name, Program, Term};
use uplc::builtins::DefaultFunction;
use uplc::machine::cost_model::ExBudget;

use ganglion_contracts::test_utils::harness::{Harness, NTX, assert_script_fails};

/// Runs the Plutus builtin `serialiseData` on `cbor` (decoded by uplc) and returns its bytes.
fn serialise_data_on_chain(cbor: &[u8]) -> Vec<u8> {
    let data = uplc::PlutusData::decode_fragment(cbor).expect("uplc decodes our data");
    let term: Term<Name> = Term::Apply {
        function: Term::Builtin(DefaultFunction::SerialiseData).into(),
        argument: Term::Constant(Constant::Data(data).into()).into(),
    };
    let program: Program<Name> = Program {
        version: (1, 1, 0),
        term,
    };
    let program: Program<DeBruijn> = program.try_into().expect("debruijn");
    let result = program.eval(ExBudget::max());
    match result.result().expect("evaluates") {
        Term::Constant(c) => match c.as_ref() {
            Constant::ByteString(b) => b.clone(),
            other => panic!("unexpected constant {other:?}"),
        },
        other => panic!("unexpected term {other:?}"),
    }
}

#[test]
fn signed_bytes_equal_the_builtin_serialise_data() {
    let acceptance = Acceptance {
        job_id: JobId([7; 32]),
        gpus: 4,
        rate: u64::MAX,
        deadline_ms: 1_767_225_600_000,
    };
    let bytes = acceptance.signed_bytes();
    assert_eq!(serialise_data_on_chain(&bytes), bytes);
    let body = AttestationBody {
        job_id: JobId([8; 32]),
        provider: [9; 28],
        // a CID longer than 64 bytes exercises bytestring chunking
        result: vec![0xab; 70],
        logs: vec![],
        gpu_seconds: 3600 * 8,
        exit_code: -9,
    };
    let bytes = body.signed_bytes();
    assert_eq!(serialise_data_on_chain(&bytes), bytes);
    let seed = ganglion_contracts::tx::TxoRef {
        tx_hash: [3; 32],
        index: 300,
    };
    let seed_cbor = to_cbor(&seed.to_plutus_data());
    assert_eq!(serialise_data_on_chain(&seed_cbor), seed_cbor);
}

#[test]
fn off_chain_signature_verifies_off_chain_and_on_chain() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (mut job, _) = h.lock(10 * NTX, 3600);
    let req = h.assign_request(&job);
    // Off-chain: the acceptance verifies with the provider's attest key.
    let msg = Acceptance {
        job_id: job.id,
        gpus: req.assignments[0].gpus,
        rate: req.assignments[0].rate,
        deadline_ms: job.deadline_ms,
    }
    .signed_bytes();
    verify(&req.assignments[0].attest_key, &msg, &req.acceptances[0]).expect("verifies off-chain");
    // On-chain: the validator accepts the same signature.
    let draft = build::assign(&h.dep, h.env(), &req).expect("draft");
    let orch = h.orch.clone();
    let b = h
        .run(draft, &orch, &[])
        .expect("validator verifies the signature");
    job.escrow = h.output(&b, 0);

    // The attestation too: signed off-chain, verified on-chain by Settle.
    let att = h.attest(&job, 0, 100);
    let body = AttestationBody {
        job_id: job.id,
        provider: h.providers[0].party.hash,
        result: att.result.clone(),
        logs: att.logs.clone(),
        gpu_seconds: att.gpu_seconds,
        exit_code: att.exit_code,
    };
    verify(
        &h.providers[0].attest_key(),
        &body.signed_bytes(),
        &att.signature,
    )
    .expect("verifies off-chain");
    h.world.slot += 3;
    let mut req = h.settle_request(&job, 0);
    req.attestations = vec![att];
    let draft = build::settle(&h.dep, h.env(), &req).expect("settle draft");
    h.run(draft, &orch, &[])
        .expect("validator verifies the attestation");
}

#[test]
fn a_signature_over_other_bytes_fails_on_chain() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (job, _) = h.lock(10 * NTX, 3600);
    let mut req = h.assign_request(&job);
    // Signed over a different rate than the one assigned.
    let msg = Acceptance {
        job_id: job.id,
        gpus: req.assignments[0].gpus,
        rate: req.assignments[0].rate + 1,
        deadline_ms: job.deadline_ms,
    }
    .signed_bytes();
    req.acceptances[0] = sign(&h.providers[0].attest, &msg);
    let draft = build::assign(&h.dep, h.env(), &req).expect("draft");
    assert_script_fails(h.balance(draft, &h.orch));
}
