//! Read models kept up to date by [`crate::Indexer`]: a job's view with its full history.

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::{Assignment, JobId};
use serde::{Deserialize, Serialize};

use crate::event::{ClaimOutcome, Event, Payment, ReceiptTerms, Record};

/// Where a job stands, as the chain says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobStatus {
    /// Locked, not assigned.
    Locked,
    /// Assigned to providers; none has claimed yet.
    Assigned,
    /// Some assignments claimed, the escrow continues for the others.
    Claiming,
    /// Every assignment claimed; the escrow closed and the rest was refunded.
    Claimed,
    /// Cancelled by the orchestrator.
    Cancelled,
    /// Expired after its deadline.
    Expired,
}

/// Everything the chain says about one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    /// Job id.
    pub job_id: JobId,
    /// Orchestrator key hash.
    #[serde(with = "hex::serde")]
    pub orchestrator: KeyHash,
    /// Spec CID bytes.
    #[serde(with = "hex::serde")]
    pub spec: Vec<u8>,
    /// GPUs asked for.
    pub gpus: u64,
    /// NTX locked.
    pub budget: u64,
    /// POSIX ms.
    pub deadline_ms: u64,
    /// Current status.
    pub status: JobStatus,
    /// Providers, once assigned (a rescale releases some and adds others at the end).
    pub assignments: Vec<Assignment>,
    /// Payments to providers, one per claim, in chain order.
    pub payments: Vec<Payment>,
    /// Receipt key and interval.
    pub receipts: ReceiptTerms,
    /// POSIX ms after which no claim is possible and the escrow may expire: the deadline
    /// plus the deployment's claim window.
    pub claim_window_end_ms: u64,
    /// Per assignment (same order as `assignments`), its claim once made (empty until
    /// assigned).
    pub claims: Vec<Option<ClaimView>>,
    /// Every event of the job, oldest first.
    pub history: Vec<Record>,
}

/// One assignment's claim, as the view keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    /// GPU-milliseconds attested.
    pub gpu_ms: u64,
    /// NTX base units paid.
    pub paid: u64,
    /// POSIX ms the orchestrator's receipt acknowledged, if the claim carried one.
    pub acknowledged_until_ms: Option<u64>,
    /// The claim transaction's id.
    #[serde(with = "hex::serde")]
    pub tx_hash: [u8; 32],
}

impl JobView {
    /// A new view from its `JobLocked` record.
    pub fn locked(record: &Record) -> Option<Self> {
        match &record.event {
            Event::JobLocked {
                job_id,
                orchestrator,
                spec,
                gpus,
                budget,
                deadline_ms,
                receipts,
                claim_window_ms,
                ..
            } => Some(Self {
                job_id: *job_id,
                orchestrator: *orchestrator,
                spec: spec.clone(),
                gpus: *gpus,
                budget: *budget,
                deadline_ms: *deadline_ms,
                status: JobStatus::Locked,
                assignments: Vec::new(),
                payments: Vec::new(),
                receipts: *receipts,
                claim_window_end_ms: deadline_ms.saturating_add(*claim_window_ms),
                claims: Vec::new(),
                history: vec![record.clone()],
            }),
            _ => None,
        }
    }

    /// Folds a later record of this job into the view.
    pub fn apply(&mut self, record: &Record) {
        match &record.event {
            Event::JobAssigned { assignments, .. } => {
                self.status = JobStatus::Assigned;
                self.assignments = assignments.clone();
                self.claims = vec![None; assignments.len()];
            }
            Event::JobRescaled {
                added, released, ..
            } => {
                for r in released {
                    if let Some(a) = usize::try_from(r.index)
                        .ok()
                        .and_then(|i| self.assignments.get_mut(i))
                    {
                        a.until_ms = r.until_ms;
                    }
                }
                self.assignments.extend(added.iter().cloned());
                self.claims.resize(self.assignments.len(), None);
            }
            Event::JobClaimed {
                index,
                provider,
                gpu_ms,
                paid,
                receipt,
                outcome,
                ..
            } => {
                self.status = match outcome {
                    ClaimOutcome::Continues { .. } => JobStatus::Claiming,
                    ClaimOutcome::Closed { .. } => JobStatus::Claimed,
                };
                let claim = ClaimView {
                    gpu_ms: *gpu_ms,
                    paid: *paid,
                    acknowledged_until_ms: receipt.as_ref().map(|r| r.acknowledged_until_ms),
                    tx_hash: record.meta.tx_hash,
                };
                if let Some(slot) = usize::try_from(*index)
                    .ok()
                    .and_then(|i| self.claims.get_mut(i))
                {
                    *slot = Some(claim);
                }
                self.payments.push(Payment {
                    to: *provider,
                    ntx: *paid,
                });
            }
            Event::JobCancelled { .. } => self.status = JobStatus::Cancelled,
            Event::JobExpired { .. } => self.status = JobStatus::Expired,
            _ => {}
        }
        self.history.push(record.clone());
    }

    /// Providers that were assigned and never claimed, from the `JobExpired` event.
    pub fn defaulters(&self) -> Vec<KeyHash> {
        self.history
            .iter()
            .filter_map(|r| match &r.event {
                Event::JobExpired { defaulters, .. } => Some(defaulters.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// NTX base units paid to providers so far by their claims.
    pub fn paid(&self) -> u64 {
        self.payments.iter().map(|p| p.ntx).sum()
    }

    /// When the assignment started, POSIX ms: the assign's validity lower bound (`None`
    /// before the assign).
    pub fn started_at_ms(&self) -> Option<u64> {
        self.history.iter().rev().find_map(|r| match &r.event {
            Event::JobAssigned { started_at_ms, .. } => Some(*started_at_ms),
            _ => None,
        })
    }

    /// Whether assignment `index` has claimed its pay.
    pub fn has_claimed(&self, index: usize) -> bool {
        self.claims.get(index).is_some_and(Option::is_some)
    }

    /// Whether the escrow still holds funds on-chain (locked, assigned or claiming).
    pub fn is_open(&self) -> bool {
        matches!(
            self.status,
            JobStatus::Locked | JobStatus::Assigned | JobStatus::Claiming
        )
    }

    /// Height of the latest event.
    pub fn last_height(&self) -> u64 {
        self.history.last().map(|r| r.meta.height).unwrap_or(0)
    }
}
