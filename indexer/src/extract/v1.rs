//! Protocol v1 (`ganglion`): its datums and redeemers read into events, and v1 shapes
//! converted into the v2 shapes the events and views hold (deleted with v1).

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::datum::{BondDatum, EscrowDatum, GanglionDatum, JobId, JobState};
use ganglion_contracts::params::{KeyHash, Params, PolicyId};
use ganglion_contracts::redeemer::SpendRedeemer;
use ganglion_contracts::tx::Output;
use ganglion_contracts::v2;
use ganglion_contracts::v2::payout::Payout;
use serde::{Deserialize, Deserializer};

use super::{Datum, Scan, Tracked, TxEffects, drop_ignored};
use crate::event::{Event, Payment};
use crate::watch::payment_key;

/// A v1 assignment in v2's shape: paid at the provider's enterprise address (v1 pays the
/// provider's payment key); accept-by 0 (v1 acceptances carry none).
pub(crate) fn assignment(a: &ganglion_contracts::datum::Assignment) -> v2::datum::Assignment {
    v2::datum::Assignment {
        provider: a.provider,
        attest_key: a.attest_key,
        payout: Payout::enterprise(a.provider),
        gpus: a.gpus,
        rate: a.rate,
        accept_by_ms: 0,
    }
}

/// A v1 bond in v2's shape: its payout is the provider's enterprise address.
pub(crate) fn bond(b: &BondDatum) -> v2::datum::BondDatum {
    v2::datum::BondDatum {
        provider: b.provider,
        attest_key: b.attest_key,
        peer_id: b.peer_id.clone(),
        payout: Payout::enterprise(b.provider),
        gpus: b.gpus,
        unbonding_since_ms: b.unbonding_since_ms,
        commitments: Vec::new(),
    }
}

/// Serde: a list of assignments as stored, v2's shape or (records written before v2) v1's,
/// converted by [`assignment`].
///
/// # Errors
/// An entry of neither shape.
pub(crate) fn assignments<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<v2::datum::Assignment>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        V2(v2::datum::Assignment),
        V1(ganglion_contracts::datum::Assignment),
    }
    Ok(Vec::<Stored>::deserialize(d)?
        .into_iter()
        .map(|s| match s {
            Stored::V2(a) => a,
            Stored::V1(a) => assignment(&a),
        })
        .collect())
}

/// Classifies a v1 output at the script address (see [`super::classify`]).
pub(crate) fn classify(
    script_hash: &PolicyId,
    params: &Params,
    reference: TxoRef,
    o: &Output,
) -> Result<Tracked, String> {
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
    }
    Ok(Tracked {
        reference,
        datum: Datum::V1(datum),
        ntx,
    })
}

fn datum(t: &Tracked) -> Option<&GanglionDatum> {
    match &t.datum {
        Datum::V1(d) => Some(d),
        Datum::V2(_) => None,
    }
}

fn escrow(t: &Tracked) -> Option<&EscrowDatum> {
    match datum(t)? {
        GanglionDatum::Escrow(e) => Some(e),
        GanglionDatum::Bond(_) => None,
    }
}

fn bond_of(t: &Tracked) -> Option<&BondDatum> {
    match datum(t)? {
        GanglionDatum::Bond(b) => Some(b),
        GanglionDatum::Escrow(_) => None,
    }
}

/// Payments in the first `n` outputs, and the NTX of the output after them (the refund).
fn payouts(params: &Params, outputs: &[Output], n: usize) -> (Vec<Payment>, u64) {
    let payments = outputs
        .iter()
        .take(n)
        .map(|o| Payment {
            to: payment_key(&o.address).unwrap_or_default(),
            ntx: o.value.quantity_of(&params.ntx),
        })
        .collect();
    let refund = outputs
        .get(n)
        .map(|o| o.value.quantity_of(&params.ntx))
        .unwrap_or(0);
    (payments, refund)
}

/// The effects of one transaction under v1.
pub(crate) fn extract(script_hash: &PolicyId, params: &Params, scan: &Scan) -> TxEffects {
    let mut fx = TxEffects::default();
    let outputs = &scan.outputs;
    for &i in &scan.ours {
        let reference = scan.reference(i);
        match classify(script_hash, params, reference, &outputs[i]) {
            Ok(t) => fx.created.push(t),
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

    let created_escrow = |id: &JobId| {
        fx.created
            .iter()
            .find(|t| escrow(t).is_some_and(|e| e.job_id == *id))
    };
    let created_bond = |p: &KeyHash| {
        fx.created
            .iter()
            .find(|t| bond_of(t).is_some_and(|b| b.provider == *p))
    };
    let mut events = Vec::new();
    for (t, redeemer) in &spent {
        let Some(d) = datum(t) else { continue };
        match (d, redeemer) {
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
                        assignments: assignments.iter().map(assignment).collect(),
                        started_at_ms: *started_at_ms,
                        escrow: next.reference,
                        acceptances: acceptances.clone(),
                    });
                }
            }
            (GanglionDatum::Escrow(e), Some(SpendRedeemer::Settle { attestations })) => {
                let (payments, refund) = payouts(params, outputs, attestations.len());
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
                    .map(|o| o.value.quantity_of(&params.ntx))
                    .sum();
                events.push(Event::JobCancelled {
                    job_id: e.job_id,
                    refund,
                });
            }
            (GanglionDatum::Escrow(e), Some(SpendRedeemer::Expire { attestations })) => {
                let (payments, refund) = payouts(params, outputs, attestations.len());
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
                    slashes: Vec::new(),
                    recovered: 0,
                    burnt: 0,
                });
            }
            (GanglionDatum::Bond(b), Some(SpendRedeemer::Unbond)) => {
                if let Some(next) = created_bond(&b.provider)
                    && let Some(since_ms) = bond_of(next).and_then(|n| n.unbonding_since_ms)
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
        match datum(t) {
            Some(GanglionDatum::Escrow(e))
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
                    receipts: None,
                    claim_window_ms: None,
                })
            }
            Some(GanglionDatum::Bond(b))
                if !spent
                    .iter()
                    .any(|(s, _)| bond_of(s).is_some_and(|x| x.provider == b.provider)) =>
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
                    payout: None,
                })
            }
            _ => {}
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
        let watch = Watch::v1(
            [0x5c; 28],
            Params {
                ntx,
                min_bond_per_gpu: 100,
                unbonding_delay_ms: 1,
                slash_bps: 0,
            },
        );
        let escrow = TxoRef {
            tx_hash: [0xe5; 32],
            index: 0,
        };
        let tracked = Tracked {
            reference: escrow,
            datum: Datum::V1(GanglionDatum::Escrow(EscrowDatum {
                job_id: JobId([1; 32]),
                orchestrator: [2; 28],
                spec: vec![1, 2, 3],
                gpus: 1,
                max_rate: 1,
                budget: 10,
                deadline_ms: 1,
                state: JobState::Open,
            })),
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

    #[test]
    fn records_stored_before_v2_still_read_with_v1_assignments_converted() {
        let v1 = ganglion_contracts::datum::Assignment {
            provider: [3; 28],
            attest_key: [4; 32],
            gpus: 2,
            rate: 5,
        };
        let mut json = serde_json::json!({
            "type": "JobAssigned",
            "job_id": JobId([1; 32]),
            "assignments": [v1],
            "started_at_ms": 9,
            "escrow": TxoRef { tx_hash: [2; 32], index: 0 },
        });
        let event: Event = serde_json::from_value(json.clone()).expect("a v1 record reads");
        let Event::JobAssigned { assignments, .. } = &event else {
            panic!("{event:?}")
        };
        assert_eq!(assignments, &vec![assignment(&v1)]);
        assert_eq!(assignments[0].payout, Payout::enterprise([3; 28]));
        // A record in v2's shape reads as written.
        let v2 = v2::datum::Assignment {
            accept_by_ms: 77,
            ..assignment(&v1)
        };
        json["assignments"] = serde_json::json!([v2]);
        let event: Event = serde_json::from_value(json).expect("a v2 record reads");
        assert!(
            matches!(&event, Event::JobAssigned { assignments, .. } if assignments == &vec![v2])
        );
    }
}
