//! Ganglion's job lifecycle (DESIGN §2, §3): persisted state machines and the drivers that take
//! a job from the orchestrator's lock to the providers being paid, and the audit that
//! re-derives it all from the chain.
//!
//! - [`state`]: the orchestrator and provider state machines and their pure, idempotent
//!   transition function.
//! - [`store`]: the job store: one record per (job, role), history, the transaction intent
//!   log and the dispatch intent that make restarts safe; over a [`store::Backend`], sled on
//!   disk ([`store::JobStore::open`]) or its in-memory twin ([`store::JobStore::in_memory`]),
//!   one conformance suite run on both.
//! - [`chain`]: UTxOs, submission, slot clock, transactions balanced and signed; [`submit`]:
//!   how the node's own transactions leave (their durable intents, re-submission, lapse).
//! - [`cluster`]: [`cluster::ClusterSetup`], the job's network agreed with the other assigned
//!   providers before dispatch (the node implements it with its overlay).
//! - [`accept`]: a provider's accept decision and its `Reserved` record, one step;
//!   [`receipts`]: escrow v2 receipts, what the orchestrator acknowledges and what the provider
//!   keeps, stops on and claims; [`heartbeat`]: the heartbeats that carry them while a job runs,
//!   and with them each provider's live log ([`live_logs`], `job logs --follow`).
//! - [`links`]: the network measurements — this provider's ping row as its offer's signed
//!   links, the orchestrator's latency matrix from the live offers' links (fed to the matcher
//!   for `placement.max_rtt_ms`), the plan's measured pairs kept with its record.
//! - [`orchestrator`], [`provider`]: the drivers, one step per job per pass; [`gpu_pick`]:
//!   which pooled GPUs run a provider's share (meeting the spec, free, MIG rules); [`terms`]: the
//!   terms a job must meet before anything is locked or started; [`quote`]: whether today's
//!   market can place a spec, on whom, at what worst-case cost; [`retry`]: how refused
//!   transactions are classified and backed off; [`failure_note`]: the log a provider attests
//!   for a share that failed or never ran, ending with why; [`unformed`]: a job whose network
//!   did not form after the assign — the providers' reports, the job stopped unpaid and its
//!   spec locked again without the providers that could not be reached.
//! - [`service`]: a running service's replicas on the orchestrator's side: the count wanted
//!   and the rescale that adds, releases and replaces providers; [`usage`]: what each replica
//!   served through the gateway, signed with its receipts and attested in its log.
//! - [`engine`]: [`Engine`], the task running the drivers; how a node starts it.
//! - [`control`]: [`JobControl`], the engine as the RPC server sees it.
//! - [`external`]: [`WalletLocks`], locks paid and signed by a CIP-30 wallet, adopted by the
//!   engine; [`witness`]: joining a wallet's witness set to the transaction it signed.
//! - [`audit`]: `audit verify`, every signature, CID and payment of a job re-checked.

pub mod accept;
pub mod audit;
pub mod chain;
pub mod cluster;
pub mod control;
pub mod engine;
pub mod external;
pub mod failure_note;
pub mod gpu_pick;
pub mod heartbeat;
pub mod links;
pub mod live_logs;
pub mod orchestrator;
pub mod provider;
pub mod quote;
pub mod receipts;
pub mod retry;
pub mod service;
pub mod state;
pub mod store;
pub mod submit;
pub mod terms;
pub mod unformed;
pub mod usage;
pub mod witness;

pub use control::{EngineHandle, JobControl};
pub use engine::{Engine, EngineConfig, EngineError, NoExecutor, Parts};
pub use external::WalletLocks;
