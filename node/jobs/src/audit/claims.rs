//! The audit of an escrow v2 job (DESIGN §3.1 G8, `docs/escrow-v2.md`): every claim's pay and
//! every slash re-derived from the chain's events and the signed messages they carry, each
//! check naming the rule behind it.
//!
//! Order: `status`, `spec_cid`, `spec_terms`, `assignment`, `budget`, then for each provider
//! `i` in assignment order `bond_key[i]`, `acceptance[i]`, and either its claim —
//! `attestation[i]`, `receipt[i]`, `claim_bound[i]`, `payment[i]`, `result_cid[i]`,
//! `logs_cid[i]` — or, unclaimed, `default[i]` (and `slash[i]` when the expire slashed it);
//! last `refund` once the escrow closed.
//!
//! The rules (the validator's, mirrored by `ganglion_contracts::v2::rules`):
//! - G1 `claim_bound`: `gpu_ms ≤ gpus × max(0, min(acknowledged + receipt_interval,
//!   lower_bound, until) − started_at)` over the assignment's own window (`started_at` the
//!   assign's or its rescale's lower bound, `until` the deadline or its release),
//!   `acknowledged` the receipt's time or the start;
//! - `payment`: `⌊gpu_ms × rate / 3 600 000⌋` to the assignment's whole payout address;
//! - G3 `default`: only an assigned provider with no claim by deadline + claim window;
//! - G4 `slash`: at most the assignment's own window value, the orchestrator recovering at most
//!   what it paid (`min(Σ slashes, paid)`), the rest burnt;
//! - G6 `budget`: at the assign and at each rescale, the budget left pays every unclaimed
//!   assignment for its own window;
//! - `refund`: the budget less every claim, plus the recovered slashes.

use ganglion_contracts::v2::datum::Assignment;
use ganglion_contracts::v2::redeemer::{Attestation, SignedReceipt};
use ganglion_contracts::v2::rules;
use ganglion_contracts::v2::signed::{self, Acceptance, AttestationBody, Receipt};
use ganglion_indexer::event::{ClaimOutcome, Event, ReceiptTerms, Slash};
use ganglion_indexer::{JobStatus, Record};

use super::checks::{
    check_artifact, check_assignment, check_bond_key, check_spec, check_spec_terms, fail, from,
    pass, trail,
};
use super::evidence::Evidence;
use super::{Check, Report};

/// One claim as its event says it.
struct Claim<'a> {
    gpu_ms: u64,
    paid: u64,
    payout: &'a ganglion_contracts::v2::payout::Payout,
    receipt: Option<&'a SignedReceipt>,
    lower_bound_ms: Option<u64>,
    attestation: &'a Attestation,
    record: &'a Record,
}

/// The expire, as its event says it.
struct Expiry<'a> {
    slashes: &'a [Slash],
    recovered: u64,
    burnt: u64,
    refund: u64,
    record: &'a Record,
}

fn claim_of(e: &Evidence, index: usize) -> Option<Claim<'_>> {
    e.job.history.iter().find_map(|r| match &r.event {
        Event::JobClaimed {
            index: i,
            gpu_ms,
            paid,
            payout,
            receipt,
            lower_bound_ms,
            attestation,
            ..
        } if *i == index as u64 => Some(Claim {
            gpu_ms: *gpu_ms,
            paid: *paid,
            payout,
            receipt: receipt.as_ref(),
            lower_bound_ms: *lower_bound_ms,
            attestation,
            record: r,
        }),
        _ => None,
    })
}

fn expiry(e: &Evidence) -> Option<Expiry<'_>> {
    e.job.history.iter().find_map(|r| match &r.event {
        Event::JobExpired {
            slashes,
            recovered,
            burnt,
            refund,
            ..
        } => Some(Expiry {
            slashes,
            recovered: *recovered,
            burnt: *burnt,
            refund: *refund,
            record: r,
        }),
        _ => None,
    })
}

/// The refund of the last claim, if the escrow closed by claims.
fn closing_refund(e: &Evidence) -> Option<(u64, &Record)> {
    e.job.history.iter().find_map(|r| match &r.event {
        Event::JobClaimed {
            outcome: ClaimOutcome::Closed { refund },
            ..
        } => Some((*refund, r)),
        _ => None,
    })
}

fn check_status(e: &Evidence) -> Check {
    let last = e.job.history.last().map(|r| r.meta);
    let at = last
        .map(|m| format!(" (tx {} at slot {})", hex::encode(m.tx_hash), m.slot))
        .unwrap_or_default();
    match e.job.status {
        JobStatus::Claimed | JobStatus::Expired => {
            pass("status", format!("{:?}{at}", e.job.status))
        }
        s => fail(
            "status",
            format!("the job is {s:?}: nothing to verify before every claim is in or it expired"),
        ),
    }
}

/// G6 replayed as the validator ran it: at the assign, and at each rescale of a service, the
/// budget left (budget − Σ pay so far) pays every assignment not yet claimed for its own
/// window (`until − started_at`, releases applied).
fn check_budget(e: &Evidence) -> Check {
    let name = "budget";
    let (mut assignments, mut claimed, mut paid) = (Vec::<Assignment>::new(), Vec::new(), 0u64);
    let mut held = Vec::new();
    for r in &e.job.history {
        let at = format!("tx {} at slot {}", hex::encode(r.meta.tx_hash), r.meta.slot);
        match &r.event {
            Event::JobAssigned { .. } | Event::JobRescaled { .. } => {
                apply_change(&mut assignments, &r.event);
            }
            Event::JobClaimed { index, paid: p, .. } => {
                claimed.push(*index);
                paid = paid.saturating_add(*p);
                continue;
            }
            _ => continue,
        }
        let need: u128 = (assignments.iter().enumerate())
            .filter(|(i, _)| !claimed.contains(&(*i as u64)))
            .map(|(_, a)| rules::assignment_value(a))
            .sum();
        if !rules::budget_covers_left(&assignments, &claimed, e.job.budget, paid) {
            return fail(
                name,
                format!(
                    "not: at {at} the budget left {} NTX base units does not pay the unclaimed \
                     assignments for their windows (Σ gpus × rate × (until − start) / 3 600 000 = {need})",
                    e.job.budget.saturating_sub(paid)
                ),
            );
        }
        held.push(format!(
            "{need} ≤ {} at {at}",
            e.job.budget.saturating_sub(paid)
        ));
    }
    if held.is_empty() {
        return fail(name, "no assign transaction on chain");
    }
    pass(
        name,
        format!(
            "G6: the budget left pays every unclaimed assignment for its own window at the assign \
             and each rescale: {}",
            held.join("; ")
        ),
    )
}

/// The assignments as the chain's events leave them: the assign's, each rescale's releases
/// applied and its added providers appended (re-derived here, not read from the view).
fn assignments(e: &Evidence) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = Vec::new();
    for r in &e.job.history {
        apply_change(&mut out, &r.event);
    }
    out
}

/// `event`'s change to the assignments, if it is an assign or a rescale.
fn apply_change(assignments: &mut Vec<Assignment>, event: &Event) {
    match event {
        Event::JobAssigned { assignments: a, .. } => *assignments = a.clone(),
        Event::JobRescaled {
            added, released, ..
        } => {
            for rel in released {
                if let Some(a) = usize::try_from(rel.index)
                    .ok()
                    .and_then(|i| assignments.get_mut(i))
                {
                    a.until_ms = rel.until_ms;
                }
            }
            assignments.extend(added.iter().cloned());
        }
        _ => {}
    }
}

/// The acceptance signatures of every assignment in order: the assign's, then each rescale's
/// for the providers it added.
fn acceptances(e: &Evidence) -> Vec<&Vec<u8>> {
    let mut out = Vec::new();
    for r in &e.job.history {
        match &r.event {
            Event::JobAssigned { acceptances, .. } | Event::JobRescaled { acceptances, .. } => {
                out.extend(acceptances.iter());
            }
            _ => {}
        }
    }
    out
}

fn check_acceptance(
    e: &Evidence,
    terms: &ReceiptTerms,
    i: usize,
    a: &Assignment,
    sig: Option<&Vec<u8>>,
) -> Check {
    let name = format!("acceptance[{i}]");
    let Some(sig) = sig else {
        return fail(name, "no acceptance signature on chain");
    };
    let msg = Acceptance {
        job_id: e.job.job_id,
        spec: e.job.spec.clone(),
        gpus: a.gpus,
        rate: a.rate,
        deadline_ms: e.job.deadline_ms,
        accept_by_ms: a.accept_by_ms,
        receipt_interval_ms: terms.interval_ms,
    };
    from(
        name,
        signed::verify(&a.attest_key, &msg.signed_bytes(), sig)
            .map(|()| {
                format!(
                    "{} GPUs at {} NTX base units per GPU-hour for this spec, accept-by {} ms, receipts every {} ms, \
                     signed by the attest key",
                    a.gpus, a.rate, a.accept_by_ms, terms.interval_ms
                )
            })
            .map_err(|err| err.to_string()),
    )
}

fn check_attestation(e: &Evidence, i: usize, a: &Assignment, c: &Claim<'_>) -> Check {
    let body = AttestationBody {
        job_id: e.job.job_id,
        provider: a.provider,
        result: c.attestation.result.clone(),
        logs: c.attestation.logs.clone(),
        gpu_ms: c.attestation.gpu_ms,
        exit_code: c.attestation.exit_code,
    };
    from(
        format!("attestation[{i}]"),
        signed::verify(
            &a.attest_key,
            &body.signed_bytes(),
            &c.attestation.signature,
        )
        .map(|()| {
            format!(
                "{} GPU-ms, exit {}, signed by the attest key (claim tx {})",
                c.gpu_ms,
                c.attestation.exit_code,
                hex::encode(c.record.meta.tx_hash)
            )
        })
        .map_err(|err| err.to_string()),
    )
}

fn check_receipt(e: &Evidence, terms: &ReceiptTerms, i: usize, c: &Claim<'_>) -> Check {
    let name = format!("receipt[{i}]");
    let Some(r) = c.receipt else {
        return pass(
            name,
            "no receipt: the claim counts at most one interval from the start (G1, G2)",
        );
    };
    let msg = Receipt {
        job_id: e.job.job_id,
        provider_index: i as u64,
        acknowledged_until_ms: r.acknowledged_until_ms,
    };
    from(
        name,
        signed::verify(&terms.key, &msg.signed_bytes(), &r.signature)
            .map(|()| {
                format!(
                    "acknowledged until {} ms, signed by the escrow's receipt key",
                    r.acknowledged_until_ms
                )
            })
            .map_err(|err| format!("not by the escrow's receipt key: {err}")),
    )
}

fn check_claim_bound(
    e: &Evidence,
    terms: &ReceiptTerms,
    i: usize,
    a: &Assignment,
    c: &Claim<'_>,
) -> Check {
    let name = format!("claim_bound[{i}]");
    let acknowledged = c.receipt.map(|r| r.acknowledged_until_ms);
    // Without the claim's lower bound (a watch without the slot clock) only the receipt and
    // the window's end bound it here; the validator checked the elapsed time when it ran.
    let lower = c.lower_bound_ms.unwrap_or(u64::MAX);
    let bound = rules::assignment_bound_gpu_ms(a, terms.interval_ms, acknowledged, lower);
    let elapsed = c
        .lower_bound_ms
        .map(|l| format!("lower bound {l} ms"))
        .unwrap_or_else(|| "lower bound not known here".into());
    let end = if a.until_ms < e.job.deadline_ms {
        format!("released until {}", a.until_ms)
    } else {
        format!("deadline {}", a.until_ms)
    };
    let detail = format!(
        "G1: {} GPU-ms ≤ {} GPUs × (min(acknowledged {} + interval {}, {elapsed}, {end}) \
         − start {}) = {bound}",
        c.gpu_ms,
        a.gpus,
        acknowledged.unwrap_or(a.started_at_ms),
        terms.interval_ms,
        a.started_at_ms
    );
    if c.gpu_ms <= bound {
        pass(name, detail)
    } else {
        fail(name, format!("not: {detail}"))
    }
}

fn check_payment(i: usize, a: &Assignment, c: &Claim<'_>) -> Check {
    let name = format!("payment[{i}]");
    let due = rules::pay_for(c.gpu_ms, a.rate);
    if *c.payout != a.payout {
        return fail(
            name,
            format!(
                "paid to {:?}, the assignment's payout is {:?}",
                c.payout, a.payout
            ),
        );
    }
    let detail = format!(
        "{} NTX base units = ⌊{} GPU-ms × {} / 3 600 000⌋ to the assignment's payout",
        c.paid, c.gpu_ms, a.rate
    );
    if c.paid == due {
        pass(name, detail)
    } else {
        fail(name, format!("paid {}; the rule gives {due}", c.paid))
    }
}

fn check_default(e: &Evidence, x: Option<&Expiry<'_>>, i: usize, a: &Assignment) -> Vec<Check> {
    let name = format!("default[{i}]");
    let Some(x) = x else {
        let end = e.job.claim_window_end_ms;
        return vec![fail(
            name,
            format!("no claim yet and the job has not expired (claims close at {end} ms)"),
        )];
    };
    let mut out = vec![pass(
        name,
        format!(
            "G3: no claim by deadline + claim window; expired in tx {} at slot {}",
            hex::encode(x.record.meta.tx_hash),
            x.record.meta.slot
        ),
    )];
    if let Some(s) = x.slashes.iter().find(|s| s.index == i as u64) {
        let value = rules::assignment_value(a);
        let detail = format!(
            "G4: {} NTX base units from {}'s bond ≤ its assignment's window value {value}",
            s.amount,
            hex::encode(s.provider)
        );
        out.push(
            if u128::from(s.amount) <= value && s.provider == a.provider {
                pass(format!("slash[{i}]"), detail)
            } else {
                fail(format!("slash[{i}]"), format!("not: {detail}"))
            },
        );
    }
    out
}

fn check_refund(e: &Evidence, x: Option<&Expiry<'_>>) -> Option<Check> {
    let name = "refund";
    let paid: u64 = e.job.claims.iter().flatten().map(|c| c.paid).sum();
    let Some(rest) = e.job.budget.checked_sub(paid) else {
        return Some(fail(
            name,
            format!(
                "Σpay {paid} NTX base units exceeds the budget {}",
                e.job.budget
            ),
        ));
    };
    if let Some(x) = x {
        let slashed: u64 = x.slashes.iter().map(|s| s.amount).sum();
        let (recover, burn) = rules::split_slashes(slashed, paid);
        let detail = format!(
            "G4: refund {} NTX base units = budget {} − Σpay {paid} + recovered {}; of Σslashes {slashed} \
             the orchestrator recovers min(Σslashes, Σpay) = {recover}, {burn} burnt",
            x.refund, e.job.budget, x.recovered
        );
        let ok = x.refund == rest + x.recovered && x.recovered == recover && x.burnt == burn;
        return Some(if ok {
            pass(name, detail)
        } else {
            fail(name, format!("not: {detail} (burnt {})", x.burnt))
        });
    }
    let (refund, _) = closing_refund(e)?;
    let detail = format!(
        "refund {refund} NTX base units = budget {} − Σpay {paid} = {rest} (the last claim)",
        e.job.budget
    );
    Some(if refund == rest {
        pass(name, detail)
    } else {
        fail(name, format!("not: {detail}"))
    })
}

/// Runs every check of a v2 job (`terms`: its receipt key and interval, from the lock).
pub(super) fn check(e: &Evidence, terms: &ReceiptTerms) -> Report {
    let t = trail(e);
    let x = expiry(e);
    let mut checks = vec![check_status(e)];
    let (spec, content) = check_spec(e);
    checks.push(spec);
    checks.push(check_spec_terms(e, content.as_deref()));
    checks.push(check_assignment(e, &t));
    checks.push(check_budget(e));
    if t.assigned.is_some() {
        // Every assignment as the escrow ends with it: the assign's, then those rescales
        // added, each with its own window (releases applied).
        let acceptances = acceptances(e);
        for (i, a) in assignments(e).iter().enumerate() {
            checks.push(check_bond_key(e, i, a));
            checks.push(check_acceptance(
                e,
                terms,
                i,
                a,
                acceptances.get(i).copied(),
            ));
            match claim_of(e, i) {
                Some(c) => {
                    checks.push(check_attestation(e, i, a, &c));
                    checks.push(check_receipt(e, terms, i, &c));
                    checks.push(check_claim_bound(e, terms, i, a, &c));
                    checks.push(check_payment(i, a, &c));
                    checks.push(check_artifact(
                        e,
                        format!("result_cid[{i}]"),
                        &c.attestation.result,
                    ));
                    checks.push(check_artifact(
                        e,
                        format!("logs_cid[{i}]"),
                        &c.attestation.logs,
                    ));
                    checks.extend(super::usage::check(
                        e,
                        terms,
                        i,
                        &c.attestation.logs,
                        c.paid,
                        c.receipt.map(|r| r.acknowledged_until_ms),
                    ));
                }
                None => checks.extend(check_default(e, x.as_ref(), i, a)),
            }
        }
    }
    checks.extend(check_refund(e, x.as_ref()));
    Report {
        job_id: hex::encode(e.job.job_id.0),
        pass: checks.iter().all(|c| c.pass),
        checks,
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
