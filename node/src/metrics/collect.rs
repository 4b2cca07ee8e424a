//! Scrape-time collection: [`Sources`] (what a running node owns) read into [`Metrics`].
//!
//! Job counts, histograms and transaction counts come from the durable job store and the
//! executor's table, so they also cover jobs that ran before a restart (a restart resets the
//! histograms and counters to those totals, which Prometheus reads as a counter reset).
//! Each job is observed once per process in each histogram, when its record has both ends of
//! the interval.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ganglion_contracts::time::SlotConfig;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;

use super::registry::{JobLabels, Metrics, TxLabels};
use crate::job::engine::{OrchestratorRecord, OrchestratorRole, ProviderRecord, ProviderRole};
use crate::job::state::{OrchestratorState, ProviderState};
use crate::job::store::{JobStore, StoreError, TxKind};
use ganglion_dispatch::executor::state::JobTable;
use ganglion_p2p as p2p;

/// How long a scrape waits for the p2p event loop before leaving its gauges as they were.
const P2P_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a scrape could not read the node's state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// The job store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The executor's table failed.
    #[error("executor table: {0}")]
    Executor(#[from] ganglion_dispatch::executor::ExecError),
    /// The indexer's store failed.
    #[error("indexer: {0}")]
    Indexer(#[from] ganglion_indexer::Error),
}

/// Every orchestrator state, in the machine's order.
pub const ORCHESTRATOR_STATES: [OrchestratorState; 7] = [
    OrchestratorState::Locked,
    OrchestratorState::Matching,
    OrchestratorState::Assigning,
    OrchestratorState::Assigned,
    OrchestratorState::Settled,
    OrchestratorState::Cancelled,
    OrchestratorState::Expired,
];

/// Every provider state, in the machine's order.
pub const PROVIDER_STATES: [ProviderState; 9] = [
    ProviderState::Reserved,
    ProviderState::Assigned,
    ProviderState::Preparing,
    ProviderState::Running,
    ProviderState::Finished,
    ProviderState::Claiming,
    ProviderState::Paid,
    ProviderState::Failed,
    ProviderState::Slashed,
];

/// Every transaction kind of the intent log.
pub const TX_KINDS: [TxKind; 5] = [
    TxKind::Lock,
    TxKind::Assign,
    TxKind::Claim,
    TxKind::Cancel,
    TxKind::Expire,
];

/// The `state` label of an orchestrator state (its serde name, as `job_status` shows it).
pub fn orchestrator_label(s: OrchestratorState) -> &'static str {
    use OrchestratorState as S;
    match s {
        S::Locked => "locked",
        S::Matching => "matching",
        S::Assigning => "assigning",
        S::Assigned => "assigned",
        S::Settled => "settled",
        S::Cancelled => "cancelled",
        S::Expired => "expired",
    }
}

/// The `state` label of a provider state (its serde name).
pub fn provider_label(s: ProviderState) -> &'static str {
    use ProviderState as S;
    match s {
        S::Reserved => "reserved",
        S::Assigned => "assigned",
        S::Preparing => "preparing",
        S::Running => "running",
        S::Finished => "finished",
        S::Claiming => "claiming",
        S::Paid => "paid",
        S::Failed => "failed",
        S::Slashed => "slashed",
    }
}

/// The `kind` label of a transaction kind (its serde name).
pub fn tx_label(k: TxKind) -> &'static str {
    match k {
        TxKind::Lock => "lock",
        TxKind::Assign => "assign",
        TxKind::Claim => "claim",
        TxKind::Cancel => "cancel",
        TxKind::Expire => "expire",
        TxKind::Rescale => "rescale",
    }
}

/// Chain tip lag, slots: the slot containing `now_ms` (POSIX ms) under `clock` minus
/// `tip_slot`. Negative when the local clock is behind the chain. On a devnet, which forges
/// only when a transaction is pending, it grows while the chain is idle.
pub fn tip_lag_slots(clock: &SlotConfig, now_ms: u64, tip_slot: u64) -> i64 {
    let now = i128::from(clock.slot_at_saturating(now_ms));
    i64::try_from(now - i128::from(tip_slot)).unwrap_or(i64::MAX)
}

/// Dispatch latency of a provider record, seconds: from entering `assigned` (the assignment
/// seen on chain) to `started_ms` (the executor's containers started, POSIX ms) or, without
/// it, to entering `running`. `None` while either end is missing.
pub fn dispatch_latency_s(r: &ProviderRecord, started_ms: Option<u64>) -> Option<f64> {
    let assigned = r
        .history
        .iter()
        .find(|t| t.state == ProviderState::Assigned)?
        .at_ms;
    let started = started_ms.or_else(|| {
        r.history
            .iter()
            .find(|t| t.state == ProviderState::Running)
            .map(|t| t.at_ms)
    })?;
    Some(started.saturating_sub(assigned) as f64 / 1000.0)
}

/// Lock-to-settled duration of an orchestrator record, seconds: from its first history entry
/// (the lock written) to entering `settled`. `None` unless settled.
pub fn settle_duration_s(r: &OrchestratorRecord) -> Option<f64> {
    let first = r.history.first()?.at_ms;
    let settled = r
        .history
        .iter()
        .find(|t| t.state == OrchestratorState::Settled)?
        .at_ms;
    Some(settled.saturating_sub(first) as f64 / 1000.0)
}

/// What a running node gives the metrics to read at each scrape.
pub struct Sources<S: Kv> {
    /// The job store (a clone of the engine's).
    pub store: JobStore,
    /// The executor's table, on a provider.
    pub executor: Option<JobTable>,
    /// The p2p client.
    pub p2p: p2p::Client,
    /// The indexer following the chain.
    pub indexer: Arc<Indexer<S>>,
    /// The chain's slot clock.
    pub clock: SlotConfig,
}

/// [`Metrics`] with the [`Sources`] they are read from: what the `/metrics` endpoint serves.
pub struct Collector<S: Kv> {
    metrics: Metrics,
    sources: Sources<S>,
    dispatched: Mutex<HashSet<JobId>>,
    settled: Mutex<HashSet<JobId>>,
}

impl<S: Kv> std::fmt::Debug for Collector<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector").finish_non_exhaustive()
    }
}

impl<S: Kv> Collector<S> {
    /// Fresh metrics over `sources`.
    pub fn new(sources: Sources<S>) -> Self {
        Self {
            metrics: Metrics::new(),
            sources,
            dispatched: Mutex::default(),
            settled: Mutex::default(),
        }
    }

    /// The metrics (as of the last [`Collector::refresh`]).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Reads every source into the metrics. A p2p event loop that does not answer within
    /// 2 s leaves the p2p gauges as they were (logged); an indexer without a tip leaves the
    /// lag as it was.
    ///
    /// # Errors
    /// [`CollectError`] when the job store, the executor table or the indexer store fails.
    pub async fn refresh(&self) -> Result<(), CollectError> {
        let now_ms = p2p::now_ms();
        self.refresh_p2p().await;
        if let Some(tip) = self.sources.indexer.tip()? {
            let lag = tip_lag_slots(&self.sources.clock, now_ms, tip.slot);
            self.metrics.chain_tip_lag_slots.set(lag);
        }
        let orchestrated = self.sources.store.all::<OrchestratorRole>()?;
        let provided = self.sources.store.all::<ProviderRole>()?;
        self.count_jobs(&orchestrated, &provided);
        self.count_txs(&orchestrated, &provided);
        {
            let mut seen = self.settled.lock().unwrap_or_else(|p| p.into_inner());
            for r in &orchestrated {
                if !seen.contains(&r.job_id)
                    && let Some(s) = settle_duration_s(r)
                {
                    self.metrics.settle_duration.observe(s);
                    seen.insert(r.job_id);
                }
            }
        }
        let mut latencies = Vec::new();
        {
            let seen = self.dispatched.lock().unwrap_or_else(|p| p.into_inner());
            for r in provided.iter().filter(|r| !seen.contains(&r.job_id)) {
                let started = match (&self.sources.executor, &r.dispatch) {
                    (Some(table), Some(d)) => {
                        ganglion_dispatch::executor::RunId::new(d.executor_job.clone())
                            .ok()
                            .map(|id| table.get(&id))
                            .transpose()?
                            .flatten()
                            .and_then(|rec| rec.started_at_unix_ms)
                    }
                    _ => None,
                };
                if let Some(s) = dispatch_latency_s(r, started) {
                    latencies.push((r.job_id, s));
                }
            }
        }
        let mut seen = self.dispatched.lock().unwrap_or_else(|p| p.into_inner());
        for (job, s) in latencies {
            if seen.insert(job) {
                self.metrics.dispatch_latency.observe(s);
            }
        }
        Ok(())
    }

    async fn refresh_p2p(&self) {
        let p2p = &self.sources.p2p;
        match tokio::time::timeout(P2P_TIMEOUT, p2p.connected_peers()).await {
            Ok(Ok(peers)) => {
                self.metrics.p2p_peers.set(gauge_value(peers.len()));
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "metrics: connected peers unavailable"),
            Err(_) => tracing::warn!("metrics: the p2p event loop did not answer (peers)"),
        }
        match tokio::time::timeout(P2P_TIMEOUT, p2p.market()).await {
            Ok(Ok(offers)) => {
                self.metrics.market_offers.set(gauge_value(offers.len()));
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "metrics: market offers unavailable"),
            Err(_) => tracing::warn!("metrics: the p2p event loop did not answer (offers)"),
        }
    }

    fn count_jobs(&self, orchestrated: &[OrchestratorRecord], provided: &[ProviderRecord]) {
        for s in ORCHESTRATOR_STATES {
            let n = orchestrated.iter().filter(|r| r.state == s).count();
            self.metrics
                .jobs
                .get_or_create(&JobLabels {
                    role: "orchestrator",
                    state: orchestrator_label(s),
                })
                .set(gauge_value(n));
        }
        for s in PROVIDER_STATES {
            let n = provided.iter().filter(|r| r.state == s).count();
            self.metrics
                .jobs
                .get_or_create(&JobLabels {
                    role: "provider",
                    state: provider_label(s),
                })
                .set(gauge_value(n));
        }
    }

    fn count_txs(&self, orchestrated: &[OrchestratorRecord], provided: &[ProviderRecord]) {
        let intents = orchestrated
            .iter()
            .flat_map(|r| &r.intents)
            .chain(provided.iter().flat_map(|r| &r.intents));
        let mut totals = [0u64; TX_KINDS.len()];
        for i in intents {
            if let Some(k) = TX_KINDS.iter().position(|k| *k == i.kind) {
                totals[k] += 1;
            }
        }
        for (kind, total) in TX_KINDS.into_iter().zip(totals) {
            let counter = self.metrics.txs_submitted.get_or_create(&TxLabels {
                kind: tx_label(kind),
            });
            // The store's totals only grow; a counter never goes down.
            let have = counter.get();
            if total > have {
                counter.inc_by(total - have);
            }
        }
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::store::{JobRecord, Transition};

    fn serde_name<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_value(v)
            .expect("serialises")
            .as_str()
            .expect("a string")
            .to_string()
    }

    #[test]
    fn labels_are_the_serde_names_of_every_state_and_kind() {
        for s in ORCHESTRATOR_STATES {
            assert_eq!(orchestrator_label(s), serde_name(&s));
        }
        for s in PROVIDER_STATES {
            assert_eq!(provider_label(s), serde_name(&s));
        }
        for k in TX_KINDS {
            assert_eq!(tx_label(k), serde_name(&k));
        }
        let distinct = |v: Vec<&str>| v.iter().collect::<HashSet<_>>().len();
        assert_eq!(
            distinct(ORCHESTRATOR_STATES.map(orchestrator_label).into()),
            7
        );
        assert_eq!(distinct(PROVIDER_STATES.map(provider_label).into()), 9);
        assert_eq!(distinct(TX_KINDS.map(tx_label).into()), 5);
    }

    #[test]
    fn tip_lag_is_wall_clock_slot_minus_tip_slot() {
        let clock = SlotConfig {
            zero_time: 1_000_000,
            zero_slot: 0,
            slot_length: 1000,
        };
        // 12.5 s after zero: slot 12.
        assert_eq!(tip_lag_slots(&clock, 1_012_500, 10), 2);
        assert_eq!(tip_lag_slots(&clock, 1_012_500, 12), 0);
        assert_eq!(tip_lag_slots(&clock, 1_012_500, 15), -3, "clock behind");
        let shelley = SlotConfig {
            zero_time: 1_000_000,
            zero_slot: 4_492_800,
            slot_length: 1000,
        };
        assert_eq!(tip_lag_slots(&shelley, 1_060_000, 4_492_800 + 50), 10);
    }

    fn at(state: ProviderState, at_ms: u64) -> Transition<ProviderState> {
        Transition {
            state,
            at_ms,
            slot: None,
        }
    }

    fn provider_record(history: Vec<Transition<ProviderState>>) -> ProviderRecord {
        let mut r = JobRecord::new(
            JobId([1; 32]),
            ProviderState::Reserved,
            crate::job::provider::ProviderDetail::default(),
            0,
        );
        r.state = history.last().map_or(r.state, |t| t.state);
        r.history = history;
        r
    }

    #[test]
    fn dispatch_latency_runs_from_assigned_to_the_containers_start() {
        use ProviderState as S;
        let r = provider_record(vec![
            at(S::Reserved, 1_000),
            at(S::Assigned, 5_000),
            at(S::Preparing, 5_100),
            at(S::Running, 8_000),
        ]);
        assert_eq!(
            dispatch_latency_s(&r, None),
            Some(3.0),
            "to entering running"
        );
        assert_eq!(
            dispatch_latency_s(&r, Some(7_250)),
            Some(2.25),
            "the executor's start time wins"
        );
        // Fast containers: finished before the engine saw them running.
        let fast = provider_record(vec![
            at(S::Reserved, 1_000),
            at(S::Assigned, 5_000),
            at(S::Preparing, 5_100),
            at(S::Finished, 9_000),
        ]);
        assert_eq!(dispatch_latency_s(&fast, None), None);
        assert_eq!(dispatch_latency_s(&fast, Some(6_000)), Some(1.0));
        let reserved = provider_record(vec![at(S::Reserved, 1_000)]);
        assert_eq!(dispatch_latency_s(&reserved, Some(6_000)), None);
    }
}
