//! The indexer's records and the node's market in their JSON-RPC shapes
//! ([`ganglion_rpc::audit`]).

use cid::Cid;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::tx::TxoRef;
use ganglion_indexer::event::Event;
use ganglion_indexer::query::Confirmed;
use ganglion_indexer::store::Kv;
use ganglion_indexer::{Indexer, JobStatus, JobView};
use ganglion_rpc::audit::{
    AuditAssignment, AuditAttestation, AuditCidUse, AuditJob, AuditProvider, AuditTx, BondInfo,
    MarketOffer, OfferGpus,
};

use super::error::AuditError;
use ganglion_p2p::offers::SignedOffer;

/// A CID's text form; bytes that are not a CID as `0x<hex>`; empty stays empty.
pub fn cid_text(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return String::new();
    }
    Cid::try_from(bytes).map_or_else(|_| format!("0x{}", hex::encode(bytes)), |c| c.to_string())
}

/// `audit_cid`: where the jobs' records name `cid` — a lock's spec, a claim's result or
/// log — oldest first (by slot, then job id).
pub fn cid_uses(jobs: &[JobView], cid: &Cid) -> Vec<AuditCidUse> {
    let is = |bytes: &[u8]| Cid::try_from(bytes).is_ok_and(|c| c == *cid);
    let mut out = Vec::new();
    for v in jobs {
        let job_id = hex::encode(v.job_id.0);
        for r in &v.history {
            match &r.event {
                Event::JobLocked { spec, .. } if is(spec) => out.push(AuditCidUse {
                    job_id: job_id.clone(),
                    field: "spec".into(),
                    index: None,
                    provider: None,
                    slot: r.meta.slot,
                }),
                Event::JobClaimed {
                    index,
                    provider,
                    attestation,
                    ..
                } => {
                    for (field, bytes) in
                        [("result", &attestation.result), ("logs", &attestation.logs)]
                    {
                        if is(bytes) {
                            out.push(AuditCidUse {
                                job_id: job_id.clone(),
                                field: field.into(),
                                index: Some(*index),
                                provider: Some(hex::encode(provider)),
                                slot: r.meta.slot,
                            });
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| (a.slot, &a.job_id).cmp(&(b.slot, &b.job_id)));
    out
}

/// `<tx hash hex>#<index>`.
pub fn txo_text(r: &TxoRef) -> String {
    format!("{}#{}", hex::encode(r.tx_hash), r.index)
}

fn peer_text(bytes: &[u8]) -> String {
    libp2p::PeerId::from_bytes(bytes).map_or_else(|_| hex::encode(bytes), |p| p.to_string())
}

fn status_text(s: JobStatus) -> &'static str {
    match s {
        JobStatus::Locked => "locked",
        JobStatus::Assigned => "assigned",
        JobStatus::Claiming => "claiming",
        JobStatus::Claimed => "claimed",
        JobStatus::Cancelled => "cancelled",
        JobStatus::Expired => "expired",
    }
}

/// An assignment as `audit_job` shows it, before any claim.
fn audit_assignment(a: &ganglion_contracts::v2::datum::Assignment) -> AuditAssignment {
    AuditAssignment {
        provider: hex::encode(a.provider),
        attest_key: hex::encode(a.attest_key),
        gpus: a.gpus,
        rate: a.rate.into(),
        attestation: None,
        paid: None,
        started_at_ms: Some(a.started_at_ms),
        until_ms: Some(a.until_ms),
    }
}

/// `audit_job` from the indexer's view of a job.
pub fn job(c: &Confirmed<JobView>) -> AuditJob {
    let v = &c.value;
    let mut out = AuditJob {
        job_id: hex::encode(v.job_id.0),
        status: status_text(v.status).to_string(),
        orchestrator: hex::encode(v.orchestrator),
        spec: cid_text(&v.spec),
        gpus: v.gpus,
        max_rate: Default::default(),
        budget: v.budget.into(),
        deadline_ms: v.deadline_ms,
        started_at_ms: None,
        // As the indexer's view holds them: the assign's, each rescale's releases applied and
        // added providers appended.
        assignments: v.assignments.iter().map(audit_assignment).collect(),
        refund: None,
        txs: Vec::new(),
        confirmations: c.confirmations,
    };
    for r in &v.history {
        let kind = match &r.event {
            Event::JobLocked { max_rate, .. } => {
                out.max_rate = (*max_rate).into();
                "lock"
            }
            Event::JobAssigned { started_at_ms, .. } => {
                out.started_at_ms = Some(*started_at_ms);
                "assign"
            }
            Event::JobRescaled { .. } => "rescale",
            Event::JobExpired { refund, .. } => {
                out.refund = Some((*refund).into());
                "expire"
            }
            Event::JobClaimed {
                index,
                paid,
                gpu_ms,
                attestation,
                outcome,
                ..
            } => {
                if let Some(a) = usize::try_from(*index)
                    .ok()
                    .and_then(|i| out.assignments.get_mut(i))
                {
                    a.attestation = Some(AuditAttestation {
                        result: cid_text(&attestation.result),
                        logs: cid_text(&attestation.logs),
                        gpu_ms: *gpu_ms,
                        exit_code: attestation.exit_code,
                    });
                    a.paid = Some((*paid).into());
                }
                if let ganglion_indexer::event::ClaimOutcome::Closed { refund } = outcome {
                    out.refund = Some((*refund).into());
                }
                "claim"
            }
            Event::JobCancelled { refund, .. } => {
                out.refund = Some((*refund).into());
                "cancel"
            }
            Event::BondSlashed { .. } => "slash",
            _ => continue,
        };
        out.txs.push(AuditTx {
            kind: kind.to_string(),
            tx_id: hex::encode(r.meta.tx_hash),
            slot: r.meta.slot,
            block: r.meta.height,
            fee: r.meta.fee.into(),
        });
    }
    out
}

/// Every live bond UTxO (active or unbonding) of `provider`, with free GPUs from the
/// indexer's active-bond view.
///
/// # Errors
/// [`AuditError::Indexer`].
pub fn bonds_of<S: Kv>(
    indexer: &Indexer<S>,
    provider: &KeyHash,
) -> Result<Vec<BondInfo>, AuditError> {
    let active = indexer.active_bonds()?;
    let mut out = Vec::new();
    for t in indexer.live_utxos()? {
        if let Some(b) = t.bond()
            && b.provider == *provider
        {
            let free = active
                .iter()
                .find(|x| x.bond == t.reference)
                .map_or(0, |x| x.free_gpus);
            out.push(BondInfo {
                bond: txo_text(&t.reference),
                provider: hex::encode(b.provider),
                attest_key: hex::encode(b.attest_key),
                peer_id: peer_text(&b.peer_id),
                gpus: b.gpus,
                stake: t.ntx.into(),
                free_gpus: free,
                unbonding_since_ms: b.unbonding_since_ms,
            });
        }
    }
    Ok(out)
}

/// Parses `key`: a payment key hash (56 hex digits) or a libp2p peer id (base58) that a bond
/// on chain names (live, or in a `BondPosted` event).
///
/// # Errors
/// [`AuditError::UnknownProvider`] when it is neither, or no bond names the peer.
pub fn provider_key<S: Kv>(indexer: &Indexer<S>, key: &str) -> Result<KeyHash, AuditError> {
    if let Some(h) = hex::decode(key)
        .ok()
        .and_then(|b| <KeyHash>::try_from(b).ok())
    {
        return Ok(h);
    }
    let peer: libp2p::PeerId = key.parse().map_err(|_| {
        AuditError::UnknownProvider(format!("{key:?} (not 56 hex digits nor a peer id)"))
    })?;
    let bytes = peer.to_bytes();
    for t in indexer.live_utxos()? {
        if let Some(b) = t.bond()
            && b.peer_id == bytes
        {
            return Ok(b.provider);
        }
    }
    for r in indexer.events(0, u64::MAX)? {
        if let Event::BondPosted {
            provider, peer_id, ..
        } = r.event
            && peer_id == bytes
        {
            return Ok(provider);
        }
    }
    Err(AuditError::UnknownProvider(key.to_string()))
}

/// `audit_provider` for `provider`.
///
/// # Errors
/// [`AuditError::Indexer`].
pub fn provider<S: Kv>(
    indexer: &Indexer<S>,
    provider: &KeyHash,
) -> Result<AuditProvider, AuditError> {
    let s = indexer.provider(provider)?;
    Ok(AuditProvider {
        provider: hex::encode(provider),
        bonds: bonds_of(indexer, provider)?,
        jobs: s.jobs.iter().map(|j| hex::encode(j.0)).collect(),
        earnings: s.earnings.into(),
        defaults: s.defaults.iter().map(|j| hex::encode(j.0)).collect(),
        slashed: s.slashed.into(),
    })
}

/// A market entry from a signed offer.
pub fn offer(o: &SignedOffer) -> MarketOffer {
    let b = &o.body;
    MarketOffer {
        provider: hex::encode(b.market.provider),
        peer_id: peer_text(&b.peer_id),
        bond: txo_text(&b.bond),
        bond_gpus: b.market.bond_gpus,
        price_per_gpu_hour: b.market.price_per_gpu_hour.into(),
        score: b.market.score,
        bench_version: match b.market.compute {
            ganglion_market::snapshot::Compute::Measured { bench_version } => Some(bench_version),
            ganglion_market::snapshot::Compute::Unmeasured => None,
        },
        uplink_mbps: b.market.uplink_mbps,
        direct_capable: b.market.direct_capable,
        gpus: b
            .market
            .gpus
            .iter()
            .map(|g| OfferGpus {
                model: g.model.name.clone(),
                vram_mib: g.model.vram_mib,
                free: g.free,
                declared: g.declared,
            })
            .collect(),
        addrs: b
            .addrs
            .iter()
            .filter_map(|a| libp2p::Multiaddr::try_from(a.clone()).ok())
            .map(|a| a.to_string())
            .collect(),
        expires_ms: b.expires_ms,
    }
}

#[cfg(test)]
mod tests {
    use ganglion_market::snapshot::Compute;

    use super::*;

    /// `market_offers` shows where the score comes from and the uplink the offer advertises.
    #[test]
    fn a_market_entry_carries_the_offers_compute_and_uplink() {
        let mut o = ganglion_p2p::test_utils::signed_offer(
            [3; 28],
            libp2p::PeerId::random(),
            vec![],
            0,
            u64::MAX,
        );
        o.body.market.uplink_mbps = 940;
        let unmeasured = offer(&o);
        assert_eq!(
            (unmeasured.bench_version, unmeasured.uplink_mbps),
            (None, 940)
        );
        o.body.market.compute = Compute::Measured { bench_version: 3 };
        assert_eq!(offer(&o).bench_version, Some(3));
    }
}
