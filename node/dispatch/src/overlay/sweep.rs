//! Teardown of orphaned pods: after a
//! crash the node's TUNs die with its file descriptors, but the Docker Engine keeps the job
//! sandboxes (and every workload joined to them) running, and with them the pods' network
//! namespaces. On start the node removes every pod of a job it no longer runs.
//!
//! Sandboxes are found by their [`SANDBOX_LABEL`] (the job id) and [`OWNER_LABEL`] (the node
//! that made them: several nodes may share one engine, and one node's restart must not touch
//! another's pods); workloads by their
//! `HostConfig.NetworkMode` of `container:<sandbox id>`. A workload joined to a sandbox keeps
//! the namespace alive after the sandbox is gone, so workloads go first.

use std::collections::{BTreeSet, HashMap};

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::OverlayError;
use super::network::{OWNER_LABEL, SANDBOX_LABEL};
use crate::executor::plan::RunId;

/// What a sweep removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Job ids whose pods were removed.
    pub jobs: BTreeSet<String>,
    /// Sandbox containers removed (ids).
    pub sandboxes: Vec<String>,
    /// Workload containers removed because they were joined to a removed sandbox (ids).
    pub workloads: Vec<String>,
}

fn engine(operation: &'static str) -> impl FnOnce(bollard::errors::Error) -> OverlayError {
    move |source| OverlayError::Engine { operation, source }
}

/// Force-removes container `id`; one already gone is fine.
///
/// # Errors
/// [`OverlayError::Engine`] for any other refusal.
pub async fn remove_container(docker: &Docker, id: &str) -> Result<(), OverlayError> {
    let opts = RemoveContainerOptionsBuilder::new().force(true).build();
    match docker.remove_container(id, Some(opts)).await {
        Ok(())
        | Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(source) => Err(OverlayError::Engine {
            operation: "remove container",
            source,
        }),
    }
}

/// Removes the pods `owner` made for every job except those in `keep` (the jobs this node
/// still runs, from its durable job table): each sandbox labelled [`SANDBOX_LABEL`] and
/// [`OWNER_LABEL`]` = owner`, and first every container joined to one of them. With `keep` empty it clears all pods; [`remove_pods`] is the single
/// job form used at job end.
///
/// # Errors
/// [`OverlayError::Engine`] when the engine cannot list or remove containers.
pub async fn sweep(
    docker: &Docker,
    owner: &str,
    keep: &BTreeSet<RunId>,
) -> Result<SweepReport, OverlayError> {
    let keep: BTreeSet<&str> = keep.iter().map(RunId::as_str).collect();
    let labels = vec![SANDBOX_LABEL.to_string(), format!("{OWNER_LABEL}={owner}")];
    pods_where(docker, labels, |job| !keep.contains(job)).await
}

/// Removes the pods `owner` made for `job` (sandboxes and joined workloads); none is fine.
///
/// # Errors
/// [`OverlayError::Engine`] when the engine cannot list or remove containers.
pub async fn remove_pods(
    docker: &Docker,
    owner: &str,
    job: &RunId,
) -> Result<SweepReport, OverlayError> {
    let labels = vec![
        format!("{SANDBOX_LABEL}={job}"),
        format!("{OWNER_LABEL}={owner}"),
    ];
    pods_where(docker, labels, |_| true).await
}

async fn pods_where(
    docker: &Docker,
    labels: Vec<String>,
    orphaned: impl Fn(&str) -> bool,
) -> Result<SweepReport, OverlayError> {
    // Several label filters must all match (the engine ANDs them).
    let filters = HashMap::from([("label".to_string(), labels)]);
    let sandboxes = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(engine("list sandboxes"))?;
    let mut report = SweepReport::default();
    let mut doomed = BTreeSet::new();
    // What a joined workload's `container:<target>` may name: the id, a short id, or a name.
    let mut targets: Vec<String> = Vec::new();
    for sandbox in sandboxes {
        let (Some(id), Some(job)) = (
            sandbox.id,
            sandbox
                .labels
                .as_ref()
                .and_then(|l| l.get(SANDBOX_LABEL))
                .cloned(),
        ) else {
            continue;
        };
        if orphaned(&job) {
            report.jobs.insert(job);
            targets.extend(
                sandbox
                    .names
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| n.trim_start_matches('/').to_string()),
            );
            targets.push(id.clone());
            doomed.insert(id);
        }
    }
    if doomed.is_empty() {
        return Ok(report);
    }
    let everything = docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).build()))
        .await
        .map_err(engine("list containers"))?;
    for c in everything {
        let joined = c
            .host_config
            .as_ref()
            .and_then(|h| h.network_mode.as_deref())
            .and_then(|m| m.strip_prefix("container:"))
            .is_some_and(|target| {
                targets
                    .iter()
                    .any(|t| t == target || (target.len() >= 12 && t.starts_with(target)))
            });
        if let (true, Some(id)) = (joined, c.id) {
            remove_container(docker, &id).await?;
            report.workloads.push(id);
        }
    }
    for id in doomed {
        remove_container(docker, &id).await?;
        report.sandboxes.push(id);
    }
    Ok(report)
}
