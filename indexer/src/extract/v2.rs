//! Protocol v2 (`ganglion_v2`, `docs/escrow-v2.md`): its datums and redeemers read into
//! events.
//!
//! The transaction is valid (phase 2 passed), so the validator's output positions hold:
//! a claim pays at `outputs[0]` and continues the escrow or refunds at `outputs[1]`; an
//! expire refunds at `outputs[0]` and burns at a script output with datum `Burnt{job_id}`;
//! a rescale continues the escrow with the old assignments (some released: an earlier
//! `until`) followed by the added ones.
//! Amounts are read from those outputs, never recomputed.

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::params::{KeyHash, PolicyId};
use ganglion_contracts::tx::Output;
use ganglion_contracts::v2::datum::{BondDatum, EscrowDatum, GanglionDatum, JobId, JobState};
use ganglion_contracts::v2::params::Params;
use ganglion_contracts::v2::redeemer::SpendRedeemer;

use super::{Scan, Tracked, TxEffects, drop_ignored};
use crate::event::{ClaimOutcome, Event, ReceiptTerms, Released, Slash};
use crate::watch::payment_key;

/// An output at the script address that carries a well-formed v2 datum.
pub(super) enum Found {
    /// An authentic escrow or bond.
    Live(Box<Tracked>),
    /// A `Burnt{job_id}` output: slashed NTX nobody may spend (counted only in the expire
    /// of `job_id`).
    Burnt {
        /// The job whose expire burnt it.
        job_id: JobId,
        /// NTX base units it holds.
        ntx: u64,
    },
}

/// Classifies a v2 output at the script address (see [`super::classify`]).
pub(super) fn classify(
    script_hash: &PolicyId,
    params: &Params,
    reference: TxoRef,
    o: &Output,
) -> Result<Found, String> {
    let datum = o
        .datum
        .as_ref()
        .ok_or_else(|| "no inline datum".to_string())?;
    let datum = GanglionDatum::from_plutus_data(datum).map_err(|e| e.to_string())?;
    let ntx = o.value.quantity_of(&params.ntx);
    match &datum {
        GanglionDatum::Escrow(e) => super::holds_own_token(o, script_hash, &e.job_id.0, || {
            format!("escrow of job {} without its thread token", e.job_id)
        })?,
        GanglionDatum::Bond(b) => super::holds_own_token(o, script_hash, &b.provider, || {
            format!("bond of {} without its bond token", hex::encode(b.provider))
        })?,
        GanglionDatum::Burnt(job_id) => {
            return Ok(Found::Burnt {
                job_id: *job_id,
                ntx,
            });
        }
    }
    Ok(Found::Live(Box::new(Tracked {
        reference,
        datum,
        ntx,
        output: None,
    })))
}

fn escrow(t: &Tracked) -> Option<&EscrowDatum> {
    t.escrow()
}

fn bond(t: &Tracked) -> Option<&BondDatum> {
    t.bond()
}

/// What the protocol module needs while reading one transaction.
struct Reading<'a> {
    params: &'a Params,
    scan: &'a Scan,
    created: &'a [Tracked],
    /// `Burnt` outputs: (output reference, job, NTX).
    burnt: &'a [(TxoRef, JobId, u64)],
    spent: &'a [(&'a Tracked, Option<SpendRedeemer>)],
}

impl Reading<'_> {
    fn ntx_at(&self, index: usize) -> u64 {
        self.scan
            .outputs
            .get(index)
            .map(|o| o.value.quantity_of(&self.params.ntx))
            .unwrap_or(0)
    }

    fn created_escrow(&self, id: &JobId) -> Option<&Tracked> {
        self.created
            .iter()
            .find(|t| escrow(t).is_some_and(|e| e.job_id == *id))
    }

    fn created_bond(&self, p: &KeyHash) -> Option<&Tracked> {
        self.created
            .iter()
            .find(|t| bond(t).is_some_and(|b| b.provider == *p))
    }

    fn spends_escrow(&self, id: &JobId) -> bool {
        self.spent
            .iter()
            .any(|(s, _)| escrow(s).is_some_and(|x| x.job_id == *id))
    }

    fn expires(&self, id: &JobId) -> bool {
        self.spent.iter().any(|(s, r)| {
            matches!(r, Some(SpendRedeemer::Expire)) && escrow(s).is_some_and(|x| x.job_id == *id)
        })
    }

    /// NTX the bond of `provider` (spent as `t`) lost: its stake less its continuation's.
    fn bond_loss(&self, t: &Tracked, provider: &KeyHash) -> u64 {
        let kept = self.created_bond(provider).map(|n| n.ntx).unwrap_or(0);
        t.ntx.saturating_sub(kept)
    }

    fn assigned(&self, e: &EscrowDatum, next: &Tracked, acceptances: &[Vec<u8>]) -> Option<Event> {
        let Some(EscrowDatum {
            state:
                JobState::Assigned {
                    assignments,
                    started_at_ms,
                    ..
                },
            ..
        }) = escrow(next)
        else {
            return None;
        };
        Some(Event::JobAssigned {
            job_id: e.job_id,
            assignments: assignments.clone(),
            started_at_ms: *started_at_ms,
            escrow: next.reference,
            acceptances: acceptances.to_vec(),
        })
    }

    fn rescaled(&self, e: &EscrowDatum, next: &Tracked, acceptances: &[Vec<u8>]) -> Option<Event> {
        let JobState::Assigned {
            assignments: before,
            ..
        } = &e.state
        else {
            return None;
        };
        let Some(EscrowDatum {
            state: JobState::Assigned {
                assignments: after, ..
            },
            ..
        }) = escrow(next)
        else {
            return None;
        };
        let released = before
            .iter()
            .zip(after)
            .enumerate()
            .filter(|(_, (old, new))| old.until_ms != new.until_ms)
            .map(|(i, (_, new))| Released {
                index: i as u64,
                provider: new.provider,
                until_ms: new.until_ms,
            })
            .collect();
        Some(Event::JobRescaled {
            job_id: e.job_id,
            added: after.get(before.len()..).unwrap_or_default().to_vec(),
            first_added: before.len() as u64,
            released,
            escrow: next.reference,
            acceptances: acceptances.to_vec(),
        })
    }

    fn claimed(&self, e: &EscrowDatum, redeemer: &SpendRedeemer) -> Option<Event> {
        let SpendRedeemer::Claim {
            index,
            attestation,
            receipt,
        } = redeemer
        else {
            return None;
        };
        let JobState::Assigned { assignments, .. } = &e.state else {
            return None;
        };
        let a = usize::try_from(*index)
            .ok()
            .and_then(|i| assignments.get(i))?;
        let outcome = match self.created_escrow(&e.job_id) {
            Some(next) => ClaimOutcome::Continues {
                escrow: next.reference,
            },
            None => ClaimOutcome::Closed {
                refund: self.ntx_at(1),
            },
        };
        Some(Event::JobClaimed {
            job_id: e.job_id,
            index: *index,
            provider: a.provider,
            payout: a.payout,
            gpu_ms: attestation.gpu_ms,
            paid: self.ntx_at(0),
            receipt: receipt.clone(),
            lower_bound_ms: self.scan.lower_bound_ms,
            attestation: attestation.clone(),
            outcome,
        })
    }

    fn expired(&self, e: &EscrowDatum) -> Event {
        let (defaulters, slashes) = match &e.state {
            JobState::Open => (Vec::new(), Vec::new()),
            JobState::Assigned {
                assignments,
                claimed,
                ..
            } => {
                let defaulters = assignments
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !claimed.contains(&(*i as u64)))
                    .map(|(_, a)| a.provider)
                    .collect();
                let slashes = self
                    .spent
                    .iter()
                    .filter(|(_, r)| {
                        matches!(r, Some(SpendRedeemer::Slash { job_id }) if *job_id == e.job_id)
                    })
                    .filter_map(|(t, _)| {
                        let b = bond(t)?;
                        let index = assignments.iter().position(|a| a.provider == b.provider)?;
                        Some(Slash {
                            provider: b.provider,
                            index: index as u64,
                            amount: self.bond_loss(t, &b.provider),
                        })
                    })
                    .collect();
                (defaulters, slashes)
            }
        };
        let burnt: u64 = self
            .burnt
            .iter()
            .filter(|(_, id, _)| *id == e.job_id)
            .map(|(_, _, ntx)| ntx)
            .sum();
        let slashed: u64 = slashes.iter().map(|s: &Slash| s.amount).sum();
        Event::JobExpired {
            job_id: e.job_id,
            defaulters,
            refund: self.ntx_at(0),
            slashes,
            recovered: slashed.saturating_sub(burnt),
            burnt,
        }
    }
}

/// The effects of one transaction under v2.
pub(super) fn extract(script_hash: &PolicyId, params: &Params, scan: &Scan) -> TxEffects {
    let mut fx = TxEffects::default();
    let mut burnt = Vec::new();
    for &i in &scan.ours {
        let reference = scan.reference(i);
        match classify(script_hash, params, reference, &scan.outputs[i]) {
            Ok(Found::Live(t)) => fx.created.push(*t),
            Ok(Found::Burnt { job_id, ntx }) => burnt.push((reference, job_id, ntx)),
            Err(reason) => fx.events.push(Event::Ignored {
                utxo: reference,
                reason,
            }),
        }
    }
    let spent: Vec<(&Tracked, Option<SpendRedeemer>)> = scan
        .spent
        .iter()
        .map(|(t, r)| {
            (
                t,
                r.as_ref()
                    .and_then(|r| SpendRedeemer::from_plutus_data(r).ok()),
            )
        })
        .collect();
    fx.spent = spent.iter().map(|(t, _)| t.reference).collect();
    let r = Reading {
        params,
        scan,
        created: &fx.created,
        burnt: &burnt,
        spent: &spent,
    };
    let mut events = Vec::new();
    for (t, redeemer) in &spent {
        let d = &t.datum;
        let Some(redeemer) = redeemer else { continue };
        match (d, redeemer) {
            (GanglionDatum::Escrow(e), SpendRedeemer::Assign { acceptances, .. }) => {
                if let Some(ev) = r
                    .created_escrow(&e.job_id)
                    .and_then(|next| r.assigned(e, next, acceptances))
                {
                    events.push(ev);
                }
            }
            (GanglionDatum::Escrow(e), SpendRedeemer::Rescale { acceptances }) => {
                if let Some(ev) = r
                    .created_escrow(&e.job_id)
                    .and_then(|next| r.rescaled(e, next, acceptances))
                {
                    events.push(ev);
                }
            }
            (GanglionDatum::Escrow(e), SpendRedeemer::Claim { .. }) => {
                events.extend(r.claimed(e, redeemer));
            }
            (GanglionDatum::Escrow(e), SpendRedeemer::Cancel) => {
                let refund = scan
                    .outputs
                    .iter()
                    .filter(|o| payment_key(&o.address) == Some(e.orchestrator))
                    .map(|o| o.value.quantity_of(&params.ntx))
                    .sum();
                events.push(Event::JobCancelled {
                    job_id: e.job_id,
                    refund,
                });
            }
            (GanglionDatum::Escrow(e), SpendRedeemer::Expire) => events.push(r.expired(e)),
            (GanglionDatum::Bond(b), SpendRedeemer::Unbond) => {
                if let Some(next) = r.created_bond(&b.provider)
                    && let Some(since_ms) = bond(next).and_then(|n| n.unbonding_since_ms)
                {
                    events.push(Event::BondUnbonding {
                        provider: b.provider,
                        since_ms,
                        bond: next.reference,
                    });
                }
            }
            (GanglionDatum::Bond(b), SpendRedeemer::Withdraw) => {
                events.push(Event::BondWithdrawn {
                    provider: b.provider,
                    stake: t.ntx,
                })
            }
            (GanglionDatum::Bond(b), SpendRedeemer::Slash { job_id }) => {
                events.push(Event::BondSlashed {
                    provider: b.provider,
                    job_id: *job_id,
                    amount: r.bond_loss(t, &b.provider),
                });
            }
            _ => {}
        }
    }
    for t in r.created {
        match &t.datum {
            GanglionDatum::Escrow(e) if !r.spends_escrow(&e.job_id) => {
                events.push(Event::JobLocked {
                    job_id: e.job_id,
                    orchestrator: e.orchestrator,
                    spec: e.spec.clone(),
                    gpus: e.gpus,
                    max_rate: e.max_rate,
                    budget: e.budget,
                    deadline_ms: e.deadline_ms,
                    escrow: t.reference,
                    receipts: ReceiptTerms {
                        key: e.receipt_key,
                        interval_ms: e.receipt_interval_ms,
                    },
                    claim_window_ms: params.claim_window_ms,
                })
            }
            GanglionDatum::Bond(b)
                if !spent
                    .iter()
                    .any(|(s, _)| bond(s).is_some_and(|x| x.provider == b.provider)) =>
            {
                let min = params.min_bond_per_gpu.saturating_mul(b.gpus);
                if t.ntx < min {
                    events.push(Event::Ignored {
                        utxo: t.reference,
                        reason: format!(
                            "bond holds {} NTX, below the minimum {min} for {} GPUs",
                            t.ntx, b.gpus
                        ),
                    });
                    continue;
                }
                events.push(Event::BondPosted {
                    provider: b.provider,
                    attest_key: b.attest_key,
                    peer_id: b.peer_id.clone(),
                    gpus: b.gpus,
                    stake: t.ntx,
                    bond: t.reference,
                    payout: b.payout,
                })
            }
            _ => {}
        }
    }
    // A `Burnt` output counts only in the expire of its job; anywhere else it is junk.
    for (utxo, job_id, _) in &burnt {
        if !r.expires(job_id) {
            events.push(Event::Ignored {
                utxo: *utxo,
                reason: format!("a Burnt datum of job {job_id} outside that job's expire"),
            });
        }
    }
    fx.events.extend(events);
    drop_ignored(&mut fx);
    fx
}

#[cfg(test)]
mod tests {
    use ganglion_contracts::params::AssetClass;
    use pallas_codec::minicbor::{self, Encoder};
    use pallas_traverse::MultiEraTx;

    use super::*;
    use crate::extract::extract_tx;
    use crate::watch::Watch;

    /// `[body {0: #6.258([x, x]), 1: [], 2: 200000}, {5: [[0, 0, Cancel, [1, 1]]]}, true, null]`.
    fn spending_twice(x: &TxoRef) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let r: Result<(), minicbor::encode::Error<std::convert::Infallible>> = (|| {
            e.array(4)?.map(3)?.u8(0)?;
            e.tag(minicbor::data::Tag::new(258))?.array(2)?;
            for _ in 0..2 {
                e.array(2)?.bytes(&x.tx_hash)?.u64(x.index)?;
            }
            e.u8(1)?.array(0)?.u8(2)?.u32(200_000)?;
            // Cancel = Constr 2 [] = #6.123([])
            e.map(1)?.u8(5)?.array(1)?.array(4)?.u8(0)?.u8(0)?;
            e.tag(minicbor::data::Tag::new(123))?.array(0)?;
            e.array(2)?.u8(1)?.u8(1)?;
            e.bool(true)?.null()?;
            Ok(())
        })();
        r.expect("encode");
        buf
    }

    #[test]
    fn an_input_listed_twice_is_spent_and_reported_once() {
        let ntx = AssetClass {
            policy: [0x4e; 28],
            name: b"NTX".to_vec(),
        };
        let watch = Watch::v2(
            [0x5c; 28],
            Params {
                ntx,
                min_bond_per_gpu: 100,
                unbonding_delay_ms: 1,
                claim_window_ms: 1,
            },
        );
        let escrow = TxoRef {
            tx_hash: [0xe5; 32],
            index: 0,
        };
        let tracked = Tracked {
            reference: escrow,
            datum: GanglionDatum::Escrow(EscrowDatum {
                job_id: JobId([1; 32]),
                orchestrator: [2; 28],
                receipt_key: [3; 32],
                spec: vec![1, 2, 3],
                gpus: 1,
                max_rate: 1,
                budget: 10,
                deadline_ms: 1,
                receipt_interval_ms: 1,
                state: JobState::Open,
            }),
            ntx: 10,
            output: None,
        };
        let bytes = spending_twice(&escrow);
        let tx = MultiEraTx::decode(&bytes).expect("decodes (pallas reads a set as a list)");
        assert_eq!(tx.inputs().len(), 2, "the repeat is on the wire");
        let live = |r: &TxoRef| (*r == escrow).then(|| tracked.clone());
        let fx = extract_tx(&watch, &tx, &live);
        assert_eq!(fx.spent, vec![escrow], "spent once");
        let cancels = fx
            .events
            .iter()
            .filter(|e| matches!(e, Event::JobCancelled { .. }))
            .count();
        assert_eq!(cancels, 1, "one cancellation, not two: {:?}", fx.events);
    }
}
