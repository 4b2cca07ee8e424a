//! Prometheus metrics of a running node ("Metrics"): an OpenMetrics text endpoint
//! at `GET /metrics` on its own listener (`[metrics] listen`, off unless set; the bound
//! address is in `node.json`).
//!
//! - [`registry`]: [`Metrics`], the registry and every metric's name, unit and labels.
//! - [`collect`]: [`Collector`], the metrics read at each scrape from the job store, the
//!   executor table, the p2p swarm and the indexer; the pure computations (labels, tip lag,
//!   dispatch latency).
//! - [`serve`]: the HTTP listener.

pub mod collect;
pub mod registry;
pub mod serve;

pub use collect::{CollectError, Collector, Sources};
pub use registry::{CONTENT_TYPE, Metrics};
