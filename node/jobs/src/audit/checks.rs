//! The checks of an audit, pure over [`Evidence`]. Each yields one named entry of the
//! report; the order is fixed: `status`, `spec_cid`, `spec_terms`, `assignment`, then for
//! each provider `i` in assignment order `bond_key[i]`, `acceptance[i]`, `attestation[i]`,
//! `gpu_seconds[i]`, `result_cid[i]`, `logs_cid[i]`, `payment[i]`, and last `refund`.
//!
//! The rules are the escrow validator's (DESIGN §3, `contracts/aiken/validators`):
//! acceptances and attestations are ed25519 signatures by the bond's `attest_key` over the
//! PlutusData bytes of [`Acceptance`] / [`AttestationBody`]; `Σgpus = gpus`, `rate ≤
//! max_rate`; `pay_i = gpu_seconds_i × rate_i / 3600` ([`pay_for`]); `Σpay ≤ budget`; a settle
//! refunds exactly the rest, an expire at least the rest (slashes go to the orchestrator too).

use cid::Cid;
use ganglion_contracts::build::pay_for;
use ganglion_contracts::redeemer::Attestation;
use ganglion_contracts::signed::{self, Acceptance, AttestationBody};
use ganglion_contracts::v2::datum::Assignment;
use ganglion_indexer::event::{Event, Payment};
use ganglion_indexer::{JobStatus, Record};

use super::dag;
use super::evidence::Evidence;
use super::{Check, Report};

pub(super) fn pass(name: impl Into<String>, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        pass: true,
        detail: detail.into(),
    }
}

pub(super) fn fail(name: impl Into<String>, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        pass: false,
        detail: detail.into(),
    }
}

pub(super) fn from(name: String, r: Result<String, String>) -> Check {
    match r {
        Ok(d) => pass(name, d),
        Err(d) => fail(name, d),
    }
}

/// The lock's terms, the assignment and the end of the job, as the events say.
pub(super) struct Trail<'a> {
    pub(super) max_rate: Option<u64>,
    pub(super) assigned: Option<Assigned<'a>>,
    end: Option<End<'a>>,
}

/// The assign event: assignments, start (POSIX ms), acceptance signatures, where.
pub(super) type Assigned<'a> = (&'a [Assignment], u64, &'a [Vec<u8>], &'a Record);

struct End<'a> {
    kind: &'static str,
    attestations: &'a [Attestation],
    payments: &'a [Payment],
    refund: u64,
    defaulters: &'a [[u8; 28]],
    record: &'a Record,
}

pub(super) fn trail(e: &Evidence) -> Trail<'_> {
    let mut t = Trail {
        max_rate: None,
        assigned: None,
        end: None,
    };
    for r in &e.job.history {
        match &r.event {
            Event::JobLocked { max_rate, .. } => t.max_rate = Some(*max_rate),
            Event::JobAssigned {
                assignments,
                started_at_ms,
                acceptances,
                ..
            } => t.assigned = Some((assignments, *started_at_ms, acceptances, r)),
            Event::JobSettled {
                attestations,
                payments,
                refund,
                ..
            } => {
                t.end = Some(End {
                    kind: "settle",
                    attestations,
                    payments,
                    refund: *refund,
                    defaulters: &[],
                    record: r,
                })
            }
            Event::JobExpired {
                attestations,
                payments,
                refund,
                defaulters,
                ..
            } => {
                t.end = Some(End {
                    kind: "expire",
                    attestations,
                    payments,
                    refund: *refund,
                    defaulters,
                    record: r,
                })
            }
            _ => {}
        }
    }
    t
}

fn check_status(e: &Evidence, t: &Trail<'_>) -> Check {
    match (e.job.status, &t.end) {
        (JobStatus::Settled | JobStatus::Expired, Some(end)) => pass(
            "status",
            format!(
                "{:?} by {} tx {} at slot {}",
                e.job.status,
                end.kind,
                hex::encode(end.record.meta.tx_hash),
                end.record.meta.slot
            ),
        ),
        (s, _) => fail(
            "status",
            format!("the job is {s:?}: nothing to verify before it is settled or expired"),
        ),
    }
}

pub(super) fn check_spec(e: &Evidence) -> (Check, Option<Vec<u8>>) {
    let name = "spec_cid";
    let Ok(root) = Cid::try_from(e.job.spec.as_slice()) else {
        return (
            fail(
                name,
                format!(
                    "the escrow's spec 0x{} is not a CID",
                    hex::encode(&e.job.spec)
                ),
            ),
            None,
        );
    };
    let fetch = e
        .fetch_errors
        .get(&root.to_string())
        .map(|f| format!(" (fetch: {f})"))
        .unwrap_or_default();
    if let Err(why) = dag::verify_dag(&e.blocks, &root) {
        return (fail(name, format!("spec {root}: {why}{fetch}")), None);
    }
    match dag::reimport_file(&e.blocks, &root) {
        Ok((content, again)) if again == root => (
            pass(name, format!("{} bytes re-hash to {root}", content.len())),
            Some(content),
        ),
        Ok((content, again)) => (
            fail(
                name,
                format!(
                    "{} bytes re-hash to {again}, the escrow says {root}",
                    content.len()
                ),
            ),
            None,
        ),
        Err(why) => (fail(name, format!("spec {root}: {why}")), None),
    }
}

pub(super) fn check_spec_terms(e: &Evidence, content: Option<&[u8]>) -> Check {
    let name = "spec_terms";
    let Some(content) = content else {
        return fail(name, "the spec could not be read (see spec_cid)");
    };
    let text = String::from_utf8_lossy(content);
    match ganglion_market::spec::Ensemble::from_json_str(&text) {
        Err(err) => fail(name, format!("the spec does not parse: {err}")),
        Ok(spec) => {
            let ours = (
                u64::from(spec.gpus.count),
                spec.budget_ntx,
                spec.deadline_ms,
            );
            let chain = (e.job.gpus, e.job.budget, e.job.deadline_ms);
            if ours == chain {
                pass(
                    name,
                    format!(
                        "gpus {}, budget {} NTX, deadline {} ms agree with the escrow",
                        chain.0, chain.1, chain.2
                    ),
                )
            } else {
                fail(
                    name,
                    format!("spec (gpus, budget, deadline) {ours:?} ≠ escrow {chain:?}"),
                )
            }
        }
    }
}

pub(super) fn check_assignment(e: &Evidence, t: &Trail<'_>) -> Check {
    let name = "assignment";
    let Some((assignments, started, acceptances, rec)) = t.assigned else {
        return fail(name, "no assign transaction on chain");
    };
    let total: u64 = assignments.iter().map(|a| a.gpus).sum();
    if total != e.job.gpus {
        return fail(
            name,
            format!("Σgpus {total} ≠ the {} GPUs locked", e.job.gpus),
        );
    }
    if let Some(max) = t.max_rate
        && let Some(a) = assignments.iter().find(|a| a.rate > max)
    {
        return fail(
            name,
            format!(
                "{} at rate {} > max_rate {max}",
                hex::encode(a.provider),
                a.rate
            ),
        );
    }
    if acceptances.len() != assignments.len() {
        return fail(
            name,
            format!(
                "{} acceptances for {} assignments",
                acceptances.len(),
                assignments.len()
            ),
        );
    }
    pass(
        name,
        format!(
            "{} providers, {total} GPUs, started at {started} ms, tx {} at slot {}",
            assignments.len(),
            hex::encode(rec.meta.tx_hash),
            rec.meta.slot
        ),
    )
}

pub(super) fn check_bond_key(e: &Evidence, i: usize, a: &Assignment) -> Check {
    let name = format!("bond_key[{i}]");
    match e.bonded_keys.get(&a.provider) {
        Some(keys) if keys.contains(&a.attest_key) => pass(
            name,
            format!(
                "attest key {} is bonded by {}",
                hex::encode(a.attest_key),
                hex::encode(a.provider)
            ),
        ),
        Some(_) => fail(
            name,
            format!(
                "attest key {} is not a key {} bonded",
                hex::encode(a.attest_key),
                hex::encode(a.provider)
            ),
        ),
        None => fail(
            name,
            format!("{} has no bond on chain", hex::encode(a.provider)),
        ),
    }
}

fn check_acceptance(e: &Evidence, i: usize, a: &Assignment, sig: Option<&Vec<u8>>) -> Check {
    let name = format!("acceptance[{i}]");
    let Some(sig) = sig else {
        return fail(name, "no acceptance signature on chain");
    };
    let msg = Acceptance {
        job_id: e.job.job_id,
        gpus: a.gpus,
        rate: a.rate,
        deadline_ms: e.job.deadline_ms,
    };
    from(
        name,
        signed::verify(&a.attest_key, &msg.signed_bytes(), sig)
            .map(|()| {
                format!(
                    "{} GPUs at {} NTX/GPU-h, signed by the attest key",
                    a.gpus, a.rate
                )
            })
            .map_err(|err| err.to_string()),
    )
}

fn check_attestation(e: &Evidence, i: usize, a: &Assignment, att: &Attestation) -> Check {
    let body = AttestationBody {
        job_id: e.job.job_id,
        provider: a.provider,
        result: att.result.clone(),
        logs: att.logs.clone(),
        gpu_seconds: att.gpu_seconds,
        exit_code: att.exit_code,
    };
    from(
        format!("attestation[{i}]"),
        signed::verify(&a.attest_key, &body.signed_bytes(), &att.signature)
            .map(|()| {
                format!(
                    "{} GPU-s, exit {}, signed by the attest key",
                    att.gpu_seconds, att.exit_code
                )
            })
            .map_err(|err| err.to_string()),
    )
}

fn check_gpu_seconds(
    e: &Evidence,
    t: &Trail<'_>,
    i: usize,
    a: &Assignment,
    att: &Attestation,
) -> Check {
    let name = format!("gpu_seconds[{i}]");
    let Some((_, started, _, _)) = t.assigned else {
        return fail(name, "no assignment");
    };
    // A settle's validity ends by the deadline, so no claim can exceed the GPUs held until
    // then; an expire's attestations were signed before it as well.
    let bound = a
        .gpus
        .saturating_mul(e.job.deadline_ms.saturating_sub(started) / 1000);
    if att.gpu_seconds <= bound {
        pass(
            name,
            format!(
                "{} ≤ {} GPUs × (deadline − start) = {bound}",
                att.gpu_seconds, a.gpus
            ),
        )
    } else {
        fail(
            name,
            format!(
                "{} > {} GPUs × (deadline − start) = {bound}",
                att.gpu_seconds, a.gpus
            ),
        )
    }
}

pub(super) fn check_artifact(e: &Evidence, name: String, cid: &[u8]) -> Check {
    if cid.is_empty() {
        return pass(name, "none attested");
    }
    let Ok(root) = Cid::try_from(cid) else {
        return fail(name, format!("0x{} is not a CID", hex::encode(cid)));
    };
    let fetch = e
        .fetch_errors
        .get(&root.to_string())
        .map(|f| format!(" (fetch: {f})"))
        .unwrap_or_default();
    let walked = match dag::verify_dag(&e.blocks, &root) {
        Ok(w) => w,
        Err(why) => return fail(name, format!("{root}: {why}{fetch}")),
    };
    // A file is also re-imported from its content; a directory's blocks were each re-hashed.
    match dag::reimport_file(&e.blocks, &root) {
        Ok((content, again)) if again == root => pass(
            name,
            format!(
                "{root}: {} blocks re-hashed, {} bytes re-import to it",
                walked.blocks,
                content.len()
            ),
        ),
        Ok((_, again)) => fail(name, format!("{root}: the content re-imports to {again}")),
        Err(_) => pass(
            name,
            format!(
                "{root}: {} blocks ({} bytes) each re-hash to their CID",
                walked.blocks, walked.bytes
            ),
        ),
    }
}

fn check_payment(i: usize, a: &Assignment, att: &Attestation, paid: Option<&Payment>) -> Check {
    let name = format!("payment[{i}]");
    let due = pay_for(att.gpu_seconds, a.rate);
    match paid {
        None => fail(
            name,
            format!("no payment output for the attestation (due {due} NTX)"),
        ),
        Some(p) if p.to != a.provider => fail(
            name,
            format!(
                "paid to {}, the assignment names {}",
                hex::encode(p.to),
                hex::encode(a.provider)
            ),
        ),
        Some(p) if p.ntx != due => fail(
            name,
            format!(
                "paid {} NTX; the escrow rule gives {} GPU-s × {} / 3600 = {due}",
                p.ntx, att.gpu_seconds, a.rate
            ),
        ),
        Some(p) => pass(
            name,
            format!(
                "{} NTX = {} GPU-s × {} / 3600 to {}",
                p.ntx,
                att.gpu_seconds,
                a.rate,
                hex::encode(p.to)
            ),
        ),
    }
}

fn check_refund(e: &Evidence, end: &End<'_>) -> Check {
    let name = "refund";
    let paid: u64 = end.payments.iter().map(|p| p.ntx).sum();
    let Some(rest) = e.job.budget.checked_sub(paid) else {
        return fail(
            name,
            format!("Σpay {paid} NTX exceeds the budget {}", e.job.budget),
        );
    };
    let ok = match end.kind {
        "settle" => end.refund == rest,
        _ => end.refund >= rest,
    };
    let rule = if end.kind == "settle" { "=" } else { "≥" };
    let detail = format!(
        "refund {} NTX {rule} budget {} − Σpay {paid} = {rest}",
        end.refund, e.job.budget
    );
    if ok {
        pass(name, detail)
    } else {
        fail(name, format!("not: {detail}"))
    }
}

/// Runs every check on `e`. See the module docs for the names and the rules.
pub fn check(e: &Evidence) -> Report {
    if let Some(terms) = &e.job.receipts {
        return super::claims::check(e, terms);
    }
    let t = trail(e);
    let mut checks = vec![check_status(e, &t)];
    let (spec, content) = check_spec(e);
    checks.push(spec);
    checks.push(check_spec_terms(e, content.as_deref()));
    checks.push(check_assignment(e, &t));
    if let Some((assignments, _, acceptances, _)) = t.assigned {
        for (i, a) in assignments.iter().enumerate() {
            checks.push(check_bond_key(e, i, a));
            checks.push(check_acceptance(e, i, a, acceptances.get(i)));
            let Some(end) = &t.end else { continue };
            let k = end
                .attestations
                .iter()
                .position(|x| x.provider_index == i as u64);
            let Some(k) = k else {
                let listed = end.defaulters.contains(&a.provider);
                let detail = if listed {
                    "no attestation: a defaulter of the expire (bond slashable)".to_string()
                } else {
                    format!(
                        "no attestation in the {}, and not listed as a defaulter",
                        end.kind
                    )
                };
                checks.push(Check {
                    name: format!("attestation[{i}]"),
                    pass: listed,
                    detail,
                });
                continue;
            };
            let att = &end.attestations[k];
            checks.push(check_attestation(e, i, a, att));
            checks.push(check_gpu_seconds(e, &t, i, a, att));
            checks.push(check_artifact(e, format!("result_cid[{i}]"), &att.result));
            checks.push(check_artifact(e, format!("logs_cid[{i}]"), &att.logs));
            // The settle/expire pays attestation k with its k-th output.
            checks.push(check_payment(i, a, att, end.payments.get(k)));
        }
    }
    if let Some(end) = &t.end {
        checks.push(check_refund(e, end));
    }
    Report {
        job_id: hex::encode(e.job.job_id.0),
        pass: checks.iter().all(|c| c.pass),
        checks,
    }
}
