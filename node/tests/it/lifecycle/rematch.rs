//! A provider that refuses (its accept policy wants a higher rate than it advertises) is
//! excluded and the job is matched again over the others; it still settles.

use ganglion_indexer::JobStatus;
use ganglion_node::job::state::OrchestratorState;

use super::support::{self, Chain, ProviderIdent, RATE, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusing_provider_is_rematched_away() {
    let chain = Chain::start().await;
    let refuser = ProviderIdent::bonded(&chain, 1).await;
    let b = ProviderIdent::bonded(&chain, 2).await;
    let c = ProviderIdent::bonded(&chain, 3).await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    // The best-scored offer, so the matcher picks it first; it refuses every request at RATE.
    let pr = support::provider_with(&chain, &refuser, &root.join("pr"), 2 * RATE, 200).await;
    let pb = support::provider(&chain, &b, &root.join("pb")).await;
    let pc = support::provider(&chain, &c, &root.join("pc")).await;
    support::connect_market(&orch, &[&pr, &pb, &pc], 3).await;

    let job = orch.submit_probe(1, 600_000).await;
    let r = wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Settled).then_some(r)
    })
    .await;
    let states: Vec<_> = r.history.iter().map(|t| t.state).collect();
    assert_eq!(
        &states[..5],
        [
            OrchestratorState::Locked,
            OrchestratorState::Matching,
            OrchestratorState::Assigning,
            OrchestratorState::Matching,
            OrchestratorState::Assigning,
        ],
        "one refusal, one re-match: {states:?}"
    );
    assert_eq!(r.detail.excluded.len(), 1);
    let x = &r.detail.excluded[0];
    assert_eq!(x.chosen.provider, pr.key_hash);
    assert!(
        x.reason.contains("refused") && x.reason.contains("rate below"),
        "{}",
        x.reason
    );
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, JobStatus::Claimed);
    let mut assigned: Vec<_> = view.assignments.iter().map(|a| a.provider).collect();
    assigned.sort();
    let mut want = vec![pb.key_hash, pc.key_hash];
    want.sort();
    assert_eq!(assigned, want, "the refuser is not assigned");
    assert!(view.payments.iter().all(|p| p.to != pr.key_hash));
    super::support::shutdown(chain, orch, vec![pr, pb, pc]).await;
}
