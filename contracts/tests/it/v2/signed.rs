//! Signed-message cross-checks: each v2 message signed off-chain (`v2::signed`) verifies
//! on-chain inside an accepted transaction, and a signature over the same bytes with one
//! byte changed (or a changed field) is refused.

use ganglion_contracts::test_utils::harness_v2::{Harness, receipt_message};
use ganglion_contracts::test_utils::{NTX, assert_script_fails};
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::signed::{sign, verify};

use super::{TWO_GPU_HOURS_MS, assigned};

fn flipped(msg: &[u8], at: usize) -> Vec<u8> {
    let mut m = msg.to_vec();
    m[at] ^= 0x01;
    m
}

fn positions(len: usize) -> [usize; 3] {
    [0, len / 2, len - 1]
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
