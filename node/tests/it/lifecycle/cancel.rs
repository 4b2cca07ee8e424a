//! Cancel before assignment refunds the whole budget and burns the job token; the engine
//! refuses to cancel an unknown job.

use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::JobStatus;
use ganglion_node::job::EngineError;
use ganglion_node::job::state::OrchestratorState;
use ganglion_node::job::store::TxKind;

use super::support::{self, Chain, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_before_assignment_refunds_the_budget() {
    let chain = Chain::start().await;
    // No provider: the job stays in Matching.
    let orch = support::orchestrator(&chain, 0, &chain.dir.path().join("orch")).await;
    let before = chain.ntx_of(&orch.key_hash);
    let spec = support::probe_spec(1, 600_000);
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    wait_for("the lock to be confirmed", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Matching).then_some(())
    })
    .await;
    assert_eq!(
        chain.ntx_of(&orch.key_hash),
        before - spec.budget_ntx,
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
    super::support::shutdown(chain, orch, vec![]).await;
}

/// A lock that never reached the chain (refused by the ledger at submission, or the node died
/// before sending it) and whose validity has passed can no longer land: the job ends as
/// cancelled instead of being re-submitted forever, and nothing moved on chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_that_can_no_longer_land_ends_the_job() {
    use ganglion_node::job::orchestrator::OrchestratorDetail;
    use ganglion_node::job::store::{JobRecord, JobStore, TxIntent};

    let chain = Chain::start().await;
    let dir = chain.dir.path().join("orch");
    let orch = support::orchestrator(&chain, 0, &dir).await;
    let before = chain.ntx_of(&orch.key_hash);
    let stopped = orch.stop_engine().await;
    let job = JobId([7; 32]);
    {
        // What a crash right after writing the intent leaves behind, for bytes that cannot
        // land (valid until slot 0, long past).
        let store = JobStore::open(&dir.join("jobs")).expect("store");
        store
            .create::<ganglion_node::job::engine::OrchestratorRole>(&JobRecord::new(
                job,
                OrchestratorState::Locked,
                OrchestratorDetail {
                    spec: support::probe_spec(1, 600_000),
                    spec_cid: vec![1, 2, 3],
                    excluded: Vec::new(),
                    chosen: Vec::new(),
                    last_error: None,
                    stopped_at_ms: None,
                    links: None,
                    unformed: Vec::new(),
                    rematch_tried: false,
                    successor: None,
                    predecessor: None,
                    scaling: Default::default(),
                },
                0,
            ))
            .expect("record");
        store
            .record_intent::<ganglion_node::job::engine::OrchestratorRole>(
                &job,
                TxIntent {
                    kind: TxKind::Lock,
                    tx_hash: [8; 32],
                    signed: vec![0x84, 0xa0],
                    written_ms: 0,
                    valid_until_slot: Some(0),
                },
            )
            .expect("intent");
    }
    let orch = stopped.start_engine(&chain);
    let r = wait_for("the lapsed lock to end the job", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Cancelled).then_some(r)
    })
    .await;
    assert_eq!(
        r.history.iter().map(|h| h.state).collect::<Vec<_>>(),
        [OrchestratorState::Locked, OrchestratorState::Cancelled],
        "{r:?}"
    );
    assert_eq!(
        r.intents.iter().map(|i| i.kind).collect::<Vec<_>>(),
        [TxKind::Lock],
        "no cancel transaction: nothing was locked"
    );
    assert_eq!(chain.ntx_of(&orch.key_hash), before, "nothing moved");
    assert!(orch.indexer.job(&job, 0).expect("q").is_none());
    super::support::shutdown(chain, orch, vec![]).await;
}
