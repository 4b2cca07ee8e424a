//! [`Engine`]: the node's job lifecycle as one background task over the store, the indexer, the
//! p2p client, the chain and (for a provider) the executor.
//!
//! The engine is *level-triggered*: every [`EngineConfig::poll`] it reads each unfinished job's
//! record and the chain as the indexer sees it, and takes the next step (see
//! [`super::orchestrator`] and [`super::provider`]). Nothing depends on having seen an event
//! once, so a restart — the same store reopened — simply continues: transactions already
//! written in the intent log are looked up on chain and re-submitted byte for byte, never
//! rebuilt; a dispatched job is found in the executor's table, never started twice.
//!
//! # Starting it
//!
//! ```ignore
//! // The parts a node already has: data-dir sled DBs, a following indexer, a running swarm.
//! let store = JobStore::open(&data_dir.join("jobs"))?;
//! let indexer = Arc::new(Indexer::new(SledKv::open(..)?, watch, k));
//! tokio::spawn(ganglion_indexer::sync::run(indexer.clone(), sync_config, cancel));
//! let blocks: Arc<dyn Blockstore> = Arc::new(SledBlockstore::open(data_dir.join("blocks"))?);
//! let (p2p, event_loop, events, inbound) = p2p::new(key, p2p::Config {
//!     blockstore: Some(BitswapStore::new(blocks.clone())), ..cfg }, bonds)?;
//! tokio::spawn(event_loop.run());
//! tokio::spawn(p2p::log_events(events));
//! let chain = ChainAccess::new(n2c_endpoint, magic, env, deployment, payment_key);
//! // orchestrator only:
//! let engine = Engine::<_, NoExecutor>::start(
//!     Parts { store, indexer, p2p, inbound, chain, blockstore: blocks, provider: None },
//!     EngineConfig::default())?;
//! let job = engine.submit(&spec).await?;          // pins the spec, locks the budget
//! engine.orchestrator_record(&job)?;              // state, history, intents
//! engine.cancel(&job).await?;                     // while still open
//! // provider: `provider: Some(ProviderSide { executor, attest, offer, policy, .. })`: the
//! // engine answers accept requests itself (`accept`), and cluster hellos through the side's
//! // `cluster` set-up (`cluster::on_hello`).
//! // JSON-RPC `job_*`: Api::new(settings)?.with_jobs(Arc::new(engine.handle())).into_module()
//! engine.shutdown().await;
//! ```
//!
//! The devnet forges a block only when a transaction is pending, so nothing buries the last
//! block: run the engine there with `depth: 0` (as the lifecycle tests do), or keep
//! transactions flowing. Tests: `node/tests/it/lifecycle/` (claims, cancel, re-match, restart,
//! expire with slashing, a vanished orchestrator, RPC).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_storage::blockstore::Blockstore;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::chain::{ChainAccess, ChainError};
use super::orchestrator::{self, OrchestratorDetail};
use super::provider::{self, ProviderDetail, ProviderSide};
use super::store::{JobStore, Orchestrating, Providing, RecordOf, StoreError};
use ganglion_dispatch::executor::{ExecError, Executor, JobRecord as ExecRecord, JobReport};
use ganglion_market::spec::Ensemble;
use ganglion_p2p as p2p;

/// The receiver of the swarm's inbound requests ([`p2p::inbound`]).
pub type InboundRx = tokio::sync::mpsc::Receiver<p2p::inbound::Inbound>;

/// The orchestrator role's records.
pub type OrchestratorRole = Orchestrating<OrchestratorDetail>;
/// The provider role's records.
pub type ProviderRole = Providing<ProviderDetail>;
/// An orchestrator record.
pub type OrchestratorRecord = RecordOf<OrchestratorRole>;
/// A provider record.
pub type ProviderRecord = RecordOf<ProviderRole>;

/// Engine failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The job store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain (connection, ledger rejection, building).
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// The indexer.
    #[error("indexer: {0}")]
    Indexer(#[from] ganglion_indexer::Error),
    /// The p2p layer.
    #[error("p2p: {0}")]
    P2p(#[from] p2p::Error),
    /// The spec is invalid or could not be stored, read or matched.
    #[error("spec: {0}")]
    Spec(#[source] Box<SpecError>),
    /// Terms no honest run can meet (budget below the window, run past the deadline): refused
    /// before the lock.
    #[error(transparent)]
    Terms(#[from] super::terms::TermsError),
    /// A claim, cancel or expire try failed; reported once per backoff step
    /// ([`super::retry::Retries`]).
    #[error(
        "{kind:?} failed ({class}, {failures} time(s)), {}: {source}",
        super::retry::next_try(.retry_in_ms)
    )]
    Deferred {
        /// The transaction tried.
        kind: super::store::TxKind,
        /// Whether it can succeed later.
        class: super::retry::Class,
        /// Consecutive failures.
        failures: u32,
        /// When it is tried again, ms; `None`: never (fatal).
        retry_in_ms: Option<u64>,
        /// Why it failed.
        #[source]
        source: Box<EngineError>,
    },
    /// The validator refused a claim above its bound: the GPU-ms claimed exceed what the
    /// receipts and the elapsed time allow (DESIGN §3.1 G1). Only a cheating provider gets
    /// here: an honest one claims at most the bound.
    #[error(
        "the validator refused the claim: {claimed_gpu_ms} GPU-ms is above its bound of \
         {bound_gpu_ms} GPU-ms (G1: GPUs × (the last receipt + one interval, or the claim's \
         validity lower bound, − the start)): {source}"
    )]
    ClaimAboveBound {
        /// GPU-ms claimed.
        claimed_gpu_ms: u64,
        /// The validator's bound for this claim, GPU-ms.
        bound_gpu_ms: u64,
        /// The refusal.
        #[source]
        source: ChainError,
    },
    /// The executor.
    #[error("executor: {0}")]
    Exec(#[from] ExecError),
    /// The blockstore (e.g. making pinned blocks durable).
    #[error("blockstore: {0}")]
    Blockstore(#[source] Box<ganglion_storage::blockstore::Error>),
    /// The job is not (or no longer) in a state that allows the call.
    #[error("job {job}: {reason}")]
    State {
        /// The job.
        job: JobId,
        /// Why.
        reason: String,
    },
}

/// Why a job's ensemble spec could not be checked, stored, fetched, read or matched
/// ([`EngineError::Spec`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The spec breaks a rule of `docs/ensemble-spec.md`, or is not a spec.
    #[error(transparent)]
    Invalid(#[from] ganglion_market::spec::SpecError),
    /// The spec could not be serialised for pinning.
    #[error("serialising the spec: {0}")]
    Serialise(#[source] serde_json::Error),
    /// The escrow's spec CID does not parse.
    #[error("the spec CID does not parse: {0}")]
    Cid(#[source] cid::Error),
    /// The orchestrator's peer id (recorded at accept) does not parse.
    #[error("the orchestrator's peer id does not parse: {0}")]
    OrchestratorPeer(#[source] libp2p::identity::ParseError),
    /// The spec could not be imported into the blockstore (UnixFS).
    #[error("pinning the spec: {0}")]
    Import(#[source] ganglion_storage::unixfs::Error),
    /// The spec's blocks could not be pinned.
    #[error("pinning the spec: {0}")]
    Pin(#[source] ganglion_storage::blockstore::Error),
    /// The spec's blocks are not readable as one file.
    #[error("reading the spec from the blockstore: {0}")]
    Read(#[source] ganglion_storage::unixfs::Error),
    /// The market's offers do not form a snapshot to match against.
    #[error("the market snapshot: {0}")]
    Snapshot(#[from] ganglion_market::snapshot::SnapshotError),
    /// Every UTxO of the wallet already seeded a job this node tracks: no new job id.
    #[error(
        "the wallet has no UTxO to seed a new job id (every one seeded a job this node tracks)"
    )]
    NoSeed,
    /// The spec's budget is more NTX than the paying wallet holds: nothing can lock it.
    #[error(
        "budget {} > balance {}: the wallet cannot lock the budget (fund it, or lower `budget_ntx`)",
        ganglion_rpc::amount::ntx_text(*budget),
        ganglion_rpc::amount::ntx_text(*balance)
    )]
    BudgetOverBalance {
        /// The spec's budget, NTX base units.
        budget: u64,
        /// NTX the wallet's UTxOs hold, base units.
        balance: u64,
    },
}

impl From<SpecError> for EngineError {
    fn from(e: SpecError) -> Self {
        Self::Spec(Box::new(e))
    }
}

impl EngineError {
    /// Whether trying again with the same inputs can help ([`crate::retry::classify`]): a
    /// [`Class::Fatal`](crate::retry::Class::Fatal) failure (a request the builder or the validator
    /// refuses, terms that cannot be met) never succeeds by waiting; anything else (the chain or
    /// the swarm unreachable, a UTxO not yet seen, wallet funds) may.
    pub fn retry_class(&self) -> crate::retry::Class {
        crate::retry::classify(self)
    }
}

impl From<ganglion_storage::blockstore::Error> for EngineError {
    fn from(e: ganglion_storage::blockstore::Error) -> Self {
        Self::Blockstore(Box::new(e))
    }
}

/// Timing and policy. Units in the names; defaults in [`EngineConfig::default`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Blocks on top of an event before the engine acts on it (DESIGN §4; devnet default 1).
    pub depth: u64,
    /// Interval between two passes over the unfinished jobs (default 250 ms).
    pub poll: Duration,
    /// A submitted transaction not seen on chain after this long is re-submitted, same bytes
    /// (default 5 s).
    pub resubmit_after_ms: u64,
    /// Lock validity window, slots from now (default 120).
    pub validity_slots: u64,
    /// Keep declared (not detected) GPUs in the market snapshot: devnet only (default false).
    pub allow_declared_gpus: bool,
    /// A provider record still `Reserved` this long after its reservation ended fails
    /// (default 60 s).
    pub reservation_grace_ms: u64,
    /// The receipt interval this node's locks ask for, ms (escrow v2: the orchestrator
    /// acknowledges each provider's work at least this often; default 10 s).
    pub receipt_interval_ms: u64,
    /// A provider stops its containers after this many receipt intervals without a new
    /// receipt (the orchestrator is silent or gone; DESIGN §3.1 G2; default 3, at least 1).
    pub missed_receipts: u32,
    /// A cheating provider, for the devnet demo and tests only (default 1: honest): claims
    /// this many times the GPU-ms it measured, without the receipts' bound, so that the
    /// validator's claim bound (G1) is seen refusing it.
    pub overclaim_factor: u64,
    /// A provider that refused for want of free GPUs, or did not answer, is left out of this
    /// job's matching for this long, then considered again (default 10 s): busy is transient.
    /// Other refusals (price, deadline, bond) exclude it for the job's life.
    pub retry_excluded_ms: u64,
    /// A provider re-publishes its offer this often (default 2 s).
    pub offer_every: Duration,
    /// Validity of each published offer, ms (default 60 s).
    pub offer_ttl_ms: u64,
    /// The clock, POSIX ms (default the system clock; it must agree with the chain's slot
    /// clock, since validity intervals are computed from it).
    pub clock: fn() -> u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            depth: 1,
            poll: Duration::from_millis(250),
            resubmit_after_ms: 5_000,
            validity_slots: 120,
            allow_declared_gpus: false,
            reservation_grace_ms: 60_000,
            receipt_interval_ms: 10_000,
            missed_receipts: 3,
            overclaim_factor: 1,
            retry_excluded_ms: 10_000,
            offer_every: Duration::from_secs(2),
            offer_ttl_ms: 60_000,
            clock: p2p::now_ms,
        }
    }
}

/// What the engine runs on. See the module docs for how a node builds these.
pub struct Parts<S: Kv, E: Executor> {
    /// The job store (a node's: its own sled DB in the data dir, [`JobStore::open`]).
    pub store: JobStore,
    /// An indexer kept following the chain by the caller (`ganglion_indexer::sync::run`).
    pub indexer: Arc<Indexer<S>>,
    /// The p2p client.
    pub p2p: p2p::Client,
    /// The inbound requests the swarm hands over (the engine is their only reader): accept
    /// requests (answered by [`super::accept`]) and heartbeats ([`super::heartbeat`]).
    pub inbound: InboundRx,
    /// Chain access with the node's payment key.
    pub chain: ChainAccess,
    /// The blockstore bitswap serves (the same one given to `p2p::Config::blockstore`): specs
    /// are pinned into it and fetched into it.
    pub blockstore: Arc<dyn Blockstore>,
    /// Set on a provider node.
    pub provider: Option<ProviderSide<E>>,
    /// The key signing this node's receipts as an orchestrator (escrow v2: its verification
    /// key is the escrow's `receipt_key`; the daemon keeps it in `keys/receipt.key`).
    pub receipt_key: ed25519_dalek::SigningKey,
}

/// An executor that cannot exist: the type of an orchestrator-only engine's executor.
#[derive(Debug)]
pub enum NoExecutor {}

impl Executor for NoExecutor {
    async fn run(&self, _: ganglion_dispatch::executor::JobPlan) -> Result<JobReport, ExecError> {
        match *self {}
    }
    async fn recover(&self) -> Result<Vec<JobReport>, ExecError> {
        match *self {}
    }
    fn record(
        &self,
        _: &ganglion_dispatch::executor::RunId,
    ) -> Result<Option<ExecRecord>, ExecError> {
        match *self {}
    }
    async fn stop(&self, _: &ganglion_dispatch::executor::RunId, _: &str) -> Result<(), ExecError> {
        match *self {}
    }
    async fn has_image(&self, _: &str) -> Result<bool, ExecError> {
        match *self {}
    }
}

/// Shared by the loop and the handle.
pub(crate) struct Ctx<S: Kv, E: Executor> {
    pub store: JobStore,
    pub indexer: Arc<Indexer<S>>,
    pub p2p: p2p::Client,
    pub chain: ChainAccess,
    pub blockstore: Arc<dyn Blockstore>,
    pub provider: Option<ProviderSide<E>>,
    pub config: EngineConfig,
    /// Serialises every chain action of this node (driver passes, cancel, submit).
    pub actions: Mutex<()>,
    /// Serialises accept decisions ([`super::accept::answer`]): two never race for GPUs.
    pub accepting: Mutex<()>,
    /// Last (re)submission of each transaction, POSIX ms (in memory).
    pub submitted: std::sync::Mutex<HashMap<[u8; 32], u64>>,
    /// Executor jobs this process runs (in memory; the executor's table is the durable side).
    pub running: std::sync::Mutex<HashSet<String>>,
    /// Backoff of failed claim and expire tries.
    pub retries: super::retry::Retries,
    /// The orchestrator's receipt key ([`Parts::receipt_key`]).
    pub receipt_key: ed25519_dalek::SigningKey,
    /// Orchestrator: the last receipt given per (job, assignment index): when (POSIX ms) and
    /// the GPU-ms the heartbeat reported (in memory; a restart only lets one receipt come
    /// early).
    pub receipts_given: std::sync::Mutex<HashMap<(JobId, u64), (u64, u64)>>,
    /// Provider: the last heartbeat sent per job, POSIX ms (in memory).
    pub heartbeats_sent: std::sync::Mutex<HashMap<JobId, u64>>,
    /// Orchestrator: the latest live log each provider named in a heartbeat, per (job,
    /// assignment index) ([`super::live_logs`]; in memory: a restart forgets them until the
    /// next heartbeats).
    pub live_logs: std::sync::Mutex<HashMap<(JobId, u64), super::live_logs::Seen>>,
    /// Orchestrator: each routed replica as this process's gateway sees it (cumulative counts,
    /// healthy now), per (job, assignment index) ([`super::usage::record`]; in memory).
    pub served: std::sync::Mutex<HashMap<(JobId, u64), super::usage::AtGateway>>,
    /// Orchestrator: whether this node's gateway routes its services (receipts for a service's
    /// replica then need it healthy there, [`super::usage::healthy`]).
    pub gateway: std::sync::atomic::AtomicBool,
    /// Provider: jobs whose orchestrator answered that their replica is not healthy yet, and
    /// when first ([`super::heartbeat::beat`]: a replica loading gets the starting grace).
    pub not_healthy: std::sync::Mutex<HashMap<JobId, u64>>,
    /// Orchestrator: what was signed for each (job, assignment index) before this process's
    /// gateway counted anything for it ([`super::usage::to_sign`]).
    pub served_base: std::sync::Mutex<HashMap<(JobId, u64), ganglion_p2p::protocols::ServedUsage>>,
    /// The background work of this engine (job runs, the executor's recovery): closed and
    /// waited for by [`Engine::shutdown`].
    pub tasks: TaskTracker,
    /// Cancelled when the engine stops; tracked tasks end on it.
    pub stopping: CancellationToken,
}

impl<S: Kv, E: Executor> Ctx<S, E> {
    pub(crate) fn chain_magic(&self) -> u64 {
        self.chain.magic()
    }

    pub(crate) fn now(&self) -> u64 {
        (self.config.clock)()
    }

    /// The live bond of `provider` signing with `attest_key` (its first bond when `None`),
    /// as the indexer sees it now: the UTxO an assign spends and a claim releases (it moves
    /// with each of them, DESIGN §3.1 G5). The orchestrator's assign, the provider's accept
    /// (its free GPUs), offer and claim all judge this one bond.
    ///
    /// # Errors
    /// [`EngineError`] from the indexer's store.
    pub(crate) fn live_bond(
        &self,
        provider: &ganglion_contracts::params::KeyHash,
        attest_key: Option<&[u8; 32]>,
    ) -> Result<Option<ganglion_indexer::query::ActiveBond>, EngineError> {
        Ok(self
            .indexer
            .provider(provider)?
            .bonds
            .into_iter()
            .find(|b| attest_key.is_none_or(|k| b.datum.attest_key == *k)))
    }

    /// Whether `tx` is due for a (re)submission, and marks it submitted now if so.
    pub(crate) fn due(&self, tx: &[u8; 32], written_ms: u64) -> bool {
        let now = self.now();
        let mut m = self.submitted.lock().unwrap_or_else(|p| p.into_inner());
        let last = *m.get(tx).unwrap_or(&written_ms);
        if now.saturating_sub(last) >= self.config.resubmit_after_ms {
            m.insert(*tx, now);
            true
        } else {
            m.entry(*tx).or_insert(written_ms);
            false
        }
    }
}

/// The running job engine. See the module docs.
pub struct Engine<S: Kv + 'static, E: Executor + 'static> {
    ctx: Arc<Ctx<S, E>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
    /// Answers the swarm's inbound requests; hands their receiver back when it stops.
    inbound: JoinHandle<InboundRx>,
    /// Cancelled when the engine's task ends, however it ends (returned or panicked).
    finished: CancellationToken,
}

impl<S: Kv + 'static, E: Executor + 'static> Engine<S, E> {
    /// Starts the engine's task on the current tokio runtime. A provider's executor is asked
    /// to `recover` first (adopting containers of a previous run), in the background.
    ///
    /// # Errors
    /// None: it always returns `Ok`.
    pub fn start(parts: Parts<S, E>, config: EngineConfig) -> Result<Self, EngineError> {
        let Parts {
            store,
            indexer,
            p2p,
            inbound,
            chain,
            blockstore,
            provider,
            receipt_key,
        } = parts;
        let ctx = Arc::new(Ctx {
            store,
            indexer,
            p2p,
            chain,
            blockstore,
            provider,
            config,
            actions: Mutex::new(()),
            accepting: Mutex::new(()),
            submitted: std::sync::Mutex::new(HashMap::new()),
            running: std::sync::Mutex::new(HashSet::new()),
            retries: super::retry::Retries::default(),
            receipt_key,
            receipts_given: std::sync::Mutex::new(HashMap::new()),
            heartbeats_sent: std::sync::Mutex::new(HashMap::new()),
            live_logs: std::sync::Mutex::new(HashMap::new()),
            served: std::sync::Mutex::new(HashMap::new()),
            gateway: std::sync::atomic::AtomicBool::new(false),
            not_healthy: std::sync::Mutex::new(HashMap::new()),
            served_base: std::sync::Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            stopping: CancellationToken::new(),
        });
        let cancel = ctx.stopping.clone();
        if let Some(p) = &ctx.provider {
            let executor = p.executor.clone();
            let stopping = ctx.stopping.clone();
            ctx.tasks.spawn(async move {
                tokio::select! {
                    () = stopping.cancelled() => {}
                    r = executor.recover() => if let Err(e) = r {
                        tracing::warn!(error = %e, "executor recovery failed");
                    },
                }
            });
        }
        let inbound = ctx.tasks.spawn(answer_inbound(ctx.clone(), inbound));
        let finished = CancellationToken::new();
        let done = finished.clone().drop_guard();
        let task = tokio::spawn({
            let (ctx, cancel) = (ctx.clone(), cancel.clone());
            async move {
                let _done = done;
                run(ctx, cancel).await;
            }
        });
        Ok(Self {
            ctx,
            cancel,
            task,
            inbound,
            finished,
        })
    }

    /// Orchestrator: validates `spec`, pins it (UnixFS, CIDv1) into the blockstore, builds,
    /// records and submits the lock of `spec.budget_ntx` NTX with `spec.deadline_ms`. Returns
    /// the job id; the engine drives the rest.
    ///
    /// # Errors
    /// [`EngineError::Spec`], [`EngineError::Chain`] (funds, ledger rejection),
    /// [`EngineError::Store`].
    pub async fn submit(&self, spec: &Ensemble) -> Result<JobId, EngineError> {
        let _guard = self.ctx.actions.lock().await;
        orchestrator::submit(&self.ctx, spec).await
    }

    /// Orchestrator: cancels a job whose escrow is still open (refund, token burnt).
    ///
    /// # Errors
    /// [`EngineError::State`] once assigned or finished, chain and store errors.
    pub async fn cancel(&self, job: &JobId) -> Result<(), EngineError> {
        let _guard = self.ctx.actions.lock().await;
        orchestrator::cancel(&self.ctx, job).await
    }

    /// The orchestrator record of `job`.
    ///
    /// # Errors
    /// Store errors.
    pub fn orchestrator_record(
        &self,
        job: &JobId,
    ) -> Result<Option<OrchestratorRecord>, EngineError> {
        Ok(self.ctx.store.get::<OrchestratorRole>(job)?)
    }

    /// The provider record of `job`.
    ///
    /// # Errors
    /// Store errors.
    pub fn provider_record(&self, job: &JobId) -> Result<Option<ProviderRecord>, EngineError> {
        Ok(self.ctx.store.get::<ProviderRole>(job)?)
    }

    /// A cloneable, object-safe handle for the RPC server (`ganglion_node::rpc::Api::with_jobs`).
    pub fn handle(&self) -> super::control::EngineHandle<S, E> {
        super::control::EngineHandle {
            ctx: self.ctx.clone(),
        }
    }

    /// The job store.
    pub fn store(&self) -> &JobStore {
        &self.ctx.store
    }

    /// Resolves when the engine's task has ended, whether [`Engine::shutdown`] stopped it, it
    /// returned or it panicked (the node's supervisor watches it).
    pub fn finished(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.finished.clone().cancelled_owned()
    }

    /// Stops the engine's task (between steps) and waits for it, then drains its tracked
    /// tasks: job runs stop supervising their containers (which keep running: the executor's
    /// durable table and [`Executor::recover`] adopt them at the next start, as after a crash)
    /// and the executor's recovery stops. On return nothing of this engine runs any more.
    /// Returns the swarm's inbound receiver (for an engine restarted on the same swarm), or
    /// `None` when the task answering it panicked.
    pub async fn shutdown(self) -> Option<InboundRx> {
        self.cancel.cancel();
        let _ = self.task.await;
        self.ctx.tasks.close();
        self.ctx.tasks.wait().await;
        self.inbound.await.ok()
    }

    /// Background tasks of this engine still running (job runs, the executor's recovery).
    pub fn tracked_tasks(&self) -> usize {
        self.ctx.tasks.len()
    }
}

/// Answers the swarm's inbound requests (accept requests, cluster hellos, heartbeats): the one
/// place where this node decides what its peers asked. One at a time (so two accept decisions
/// never race), apart from the driver passes (so a slow chain action never delays an answer
/// past the requester's timeout). Ends when the engine stops or the swarm is gone.
async fn answer_inbound<S: Kv + 'static, E: Executor + 'static>(
    ctx: Arc<Ctx<S, E>>,
    mut inbound: InboundRx,
) -> InboundRx {
    use p2p::inbound::Inbound;
    loop {
        let request = tokio::select! {
            () = ctx.stopping.cancelled() => return inbound,
            r = inbound.recv() => match r {
                Some(r) => r,
                None => return inbound,
            },
        };
        let sent = match request {
            Inbound::Accept {
                peer,
                request,
                responder,
            } => {
                // Its spec is fetched first: in a task of its own, so a slow requester holds up
                // no heartbeat; the decisions still go one at a time (`Ctx::accepting`).
                let ctx = ctx.clone();
                ctx.tasks.clone().spawn(async move {
                    let answer = super::accept::answer(&ctx, peer, &request).await;
                    if let Err(e) = ctx.p2p.respond_accept(responder, answer).await {
                        tracing::debug!(error = %e, "accept answer not sent");
                    }
                });
                Ok(())
            }
            Inbound::Cluster {
                peer,
                request,
                responder,
            } => {
                let setup = ctx.provider.as_ref().and_then(|p| p.cluster.as_deref());
                let answer = super::cluster::on_hello(setup, peer, &request);
                ctx.p2p.respond_cluster(responder, answer).await
            }
            Inbound::Heartbeat {
                peer,
                request,
                responder,
            } => {
                let answer = super::heartbeat::on_heartbeat(&ctx, peer, &request);
                ctx.p2p.respond_heartbeat(responder, answer).await
            }
        };
        if sent.is_err() {
            return inbound;
        }
    }
}

async fn run<S: Kv + 'static, E: Executor + 'static>(
    ctx: Arc<Ctx<S, E>>,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(ctx.config.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut offer = tokio::time::interval(ctx.config.offer_every);
    offer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = offer.tick() => provider::publish_offer(&ctx).await,
            _ = tick.tick() => {
                // A stop cuts a pass where it is: every step is safe to cut (intents are
                // written before their transaction leaves; the next start re-reads them).
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = async {
                        if let Err(e) = p2p::bonds::refresh(&ctx.indexer, &ctx.p2p).await {
                            tracing::warn!(error = %e, "bond snapshot refresh failed");
                        }
                        let _guard = ctx.actions.lock().await;
                        orchestrator::pass(&ctx).await;
                        provider::pass(&ctx).await;
                    } => {}
                }
            }
        }
    }
}
