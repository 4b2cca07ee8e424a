//! Claim: one provider's pay for its attested GPU time (DESIGN §3.2 "Claim i").

use crate::env::Env;
use crate::error::{Error, Result};
use crate::tx::funded;
use crate::tx::{Draft, Utxo, Value};
use crate::v2::build::{Deployment, bond_datum, escrow_datum, refund};
use crate::v2::datum::job_tag;
use crate::v2::datum::{EscrowDatum, GanglionDatum, JobState};
use crate::v2::redeemer::{Attestation, MintRedeemer, SignedReceipt, SpendRedeemer};
use crate::v2::rules::pay_for;

/// What claims assignment `index` of an assigned escrow.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The assigned escrow, as it stands on-chain now.
    pub escrow: Utxo,
    /// Index of the claiming provider in the escrow's assignments.
    pub index: u64,
    /// The provider's signed attestation (GPU-ms, result and log CIDs).
    pub attestation: Attestation,
    /// The orchestrator's latest receipt for this provider, if any.
    pub receipt: Option<SignedReceipt>,
    /// First valid slot: its start is the "provably elapsed" end of the claimable time, so a
    /// later slot allows more (up to the receipt's bound); it must have begun when submitted.
    pub valid_from_slot: u64,
    /// First invalid slot: must begin no later than the deadline plus the claim window.
    pub valid_until_slot: u64,
    /// The claiming provider's bond as it stands on-chain now, to release its commitment to
    /// this job in the same transaction (DESIGN §3.1 G5: a claimed assignment no longer holds
    /// the bond's GPUs); the provider must sign. `None` leaves the commitment until it lapses
    /// at the deadline plus the claim window (a claim anyone else submits).
    pub release: Option<Utxo>,
}

/// Claim: pay provider `index` `⌊gpu_ms × rate / 3 600 000⌋` NTX at its payout address
/// (`outputs[0]`, tagged with the job id); the escrow continues with the index marked claimed
/// (`outputs[1]`), or — on the last claim — the rest and all lovelace are refunded to the
/// orchestrator (`outputs[1]`) and the thread token is burnt. With [`ClaimRequest::release`],
/// the provider's bond is spent too (`Release`) and continues without the job's commitment
/// (`outputs[2]`), the provider a required signer. The payout's min-UTxO lovelace comes from
/// the wallet that balances the transaction.
///
/// The bound on `gpu_ms` (G1, over the assignment's own window) is the validator's; check it
/// first with [`crate::v2::rules::assignment_bound_gpu_ms`] to get a named error instead of a
/// phase-2 failure.
///
/// # Errors
/// [`Error::InvalidRequest`] when the escrow is not assigned, the index is out of range or
/// already claimed, the pay exceeds the NTX the escrow holds, or the bond to release is not
/// the claimed assignment's bond or holds no commitment to the job.
pub fn claim(dep: &Deployment, env: &Env, req: &ClaimRequest) -> Result<Draft> {
    let e = escrow_datum(dep, env, &req.escrow)?;
    let JobState::Assigned {
        assignments,
        started_at_ms,
        claimed,
        paid,
    } = &e.state
    else {
        return Err(Error::InvalidRequest(format!(
            "job {} is not assigned",
            e.job_id
        )));
    };
    let a = usize::try_from(req.index)
        .ok()
        .and_then(|i| assignments.get(i))
        .ok_or_else(|| {
            Error::InvalidRequest(format!(
                "job {} has {} assignments, no index {}",
                e.job_id,
                assignments.len(),
                req.index
            ))
        })?;
    if claimed.contains(&req.index) {
        return Err(Error::InvalidRequest(format!(
            "provider {} of job {} has claimed already",
            req.index, e.job_id
        )));
    }
    let pay = pay_for(req.attestation.gpu_ms, a.rate);
    let held = req.escrow.output.value.quantity_of(&dep.params.ntx);
    let rest = held.checked_sub(pay).ok_or_else(|| {
        Error::InvalidRequest(format!(
            "the claim asks {pay} NTX, the escrow of job {} holds {held}",
            e.job_id
        ))
    })?;
    let mut d = Draft::default();
    d.spend_script(
        req.escrow.clone(),
        SpendRedeemer::Claim {
            index: req.index,
            attestation: req.attestation.clone(),
            receipt: req.receipt.clone(),
        }
        .to_plutus_data(),
    )
    .pay(funded(
        env,
        a.payout.address(env.network),
        Value::default().with_class(&dep.params.ntx, pay),
        Some(job_tag(&e.job_id)),
    )?);
    let last = claimed.len() + 1 == assignments.len();
    if last {
        d.pay(refund(dep, env, &e, &req.escrow, rest)?).mint(
            dep.script.hash,
            &e.job_id.0,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        );
    } else {
        let next = GanglionDatum::Escrow(EscrowDatum {
            state: JobState::Assigned {
                assignments: assignments.clone(),
                started_at_ms: *started_at_ms,
                claimed: std::iter::once(req.index)
                    .chain(claimed.iter().copied())
                    .collect(),
                paid: paid.saturating_add(pay),
            },
            ..e.clone()
        });
        let mut value = req.escrow.output.value.clone();
        value.take_asset(&dep.params.ntx.policy, &dep.params.ntx.name, pay);
        d.pay(funded(
            env,
            req.escrow.output.address.clone(),
            value,
            Some(next.to_plutus_data()),
        )?);
    }
    if let Some(bond) = &req.release {
        let b = bond_datum(dep, env, bond)?;
        if b.provider != a.provider {
            return Err(Error::InvalidRequest(format!(
                "{} is not the bond of provider {} of job {}",
                bond.reference, req.index, e.job_id
            )));
        }
        if !b.commits_to(&e.job_id) {
            return Err(Error::InvalidRequest(format!(
                "bond {} holds no commitment to job {}",
                bond.reference, e.job_id
            )));
        }
        d.spend_script(
            bond.clone(),
            SpendRedeemer::Release { job_id: e.job_id }.to_plutus_data(),
        )
        .pay(funded(
            env,
            bond.output.address.clone(),
            bond.output.value.clone(),
            Some(GanglionDatum::Bond(b.released(&e.job_id)).to_plutus_data()),
        )?)
        .signer(b.provider);
    }
    d.reference(dep.reference.clone())
        .validity(Some(req.valid_from_slot), Some(req.valid_until_slot));
    Ok(d)
}
