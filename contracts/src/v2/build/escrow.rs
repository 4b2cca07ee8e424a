//! Escrow actions before the work: lock, assign, cancel. Claims and expiry are in
//! [`super::claim`] and [`super::expire`].

use crate::env::Env;
use crate::error::{Error, Result};
use crate::time::slot_to_posix_ms;
use crate::tx::funded;
use crate::tx::{Draft, Utxo, Value};
use crate::v2::build::{Deployment, bond_datum, escrow_datum, refund};
use crate::v2::datum::job_id_of;
use crate::v2::datum::{
    Assignment, BondDatum, Commitment, EscrowDatum, GanglionDatum, JobId, JobState,
};
use crate::v2::params::KeyHash;
use crate::v2::redeemer::{MintRedeemer, SpendRedeemer};
use crate::v2::rules::budget_covers_left;

/// What an orchestrator locks.
#[derive(Debug, Clone)]
pub struct LockRequest {
    /// The orchestrator's payment key hash.
    pub orchestrator: KeyHash,
    /// The orchestrator's ed25519 receipt key (public, 32 bytes).
    pub receipt_key: [u8; 32],
    /// CID bytes of the ensemble spec.
    pub spec: Vec<u8>,
    /// GPUs needed (> 0).
    pub gpus: u64,
    /// Highest rate accepted, NTX base units per GPU-hour.
    pub max_rate: u64,
    /// NTX base units locked.
    pub budget: u64,
    /// POSIX ms; must lie after the lock's upper validity bound.
    pub deadline_ms: u64,
    /// Milliseconds between receipts (> 0).
    pub receipt_interval_ms: u64,
    /// A wallet UTxO the lock consumes; it fixes the job id.
    pub seed: Utxo,
    /// First slot at which the lock is no longer valid.
    pub valid_until_slot: u64,
}

/// Lock: mint the job's thread token and create the `Open` escrow holding `budget` NTX.
///
/// # Errors
/// [`Error::InvalidRequest`] for zero GPUs, a zero receipt interval or a deadline not after
/// the validity interval; [`Error::Time`] for a validity end outside the slot clock.
pub fn lock(dep: &Deployment, env: &Env, req: &LockRequest) -> Result<(Draft, JobId)> {
    if req.gpus == 0 {
        return Err(Error::InvalidRequest("gpus must be at least 1".into()));
    }
    if req.receipt_interval_ms == 0 {
        return Err(Error::InvalidRequest(
            "the receipt interval must be at least 1 ms".into(),
        ));
    }
    let upper = slot_to_posix_ms(&env.slot_config, req.valid_until_slot)?;
    if req.deadline_ms <= upper {
        return Err(Error::InvalidRequest(format!(
            "deadline {} ms is not after the lock's validity end {upper} ms",
            req.deadline_ms
        )));
    }
    let job_id = job_id_of(&req.seed.reference);
    let datum = GanglionDatum::Escrow(EscrowDatum {
        job_id,
        orchestrator: req.orchestrator,
        receipt_key: req.receipt_key,
        spec: req.spec.clone(),
        gpus: req.gpus,
        max_rate: req.max_rate,
        budget: req.budget,
        deadline_ms: req.deadline_ms,
        receipt_interval_ms: req.receipt_interval_ms,
        state: JobState::Open,
    });
    let value = Value::default()
        .with_class(&dep.params.ntx, req.budget)
        .with(dep.script.hash, &job_id.0, 1);
    let mut d = Draft::default();
    d.spend(req.seed.clone())
        .mint(
            dep.script.hash,
            &job_id.0,
            1,
            MintRedeemer::LockJob {
                seed: req.seed.reference,
            }
            .to_plutus_data(),
        )
        .pay(funded(
            env,
            dep.address(env),
            value,
            Some(datum.to_plutus_data()),
        )?)
        .reference(dep.reference.clone())
        .validity(None, Some(req.valid_until_slot));
    Ok((d, job_id))
}

/// What an orchestrator submits to assign an open escrow.
#[derive(Debug, Clone)]
pub struct AssignRequest {
    /// The open escrow.
    pub escrow: Utxo,
    /// Providers, GPUs and rates (0 < Σ gpus ≤ the job's gpus: a service starts with its
    /// minimum). Each one's `started_at_ms` and `until_ms` are set by [`assign`]: the
    /// assign's lower bound and the escrow's deadline.
    pub assignments: Vec<Assignment>,
    /// Each provider's signature over its [`crate::v2::signed::Acceptance`].
    pub acceptances: Vec<Vec<u8>>,
    /// The providers' bond UTxOs, spent and continued with the job's commitment (G5).
    pub bonds: Vec<Utxo>,
    /// First valid slot; its start becomes `started_at`.
    pub valid_from_slot: u64,
    /// First invalid slot; its start may not lie after any assignment's `accept_by_ms`.
    pub valid_until_slot: u64,
}

/// Assign: `Open` → `Assigned`, tokens unchanged, orchestrator signs. `outputs[0]` continues
/// the escrow, its lovelace raised to the min-UTxO of its largest future datum (every
/// assignment claimed), so a provider's claim never has to add ADA to the escrow. Each
/// provider's bond is spent (`Commit`) and continues right after, in assignment order, with
/// `Commitment{job_id, gpus, deadline + claim window}` added and its lapsed commitments
/// dropped (DESIGN §3.1 G5). Each assignment's window is stamped: from the assign's lower
/// bound to the deadline.
///
/// # Errors
/// [`Error::InvalidRequest`] when the escrow is not open, no GPU or more than the job's are
/// assigned, the
/// validity end lies after an assignment's accept-by, the budget cannot pay every
/// assignment for its whole window (G6), a provider's bond is missing, unbonding, or would
/// back more GPUs than it holds (or stake less than `min_bond_per_gpu` per committed GPU);
/// [`Error::MalformedData`] for a malformed datum; [`Error::Time`] for a validity bound
/// outside the slot clock.
pub fn assign(dep: &Deployment, env: &Env, req: &AssignRequest) -> Result<Draft> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    if e.state != JobState::Open {
        return Err(Error::InvalidRequest(format!(
            "job {} is not open",
            e.job_id
        )));
    }
    let total: u64 = req.assignments.iter().map(|a| a.gpus).sum();
    if total == 0 || total > e.gpus {
        return Err(Error::InvalidRequest(format!(
            "assignments hold {total} GPUs, the job has 1 to {}",
            e.gpus
        )));
    }
    if let Some((i, a)) = req.assignments.iter().enumerate().find(|(i, a)| {
        req.assignments[..*i]
            .iter()
            .any(|b| b.provider == a.provider)
    }) {
        return Err(Error::InvalidRequest(format!(
            "provider {} is assigned twice (again at {i})",
            hex::encode(a.provider)
        )));
    }
    let started_at_ms = slot_to_posix_ms(&env.slot_config, req.valid_from_slot)?;
    let upper_ms = slot_to_posix_ms(&env.slot_config, req.valid_until_slot)?;
    let assignments = stamped(&req.assignments, started_at_ms, e.deadline_ms);
    if let Some(late) = req.assignments.iter().find(|a| a.accept_by_ms < upper_ms) {
        return Err(Error::InvalidRequest(format!(
            "the assign is valid until {upper_ms} ms, after provider {}'s accept-by {} ms",
            hex::encode(late.provider),
            late.accept_by_ms
        )));
    }
    if !budget_covers_left(&assignments, &[], e.budget, 0) {
        return Err(Error::InvalidRequest(format!(
            "budget {} cannot pay the assignments from {started_at_ms} ms to the deadline {} ms",
            e.budget, e.deadline_ms
        )));
    }
    let assigned = |claimed: Vec<u64>, paid: u64| {
        GanglionDatum::Escrow(EscrowDatum {
            state: JobState::Assigned {
                assignments: assignments.clone(),
                started_at_ms,
                claimed,
                paid,
            },
            ..e.clone()
        })
    };
    let next = assigned(Vec::new(), 0);
    let largest = funded(
        env,
        req.escrow.output.address.clone(),
        req.escrow.output.value.clone(),
        Some(assigned((0..assignments.len() as u64).collect(), e.budget).to_plutus_data()),
    )?;
    let mut d = Draft::default();
    d.spend_script(
        req.escrow.clone(),
        SpendRedeemer::Assign {
            acceptances: req.acceptances.clone(),
        }
        .to_plutus_data(),
    )
    .pay(funded(
        env,
        req.escrow.output.address.clone(),
        largest.value,
        Some(next.to_plutus_data()),
    )?)
    .reference(dep.reference.clone())
    .signer(e.orchestrator)
    .validity(Some(req.valid_from_slot), Some(req.valid_until_slot));
    commit_bonds(
        dep,
        env,
        &mut d,
        &req.bonds,
        &assignments,
        &e,
        started_at_ms,
    )?;
    Ok(d)
}

/// `assignments` with their window stamped: from `started_at_ms` to `deadline_ms`.
pub(super) fn stamped(
    assignments: &[Assignment],
    started_at_ms: u64,
    deadline_ms: u64,
) -> Vec<Assignment> {
    assignments
        .iter()
        .map(|a| Assignment {
            started_at_ms,
            until_ms: deadline_ms,
            ..a.clone()
        })
        .collect()
}

/// Spends the bond of each of the new `assignments` of escrow `e` (`Commit`) and continues
/// it next in the outputs, in order, with the job's commitment (G5): an Assign's and a
/// Rescale's bonds at `outputs[1 + j]`.
pub(super) fn commit_bonds(
    dep: &Deployment,
    env: &Env,
    d: &mut Draft,
    bonds: &[Utxo],
    assignments: &[Assignment],
    e: &EscrowDatum,
    now_ms: u64,
) -> Result<()> {
    let until_ms = e.deadline_ms.saturating_add(dep.params.claim_window_ms);
    for a in assignments {
        let (bond, next) = commit(dep, env, bonds, a, e.job_id, now_ms, until_ms)?;
        d.spend_script(
            bond.clone(),
            SpendRedeemer::Commit { job_id: e.job_id }.to_plutus_data(),
        )
        .pay(funded(
            env,
            bond.output.address.clone(),
            bond.output.value.clone(),
            Some(next.to_plutus_data()),
        )?);
    }
    Ok(())
}

/// `a`'s bond among `bonds` and the datum it continues with: the job's commitment added,
/// lapsed ones dropped, checked as the validator will (live, same attest key and payout,
/// capacity and stake).
fn commit<'a>(
    dep: &Deployment,
    env: &Env,
    bonds: &'a [Utxo],
    a: &Assignment,
    job_id: JobId,
    now_ms: u64,
    until_ms: u64,
) -> Result<(&'a Utxo, GanglionDatum)> {
    let (utxo, b) = bonds
        .iter()
        .find_map(|u| {
            bond_datum(dep, env, u)
                .ok()
                .filter(|b| b.provider == a.provider)
                .map(|b| (u, b))
        })
        .ok_or_else(|| {
            Error::InvalidRequest(format!(
                "no bond of provider {} was given",
                hex::encode(a.provider)
            ))
        })?;
    let refuse = |why: String| {
        Err(Error::InvalidRequest(format!(
            "bond {} of provider {} {why}",
            utxo.reference,
            hex::encode(a.provider)
        )))
    };
    if b.unbonding_since_ms.is_some() {
        return refuse("is unbonding".into());
    }
    if b.attest_key != a.attest_key || b.payout != a.payout {
        return refuse("names another attest key or payout than its assignment".into());
    }
    let committed = b.committed_gpus(now_ms).saturating_add(a.gpus);
    if committed > b.gpus {
        return refuse(format!(
            "backs {} GPUs and already {} of other jobs: it cannot take {} more",
            b.gpus,
            b.committed_gpus(now_ms),
            a.gpus
        ));
    }
    let stake = utxo.output.value.quantity_of(&dep.params.ntx);
    if stake < dep.params.min_bond_per_gpu.saturating_mul(committed) {
        return refuse(format!(
            "holds {stake} NTX, less than the minimum for {committed} committed GPUs"
        ));
    }
    let mut commitments = vec![Commitment {
        job_id,
        gpus: a.gpus,
        until_ms,
    }];
    commitments.extend(b.commitments.iter().filter(|c| c.is_live(now_ms)).cloned());
    Ok((utxo, GanglionDatum::Bond(BondDatum { commitments, ..b })))
}

/// Cancel: refund an open escrow to its orchestrator, who signs; burn the token.
///
/// # Errors
/// [`Error::InvalidRequest`] when the escrow is not open.
pub fn cancel(dep: &Deployment, env: &Env, escrow: &Utxo) -> Result<Draft> {
    let e = escrow_datum(dep, env, escrow)?;
    if e.state != JobState::Open {
        return Err(Error::InvalidRequest(format!(
            "job {} is not open",
            e.job_id
        )));
    }
    let mut d = Draft::default();
    d.spend_script(escrow.clone(), SpendRedeemer::Cancel.to_plutus_data())
        .pay(refund(
            dep,
            env,
            &e,
            escrow,
            escrow.output.value.quantity_of(&dep.params.ntx),
        )?)
        .mint(
            dep.script.hash,
            &e.job_id.0,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        )
        .reference(dep.reference.clone())
        .signer(e.orchestrator);
    Ok(d)
}
