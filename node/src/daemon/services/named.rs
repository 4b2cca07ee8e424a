//! The services of other orchestrators whose spec names this node in `serve.gateways`: found
//! on chain, their specs fetched once from their providers in the background, routed without
//! an autoscaler ([`named_here`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_market::JobKind;
use libp2p::PeerId;

use super::{Routed, Scaler, Wanted, replica, service_name};
use crate::job::cluster::peers_of;

/// What this node knows of the specs of jobs it does not orchestrate, by job; filled by
/// fetches in the background, so that a slow or unreachable job's providers never hold up the
/// routes.
#[derive(Default)]
pub(super) struct Named {
    specs: Arc<std::sync::Mutex<BTreeMap<JobId, Seen>>>,
}

/// One job's spec as a gateway saw it.
enum Seen {
    /// Being fetched.
    Fetching,
    /// A service naming this node in `serve.gateways`.
    Route(Box<ganglion_market::Ensemble>),
    /// A batch job, or a service that does not name this node.
    Skip,
    /// The spec could not be fetched: try again from then on.
    RetryAt(std::time::Instant),
}

impl Named {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<JobId, Seen>> {
        self.specs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `job` is known not to be routed here (a batch job, or a service not naming
    /// this node).
    fn skipped(&self, job: &JobId) -> bool {
        matches!(self.lock().get(job), Some(Seen::Skip))
    }

    /// Fetches `view`'s spec in the background unless known or being fetched; the spec it
    /// routes under, once fetched and naming `me`.
    fn spec(
        &self,
        view: &ganglion_indexer::JobView,
        from: Vec<PeerId>,
        scaler: &Arc<dyn Scaler>,
        me: PeerId,
    ) -> Option<ganglion_market::Ensemble> {
        let mut specs = self.lock();
        let due = match specs.get(&view.job_id) {
            None => true,
            Some(Seen::RetryAt(at)) => std::time::Instant::now() >= *at,
            Some(Seen::Route(spec)) => return Some((**spec).clone()),
            Some(Seen::Fetching | Seen::Skip) => false,
        };
        if due {
            specs.insert(view.job_id, Seen::Fetching);
            let (job, cid) = (view.job_id, view.spec.clone());
            let (specs, scaler) = (Arc::clone(&self.specs), Arc::clone(scaler));
            tokio::spawn(async move {
                let fetched = tokio::time::timeout(SPEC_FETCH, scaler.spec(job, cid, from))
                    .await
                    .map_err(|_| "timed out".to_string())
                    .and_then(|r| r);
                let seen = match fetched {
                    Ok(spec) if names(&spec, &me) => {
                        tracing::info!(job = %job, "a service names this node as its gateway");
                        Seen::Route(Box::new(spec))
                    }
                    Ok(_) => Seen::Skip,
                    Err(e) => {
                        tracing::debug!(job = %job, error = %e, "spec not fetched; asking again later");
                        Seen::RetryAt(std::time::Instant::now() + SPEC_FETCH)
                    }
                };
                // Not when the job ended meanwhile (forgotten by the routes).
                if let Some(slot) = specs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_mut(&job)
                {
                    *slot = seen;
                }
            });
        }
        None
    }
}

/// How long a gateway waits for a spec from a job's providers, and before it asks again.
const SPEC_FETCH: Duration = Duration::from_secs(10);

/// The services on chain (assigned, not over) that this node does not orchestrate and whose
/// spec names `me` in `serve.gateways`, each to its assignments not claimed and not released.
/// Specs are fetched once per job from its providers (over bitswap, in the background) and
/// remembered; a job that cannot be read is left for the next pass.
pub(super) fn named_here<S: Kv>(
    named: &Named,
    indexer: &Indexer<S>,
    depth: u64,
    scaler: &Arc<dyn Scaler>,
    me: &PeerId,
    orchestrated: &Wanted,
) -> Result<Wanted, String> {
    use ganglion_indexer::JobStatus as Chain;
    let ours: BTreeSet<JobId> = orchestrated.values().map(|r| r.job).collect();
    let mut live = BTreeSet::new();
    let mut out = Wanted::new();
    let mut views = indexer
        .jobs_by_status(Chain::Assigned)
        .map_err(|e| e.to_string())?;
    views.extend(
        indexer
            .jobs_by_status(Chain::Claiming)
            .map_err(|e| e.to_string())?,
    );
    for listed in views.into_iter().filter(|v| !ours.contains(&v.job_id)) {
        // Known not ours: nothing more to read for it.
        if named.skipped(&listed.job_id) {
            live.insert(listed.job_id);
            continue;
        }
        // At the node's confirmation depth, as its own jobs are read.
        let Some(view) = indexer
            .job(&listed.job_id, depth)
            .map_err(|e| e.to_string())?
            .filter(|c| !c.tentative)
            .map(|c| c.value)
        else {
            continue;
        };
        live.insert(view.job_id);
        let peers: BTreeMap<u32, PeerId> = match peers_of(indexer, &view.assignments, u32::MAX) {
            Ok(p) => p.into_iter().collect(),
            Err(e) => {
                tracing::debug!(job = %view.job_id, error = %e, "its providers' peers unknown");
                continue;
            }
        };
        let from = peers.values().copied().collect();
        let Some(spec) = named.spec(&view, from, scaler, *me) else {
            continue;
        };
        let replicas = crate::job::service::running(&view)
            .into_iter()
            .filter_map(|i| replica(view.job_id, u32::try_from(i).ok()?, &peers))
            .collect();
        out.insert(
            service_name(&view.job_id),
            Routed {
                job: view.job_id,
                spec,
                replicas,
                scaled: false,
            },
        );
    }
    // Jobs over (or never seen again) are forgotten.
    named.lock().retain(|job, _| live.contains(job));
    Ok(out)
}

/// Whether `spec` is a service that names `me` among its gateways.
fn names(spec: &ganglion_market::Ensemble, me: &PeerId) -> bool {
    spec.kind == JobKind::Service
        && spec.serve.as_ref().is_some_and(|s| {
            s.gateways
                .iter()
                .any(|g| g.parse::<PeerId>().ok() == Some(*me))
        })
}
