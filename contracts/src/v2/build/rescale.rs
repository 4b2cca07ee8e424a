//! Rescale: a running escrow releases providers and adds new ones (an inference service
//! scaling with its load, replacing a lost provider; `docs/escrow-v2.md`, Rescale).

use crate::env::Env;
use crate::error::{Error, Result};
use crate::time::slot_to_posix_ms;
use crate::tx::funded;
use crate::tx::{Draft, Utxo};
use crate::v2::build::escrow::{commit_bonds, stamped};
use crate::v2::build::{Deployment, escrow_datum};
use crate::v2::datum::{Assignment, EscrowDatum, GanglionDatum, JobState};
use crate::v2::redeemer::SpendRedeemer;
use crate::v2::rules::{budget_covers_left, running_gpus};
use crate::v2::signed::{Acceptance, verify};

/// What an orchestrator submits to rescale an assigned escrow.
#[derive(Debug, Clone)]
pub struct RescaleRequest {
    /// The assigned escrow, as it stands on-chain now.
    pub escrow: Utxo,
    /// Providers to add, with their GPUs, rates, payout and accept-by; their
    /// `started_at_ms` and `until_ms` are set by [`rescale`]: the rescale's lower bound and
    /// the escrow's deadline.
    pub added: Vec<Assignment>,
    /// Each added provider's signature over its [`Acceptance`], in the order of `added`.
    pub acceptances: Vec<Vec<u8>>,
    /// The added providers' bond UTxOs, spent and continued with the job's commitment (G5).
    pub bonds: Vec<Utxo>,
    /// Assignments to release, `(index, until_ms)`: the assignment stops being paid at
    /// `until_ms`, which must lie before its current end and at least one receipt interval
    /// after the rescale's validity end (`upper + receipt_interval ≤ until_ms`).
    pub releases: Vec<(u64, u64)>,
    /// First valid slot: its start is the added assignments' `started_at_ms`; before the
    /// deadline.
    pub valid_from_slot: u64,
    /// First invalid slot: its start may not lie after an added assignment's accept-by, and
    /// one receipt interval after it is the earliest end of a release.
    pub valid_until_slot: u64,
}

/// Rescale: `Assigned` → `Assigned`, tokens and NTX unchanged, the orchestrator signs.
/// `outputs[0]` continues the escrow with the assignments `kept ++ added` (claimed, paid and
/// started_at unchanged), its lovelace raised to the min-UTxO of its largest future datum;
/// the bond of the j-th added provider is spent (`Commit`) and continues at `outputs[1 +
/// j]` with `Commitment{job_id, gpus, deadline + claim window}` added (DESIGN §3.1 G5), as
/// an assign's.
///
/// A released assignment keeps everything but its `until`; a provider added starts at the
/// rescale's lower bound and runs to the deadline.
///
/// # Errors
/// [`Error::InvalidRequest`] for whatever the validator would refuse: an escrow that is not
/// assigned, a lower bound not before the deadline; a release of an unknown or claimed
/// assignment, listed twice, with less than one receipt interval of notice after the
/// validity end or not before its current end; an added provider already in the escrow
/// (or added twice), of no GPU, above the maximum rate, whose accept-by lies before the
/// validity end, whose acceptance is missing or does not verify, whose bond is missing,
/// unbonding, for another attest key or payout, or would back more GPUs than it holds (or
/// stake less than the minimum per committed GPU); more running GPUs (unclaimed, not
/// released) than the escrow's; a budget left (budget − paid) that cannot pay every
/// unclaimed assignment for its window (G6). [`Error::MalformedData`] for a malformed
/// datum; [`Error::Time`] for a validity bound outside the slot clock.
pub fn rescale(dep: &Deployment, env: &Env, req: &RescaleRequest) -> Result<Draft> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    let refuse = |why: String| Err(Error::InvalidRequest(format!("job {}: {why}", e.job_id)));
    let JobState::Assigned {
        assignments,
        started_at_ms,
        claimed,
        paid,
    } = &e.state
    else {
        return refuse("not assigned: nothing to rescale".into());
    };
    let lower_ms = slot_to_posix_ms(&env.slot_config, req.valid_from_slot)?;
    let upper_ms = slot_to_posix_ms(&env.slot_config, req.valid_until_slot)?;
    if lower_ms >= e.deadline_ms {
        return refuse(format!(
            "the rescale is valid from {lower_ms} ms, not before the deadline {} ms",
            e.deadline_ms
        ));
    }
    let mut next = assignments.clone();
    let notice_ms = upper_ms.saturating_add(e.receipt_interval_ms);
    for (k, (index, until_ms)) in req.releases.iter().enumerate() {
        let Some(a) = usize::try_from(*index).ok().and_then(|i| next.get_mut(i)) else {
            return refuse(format!(
                "{} assignments, no index {index} to release",
                assignments.len()
            ));
        };
        if claimed.contains(index) {
            return refuse(format!(
                "assignment {index} has claimed: it cannot be released"
            ));
        }
        if req.releases[..k].iter().any(|(i, _)| i == index) {
            return refuse(format!("assignment {index} is released twice"));
        }
        if *until_ms < notice_ms {
            return refuse(format!(
                "releasing assignment {index} at {until_ms} ms gives less than one receipt \
                 interval of notice after the rescale's validity end ({notice_ms} ms at the \
                 earliest)"
            ));
        }
        if *until_ms >= a.until_ms {
            return refuse(format!(
                "assignment {index} already ends at {} ms: a release ends it earlier, not at \
                 {until_ms} ms",
                a.until_ms
            ));
        }
        a.until_ms = *until_ms;
    }
    if req.acceptances.len() != req.added.len() {
        return refuse(format!(
            "{} providers added with {} acceptances",
            req.added.len(),
            req.acceptances.len()
        ));
    }
    let added = stamped(&req.added, lower_ms, e.deadline_ms);
    for (a, signature) in added.iter().zip(&req.acceptances) {
        let who = hex::encode(a.provider);
        if next.iter().any(|b| b.provider == a.provider) {
            return refuse(format!(
                "provider {who} is in the escrow already (a provider appears once per escrow)"
            ));
        }
        if a.gpus == 0 {
            return refuse(format!("provider {who} is added for no GPU"));
        }
        if a.rate > e.max_rate {
            return refuse(format!(
                "provider {who}'s rate {} is above the maximum {}",
                a.rate, e.max_rate
            ));
        }
        if a.accept_by_ms < upper_ms {
            return refuse(format!(
                "the rescale is valid until {upper_ms} ms, after provider {who}'s accept-by {} \
                 ms",
                a.accept_by_ms
            ));
        }
        let message = Acceptance {
            job_id: e.job_id,
            spec: e.spec.clone(),
            gpus: a.gpus,
            rate: a.rate,
            deadline_ms: e.deadline_ms,
            accept_by_ms: a.accept_by_ms,
            receipt_interval_ms: e.receipt_interval_ms,
        };
        if verify(&a.attest_key, &message.signed_bytes(), signature).is_err() {
            return refuse(format!(
                "provider {who}'s acceptance does not verify under its attest key"
            ));
        }
        next.push(a.clone());
    }
    let running = running_gpus(&next, claimed, e.deadline_ms);
    if running > e.gpus {
        return refuse(format!(
            "{running} GPUs would run (unclaimed, not released), the escrow holds {}",
            e.gpus
        ));
    }
    if !budget_covers_left(&next, claimed, e.budget, *paid) {
        return refuse(format!(
            "the budget left ({} of {}) cannot pay every unclaimed assignment for its window",
            e.budget.saturating_sub(*paid),
            e.budget
        ));
    }
    let datum = |assignments: Vec<Assignment>, claimed: Vec<u64>, paid: u64| {
        GanglionDatum::Escrow(EscrowDatum {
            state: JobState::Assigned {
                assignments,
                started_at_ms: *started_at_ms,
                claimed,
                paid,
            },
            ..e.clone()
        })
    };
    let largest = funded(
        env,
        req.escrow.output.address.clone(),
        req.escrow.output.value.clone(),
        Some(datum(next.clone(), (0..next.len() as u64).collect(), e.budget).to_plutus_data()),
    )?;
    let mut d = Draft::default();
    d.spend_script(
        req.escrow.clone(),
        SpendRedeemer::Rescale {
            acceptances: req.acceptances.clone(),
        }
        .to_plutus_data(),
    )
    .pay(funded(
        env,
        req.escrow.output.address.clone(),
        largest.value,
        Some(datum(next, claimed.clone(), *paid).to_plutus_data()),
    )?)
    .reference(dep.reference.clone())
    .signer(e.orchestrator)
    .validity(Some(req.valid_from_slot), Some(req.valid_until_slot));
    commit_bonds(dep, env, &mut d, &req.bonds, &added, &e, lower_ms)?;
    Ok(d)
}
