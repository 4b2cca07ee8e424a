//! A job whose network cannot form, on the job engine's side (issue #21, "fail before paying"):
//! provider A's job-network set-up never gets an answer from B, so after its give-up time A's
//! share ends with nothing run — it claims no GPU time, is paid nothing and is no defaulter —
//! and A tells the orchestrator it could not reach B. The orchestrator stops the job (B, whose
//! container started, stops and claims what was acknowledged), and once both have claimed it
//! locks the same spec again as a new job that leaves both out (two nodes cannot tell which end
//! failed), naming each other in their records.
//!
//! The set-up is a test double at the cluster boundary: the real overlay needs root and
//! namespaces, which these in-process tests do not use; the placement suite
//! (`tests/placement`) runs the real overlay with UDP blocked and the relay refused.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ganglion_contracts::v2::datum::JobId;
use ganglion_node::job::cluster::{ClusterPeers, ClusterSetup, SetupFailure};
use ganglion_node::job::state::OrchestratorState;
use ganglion_p2p::Client;
use ganglion_p2p::protocols::{ClusterHello, ClusterResponse};
use libp2p::PeerId;

use super::support::{self, Chain, ProviderIdent, ProviderOpts, wait_for};

/// The test double: a set-up whose peers never answer, given up after 2 s; it notes the jobs
/// the engine tells it to forget.
#[derive(Default)]
struct Unanswered {
    forgotten: std::sync::Mutex<Vec<JobId>>,
}

#[async_trait]
impl ClusterSetup for Unanswered {
    async fn prepare(&self, _p2p: &Client, job: &ClusterPeers) -> Result<(), SetupFailure> {
        Err(SetupFailure {
            unreachable: job.peers.iter().map(|(rank, _)| *rank).collect(),
            detail: "no peer answered (test double)".into(),
        })
    }

    fn give_up_after(&self) -> Duration {
        Duration::from_secs(2)
    }

    fn forget(&self, job: &JobId) {
        self.forgotten.lock().expect("lock").push(*job);
    }

    fn answer(&self, _peer: PeerId, _hello: &ClusterHello) -> ClusterResponse {
        ClusterResponse::UnknownJob
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_cannot_reach_its_peer_claims_nothing_and_the_spec_is_locked_again() {
    let chain = Chain::start().await;
    let a = ProviderIdent::bonded(&chain, 1).await;
    let b = ProviderIdent::bonded(&chain, 2).await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let setup = Arc::new(Unanswered::default());
    let opts = ProviderOpts {
        cluster: Some(setup.clone()),
        ..ProviderOpts::default()
    };
    let pa = support::provider_opts(&chain, &a, &root.join("pa"), opts).await;
    let pb = support::provider(&chain, &b, &root.join("pb")).await;
    support::connect_market(&orch, &[&pa, &pb], 2).await;

    // Two GPUs, one on each; B's share would run 30 s.
    let job = orch.submit_probe(30, 600_000).await;
    let r = wait_for("settled and locked again", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert!(
            !matches!(
                r.state,
                OrchestratorState::Cancelled | OrchestratorState::Expired
            ),
            "{r:?}"
        );
        (r.state == OrchestratorState::Settled && r.detail.rematch_tried).then_some(r)
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    let index_of = |k| {
        view.assignments
            .iter()
            .position(|x| x.provider == k)
            .expect("assigned") as u64
    };
    let (ia, ib) = (index_of(pa.key_hash), index_of(pb.key_hash));
    // A's report, as kept: it could not reach B.
    assert_eq!(r.detail.unformed.len(), 1, "{r:?}");
    assert_eq!(
        (
            r.detail.unformed[0].index,
            r.detail.unformed[0].unreachable.clone()
        ),
        (ia, vec![ib])
    );
    assert!(r.detail.stopped_at_ms.is_some(), "the job was stopped");
    // A gave the set-up up: what it announced for the job is forgotten.
    assert!(setup.forgotten.lock().expect("lock").contains(&job));
    // A was paid nothing and is no defaulter; nobody was slashed.
    let paid_to = |k| -> u64 {
        view.payments
            .iter()
            .filter(|p| p.to == k)
            .map(|p| p.ntx)
            .sum()
    };
    assert_eq!(paid_to(pa.key_hash), 0, "{view:?}");
    assert!(view.defaulters().is_empty(), "{view:?}");
    let error = r.detail.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("the job network did not form")
            && error.contains(&format!("node {ia} could not reach node {ib}"))
            && error.contains("matched again as job"),
        "{error}"
    );

    // The new job: the same spec, both nodes of the failed pair left out for its life, linked
    // both ways; with no other provider it waits in matching.
    let next = r.detail.successor.expect("a successor");
    let s = wait_for("the successor's lock on chain", || async {
        let s = orch.engine.orchestrator_record(&next).expect("store")?;
        (s.state == OrchestratorState::Matching).then_some(s)
    })
    .await;
    assert_eq!(s.detail.predecessor, Some(job));
    assert_eq!(s.detail.spec, r.detail.spec);
    let mut left_out: Vec<_> = s
        .detail
        .excluded
        .iter()
        .map(|e| e.chosen.provider)
        .collect();
    left_out.sort_unstable();
    let mut pair = vec![pa.key_hash, pb.key_hash];
    pair.sort_unstable();
    assert_eq!(left_out, pair, "{:?}", s.detail.excluded);
    assert!(
        s.detail
            .excluded
            .iter()
            .all(|e| e.until_ms.is_none() && e.reason.contains("did not form")),
        "{:?}",
        s.detail.excluded
    );
    orch.engine.cancel(&next).await.expect("cancel");
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
