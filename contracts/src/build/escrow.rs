//! Escrow actions: lock, assign, settle, cancel, expire (with slashing).

use crate::build::{Deployment, bond_datum, escrow_datum, funded, job_id_of, job_tag, payee};
use crate::datum::{Assignment, EscrowDatum, GanglionDatum, JobId, JobState};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::params::KeyHash;
use crate::redeemer::{Attestation, MintRedeemer, SpendRedeemer};
use crate::time::slot_to_posix_ms;
use crate::tx::{Draft, Output, Utxo, Value};

/// What an orchestrator locks.
#[derive(Debug, Clone)]
pub struct LockRequest {
    /// The orchestrator's payment key hash.
    pub orchestrator: KeyHash,
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
    /// A wallet UTxO the lock consumes; it fixes the job id.
    pub seed: Utxo,
    /// First slot at which the lock is no longer valid.
    pub valid_until_slot: u64,
}

/// Lock: mint the job's thread token and create the `Open` escrow holding `budget` NTX.
///
/// # Errors
/// [`Error::InvalidRequest`] for zero GPUs or a deadline not after the validity interval;
/// [`Error::Time`] for a validity end outside the slot clock.
pub fn lock(dep: &Deployment, env: &Env, req: &LockRequest) -> Result<(Draft, JobId)> {
    if req.gpus == 0 {
        return Err(Error::InvalidRequest("gpus must be at least 1".into()));
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
        spec: req.spec.clone(),
        gpus: req.gpus,
        max_rate: req.max_rate,
        budget: req.budget,
        deadline_ms: req.deadline_ms,
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
    /// Providers, GPUs and rates (Σ gpus = the job's gpus).
    pub assignments: Vec<Assignment>,
    /// Each provider's signature over its [`crate::signed::Acceptance`].
    pub acceptances: Vec<Vec<u8>>,
    /// The providers' bond UTxOs, read as reference inputs.
    pub bonds: Vec<Utxo>,
    /// First valid slot; its start becomes `started_at`.
    pub valid_from_slot: u64,
    /// First invalid slot.
    pub valid_until_slot: u64,
}

/// Assign: `Open` → `Assigned`, tokens unchanged (lovelace raised to the new datum's
/// min-UTxO when needed), bonds as reference inputs, orchestrator signs.
///
/// # Errors
/// [`Error::InvalidRequest`] when the escrow is not open or the GPUs do not add up;
/// [`Error::MalformedData`] for a malformed escrow datum; [`Error::Time`] for a validity
/// start outside the slot clock.
pub fn assign(dep: &Deployment, env: &Env, req: &AssignRequest) -> Result<Draft> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    if e.state != JobState::Open {
        return Err(Error::InvalidRequest(format!(
            "job {} is not open",
            e.job_id
        )));
    }
    let total: u64 = req.assignments.iter().map(|a| a.gpus).sum();
    if total != e.gpus {
        return Err(Error::InvalidRequest(format!(
            "assignments hold {total} GPUs, the job needs {}",
            e.gpus
        )));
    }
    let started_at_ms = slot_to_posix_ms(&env.slot_config, req.valid_from_slot)?;
    let next = GanglionDatum::Escrow(EscrowDatum {
        state: JobState::Assigned {
            assignments: req.assignments.clone(),
            started_at_ms,
        },
        ..e.clone()
    });
    let mut d = Draft::default();
    d.spend_script(
        req.escrow.clone(),
        SpendRedeemer::Assign {
            assignments: req.assignments.clone(),
            acceptances: req.acceptances.clone(),
        }
        .to_plutus_data(),
    )
    .pay(funded(
        env,
        req.escrow.output.address.clone(),
        req.escrow.output.value.clone(),
        Some(next.to_plutus_data()),
    )?)
    .reference(dep.reference.clone())
    .signer(e.orchestrator)
    .validity(Some(req.valid_from_slot), Some(req.valid_until_slot));
    for b in &req.bonds {
        d.reference(b.clone());
    }
    Ok(d)
}

/// What settles an assigned escrow.
#[derive(Debug, Clone)]
pub struct SettleRequest {
    /// The assigned escrow.
    pub escrow: Utxo,
    /// One attestation per assignment, in assignment order.
    pub attestations: Vec<Attestation>,
    /// First valid slot, if any.
    pub valid_from_slot: Option<u64>,
    /// First invalid slot: must begin no later than the deadline.
    pub valid_until_slot: u64,
}

fn assigned(e: &EscrowDatum) -> Result<(&[Assignment], u64)> {
    match &e.state {
        JobState::Assigned {
            assignments,
            started_at_ms,
        } => Ok((assignments, *started_at_ms)),
        JobState::Open => Err(Error::InvalidRequest(format!(
            "job {} is not assigned",
            e.job_id
        ))),
    }
}

/// Payout outputs for attestations, and the NTX they pay in total.
fn payouts(
    dep: &Deployment,
    env: &Env,
    e: &EscrowDatum,
    assignments: &[Assignment],
    atts: &[Attestation],
) -> Result<(Vec<Output>, u64)> {
    let mut outs = Vec::new();
    let mut paid = 0u64;
    for att in atts {
        let a = usize::try_from(att.provider_index)
            .ok()
            .and_then(|i| assignments.get(i))
            .ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "attestation names provider {} of {}",
                    att.provider_index,
                    assignments.len()
                ))
            })?;
        let pay = pay_for(att.gpu_seconds, a.rate);
        paid += pay;
        outs.push(funded(
            env,
            payee(env, &a.provider),
            Value::default().with_class(&dep.params.ntx, pay),
            Some(job_tag(&e.job_id)),
        )?);
    }
    Ok((outs, paid))
}

/// NTX left in the escrow after paying `paid`.
fn unpaid(dep: &Deployment, escrow: &Utxo, paid: u64) -> Result<u64> {
    let held = escrow.output.value.quantity_of(&dep.params.ntx);
    held.checked_sub(paid).ok_or_else(|| {
        Error::InvalidRequest(format!(
            "attestations claim {paid} NTX, the escrow holds {held}"
        ))
    })
}

/// NTX base units earned: `gpu_seconds × rate / 3600`, rounded down as on-chain.
pub fn pay_for(gpu_seconds: u64, rate: u64) -> u64 {
    (u128::from(gpu_seconds) * u128::from(rate) / 3600) as u64
}

fn refund(dep: &Deployment, env: &Env, e: &EscrowDatum, escrow: &Utxo, ntx: u64) -> Result<Output> {
    funded(
        env,
        payee(env, &e.orchestrator),
        Value::lovelace(escrow.output.value.lovelace).with_class(&dep.params.ntx, ntx),
        Some(job_tag(&e.job_id)),
    )
}

/// Settle: pay each provider `gpu_seconds × rate / 3600` NTX, refund the rest and the
/// escrow's lovelace to the orchestrator, burn the thread token. The payout outputs' own
/// min-UTxO lovelace is funded by the wallet that balances the transaction.
///
/// # Errors
/// [`Error::InvalidRequest`] when the escrow is not assigned or the payments exceed the budget.
pub fn settle(dep: &Deployment, env: &Env, req: &SettleRequest) -> Result<Draft> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    let (assignments, _) = assigned(&e)?;
    let (outs, paid) = payouts(dep, env, &e, assignments, &req.attestations)?;
    let rest = unpaid(dep, &req.escrow, paid)?;
    let mut d = Draft::default();
    d.spend_script(
        req.escrow.clone(),
        SpendRedeemer::Settle {
            attestations: req.attestations.clone(),
        }
        .to_plutus_data(),
    );
    for o in outs {
        d.pay(o);
    }
    d.pay(refund(dep, env, &e, &req.escrow, rest)?)
        .mint(
            dep.script.hash,
            &e.job_id.0,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        )
        .reference(dep.reference.clone())
        .validity(req.valid_from_slot, Some(req.valid_until_slot));
    Ok(d)
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

/// What expires an escrow after its deadline.
#[derive(Debug, Clone)]
pub struct ExpireRequest {
    /// The escrow (open or assigned).
    pub escrow: Utxo,
    /// Attestations of the providers that finished, strictly increasing `provider_index`.
    pub attestations: Vec<Attestation>,
    /// Bonds of assigned providers without an attestation, to slash.
    pub slash: Vec<Utxo>,
    /// First valid slot: must begin after the deadline.
    pub valid_from_slot: u64,
}

/// Expire: after the deadline, pay the attested providers, slash the bonds of defaulters
/// (`slash_bps` of each bond to the orchestrator, the rest stays bonded), refund the rest,
/// burn the token.
///
/// # Errors
/// [`Error::InvalidRequest`] for a malformed request (bad index, over-budget claims, a
/// bond of a provider that attested).
pub fn expire(dep: &Deployment, env: &Env, req: &ExpireRequest) -> Result<Draft> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    let (outs, paid) = match &e.state {
        JobState::Open => (Vec::new(), 0),
        JobState::Assigned { assignments, .. } => {
            payouts(dep, env, &e, assignments, &req.attestations)?
        }
    };
    let mut d = Draft::default();
    d.spend_script(
        req.escrow.clone(),
        SpendRedeemer::Expire {
            attestations: req.attestations.clone(),
        }
        .to_plutus_data(),
    );
    let mut slashed = 0u64;
    let mut kept_bonds = Vec::new();
    for b in &req.slash {
        bond_datum(dep, env, b)?;
        let stake = b.output.value.quantity_of(&dep.params.ntx);
        let cut = dep.params.slash_amount(stake);
        slashed += cut;
        let mut kept = b.output.clone();
        if let Some(names) = kept.value.assets.get_mut(&dep.params.ntx.policy) {
            if let Some(q) = names.get_mut(&dep.params.ntx.name) {
                *q -= cut;
                if *q == 0 {
                    names.remove(&dep.params.ntx.name);
                }
            }
            if names.is_empty() {
                kept.value.assets.remove(&dep.params.ntx.policy);
            }
        }
        kept_bonds.push(kept);
        d.spend_script(
            b.clone(),
            SpendRedeemer::Slash { job_id: e.job_id }.to_plutus_data(),
        );
    }
    let rest = unpaid(dep, &req.escrow, paid)?;
    for o in outs {
        d.pay(o);
    }
    d.pay(refund(dep, env, &e, &req.escrow, rest + slashed)?);
    for k in kept_bonds {
        d.pay(k);
    }
    d.mint(
        dep.script.hash,
        &e.job_id.0,
        -1,
        MintRedeemer::Burn.to_plutus_data(),
    )
    .reference(dep.reference.clone())
    .validity(Some(req.valid_from_slot), None);
    Ok(d)
}
