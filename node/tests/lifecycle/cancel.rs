//! Cancel before assignment refunds the whole budget and burns the job token; the engine
//! refuses to cancel an unknown job.

use ganglion_contracts::datum::JobId;
use ganglion_indexer::JobStatus;
use ganglion_node::job::EngineError;
use ganglion_node::job::state::OrchestratorState;
use ganglion_node::job::store::TxKind;

use crate::support::{self, Chain, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_before_assignment_refunds_the_budget() {
    let chain = Chain::start().await;
    // No provider: the job stays in Matching.
    let orch = support::orchestrator(&chain, 0, &chain.dir.path().join("orch")).await;
    let before = chain.ntx_of(&orch.key_hash);
    let job = orch
        .engine
        .submit(&support::probe_spec(1, 600_000))
        .await
        .expect("lock submitted");
    wait_for("the lock to be confirmed", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Matching).then_some(())
    })
    .await;
    assert_eq!(
        chain.ntx_of(&orch.key_hash),
        before - 1_000_000,
        "budget locked"
    );
    orch.engine.cancel(&job).await.expect("cancel submitted");
    let r = wait_for("Cancelled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Cancelled).then_some(r)
    })
    .await;
    assert_eq!(
        r.intents.iter().map(|i| i.kind).collect::<Vec<_>>(),
        [TxKind::Lock, TxKind::Cancel]
    );
    assert_eq!(
        chain.ntx_of(&orch.key_hash),
        before,
        "whole budget refunded"
    );
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, JobStatus::Cancelled);
    // A second cancel is refused with the state, not a second transaction.
    let err = orch.engine.cancel(&job).await.expect_err("terminal");
    assert!(matches!(err, EngineError::State { .. }), "{err}");
    let err = orch
        .engine
        .cancel(&JobId([9; 32]))
        .await
        .expect_err("unknown");
    assert!(err.to_string().contains("unknown job"), "{err}");
    orch.cancel.cancel();
    orch.engine.shutdown().await;
    chain.handle.shutdown().await;
}
