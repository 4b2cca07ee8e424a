//! The provider's side of `/ganglion/service/1`: which of this node's replicas a gateway's
//! stream may reach ([`admit`]), and a connection into the replica's container
//! ([`Replicas`], over [`Executor::connect`]).

use std::sync::Arc;

use ganglion_contracts::v2::datum::JobId;
use ganglion_dispatch::executor::{Executor, Phase, RunId};
use ganglion_gateway::p2p::{BoxFuture, Resolve, Target};
use libp2p::PeerId;
use tokio::net::TcpStream;

use crate::job::engine::{ProviderRecord, ProviderRole};
use crate::job::state::ProviderState;
use crate::job::store::JobStore;

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
}
