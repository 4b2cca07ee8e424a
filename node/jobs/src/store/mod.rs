//! The durable job store: one record per (job id, role) with its state, the history of
//! its transitions, an *intent log* of the transactions it submitted and its dispatch intent.
//!
//! Records are JSON in a [`Backend`]'s named trees, one tree per role ([`Role::NAME`]), keyed by
//! the job id; [`super::receipts`] keeps a provider's best receipts in a tree of its own
//! (`receipts`) in the same backend. A node runs [`SledBackend`] ([`JobStore::open`], its data
//! dir's `jobs.sled`); tests and tools can run [`MemoryBackend`] ([`JobStore::in_memory`]), its
//! twin, held to the same semantics by one conformance suite run on both.
//!
//! - [`backend`]: the [`Backend`] trait, bytes in and out.
//! - [`SledBackend`]: on disk; [`MemoryBackend`]: in memory, the readable spec.
//!
//! Crash safety ("never submits the same logical transaction twice, never dispatches
//! twice"): before a transaction is submitted its kind, hash and signed bytes are written and
//! flushed ([`JobStore::record_intent`]). After a restart the driver finds the intent, looks the
//! hash up on chain through the indexer and, while it is not there, re-submits *the same
//! bytes* (the same transaction, which the ledger accepts at most once) instead of building a
//! second one. Likewise the executor job id is written ([`JobStore::record_dispatch`]) before
//! the executor is called; the executor's own table then refuses a second start of that id and
//! its `recover` adopts the running containers.

use std::path::Path;
use std::sync::Arc;

use ganglion_contracts::v2::datum::JobId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::state::{IllegalTransition, Machine, OrchestratorState, ProviderState, transition};

pub mod backend;
#[cfg(test)]
pub(crate) mod conformance;
mod memory;
mod sled;

pub use self::sled::{SledBackend, SledError};
pub use backend::{Backend, Entry, Swap};
pub use memory::MemoryBackend;

/// Job store failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The sled backend failed.
    #[error("job store: {0}")]
    Sled(#[from] SledError),
    /// A record did not (de)serialise.
    #[error("job store record: {0}")]
    Codec(#[from] serde_json::Error),
    /// No record for the job in this role.
    #[error("no {role} record for job {job}")]
    Unknown {
        /// The role.
        role: &'static str,
        /// The job.
        job: JobId,
    },
    /// A record for the job already exists in this role.
    #[error("job {job} already has a {role} record")]
    Exists {
        /// The role.
        role: &'static str,
        /// The job.
        job: JobId,
    },
    /// The event is not legal in the record's state.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
}

/// A transaction kind in the intent log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxKind {
    /// Escrow lock.
    Lock,
    /// Escrow assign.
    Assign,
    /// A provider's claim of its own pay (escrow v2 `Claim`).
    Claim,
    /// Escrow cancel.
    Cancel,
    /// Escrow expire (with slashes).
    Expire,
    /// A running service's rescale: providers added, assignments released.
    Rescale,
}

/// A transaction written down before it was submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxIntent {
    /// What it does.
    pub kind: TxKind,
    /// Its id (blake2b-256 of the body).
    #[serde(with = "hex::serde")]
    pub tx_hash: [u8; 32],
    /// The signed transaction (Conway CBOR), re-submitted as is after a restart.
    #[serde(with = "hex::serde")]
    pub signed: Vec<u8>,
    /// When it was written, POSIX ms.
    pub written_ms: u64,
    /// First slot at which it is no longer valid (`None`: no upper bound).
    pub valid_until_slot: Option<u64>,
}

/// The executor job written down before the executor was asked to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchIntent {
    /// The executor's job id (container names `ganglion-<id>-r<rank>` derive from it).
    pub executor_job: String,
    /// When it was written, POSIX ms.
    pub written_ms: u64,
    /// The pooled GPUs this node's share runs on ([`crate::gpu_pick::PooledGpu::id`]: UUIDs),
    /// chosen by [`crate::gpu_pick::pick`] and written here before the executor sees the job:
    /// a restart re-plans onto them, and this node's other jobs see them as held until the
    /// record stops holding GPUs. Empty in records written before it existed (and for jobs
    /// with no GPU on this node).
    #[serde(default)]
    pub gpus: Vec<String>,
}

/// One transition in a record's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition<S> {
    /// The state entered.
    pub state: S,
    /// When, POSIX ms (node clock).
    pub at_ms: u64,
    /// The chain slot that caused it, when a chain event did.
    pub slot: Option<u64>,
}

/// One job in one role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "S: Serialize, D: Serialize",
    deserialize = "S: DeserializeOwned, D: DeserializeOwned"
))]
pub struct JobRecord<S, D> {
    /// The job.
    pub job_id: JobId,
    /// Its state.
    pub state: S,
    /// Every state entered, first to last (the initial state included).
    pub history: Vec<Transition<S>>,
    /// Transactions submitted, in order.
    pub intents: Vec<TxIntent>,
    /// The dispatch, once written.
    pub dispatch: Option<DispatchIntent>,
    /// What the role keeps about the job.
    pub detail: D,
}

impl<S: Copy, D> JobRecord<S, D> {
    /// A fresh record in `state` at `now_ms`.
    pub fn new(job_id: JobId, state: S, detail: D, now_ms: u64) -> Self {
        Self {
            job_id,
            state,
            history: vec![Transition {
                state,
                at_ms: now_ms,
                slot: None,
            }],
            intents: Vec::new(),
            dispatch: None,
            detail,
        }
    }

    /// The newest intent of `kind`.
    pub fn intent(&self, kind: TxKind) -> Option<&TxIntent> {
        self.intents.iter().rev().find(|i| i.kind == kind)
    }
}

/// A role: which tree its records live in, its state machine and its detail.
pub trait Role {
    /// Name (tree name, errors).
    const NAME: &'static str;
    /// Its state machine.
    type State: Machine + Serialize + DeserializeOwned;
    /// What it keeps per job.
    type Detail: Serialize + DeserializeOwned + Clone;
}

/// The orchestrator role.
#[derive(Debug, Clone, Copy)]
pub struct Orchestrating<D>(std::marker::PhantomData<D>);
impl<D: Serialize + DeserializeOwned + Clone> Role for Orchestrating<D> {
    const NAME: &'static str = "orchestrator";
    type State = OrchestratorState;
    type Detail = D;
}

/// The provider role.
#[derive(Debug, Clone, Copy)]
pub struct Providing<D>(std::marker::PhantomData<D>);
impl<D: Serialize + DeserializeOwned + Clone> Role for Providing<D> {
    const NAME: &'static str = "provider";
    type State = ProviderState;
    type Detail = D;
}

/// The record type of role `R`.
pub type RecordOf<R> = JobRecord<<R as Role>::State, <R as Role>::Detail>;

/// The job store over a [`Backend`]: sled on disk ([`JobStore::open`]) or its in-memory twin
/// ([`JobStore::in_memory`]). Cheap to clone (the clones share the backend).
#[derive(Clone)]
pub struct JobStore {
    backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for JobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobStore").finish_non_exhaustive()
    }
}

impl JobStore {
    /// Opens (or creates) the sled store in folder `path`.
    ///
    /// # Errors
    /// [`StoreError::Sled`] (e.g. another process holds it).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Self::with_backend(SledBackend::open(path)?))
    }

    /// An empty store in memory ([`MemoryBackend`]): the same semantics as [`JobStore::open`]'s,
    /// nothing kept past the last clone.
    pub fn in_memory() -> Self {
        Self::with_backend(MemoryBackend::new())
    }

    /// The store over `backend` (e.g. one that wraps a real backend to inject faults).
    pub fn with_backend(backend: impl Backend + 'static) -> Self {
        Self {
            backend: Arc::new(backend),
        }
    }

    /// The backend, for the store's other tree (`receipts`, [`super::receipts`]).
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    fn save<R: Role>(&self, record: &RecordOf<R>) -> Result<(), StoreError> {
        self.backend
            .insert(R::NAME, &record.job_id.0, serde_json::to_vec(record)?)?;
        self.backend.flush()
    }

    /// Creates the record of a new job.
    ///
    /// # Errors
    /// [`StoreError::Exists`], store errors.
    pub fn create<R: Role>(&self, record: &RecordOf<R>) -> Result<(), StoreError> {
        let value = serde_json::to_vec(record)?;
        match self
            .backend
            .compare_and_swap(R::NAME, &record.job_id.0, None, Some(value))?
        {
            Swap::Swapped => self.backend.flush(),
            Swap::Conflict { .. } => Err(StoreError::Exists {
                role: R::NAME,
                job: record.job_id,
            }),
        }
    }

    /// The record of `job`, if any.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn get<R: Role>(&self, job: &JobId) -> Result<Option<RecordOf<R>>, StoreError> {
        Ok(match self.backend.get(R::NAME, &job.0)? {
            Some(v) => Some(serde_json::from_slice(&v)?),
            None => None,
        })
    }

    fn require<R: Role>(&self, job: &JobId) -> Result<RecordOf<R>, StoreError> {
        self.get::<R>(job)?.ok_or(StoreError::Unknown {
            role: R::NAME,
            job: *job,
        })
    }

    /// Every record of the role, in job id order.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn all<R: Role>(&self) -> Result<Vec<RecordOf<R>>, StoreError> {
        self.backend
            .iter(R::NAME)?
            .iter()
            .map(|(_, v)| Ok(serde_json::from_slice(v)?))
            .collect()
    }

    /// Applies `event` to the job's state (see [`transition`]); a change is appended to the
    /// history with `now_ms` and `slot` and flushed. Returns the new state.
    ///
    /// # Errors
    /// [`StoreError::Unknown`], [`StoreError::Illegal`], store errors.
    pub fn apply<R: Role>(
        &self,
        job: &JobId,
        event: <R::State as Machine>::Event,
        now_ms: u64,
        slot: Option<u64>,
    ) -> Result<R::State, StoreError> {
        self.apply_with::<R>(job, event, None, now_ms, slot)
    }

    /// [`apply`](Self::apply), replacing the role detail with `detail` (when given) in the
    /// same write: after a crash the record holds both the new detail and the new state, or
    /// neither — never a detail whose state did not follow (a re-match's cleared plan left in
    /// `Assigning`, say). An illegal event writes nothing.
    ///
    /// # Errors
    /// [`StoreError::Unknown`], [`StoreError::Illegal`], store errors.
    pub fn apply_with<R: Role>(
        &self,
        job: &JobId,
        event: <R::State as Machine>::Event,
        detail: Option<R::Detail>,
        now_ms: u64,
        slot: Option<u64>,
    ) -> Result<R::State, StoreError> {
        let mut r = self.require::<R>(job)?;
        let to = transition(r.state, event)?;
        let changed = to != r.state;
        if changed {
            r.state = to;
            r.history.push(Transition {
                state: to,
                at_ms: now_ms,
                slot,
            });
        }
        if let Some(d) = detail {
            r.detail = d;
            self.save::<R>(&r)?;
        } else if changed {
            self.save::<R>(&r)?;
        }
        Ok(to)
    }

    /// Changes `job`'s record with `change` only if `keep` holds for it at that moment:
    /// an atomic compare-and-swap (retried on a concurrent write), flushed. Returns whether
    /// the record was changed.
    ///
    /// # Errors
    /// [`StoreError::Unknown`], store errors.
    pub fn update_if<R: Role>(
        &self,
        job: &JobId,
        keep: impl Fn(&RecordOf<R>) -> bool,
        change: impl Fn(&mut RecordOf<R>),
    ) -> Result<bool, StoreError> {
        loop {
            let old = self
                .backend
                .get(R::NAME, &job.0)?
                .ok_or(StoreError::Unknown {
                    role: R::NAME,
                    job: *job,
                })?;
            let mut r: RecordOf<R> = serde_json::from_slice(&old)?;
            if !keep(&r) {
                return Ok(false);
            }
            change(&mut r);
            let new = serde_json::to_vec(&r)?;
            let swap = self
                .backend
                .compare_and_swap(R::NAME, &job.0, Some(&old), Some(new))?;
            if swap == Swap::Swapped {
                self.backend.flush()?;
                return Ok(true);
            }
        }
    }

    /// Replaces the role detail of `job` (flushed).
    ///
    /// # Errors
    /// [`StoreError::Unknown`], store errors.
    pub fn set_detail<R: Role>(&self, job: &JobId, detail: R::Detail) -> Result<(), StoreError> {
        let mut r = self.require::<R>(job)?;
        r.detail = detail;
        self.save::<R>(&r)
    }

    /// Writes a transaction intent durably (flushed) — call before submitting it.
    ///
    /// # Errors
    /// [`StoreError::Unknown`], store errors.
    pub fn record_intent<R: Role>(&self, job: &JobId, intent: TxIntent) -> Result<(), StoreError> {
        let mut r = self.require::<R>(job)?;
        if !r.intents.iter().any(|i| i.tx_hash == intent.tx_hash) {
            r.intents.push(intent);
            self.save::<R>(&r)?;
        }
        Ok(())
    }

    /// Writes the dispatch intent durably (flushed) unless one exists; returns the one that
    /// holds (the existing one after a restart).
    ///
    /// # Errors
    /// [`StoreError::Unknown`], store errors.
    pub fn record_dispatch<R: Role>(
        &self,
        job: &JobId,
        intent: DispatchIntent,
    ) -> Result<DispatchIntent, StoreError> {
        let mut r = self.require::<R>(job)?;
        if let Some(d) = &r.dispatch {
            return Ok(d.clone());
        }
        r.dispatch = Some(intent.clone());
        self.save::<R>(&r)?;
        Ok(intent)
    }
}

#[cfg(test)]
mod tests {
    //! Run on both backends (`sled::…`, `memory::…`).

    use super::*;
    use crate::state::{OrchestratorEvent, ProviderEvent};
    use crate::store::conformance::{Backing, on_both_backends};

    type O = Orchestrating<Vec<u8>>;
    type P = Providing<()>;

    fn intent(kind: TxKind, b: u8) -> TxIntent {
        TxIntent {
            kind,
            tx_hash: [b; 32],
            signed: vec![b, b],
            written_ms: 1,
            valid_until_slot: Some(9),
        }
    }

    on_both_backends!(
        a_conditional_update_changes_only_a_record_that_still_qualifies,
        records_survive_a_reopen_with_history_and_intents,
        a_second_create_and_illegal_events_are_refused,
        the_first_dispatch_intent_holds,
        a_transition_with_its_detail_is_one_write,
    );

    fn a_transition_with_its_detail_is_one_write(b: Backing) {
        let job = JobId([5; 32]);
        {
            let s = b.open();
            s.create::<O>(&JobRecord::new(job, OrchestratorState::Locked, vec![1], 10))
                .expect("create");
            // Illegal: neither the state nor the detail changes.
            assert!(matches!(
                s.apply_with::<O>(
                    &job,
                    OrchestratorEvent::SettleConfirmed,
                    Some(vec![9]),
                    11,
                    None
                ),
                Err(StoreError::Illegal(_))
            ));
            assert_eq!(
                s.apply_with::<O>(
                    &job,
                    OrchestratorEvent::LockConfirmed,
                    Some(vec![2]),
                    12,
                    None
                )
                .expect("legal"),
                OrchestratorState::Matching
            );
            // No state change still writes the detail.
            s.apply_with::<O>(
                &job,
                OrchestratorEvent::LockConfirmed,
                Some(vec![3]),
                13,
                None,
            )
            .expect("idempotent");
        }
        let r = b.open().get::<O>(&job).expect("get").expect("known");
        assert_eq!(r.state, OrchestratorState::Matching);
        assert_eq!(r.detail, vec![3]);
        assert_eq!(r.history.len(), 2, "{:?}", r.history);
    }

    fn a_conditional_update_changes_only_a_record_that_still_qualifies(b: Backing) {
        let s = b.open();
        let job = JobId([3; 32]);
        s.create::<O>(&JobRecord::new(job, OrchestratorState::Locked, vec![1], 10))
            .expect("create");
        let locked = |r: &RecordOf<O>| r.state == OrchestratorState::Locked;
        assert!(
            s.update_if::<O>(&job, locked, |r| r.detail.push(2))
                .expect("update")
        );
        s.apply::<O>(&job, OrchestratorEvent::LockConfirmed, 20, None)
            .expect("legal");
        assert!(
            !s.update_if::<O>(&job, locked, |r| r.detail.push(3))
                .expect("no update")
        );
        assert_eq!(
            s.get::<O>(&job).expect("read").expect("some").detail,
            vec![1, 2]
        );
        assert!(matches!(
            s.update_if::<O>(&JobId([4; 32]), locked, |_| {}),
            Err(StoreError::Unknown { .. })
        ));
    }

    fn records_survive_a_reopen_with_history_and_intents(b: Backing) {
        let job = JobId([7; 32]);
        {
            let s = b.open();
            s.create::<O>(&JobRecord::new(job, OrchestratorState::Locked, vec![1], 10))
                .expect("create");
            s.record_intent::<O>(&job, intent(TxKind::Lock, 1))
                .expect("intent");
            s.record_intent::<O>(&job, intent(TxKind::Lock, 1))
                .expect("same intent again");
            assert_eq!(
                s.apply::<O>(&job, OrchestratorEvent::LockConfirmed, 20, Some(5))
                    .expect("apply"),
                OrchestratorState::Matching
            );
            // Re-delivered: no change, no history entry.
            s.apply::<O>(&job, OrchestratorEvent::LockConfirmed, 21, Some(5))
                .expect("idempotent");
            s.create::<P>(&JobRecord::new(job, ProviderState::Reserved, (), 10))
                .expect("the same job in the other role");
        }
        let s = b.open();
        let r = s.get::<O>(&job).expect("get").expect("known");
        assert_eq!(r.state, OrchestratorState::Matching);
        assert_eq!(r.history.len(), 2);
        assert_eq!(r.history[1].slot, Some(5));
        assert_eq!(r.intents.len(), 1, "one intent per transaction");
        assert_eq!(r.intent(TxKind::Lock), Some(&intent(TxKind::Lock, 1)));
        assert_eq!(r.intent(TxKind::Claim), None);
        assert_eq!(r.detail, vec![1]);
        assert_eq!(
            s.get::<P>(&job).expect("get").expect("known").state,
            ProviderState::Reserved
        );
    }

    fn a_second_create_and_illegal_events_are_refused(b: Backing) {
        let s = b.open();
        let job = JobId([1; 32]);
        s.create::<P>(&JobRecord::new(job, ProviderState::Reserved, (), 0))
            .expect("create");
        assert!(matches!(
            s.create::<P>(&JobRecord::new(job, ProviderState::Reserved, (), 0)),
            Err(StoreError::Exists { .. })
        ));
        assert!(matches!(
            s.apply::<P>(&job, ProviderEvent::PaymentSeen, 0, None),
            Err(StoreError::Illegal(_))
        ));
        assert!(matches!(
            s.apply::<P>(&JobId([2; 32]), ProviderEvent::Failed, 0, None),
            Err(StoreError::Unknown { .. })
        ));
    }

    fn the_first_dispatch_intent_holds(b: Backing) {
        let s = b.open();
        let job = JobId([3; 32]);
        s.create::<P>(&JobRecord::new(job, ProviderState::Assigned, (), 0))
            .expect("create");
        let first = DispatchIntent {
            executor_job: "a".into(),
            written_ms: 1,
            gpus: vec!["GPU-a".into()],
        };
        let second = DispatchIntent {
            executor_job: "b".into(),
            written_ms: 2,
            gpus: vec!["GPU-b".into()],
        };
        assert_eq!(
            s.record_dispatch::<P>(&job, first.clone()).expect("1"),
            first
        );
        assert_eq!(s.record_dispatch::<P>(&job, second).expect("2"), first);
    }

    #[test]
    fn a_dispatch_intent_written_before_its_gpus_were_recorded_still_loads() {
        let old = r#"{"executor_job":"a","written_ms":1}"#;
        let d: DispatchIntent = serde_json::from_str(old).expect("loads");
        assert_eq!(
            d,
            DispatchIntent {
                executor_job: "a".into(),
                written_ms: 1,
                gpus: vec![],
            }
        );
    }
}
