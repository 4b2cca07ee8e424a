//! Block → events: pure functions over pallas-traverse transactions and the set of live
//! script UTxOs (escrows and bonds) the store already knows.
//!
//! Only authentic UTxOs count: an escrow must hold its thread token (policy = script hash,
//! name = job id), a bond its bond token (name = provider key hash) and at least
//! `min_bond_per_gpu × gpus` NTX, and both need a well-formed inline datum. Anything else at
//! the script address becomes an [`Event::Ignored`] with the reason. Transactions whose
//! scripts failed (`is_valid = false`) only consume collateral and yield nothing.

use std::collections::BTreeMap;

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::datum::{BondDatum, EscrowDatum, GanglionDatum, JobId, JobState};
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::redeemer::SpendRedeemer;
use ganglion_contracts::tx::Output;
use pallas_primitives::conway::RedeemerTag;
use pallas_traverse::{MultiEraOutput, MultiEraTx};
use serde::{Deserialize, Serialize};

use crate::event::{Event, Payment};
use crate::watch::{Watch, payment_key};

/// A live, authentic script UTxO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    /// Where it is.
    pub reference: TxoRef,
    /// Its datum.
    pub datum: GanglionDatum,
    /// NTX base units it holds.
    pub ntx: u64,
}

/// What one transaction does to the indexer's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxEffects {
    /// Script UTxOs it spent.
    pub spent: Vec<TxoRef>,
    /// Authentic script UTxOs it created.
    pub created: Vec<Tracked>,
    /// Events, in order.
    pub events: Vec<Event>,
}

/// NTX a bond backing `gpus` GPUs must hold.
pub fn min_stake(watch: &Watch, gpus: u64) -> u64 {
    watch.params.min_bond_per_gpu.saturating_mul(gpus)
}

/// Classifies an output at the script address: authentic escrow or bond (token and
/// well-formed datum), or why not. A bond's minimum stake is checked where it is posted
/// ([`extract_tx`]); a slashed bond may continue below it and is then not active.
pub fn classify(watch: &Watch, reference: TxoRef, o: &Output) -> Result<Tracked, String> {
    let datum = o
        .datum
        .as_ref()
        .ok_or_else(|| "no inline datum".to_string())?;
    let datum = GanglionDatum::from_plutus_data(datum).map_err(|e| e.to_string())?;
    let ntx = o.value.quantity_of(&watch.params.ntx);
    match &datum {
        GanglionDatum::Escrow(e) => {
            if o.value.quantity(&watch.script_hash, &e.job_id.0) != 1 {
                return Err(format!(
                    "escrow of job {} without its thread token",
                    e.job_id
                ));
            }
        }
        GanglionDatum::Bond(b) => {
            if o.value.quantity(&watch.script_hash, &b.provider) != 1 {
                return Err(format!(
                    "bond of {} without its bond token",
                    hex::encode(b.provider)
                ));
            }
        }
    }
    Ok(Tracked {
        reference,
        datum,
        ntx,
    })
}

/// The raw address bytes of an output without parsing them (Byron outputs: none).
fn raw_address<'a>(o: &'a MultiEraOutput<'_>) -> Option<&'a [u8]> {
    use pallas_primitives::{babbage, conway};
    match o {
        MultiEraOutput::AlonzoCompatible(x, _) => Some(&x.address),
        MultiEraOutput::Babbage(x) => match &***x {
            babbage::TransactionOutput::Legacy(x) => Some(&x.address),
            babbage::TransactionOutput::PostAlonzo(x) => Some(&x.address),
        },
        MultiEraOutput::Conway(x) => match &***x {
            conway::TransactionOutput::Legacy(x) => Some(&x.address),
            conway::TransactionOutput::PostAlonzo(x) => Some(&x.address),
        },
        MultiEraOutput::Byron(_) => None,
        _ => None,
    }
}

fn spend_redeemers(tx: &MultiEraTx<'_>) -> BTreeMap<u32, SpendRedeemer> {
    tx.redeemers()
        .iter()
        .filter(|r| r.tag() == RedeemerTag::Spend)
        .filter_map(|r| Some((r.index(), SpendRedeemer::from_plutus_data(r.data()).ok()?)))
        .collect()
}

fn escrow(t: &Tracked) -> Option<&EscrowDatum> {
    match &t.datum {
        GanglionDatum::Escrow(e) => Some(e),
        GanglionDatum::Bond(_) => None,
    }
}

fn bond(t: &Tracked) -> Option<&BondDatum> {
    match &t.datum {
        GanglionDatum::Bond(b) => Some(b),
        GanglionDatum::Escrow(_) => None,
    }
}

/// Payments in the first `n` outputs, and the NTX of the output after them (the refund).
fn payouts(watch: &Watch, outputs: &[Output], n: usize) -> (Vec<Payment>, u64) {
    let payments = outputs
        .iter()
        .take(n)
        .map(|o| Payment {
            to: payment_key(&o.address).unwrap_or_default(),
            ntx: o.value.quantity_of(&watch.params.ntx),
        })
        .collect();
    let refund = outputs
        .get(n)
        .map(|o| o.value.quantity_of(&watch.params.ntx))
        .unwrap_or(0);
    (payments, refund)
}

/// The effects of one transaction. `live` answers whether an input is a live script UTxO.
pub fn extract_tx(
    watch: &Watch,
    tx: &MultiEraTx<'_>,
    live: &dyn Fn(&TxoRef) -> Option<Tracked>,
) -> TxEffects {
    let mut fx = TxEffects::default();
    if !tx.is_valid() {
        return fx;
    }
    let chain_outputs = tx.outputs();
    let ours: Vec<usize> = chain_outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| raw_address(o).is_some_and(|a| watch.is_script_address(a)))
        .map(|(i, _)| i)
        .collect();
    // Fast path: no script output and no live script input → nothing to do.
    let inputs = tx.inputs();
    let spends_ours = inputs.iter().any(|i| {
        live(&TxoRef {
            tx_hash: **i.hash(),
            index: i.index(),
        })
        .is_some()
    });
    if ours.is_empty() && !spends_ours {
        return fx;
    }
    let tx_hash = *tx.hash();
    let outputs: Vec<Output> = chain_outputs.iter().map(Output::from_chain).collect();
    for i in ours {
        let o = &outputs[i];
        let reference = TxoRef {
            tx_hash,
            index: i as u64,
        };
        match classify(watch, reference, o) {
            Ok(t) => fx.created.push(t),
            Err(reason) => fx.events.push(Event::Ignored {
                utxo: reference,
                reason,
            }),
        }
    }

    let redeemers = spend_redeemers(tx);
    let mut spent: Vec<(Tracked, Option<SpendRedeemer>)> = Vec::new();
    // Inputs are a set: pallas' `inputs_sorted_set` sorts and drops repeats, so an input
    // listed twice (refused by Conway's decoder, silently merged before protocol version 9)
    // is counted once and redeemer indices point into the deduplicated set, as the ledger's.
    for (i, input) in tx.inputs_sorted_set().iter().enumerate() {
        let reference = TxoRef {
            tx_hash: **input.hash(),
            index: input.index(),
        };
        if let Some(t) = live(&reference) {
            spent.push((t, redeemers.get(&(i as u32)).cloned()));
        }
    }
    fx.spent = spent.iter().map(|(t, _)| t.reference).collect();

    let created_escrow = |id: &JobId| {
        fx.created
            .iter()
            .find(|t| escrow(t).is_some_and(|e| e.job_id == *id))
    };
    let created_bond = |p: &KeyHash| {
        fx.created
            .iter()
            .find(|t| bond(t).is_some_and(|b| b.provider == *p))
    };
    let mut events = Vec::new();
    for (t, redeemer) in &spent {
        match (&t.datum, redeemer) {
            (GanglionDatum::Escrow(e), Some(SpendRedeemer::Assign { acceptances, .. })) => {
                if let Some(next) = created_escrow(&e.job_id)
                    && let Some(EscrowDatum {
                        state:
                            JobState::Assigned {
                                assignments,
                                started_at_ms,
                            },
                        ..
                    }) = escrow(next)
                {
                    events.push(Event::JobAssigned {
                        job_id: e.job_id,
                        assignments: assignments.clone(),
                        started_at_ms: *started_at_ms,
                        escrow: next.reference,
                        acceptances: acceptances.clone(),
                    });
                }
            }
            (GanglionDatum::Escrow(e), Some(SpendRedeemer::Settle { attestations })) => {
                let (payments, refund) = payouts(watch, &outputs, attestations.len());
                events.push(Event::JobSettled {
                    job_id: e.job_id,
                    attestations: attestations.clone(),
                    payments,
                    refund,
                });
            }
            (GanglionDatum::Escrow(e), Some(SpendRedeemer::Cancel)) => {
                let refund = outputs
                    .iter()
                    .filter(|o| payment_key(&o.address) == Some(e.orchestrator))
                    .map(|o| o.value.quantity_of(&watch.params.ntx))
                    .sum();
                events.push(Event::JobCancelled {
                    job_id: e.job_id,
                    refund,
                });
            }
            (GanglionDatum::Escrow(e), Some(SpendRedeemer::Expire { attestations })) => {
                let (payments, refund) = payouts(watch, &outputs, attestations.len());
                let defaulters = match &e.state {
                    JobState::Open => Vec::new(),
                    JobState::Assigned { assignments, .. } => assignments
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| {
                            !attestations.iter().any(|a| a.provider_index == *i as u64)
                        })
                        .map(|(_, a)| a.provider)
                        .collect(),
                };
                events.push(Event::JobExpired {
                    job_id: e.job_id,
                    attestations: attestations.clone(),
                    payments,
                    defaulters,
                    refund,
                });
            }
            (GanglionDatum::Bond(b), Some(SpendRedeemer::Unbond)) => {
                if let Some(next) = created_bond(&b.provider)
                    && let Some(since_ms) = bond(next).and_then(|n| n.unbonding_since_ms)
                {
                    events.push(Event::BondUnbonding {
                        provider: b.provider,
                        since_ms,
                        bond: next.reference,
                    });
                }
            }
            (GanglionDatum::Bond(b), Some(SpendRedeemer::Withdraw)) => {
                events.push(Event::BondWithdrawn {
                    provider: b.provider,
                    stake: t.ntx,
                })
            }
            (GanglionDatum::Bond(b), Some(SpendRedeemer::Slash { job_id })) => {
                let kept = created_bond(&b.provider).map(|n| n.ntx).unwrap_or(0);
                events.push(Event::BondSlashed {
                    provider: b.provider,
                    job_id: *job_id,
                    amount: t.ntx.saturating_sub(kept),
                });
            }
            _ => {}
        }
    }
    for t in &fx.created {
        match &t.datum {
            GanglionDatum::Escrow(e)
                if !spent
                    .iter()
                    .any(|(s, _)| escrow(s).is_some_and(|x| x.job_id == e.job_id)) =>
            {
                events.push(Event::JobLocked {
                    job_id: e.job_id,
                    orchestrator: e.orchestrator,
                    spec: e.spec.clone(),
                    gpus: e.gpus,
                    max_rate: e.max_rate,
                    budget: e.budget,
                    deadline_ms: e.deadline_ms,
                    escrow: t.reference,
                })
            }
            GanglionDatum::Bond(b)
                if !spent
                    .iter()
                    .any(|(s, _)| bond(s).is_some_and(|x| x.provider == b.provider)) =>
            {
                let min = min_stake(watch, b.gpus);
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
                })
            }
            _ => {}
        }
    }
    let ignored: Vec<TxoRef> = events
        .iter()
        .filter_map(|e| match e {
            Event::Ignored { utxo, .. } => Some(*utxo),
            _ => None,
        })
        .collect();
    fx.created.retain(|t| !ignored.contains(&t.reference));
    fx.events.extend(events);
    fx
}

#[cfg(test)]
mod tests {
    use ganglion_contracts::datum::JobId;
    use ganglion_contracts::params::{AssetClass, Params};
    use pallas_codec::minicbor::{self, Encoder};

    use super::*;

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
        let watch = Watch {
            script_hash: [0x5c; 28],
            params: Params {
                ntx,
                min_bond_per_gpu: 100,
                unbonding_delay_ms: 1,
                slash_bps: 0,
            },
        };
        let escrow = TxoRef {
            tx_hash: [0xe5; 32],
            index: 0,
        };
        let tracked = Tracked {
            reference: escrow,
            datum: GanglionDatum::Escrow(EscrowDatum {
                job_id: JobId([1; 32]),
                orchestrator: [2; 28],
                spec: vec![1, 2, 3],
                gpus: 1,
                max_rate: 1,
                budget: 10,
                deadline_ms: 1,
                state: JobState::Open,
            }),
            ntx: 10,
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
