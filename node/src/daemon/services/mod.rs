//! Inference services on a node (`kind: service`, issue #24): a provider's node carries the
//! gateway's `/ganglion/service/1` streams into the containers of the replicas it runs
//! ([`Replicas`]); a node with `[gateway] listen` routes the services it orchestrates, and
//! those whose spec names it as a gateway, to their replicas ([`route`]).
//!
//! A service is routed as `/<name>/…` with `name` the first 16 hex digits of its job id
//! ([`service_name`]), its replicas reached through their providers' nodes over libp2p: the
//! provider lets only the job's orchestrator and the gateways its spec names
//! (`serve.gateways`) through, to the replica it runs. Each service a node orchestrates has
//! the gateway's autoscaler ([`ganglion_gateway::Controller`]) over an [`EngineFleet`]: the
//! replica count it asks for, and the replicas it gives up as lost, go to the node's job
//! engine, which rescales the escrow ([`crate::job::service`]); what each replica served, and
//! whether it is healthy, go with its receipts ([`crate::job::usage`]).
//!
//! - [`replicas`]: the provider's side, who may reach which replica.
//! - [`scaler`]: what the gateway asks of the job engine ([`Scaler`], [`EngineFleet`]).
//! - `named`: the services of other orchestrators whose spec names this node.

mod named;
pub mod replicas;
pub mod scaler;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ganglion_contracts::v2::datum::JobId;
use ganglion_gateway::connect::Endpoint;
use ganglion_gateway::p2p::Target;
use ganglion_gateway::pool::Replica;
use ganglion_gateway::server::Gateway;
use ganglion_gateway::{Autoscaler, Controller};
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_market::JobKind;
use ganglion_p2p::protocols::ServedUsage;
use libp2p::PeerId;
use tokio_util::sync::CancellationToken;

use crate::job::cluster::peers_of;
use crate::job::engine::OrchestratorRole;
use crate::job::service::serving;
use crate::job::store::JobStore;
use crate::job::usage::AtGateway;

use named::{Named, named_here};
pub use replicas::{Replicas, admit};
pub use scaler::{EngineFleet, Scaler};

/// The name a service is routed under: the first 16 hex digits of its job id (64 bits: the
/// gateway's names are at most 63 characters, and one orchestrator's services never collide).
pub fn service_name(job: &JobId) -> String {
    hex::encode(&job.0[..8])
}

/// How often [`route`] reads the orchestrator's jobs.
const ROUTE_EVERY: Duration = Duration::from_secs(1);

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

    #[test]
    fn a_service_is_named_by_its_job_ids_first_sixteen_hex_digits() {
        let name = service_name(&JobId([0xab; 32]));
        assert_eq!(name, "abababababababab");
    }
}
