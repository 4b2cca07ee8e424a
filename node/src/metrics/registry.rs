//! [`Metrics`]: the node's Prometheus registry and the metrics in it (names, units, labels).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Content type of [`Metrics::encode`]'s text (OpenMetrics 1.0, which Prometheus scrapes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of `ganglion_jobs`: the record's role and state (snake_case, as `job_status` shows
/// them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct JobLabels {
    /// `orchestrator` or `provider`.
    pub role: &'static str,
    /// The state machine's state, e.g. `settled`, `running`.
    pub state: &'static str,
}

/// Labels of `ganglion_txs_submitted_total`: the transaction kind (`lock`, `assign`, `claim`,
/// `cancel`, `expire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TxLabels {
    /// The intent log's kind, snake_case.
    pub kind: &'static str,
}

/// The node's metrics. Values are refreshed from the job store, the executor table, the p2p
/// swarm and the indexer at each scrape ([`crate::metrics::collect`]); [`Metrics::encode`]
/// writes them.
///
/// | name | type | unit, meaning |
/// |---|---|---|
/// | `ganglion_jobs{role,state}` | gauge | job records in each state of each role (every state listed, 0 when none) |
/// | `ganglion_market_offers` | gauge | live offers the p2p market holds |
/// | `ganglion_p2p_peers` | gauge | connected libp2p peers |
/// | `ganglion_chain_tip_lag_slots` | gauge | slots: wall-clock slot − the indexer's tip slot |
/// | `ganglion_dispatch_latency_seconds` | histogram | s: provider, assignment seen on chain → containers started, once per job |
/// | `ganglion_job_settle_duration_seconds` | histogram | s: orchestrator, lock written → every claim (or the expire) seen, once per job |
/// | `ganglion_txs_submitted_total{kind}` | counter | transactions in the intent logs, by kind |
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `ganglion_jobs`.
    pub jobs: Family<JobLabels, Gauge>,
    /// `ganglion_market_offers`.
    pub market_offers: Gauge,
    /// `ganglion_p2p_peers`.
    pub p2p_peers: Gauge,
    /// `ganglion_chain_tip_lag_slots`.
    pub chain_tip_lag_slots: Gauge,
    /// `ganglion_dispatch_latency_seconds`.
    pub dispatch_latency: Histogram,
    /// `ganglion_job_settle_duration_seconds`.
    pub settle_duration: Histogram,
    /// `ganglion_txs_submitted_total`.
    pub txs_submitted: Family<TxLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry holding every metric of the table above, all zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ganglion");
        let jobs = Family::<JobLabels, Gauge>::default();
        registry.register(
            "jobs",
            "Job records by role and state (the node's job store)",
            jobs.clone(),
        );
        let market_offers = Gauge::default();
        registry.register(
            "market_offers",
            "Live offers held by the p2p market",
            market_offers.clone(),
        );
        let p2p_peers = Gauge::default();
        registry.register("p2p_peers", "Connected libp2p peers", p2p_peers.clone());
        let chain_tip_lag_slots = Gauge::default();
        registry.register_with_unit(
            "chain_tip_lag",
            "Wall-clock slot minus the indexer's tip slot (negative: clock behind the chain)",
            Unit::Other("slots".into()),
            chain_tip_lag_slots.clone(),
        );
        // 0.1 s … 409.6 s: image pulls included.
        let dispatch_latency = Histogram::new(exponential_buckets(0.1, 2.0, 13));
        registry.register_with_unit(
            "dispatch_latency",
            "Provider: assignment seen on chain to the job's containers started",
            Unit::Seconds,
            dispatch_latency.clone(),
        );
        // 1 s … 32768 s (about 9 h).
        let settle_duration = Histogram::new(exponential_buckets(1.0, 2.0, 16));
        registry.register_with_unit(
            "job_settle_duration",
            "Orchestrator: lock written to the last claim seen on chain",
            Unit::Seconds,
            settle_duration.clone(),
        );
        let txs_submitted = Family::<TxLabels, Counter>::default();
        registry.register(
            "txs_submitted",
            "Transactions written to the intent logs before submission, by kind",
            txs_submitted.clone(),
        );
        Self {
            registry,
            jobs,
            market_offers,
            p2p_peers,
            chain_tip_lag_slots,
            dispatch_latency,
            settle_duration,
            txs_submitted,
        }
    }

    /// The registry as OpenMetrics text ([`CONTENT_TYPE`]), ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; the encoder's own errors are formatting errors.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_units_and_types_are_as_documented() {
        let m = Metrics::new();
        m.jobs
            .get_or_create(&JobLabels {
                role: "orchestrator",
                state: "settled",
            })
            .set(2);
        m.chain_tip_lag_slots.set(-3);
        m.dispatch_latency.observe(0.5);
        m.txs_submitted
            .get_or_create(&TxLabels { kind: "lock" })
            .inc();
        let text = m.encode();
        for line in [
            "# TYPE ganglion_jobs gauge",
            "ganglion_jobs{role=\"orchestrator\",state=\"settled\"} 2",
            "# TYPE ganglion_market_offers gauge",
            "# TYPE ganglion_p2p_peers gauge",
            "# TYPE ganglion_chain_tip_lag_slots gauge",
            "# UNIT ganglion_chain_tip_lag_slots slots",
            "ganglion_chain_tip_lag_slots -3",
            "# TYPE ganglion_dispatch_latency_seconds histogram",
            "ganglion_dispatch_latency_seconds_count 1",
            "ganglion_dispatch_latency_seconds_bucket{le=\"0.4\"} 0",
            "ganglion_dispatch_latency_seconds_bucket{le=\"0.8\"} 1",
            "# TYPE ganglion_job_settle_duration_seconds histogram",
            "# TYPE ganglion_txs_submitted counter",
            "ganglion_txs_submitted_total{kind=\"lock\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert_eq!(text.lines().last(), Some("# EOF"));
    }
}
