//! The checks of an audit, pure over [`Evidence`]: what every job is checked for (the spec
//! CID re-hashed, the spec's terms against the escrow's, the assignment, each provider's
//! bonded key, each attested DAG), and [`check`], which runs the whole audit: the escrow's
//! claims and slashes re-derived rule by rule, in `claims`.

use cid::Cid;
use ganglion_contracts::v2::datum::Assignment;
use ganglion_indexer::Record;
use ganglion_indexer::event::Event;

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

/// The lock's terms and the assignment, as the events say.
pub(super) struct Trail<'a> {
    pub(super) max_rate: Option<u64>,
    pub(super) assigned: Option<Assigned<'a>>,
}

/// The assign event: assignments, start (POSIX ms), acceptance signatures, where.
pub(super) type Assigned<'a> = (&'a [Assignment], u64, &'a [Vec<u8>], &'a Record);

pub(super) fn trail(e: &Evidence) -> Trail<'_> {
    let mut t = Trail {
        max_rate: None,
        assigned: None,
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
            _ => {}
        }
    }
    t
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
            // A service's escrow covers `replicas.max` replicas of `gpus.count` each.
            let terms = spec.escrow_terms();
            let ours = (terms.gpus, spec.budget_ntx, spec.deadline_ms);
            let chain = (e.job.gpus, e.job.budget, e.job.deadline_ms);
            if ours == chain {
                pass(
                    name,
                    format!(
                        "gpus {}, budget {} NTX base units, deadline {} ms agree with the escrow",
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
    // At most the GPUs locked: a batch job's assign places all of them, a service's its
    // `replicas.min` (a rescale adds more, within the same bound on chain).
    let total: u64 = assignments.iter().map(|a| a.gpus).sum();
    if total == 0 || total > e.job.gpus {
        return fail(
            name,
            format!("Σgpus {total}: not within 1..={} GPUs locked", e.job.gpus),
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

/// Runs every check on `e`: see `claims` for the names and the rules.
pub fn check(e: &Evidence) -> Report {
    super::claims::check(e, &e.job.receipts)
}
