//! Inference services on a node (`kind: service`, issue #24): a provider's node carries the
//! gateway's `/ganglion/service/1` streams into the containers of the replicas it runs
//! ([`Replicas`]); an orchestrator's node routes `[gateway] listen` to the replicas of the
//! services it orchestrates ([`route`]).
//!
//! A service is routed as `/<name>/…` with `name` the first 16 hex digits of its job id
//! ([`service_name`]), its replicas reached through their providers' nodes over libp2p: the
//! provider lets only the job's orchestrator and the gateways its spec names
//! (`serve.gateways`) through, to the replica it runs. A node named there routes the service
//! too, from the chain ([`route`]). Each routed
//! service has the gateway's autoscaler ([`ganglion_gateway::Controller`]) over an
//! [`EngineFleet`]: the replica count it asks for, and the replicas it gives up as lost, go to
//! the node's job engine, which rescales the escrow ([`crate::job::service`]); what each
//! replica served goes with its receipts ([`crate::job::usage`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ganglion_dispatch::executor::{Executor, Phase, RunId};
use ganglion_gateway::connect::Endpoint;
use ganglion_gateway::p2p::{BoxFuture, Resolve, Target};
use ganglion_gateway::pool::Replica;
use ganglion_gateway::server::Gateway;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_market::JobKind;
use ganglion_p2p::protocols::ServedUsage;
use libp2p::PeerId;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::job::cluster::peers_of;
use crate::job::engine::{OrchestratorRole, ProviderRecord, ProviderRole};
use crate::job::service::serving;
use crate::job::state::ProviderState;
use crate::job::store::JobStore;
use crate::job::usage::AtGateway;
use crate::job::{EngineHandle, JobControl};
use ganglion_contracts::v2::datum::JobId;
use ganglion_gateway::{Autoscaler, Controller, Fleet};

/// The name a service is routed under: the first 16 hex digits of its job id (64 bits: the
/// gateway's names are at most 63 characters, and one orchestrator's services never collide).
pub fn service_name(job: &JobId) -> String {
    hex::encode(&job.0[..8])
}

/// The provider's side of `/ganglion/service/1`: which of this node's replicas a stream may
/// reach, and a connection into its container ([`Executor::connect`]).
pub struct Replicas<E> {
    store: JobStore,
    executor: Arc<E>,
}

impl<E> Replicas<E> {
    /// Replicas of the jobs in `store`, run by `executor`.
    pub fn new(store: JobStore, executor: Arc<E>) -> Arc<Self> {
        Arc::new(Self { store, executor })
    }
}

/// Whether `peer` may reach replica `rank` of the job `record` is this node's share of: only
/// the job's orchestrator or a gateway its spec names (`serve.gateways`), only the replica
/// this node runs, only while it runs. Returns the executor's run of it.
///
/// # Errors
/// Why not, in words (sent back to the gateway).
pub fn admit(record: &ProviderRecord, peer: &PeerId, rank: u32) -> Result<RunId, String> {
    let peer = peer.to_bytes();
    if record.detail.orchestrator_peer != peer && !record.detail.gateways.contains(&peer) {
        return Err(
            "only the job's orchestrator and the gateways its spec names may reach its replicas"
                .into(),
        );
    }
    match record.detail.index {
        Some(index) if index == u64::from(rank) => {}
        Some(index) => return Err(format!("this node runs replica {index}, not {rank}")),
        None => return Err("this node is not assigned to the job".into()),
    }
    if record.state != ProviderState::Running {
        return Err(format!("the replica is not running ({:?})", record.state));
    }
    let dispatch = record
        .dispatch
        .as_ref()
        .ok_or_else(|| "the replica was never dispatched".to_string())?;
    RunId::new(dispatch.executor_job.clone()).map_err(|e| e.to_string())
}

impl<E: Executor + 'static> Resolve for Replicas<E> {
    fn connect(
        &self,
        peer: PeerId,
        target: Target,
    ) -> BoxFuture<'static, Result<TcpStream, String>> {
        let job = JobId(target.job);
        let admitted = match self.store.get::<ProviderRole>(&job) {
            Ok(Some(record)) => admit(&record, &peer, target.rank),
            Ok(None) => Err("no such job on this node".into()),
            Err(e) => Err(format!("job store: {e}")),
        };
        let executor = Arc::clone(&self.executor);
        Box::pin(async move {
            let run = admitted?;
            let record = executor
                .record(&run)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "the executor has no record of the replica".to_string())?;
            if record.phase != Phase::Running {
                return Err(format!("the replica is not running ({:?})", record.phase));
            }
            let port = record
                .plan
                .serve_port
                .ok_or_else(|| "the job is not a service".to_string())?;
            let node_rank = record.plan.local.first().copied().unwrap_or(0);
            executor
                .connect(&run, node_rank, port)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// How often [`route`] reads the orchestrator's jobs.
const ROUTE_EVERY: Duration = Duration::from_secs(1);

/// What the node's gateway asks of its job engine about the services it routes (implemented
/// by [`EngineHandle`]): the autoscaler's replica count and lost replicas, each replica's
/// usage and health (for the receipts), and the spec of a service it routes for another
/// orchestrator.
pub trait Scaler: Send + Sync + 'static {
    /// The replicas `job` wants and the indices of its running assignments.
    ///
    /// # Errors
    /// Why not, in words.
    fn replicas(&self, job: &JobId) -> Result<(u32, Vec<u64>), String>;
    /// Wants `wanted` replicas of `job` (clamped to its spec); returns the count now wanted.
    ///
    /// # Errors
    /// Why not, in words.
    fn scale(&self, job: JobId, wanted: u32) -> BoxFuture<'_, Result<u32, String>>;
    /// Gives up `job`'s assignment `index` as lost.
    ///
    /// # Errors
    /// Why not, in words.
    fn lost(&self, job: JobId, index: u64) -> BoxFuture<'_, Result<u32, String>>;
    /// This node's gateway routes the services it orchestrates (called once, before the
    /// first [`Scaler::served`]).
    fn routing(&self);
    /// `job`'s assignment `index` as the gateway sees it now: what it served so far (its next
    /// receipts carry it, signed) and whether it is healthy (no receipt while it is not).
    fn served(&self, job: JobId, index: u64, at: AtGateway);
    /// The spec `spec_cid` (binary CID) of `job`, which this node does not orchestrate,
    /// fetched from the first of `from` (its providers) that serves it.
    ///
    /// # Errors
    /// Why not, in words.
    fn spec(
        &self,
        job: JobId,
        spec_cid: Vec<u8>,
        from: Vec<PeerId>,
    ) -> BoxFuture<'_, Result<ganglion_market::Ensemble, String>>;
}

impl<S: Kv + 'static, E: Executor + 'static> Scaler for EngineHandle<S, E> {
    fn replicas(&self, job: &JobId) -> Result<(u32, Vec<u64>), String> {
        JobControl::replicas(self, job).map_err(|e| e.to_string())
    }

    fn scale(&self, job: JobId, wanted: u32) -> BoxFuture<'_, Result<u32, String>> {
        Box::pin(async move {
            EngineHandle::scale(self, &job, wanted)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn lost(&self, job: JobId, index: u64) -> BoxFuture<'_, Result<u32, String>> {
        Box::pin(async move {
            self.replica_lost(&job, index)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn routing(&self) {
        self.routes_services();
    }

    fn served(&self, job: JobId, index: u64, at: AtGateway) {
        EngineHandle::served(self, job, index, at);
    }

    fn spec(
        &self,
        job: JobId,
        spec_cid: Vec<u8>,
        from: Vec<PeerId>,
    ) -> BoxFuture<'_, Result<ganglion_market::Ensemble, String>> {
        Box::pin(async move {
            self.fetch_spec(&job, &spec_cid, &from)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// A service's replicas as the autoscaler sees them: one assignment of its escrow each; asking
/// for one more or fewer changes the count the engine rescales towards.
pub struct EngineFleet {
    job: JobId,
    scaler: Arc<dyn Scaler>,
}

impl EngineFleet {
    /// The fleet of service `job`.
    pub fn new(job: JobId, scaler: Arc<dyn Scaler>) -> Arc<Self> {
        Arc::new(Self { job, scaler })
    }

    fn wanted_now(&self) -> Result<u32, String> {
        self.scaler.replicas(&self.job).map(|(wanted, _)| wanted)
    }
}

impl Fleet for EngineFleet {
    fn wanted(&self) -> u32 {
        self.wanted_now().unwrap_or(0)
    }

    fn add(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let wanted = self.wanted_now()?;
            let now = self.scaler.scale(self.job, wanted + 1).await?;
            if now == wanted {
                return Err(format!("already at replicas.max ({wanted})"));
            }
            Ok(())
        })
    }

    fn release(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let wanted = self.wanted_now()?;
            let now = self
                .scaler
                .scale(self.job, wanted.saturating_sub(1))
                .await?;
            if now == wanted {
                return Err(format!("already at replicas.min ({wanted})"));
            }
            Ok(())
        })
    }

    fn lost(&self, id: &str) -> BoxFuture<'_, Result<(), String>> {
        let index = replica_index(id);
        Box::pin(async move {
            let index = index.ok_or_else(|| "not a replica of this service".to_string())?;
            self.scaler.lost(self.job, index).await.map(|_| ())
        })
    }
}

/// The gateway's id of replica `rank`: `replica-<rank>`.
fn replica_id(rank: u32) -> String {
    format!("replica-{rank}")
}

/// The rank in a gateway id made by [`replica_id`].
fn replica_index(id: &str) -> Option<u64> {
    id.strip_prefix("replica-")?.parse().ok()
}

/// Keeps `gateway` routing every service this node orchestrates that is assigned and not
/// over: `/<service_name>/…` to each of its running assignments (not claimed, not released,
/// not given up as lost), reached through the provider's node (the peer id of its bond), with
/// the gateway's autoscaler over an [`EngineFleet`] per service. Also every service on chain
/// whose spec names this node (`me`) in `serve.gateways`: routed the same way to its
/// assignments not claimed and not released, without an autoscaler (only the orchestrator's
/// node scales a service) and without usage in receipts (only the orchestrator signs them).
/// A service that ends is no longer routed and its autoscaler stops. Runs until `stop`.
pub async fn route<S: Kv>(
    gateway: Arc<Gateway>,
    store: JobStore,
    indexer: Arc<Indexer<S>>,
    depth: u64,
    scaler: Arc<dyn Scaler>,
    me: PeerId,
    stop: CancellationToken,
) {
    // Each routed service's autoscaler (none for a service this node only routes), stopped
    // when the service is no longer routed.
    let mut routed: BTreeMap<String, Option<CancellationToken>> = BTreeMap::new();
    let named = Named::default();
    scaler.routing();
    loop {
        let services = match wanted(&store, &indexer, depth) {
            Ok(mut services) => {
                let theirs = named_here(&named, &indexer, depth, &scaler, &me, &services);
                match theirs {
                    Ok(theirs) => services.extend(theirs),
                    Err(e) => {
                        tracing::warn!(error = %e, "services naming this gateway not routed this pass")
                    }
                }
                Ok(services)
            }
            Err(e) => Err(e),
        };
        match services {
            Ok(services) => {
                routed.retain(|name, controller| {
                    if services.contains_key(name) {
                        return true;
                    }
                    tracing::info!(service = %name, "the service ended: no longer routed");
                    if let Some(c) = controller {
                        c.cancel();
                    }
                    gateway.remove(name);
                    false
                });
                for (name, service) in services {
                    let Some(pool) = sync(&gateway, &name, &service.spec, service.replicas) else {
                        continue;
                    };
                    if !service.scaled {
                        routed.entry(name).or_insert(None);
                        continue;
                    }
                    report_usage(scaler.as_ref(), service.job, &pool);
                    routed.entry(name).or_insert_with(|| {
                        let controller = stop.child_token();
                        let replicas =
                            service
                                .spec
                                .replicas
                                .unwrap_or(ganglion_market::service::Replicas {
                                    min: 1,
                                    max: 1,
                                    share_providers: false,
                                });
                        Controller::default().spawn(
                            pool,
                            Autoscaler::new(replicas, service.spec.scale.as_ref()),
                            EngineFleet::new(service.job, Arc::clone(&scaler)),
                            controller.clone(),
                        );
                        Some(controller)
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "services not routed this pass"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(ROUTE_EVERY) => {}
        }
    }
}

/// Hands the engine each of `job`'s replicas in `pool` as the gateway sees it: what it served
/// so far (the usage its next receipts carry, signed) and whether it is healthy (receipts
/// only while it is; [`crate::job::usage`]).
fn report_usage(scaler: &dyn Scaler, job: JobId, pool: &ganglion_gateway::Pool) {
    for view in pool.views() {
        let Some(index) = replica_index(&view.replica.id) else {
            continue;
        };
        let u = view.usage;
        scaler.served(
            job,
            index,
            AtGateway {
                usage: ServedUsage {
                    requests: u.requests,
                    failed: u.failed,
                    bytes_in: u.bytes_in,
                    bytes_out: u.bytes_out,
                },
                healthy: view.health == ganglion_gateway::Health::Healthy,
            },
        );
    }
}

/// A service to route.
struct Routed {
    job: JobId,
    spec: ganglion_market::Ensemble,
    /// Its running replicas.
    replicas: Vec<Replica>,
    /// Whether this node orchestrates it: scales it and counts the usage its receipts carry.
    scaled: bool,
}

/// What this node knows of the specs of jobs it does not orchestrate, by job; filled by
/// fetches in the background, so that a slow or unreachable job's providers never hold up the
/// routes.
#[derive(Default)]
struct Named {
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
fn named_here<S: Kv>(
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

/// Replica `rank` of `job`, reached through its provider's node among `peers`.
fn replica(job: JobId, rank: u32, peers: &BTreeMap<u32, PeerId>) -> Option<Replica> {
    Some(Replica {
        id: replica_id(rank),
        endpoint: Endpoint::P2p {
            peer: *peers.get(&rank)?,
            target: Target { job: job.0, rank },
        },
        rtt: None,
    })
}

/// Each service to route, by name.
type Wanted = BTreeMap<String, Routed>;

fn wanted<S: Kv>(store: &JobStore, indexer: &Indexer<S>, depth: u64) -> Result<Wanted, String> {
    let mut out = Wanted::new();
    let records = store.all::<OrchestratorRole>().map_err(|e| e.to_string())?;
    for r in records.iter().filter(|r| !r.state.is_terminal()) {
        let spec = &r.detail.spec;
        if spec.kind != JobKind::Service || spec.serve.is_none() {
            continue;
        }
        let Some(view) = indexer
            .job(&r.job_id, depth)
            .map_err(|e| e.to_string())?
            .map(|c| c.value)
        else {
            continue;
        };
        let peers: BTreeMap<u32, PeerId> = peers_of(indexer, &view.assignments, u32::MAX)?
            .into_iter()
            .collect();
        let replicas = serving(&view, &r.detail.scaling)
            .into_iter()
            .filter_map(|i| replica(r.job_id, u32::try_from(i).ok()?, &peers))
            .collect();
        out.insert(
            service_name(&r.job_id),
            Routed {
                job: r.job_id,
                spec: spec.clone(),
                replicas,
                scaled: true,
            },
        );
    }
    Ok(out)
}

/// Routes `name` to exactly `replicas` (added as they come, kept with their health while they
/// stay, taken out when they go); returns its pool (`None`: it cannot be routed).
fn sync(
    gateway: &Gateway,
    name: &str,
    spec: &ganglion_market::Ensemble,
    replicas: Vec<Replica>,
) -> Option<Arc<ganglion_gateway::Pool>> {
    let pool = match gateway.service(name) {
        Some(s) => Arc::clone(&s.pool),
        None => match gateway.add(name, spec.serve.as_ref()?) {
            Ok(pool) => {
                tracing::info!(service = %name, "routing the service at /{name}/");
                pool
            }
            Err(e) => {
                tracing::warn!(service = %name, error = %e, "the service cannot be routed");
                return None;
            }
        },
    };
    let keep: BTreeSet<String> = replicas.iter().map(|r| r.id.clone()).collect();
    for gone in pool.replicas().iter().filter(|r| !keep.contains(&r.id)) {
        tracing::info!(service = %name, replica = %gone.id, "replica out of rotation (its provider left)");
        pool.remove(&gone.id);
    }
    let known: BTreeSet<String> = pool.replicas().into_iter().map(|r| r.id).collect();
    for replica in replicas.into_iter().filter(|r| !known.contains(&r.id)) {
        tracing::info!(service = %name, replica = %replica.id, endpoint = %replica.endpoint, "replica added");
        pool.add(replica);
    }
    Some(pool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::provider::ProviderDetail;
    use crate::job::store::{DispatchIntent, JobRecord};

    fn record(orchestrator: &PeerId, index: u64, state: ProviderState) -> ProviderRecord {
        let mut r = JobRecord::new(
            JobId([7; 32]),
            state,
            ProviderDetail {
                orchestrator_peer: orchestrator.to_bytes(),
                index: Some(index),
                ..ProviderDetail::default()
            },
            0,
        );
        r.dispatch = Some(DispatchIntent {
            executor_job: "job-n1-abcd".into(),
            written_ms: 0,
            gpus: vec![],
        });
        r
    }

    #[test]
    fn only_the_orchestrator_reaches_only_the_running_replica_this_node_runs() {
        let orchestrator = PeerId::random();
        let running = record(&orchestrator, 1, ProviderState::Running);
        assert_eq!(
            admit(&running, &orchestrator, 1)
                .expect("admitted")
                .to_string(),
            "job-n1-abcd"
        );
        let stranger = PeerId::random();
        assert!(
            admit(&running, &stranger, 1)
                .expect_err("another peer")
                .contains("only the job's orchestrator")
        );
        // A gateway the spec names is let through like the orchestrator, to the same replica.
        let named = {
            let mut r = running.clone();
            r.detail.gateways = vec![stranger.to_bytes()];
            r
        };
        assert!(admit(&named, &stranger, 1).is_ok());
        assert!(admit(&named, &stranger, 0).is_err());
        assert!(admit(&named, &PeerId::random(), 1).is_err());
        assert!(
            admit(&running, &orchestrator, 0)
                .expect_err("another replica")
                .contains("runs replica 1, not 0")
        );
        for state in [
            ProviderState::Reserved,
            ProviderState::Preparing,
            ProviderState::Finished,
            ProviderState::Paid,
        ] {
            assert!(
                admit(&record(&orchestrator, 1, state), &orchestrator, 1)
                    .expect_err("not running")
                    .contains("not running"),
                "{state:?}"
            );
        }
    }

    #[test]
    fn a_service_is_named_by_its_job_ids_first_sixteen_hex_digits() {
        let name = service_name(&JobId([0xab; 32]));
        assert_eq!(name, "abababababababab");
    }
}
