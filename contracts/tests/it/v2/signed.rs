//! Signed-message cross-checks: each v2 message's off-chain bytes equal the builtin
//! `serialiseData` of its PlutusData, each signed off-chain (`v2::signed`) verifies
//! on-chain inside an accepted transaction, and a signature over the same bytes with one
//! byte changed (or a changed field) is refused.

use ganglion_contracts::data::to_cbor;
use ganglion_contracts::test_utils::harness_v2::{Harness, receipt_message};
use ganglion_contracts::test_utils::{NTX, assert_script_fails};
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::signed::{Acceptance, AttestationBody, Receipt, sign, verify};
use uplc::Fragment;
use uplc::ast::{Constant, DeBruijn, Name, Program, Term};
use uplc::builtins::DefaultFunction;
use uplc::machine::cost_model::ExBudget;

use super::{TWO_GPU_HOURS_MS, assigned};

fn flipped(msg: &[u8], at: usize) -> Vec<u8> {
    let mut m = msg.to_vec();
    m[at] ^= 0x01;
    m
}

fn positions(len: usize) -> [usize; 3] {
    [0, len / 2, len - 1]
}

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
        // a CID longer than 64 bytes exercises bytestring chunking
        spec: vec![0x01; 70],
        gpus: 4,
        rate: u64::MAX,
        deadline_ms: 1_767_225_600_000,
        accept_by_ms: 1_767_225_000_000,
        receipt_interval_ms: 60_000,
    };
    let bytes = acceptance.signed_bytes();
    assert_eq!(serialise_data_on_chain(&bytes), bytes);
    let receipt = Receipt {
        job_id: JobId([9; 32]),
        provider_index: 300,
        acknowledged_until_ms: u64::MAX,
    };
    let bytes = receipt.signed_bytes();
    assert_eq!(serialise_data_on_chain(&bytes), bytes);
    let body = AttestationBody {
        job_id: JobId([8; 32]),
        provider: [9; 28],
        result: vec![0xab; 70],
        logs: vec![],
        gpu_ms: 3_600_000 * 8,
        exit_code: -9,
    };
    let bytes = body.signed_bytes();
    assert_eq!(serialise_data_on_chain(&bytes), bytes);
    // The job id is the hash of the seed's serialised data: the same bytes on-chain.
    let seed = ganglion_contracts::tx::TxoRef {
        tx_hash: [3; 32],
        index: 300,
    };
    let seed_cbor = to_cbor(&seed.to_plutus_data());
    assert_eq!(serialise_data_on_chain(&seed_cbor), seed_cbor);
}

#[test]
fn acceptance_signed_off_chain_verifies_on_chain() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (job, _) = h.lock(1_000 * NTX, 7200);
    let orch = h.orch.clone();
    let req = h.assign_request(&job);
    let accept_by = req.assignments[1].accept_by_ms;
    let msg = h.acceptance_message(&job, 1, accept_by);
    let bytes = msg.signed_bytes();
    verify(&h.providers[1].attest_key(), &bytes, &req.acceptances[1]).expect("verifies");
    h.judge(
        build::assign(&h.dep, h.env(), &req).expect("draft"),
        &orch,
        &[],
    )
    .expect("the assign carrying it passes");
    let refused = |signature: Vec<u8>| {
        let mut bad = req.clone();
        bad.acceptances[1] = signature;
        assert_script_fails(h.balance(build::assign(&h.dep, h.env(), &bad).expect("draft"), &orch));
    };
    for at in positions(bytes.len()) {
        refused(sign(&h.providers[1].attest, &flipped(&bytes, at)));
    }
    // The genuine signature with one byte changed.
    refused(flipped(&req.acceptances[1], 10));
    // The acceptance binds the spec and the receipt interval.
    let mut other_spec = msg.clone();
    other_spec.spec[5] ^= 1;
    refused(sign(&h.providers[1].attest, &other_spec.signed_bytes()));
    let mut other_interval = msg;
    other_interval.receipt_interval_ms += 1;
    refused(sign(&h.providers[1].attest, &other_interval.signed_bytes()));
}

#[test]
fn receipt_signed_off_chain_verifies_on_chain() {
    let (h, job) = assigned(2);
    let now = h.world.now_ms();
    let p = h.providers[0].party.clone();
    let req = h.claim_request(&job, 0, 0, TWO_GPU_HOURS_MS, Some(now));
    let bytes = receipt_message(job.id, 0, now);
    let receipt = req.receipt.clone().expect("receipt");
    verify(
        &h.receipt.verifying_key().to_bytes(),
        &bytes,
        &receipt.signature,
    )
    .expect("verifies");
    h.judge(build::claim(&h.dep, h.env(), &req).expect("draft"), &p, &[])
        .expect("the claim carrying it passes");
    for at in positions(bytes.len()) {
        let mut bad = req.clone();
        bad.receipt.as_mut().expect("receipt").signature = sign(&h.receipt, &flipped(&bytes, at));
        assert_script_fails(h.balance(build::claim(&h.dep, h.env(), &bad).expect("draft"), &p));
    }
    let mut bad = req.clone();
    bad.receipt.as_mut().expect("receipt").signature = flipped(&receipt.signature, 10);
    assert_script_fails(h.balance(build::claim(&h.dep, h.env(), &bad).expect("draft"), &p));
}

#[test]
fn attestation_signed_off_chain_verifies_on_chain() {
    let (h, job) = assigned(2);
    let now = h.world.now_ms();
    let p = h.providers[1].party.clone();
    let req = h.claim_request(&job, 1, 1, TWO_GPU_HOURS_MS, Some(now));
    let bytes = h
        .attestation_body(job.id, 1, TWO_GPU_HOURS_MS)
        .signed_bytes();
    verify(
        &h.providers[1].attest_key(),
        &bytes,
        &req.attestation.signature,
    )
    .expect("verifies");
    h.judge(build::claim(&h.dep, h.env(), &req).expect("draft"), &p, &[])
        .expect("the claim carrying it passes");
    for at in positions(bytes.len()) {
        let mut bad = req.clone();
        bad.attestation.signature = sign(&h.providers[1].attest, &flipped(&bytes, at));
        assert_script_fails(h.balance(build::claim(&h.dep, h.env(), &bad).expect("draft"), &p));
    }
    let mut bad = req.clone();
    bad.attestation.signature = flipped(&req.attestation.signature, 10);
    assert_script_fails(h.balance(build::claim(&h.dep, h.env(), &bad).expect("draft"), &p));
    // Provider 0's attestation does not claim provider 1's assignment.
    let mut other = req.clone();
    other.attestation = h.attest(&job, 0, TWO_GPU_HOURS_MS);
    assert_script_fails(h.balance(build::claim(&h.dep, h.env(), &other).expect("draft"), &p));
}
