//! Read models kept up to date by [`crate::Indexer`]: a job's view with its full history.

use ganglion_contracts::datum::{Assignment, JobId};
use ganglion_contracts::params::KeyHash;
use serde::{Deserialize, Serialize};

use crate::event::{Event, Payment, Record};

/// Where a job stands, as the chain says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobStatus {
    /// Locked, not assigned.
    Locked,
    /// Assigned to providers.
    Assigned,
    /// Settled: providers paid.
    Settled,
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
    /// Providers, once assigned.
    pub assignments: Vec<Assignment>,
    /// Payments to providers, once settled or expired.
    pub payments: Vec<Payment>,
    /// Every event of the job, oldest first.
    pub history: Vec<Record>,
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
            }
            Event::JobSettled { payments, .. } => {
                self.status = JobStatus::Settled;
                self.payments = payments.clone();
            }
            Event::JobCancelled { .. } => self.status = JobStatus::Cancelled,
            Event::JobExpired { payments, .. } => {
                self.status = JobStatus::Expired;
                self.payments = payments.clone();
            }
            _ => {}
        }
        self.history.push(record.clone());
    }

    /// Providers that were assigned and never attested (from the `JobExpired` event).
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

    /// Height of the latest event.
    pub fn last_height(&self) -> u64 {
        self.history.last().map(|r| r.meta.height).unwrap_or(0)
    }
}
