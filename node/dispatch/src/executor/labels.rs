//! Labels on every container and network the executor creates: they carry the job id so the
//! node reconciles with its job table after a restart (DESIGN §6).

use std::collections::HashMap;

use super::plan::RunId;

/// Marks objects this executor manages (`true`).
pub const MANAGED: &str = "org.ganglion.managed";
/// The job id.
pub const JOB: &str = "org.ganglion.job";
/// The container's node rank.
pub const NODE_RANK: &str = "org.ganglion.node-rank";

/// Labels for `job` (and a container's `node_rank`).
pub fn for_job(job: &RunId, node_rank: Option<u32>) -> HashMap<String, String> {
    let mut labels = HashMap::from([
        (MANAGED.to_string(), "true".to_string()),
        (JOB.to_string(), job.to_string()),
    ]);
    if let Some(rank) = node_rank {
        labels.insert(NODE_RANK.to_string(), rank.to_string());
    }
    labels
}

/// A `label=` filter value selecting `job`'s objects.
pub fn job_filter(job: &RunId) -> String {
    format!("{JOB}={job}")
}
