//! The attestations this node received for jobs it takes part in, in the job store's
//! `attestations` tree (key: job id ‖ provider key hash; value: the message's JSON).
//!
//! An orchestrator settles with them, and a provider holds its co-providers' to settle itself
//! when the orchestrator is gone. What is kept follows DESIGN §3.1 G7: an attestation is taken
//! only for a job this node has a live record of and that is assigned on chain, from a
//! provider that assignment names, signed with that assignment's attest key; one per
//! (job, provider), a later one replacing the provider's own; nothing is ever evicted to make
//! room — a job's attestations go when its record is finished. A flood therefore changes no
//! one's record but the sender's own, and the p2p layer rate-limits it per peer.
//!
//! Answering `Stored` promises the provider its attestation reaches the settle, so the
//! message is on disk (flushed) before the answer goes out: an orchestrator killed (`kill -9`)
//! right after a provider attested still settles with that attestation when it restarts.

use ganglion_contracts::datum::JobId;
use ganglion_contracts::params::KeyHash;
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::store::Kv;
use ganglion_indexer::{JobStatus, JobView};
use ganglion_p2p::protocols::{AttestMessage, AttestResponse};
use libp2p::PeerId;

use super::engine::{Ctx, OrchestratorRole, ProviderRole};
use super::store::{JobStore, StoreError};

const TREE: &str = "attestations";

fn key(job: &JobId, provider: &KeyHash) -> Vec<u8> {
    let mut k = job.0.to_vec();
    k.extend_from_slice(provider);
    k
}

impl JobStore {
    /// Writes `msg` (replacing the same provider's earlier one for the job) and flushes: on
    /// return it survives `kill -9`.
    ///
    /// # Errors
    /// Store errors.
    pub fn put_attestation(&self, msg: &AttestMessage) -> Result<(), StoreError> {
        let b = self.backend();
        b.insert(
            TREE,
            &key(&msg.job_id, &msg.provider),
            serde_json::to_vec(msg)?,
        )?;
        b.flush()
    }

    /// The attestations held for `job`, in no particular order.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn attestations(&self, job: &JobId) -> Result<Vec<AttestMessage>, StoreError> {
        self.backend()
            .scan_prefix(TREE, &job.0)?
            .iter()
            .map(|(_, v)| Ok(serde_json::from_slice(v)?))
            .collect()
    }

    /// Drops `job`'s attestations (its records are finished).
    ///
    /// # Errors
    /// Store errors.
    pub fn forget_attestations(&self, job: &JobId) -> Result<(), StoreError> {
        let b = self.backend();
        for (k, _) in b.scan_prefix(TREE, &job.0)? {
            b.remove(TREE, &k)?;
        }
        Ok(())
    }
}

/// Why an attestation is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// This node has no live record of the job, or the job is not assigned on chain.
    #[error("job {0} is not one this node takes part in while it is assigned")]
    UnknownJob(JobId),
    /// The assignment does not name the attesting provider.
    #[error("provider {} is not assigned to job {job}", hex::encode(.provider))]
    NotAssigned {
        /// The job.
        job: JobId,
        /// The named provider.
        provider: KeyHash,
    },
    /// The signature does not verify with the assignment's attest key.
    #[error("the attestation of job {0} does not verify with the assigned attest key")]
    BadSignature(JobId),
}

impl Refusal {
    /// The wire answer.
    pub fn response(&self) -> AttestResponse {
        match self {
            Self::UnknownJob(_) => AttestResponse::UnknownJob,
            Self::NotAssigned { .. } | Self::BadSignature(_) => AttestResponse::Invalid,
        }
    }
}

/// Checks `msg` against the job as the chain shows it (`view`): assigned, naming the provider,
/// signed with its assignment's attest key.
///
/// # Errors
/// The [`Refusal`].
pub fn check(msg: &AttestMessage, view: Option<&JobView>) -> Result<(), Refusal> {
    let Some(v) = view.filter(|v| v.status == JobStatus::Assigned) else {
        return Err(Refusal::UnknownJob(msg.job_id));
    };
    let a = v
        .assignments
        .iter()
        .find(|a| a.provider == msg.provider)
        .ok_or(Refusal::NotAssigned {
            job: msg.job_id,
            provider: msg.provider,
        })?;
    ganglion_contracts::signed::verify(&a.attest_key, &msg.body().signed_bytes(), &msg.signature)
        .map_err(|_| Refusal::BadSignature(msg.job_id))
}

/// Whether this node has a live (unfinished) record of `job`, as orchestrator or provider.
fn takes_part<S: Kv, E: Executor>(ctx: &Ctx<S, E>, job: &JobId) -> Result<bool, StoreError> {
    Ok(ctx
        .store
        .get::<OrchestratorRole>(job)?
        .is_some_and(|r| !r.state.is_terminal())
        || ctx
            .store
            .get::<ProviderRole>(job)?
            .is_some_and(|r| !r.state.is_terminal()))
}

/// Drops `job`'s attestations once no live record of it is left here (both roles finished).
///
/// # Errors
/// Store errors.
pub(crate) fn forget_when_done<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
) -> Result<(), StoreError> {
    if takes_part(ctx, job)? {
        return Ok(());
    }
    ctx.store.forget_attestations(job)
}

/// Answers an inbound attestation: checked ([`check`], for a job this node takes part in),
/// stored and flushed, then `Stored`. `None`: the store failed — no answer, so the provider
/// sees its request fail and sends it again.
pub(crate) fn on_attestation<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    msg: &AttestMessage,
) -> Option<AttestResponse> {
    let job = msg.job_id;
    let verdict = match takes_part(ctx, &job) {
        Ok(true) => {
            let view = ctx.indexer.job(&job, 0).ok().flatten().map(|c| c.value);
            check(msg, view.as_ref())
        }
        Ok(false) => Err(Refusal::UnknownJob(job)),
        Err(e) => {
            tracing::error!(%job, error = %e, "job store unreadable; attestation not answered");
            return None;
        }
    };
    if let Err(refusal) = verdict {
        tracing::debug!(%peer, %refusal, "attestation refused");
        return Some(refusal.response());
    }
    match ctx.store.put_attestation(msg) {
        Ok(()) => {
            tracing::info!(%job, %peer, provider = %hex::encode(msg.provider), "attestation stored");
            Some(AttestResponse::Stored)
        }
        Err(e) => {
            tracing::error!(%job, error = %e, "attestation not stored");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;
    use ganglion_contracts::signed::{AttestationBody, sign};
    use ganglion_contracts::v2::datum::Assignment;

    use crate::store::conformance::{Backing, on_both_backends};

    fn key(i: u8) -> SigningKey {
        SigningKey::from_bytes(&[i; 32])
    }

    fn view(status: JobStatus) -> JobView {
        JobView {
            job_id: JobId([1; 32]),
            orchestrator: [9; 28],
            spec: vec![],
            gpus: 2,
            budget: 100,
            deadline_ms: 1_000,
            status,
            assignments: (0..2u8)
                .map(|i| Assignment {
                    provider: [i; 28],
                    attest_key: key(i).verifying_key().to_bytes(),
                    payout: ganglion_contracts::v2::payout::Payout::enterprise([i; 28]),
                    gpus: 1,
                    rate: 10,
                    accept_by_ms: 0,
                })
                .collect(),
            payments: vec![],
            receipts: None,
            claim_window_end_ms: None,
            claims: vec![],
            history: vec![],
        }
    }

    fn msg(provider: u8, signer: u8) -> AttestMessage {
        let body = AttestationBody {
            job_id: JobId([1; 32]),
            provider: [provider; 28],
            result: vec![1],
            logs: vec![2],
            gpu_seconds: 5,
            exit_code: 0,
        };
        AttestMessage {
            job_id: body.job_id,
            provider: body.provider,
            result: body.result.clone(),
            logs: body.logs.clone(),
            gpu_seconds: body.gpu_seconds,
            exit_code: body.exit_code,
            signature: sign(&key(signer), &body.signed_bytes()),
        }
    }

    #[test]
    fn only_an_assigned_provider_signing_with_its_assigned_key_is_taken() {
        let v = view(JobStatus::Assigned);
        assert_eq!(check(&msg(1, 1), Some(&v)), Ok(()));
        // Signed by the other assigned provider's key: a forgery of provider 1.
        assert_eq!(
            check(&msg(1, 0), Some(&v)),
            Err(Refusal::BadSignature(JobId([1; 32])))
        );
        // A bonded stranger, correctly self-signed, is not in the assignment.
        assert_eq!(
            check(&msg(7, 7), Some(&v)),
            Err(Refusal::NotAssigned {
                job: JobId([1; 32]),
                provider: [7; 28]
            })
        );
        let mut tampered = msg(0, 0);
        tampered.gpu_seconds += 1;
        assert_eq!(
            check(&tampered, Some(&v)),
            Err(Refusal::BadSignature(JobId([1; 32])))
        );
    }

    #[test]
    fn a_job_not_assigned_on_chain_takes_no_attestation() {
        assert_eq!(
            check(&msg(0, 0), None),
            Err(Refusal::UnknownJob(JobId([1; 32])))
        );
        for status in [JobStatus::Locked, JobStatus::Settled, JobStatus::Expired] {
            assert_eq!(
                check(&msg(0, 0), Some(&view(status))),
                Err(Refusal::UnknownJob(JobId([1; 32])))
            );
        }
        assert_eq!(
            Refusal::UnknownJob(JobId([1; 32])).response(),
            AttestResponse::UnknownJob
        );
    }

    on_both_backends!(stored_attestations_are_on_disk_when_put_returns_and_nothing_is_evicted);

    fn stored_attestations_are_on_disk_when_put_returns_and_nothing_is_evicted(b: Backing) {
        let store = b.open();
        // Far more jobs than the old in-memory book kept (1024): none is dropped.
        for j in 0..1_100u32 {
            let mut m = msg(0, 0);
            m.job_id.0[..4].copy_from_slice(&j.to_be_bytes());
            store.put_attestation(&m).expect("put");
        }
        let mut first = msg(0, 0);
        first.job_id.0[..4].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(
            store.attestations(&first.job_id).expect("read"),
            vec![first.clone()]
        );
        // A later one from the same provider replaces its own; another provider's stays.
        let mut again = first.clone();
        again.gpu_seconds = 6;
        store.put_attestation(&again).expect("put");
        let mut other = msg(1, 1);
        other.job_id = first.job_id;
        store.put_attestation(&other).expect("put");
        let mut held = store.attestations(&first.job_id).expect("read");
        held.sort_by_key(|m| m.provider);
        assert_eq!(held, vec![again, other]);
        store.forget_attestations(&first.job_id).expect("forget");
        assert!(store.attestations(&first.job_id).expect("read").is_empty());
    }
}
