//! Expire: after the deadline and the claim window, refund the unpaid rest and slash the
//! assigned providers that never claimed, proportionally (DESIGN §3.1 G3, G4).

use crate::env::Env;
use crate::error::{Error, Result};
use crate::time::slot_to_posix_ms;
use crate::tx::funded;
use crate::tx::{Draft, Output, Utxo, Value};
use crate::v2::build::{Deployment, bond_datum, escrow_datum, refund};
use crate::v2::datum::{GanglionDatum, JobState};
use crate::v2::redeemer::{MintRedeemer, SpendRedeemer};
use crate::v2::rules::{assignment_slash, split_slashes};

/// What expires an escrow.
#[derive(Debug, Clone)]
pub struct ExpireRequest {
    /// The escrow (open or assigned).
    pub escrow: Utxo,
    /// Bonds of assigned providers that never claimed, to slash: every defaulter's until
    /// the deadline + claim window + unbonding delay (its commitment kept the bond there);
    /// after that, those still found (a bond may have been withdrawn since).
    pub slash: Vec<Utxo>,
    /// First valid slot: must begin after the deadline plus the claim window.
    pub valid_from_slot: u64,
}

/// What an expire moves, as the validator computes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireOutcome {
    /// NTX returned to the orchestrator: the escrow's rest plus its share of the slashes.
    pub refund: u64,
    /// NTX taken from each slashed bond, in the order of [`ExpireRequest::slash`].
    pub slashes: Vec<u64>,
    /// NTX locked for good in a `Burnt` output (slashed beyond the orchestrator's loss).
    pub burnt: u64,
}

/// Expire: burn the thread token; `outputs[0]` refunds the orchestrator (all escrow lovelace,
/// the escrow's NTX plus `min(Σ slashes, paid)`); `outputs[1]`, when anything is burnt, holds
/// the rest of the slashes at the script address under a `Burnt` datum; then each slashed
/// bond continues with its stake less its slash (`min(stake, gpus × rate × window / 3.6 M)`,
/// `window` its assignment's own, `until − started_at`).
///
/// # Errors
/// [`Error::InvalidRequest`] for a bond that is not of an assigned provider, one that has
/// claimed, one listed twice, or a defaulter's bond missing before the unbonding delay has
/// passed; [`Error::Time`] for a validity start outside the slot clock.
pub fn expire(dep: &Deployment, env: &Env, req: &ExpireRequest) -> Result<(Draft, ExpireOutcome)> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    let mut d = Draft::default();
    d.spend_script(req.escrow.clone(), SpendRedeemer::Expire.to_plutus_data());
    let mut outcome = ExpireOutcome::default();
    let mut kept_bonds = Vec::new();
    let mut to_orchestrator = 0;
    if let JobState::Assigned {
        assignments, paid, ..
    } = &e.state
    {
        let mut seen = Vec::new();
        for b in &req.slash {
            let bond = bond_datum(dep, env, b)?;
            let index = assignments
                .iter()
                .position(|a| a.provider == bond.provider)
                .ok_or_else(|| {
                    Error::InvalidRequest(format!(
                        "bond {} is not of a provider assigned to job {}",
                        b.reference, e.job_id
                    ))
                })?;
            if e.state.has_claimed(index as u64) || seen.contains(&index) {
                return Err(Error::InvalidRequest(format!(
                    "provider {index} of job {} claimed or is listed twice: not a defaulter",
                    e.job_id
                )));
            }
            seen.push(index);
            let stake = b.output.value.quantity_of(&dep.params.ntx);
            // Its own window: a provider added or released by a Rescale answers only for the
            // time it was assigned.
            let cut = assignment_slash(&assignments[index], stake);
            outcome.slashes.push(cut);
            let mut kept: Output = b.output.clone();
            kept.value
                .take_asset(&dep.params.ntx.policy, &dep.params.ntx.name, cut);
            kept_bonds.push(kept);
            d.spend_script(
                b.clone(),
                SpendRedeemer::Slash { job_id: e.job_id }.to_plutus_data(),
            );
        }
        let from_ms = slot_to_posix_ms(&env.slot_config, req.valid_from_slot)?;
        let bonds_may_be_gone = e
            .deadline_ms
            .saturating_add(dep.params.claim_window_ms)
            .saturating_add(dep.params.unbonding_delay_ms)
            < from_ms;
        let missing =
            (0..assignments.len()).find(|i| !e.state.has_claimed(*i as u64) && !seen.contains(i));
        if let (Some(i), false) = (missing, bonds_may_be_gone) {
            return Err(Error::InvalidRequest(format!(
                "provider {i} of job {} never claimed: its bond must be slashed in the expire",
                e.job_id
            )));
        }
        let (o, burnt) = split_slashes(outcome.slashes.iter().sum(), *paid);
        to_orchestrator = o;
        outcome.burnt = burnt;
    }
    outcome.refund = req.escrow.output.value.quantity_of(&dep.params.ntx) + to_orchestrator;
    d.pay(refund(dep, env, &e, &req.escrow, outcome.refund)?);
    if outcome.burnt > 0 {
        d.pay(funded(
            env,
            dep.address(env),
            Value::default().with_class(&dep.params.ntx, outcome.burnt),
            Some(GanglionDatum::Burnt(e.job_id).to_plutus_data()),
        )?);
    }
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
    Ok((d, outcome))
}
