//! Restarts mid-lifecycle: the orchestrator's engine right after submitting the lock and again
//! once assigned, a provider's engine while its container runs. Each restart drops the engine
//! and its job store and reopens the store from disk. Afterwards the job settled with exactly
//! one lock, one assign and one claim per provider on chain, and the provider dispatched
//! exactly once.
//! The provider's stop drains its engine's tracked tasks: the run's supervision ends at once
//! (long before the container would exit) and the restarted engine's recovery adopts it.

use ganglion_dispatch::executor::Executor;
use ganglion_indexer::event::Event;
use ganglion_node::job::provider::executor_job;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use super::support::{self, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_neither_double_submit_nor_double_dispatch() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;

    let job = orch
        .engine
        // 20 s of work: the provider's stop below must not wait for it.
        .submit(&support::probe_spec(20, 600_000))
        .await
        .expect("lock submitted");
    // Restart 1: the lock is written and submitted, not yet confirmed.
    let orch = orch.restart_engine(&chain).await;
    wait_for("Assigned", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Assigned).then_some(())
    })
    .await;
    // Restart 2: assigned, attestations not yet in.
    let orch = orch.restart_engine(&chain).await;
    // Restart 3: provider A while its container is being prepared or runs.
    let state = wait_for("provider A dispatched", || async {
        let r = pa.engine.provider_record(&job).expect("store")?;
        matches!(r.state, ProviderState::Preparing | ProviderState::Running).then_some(r.state)
    })
    .await;
    eprintln!("restarting provider A in state {state:?}");
    assert!(
        pa.engine.tracked_tasks() >= 1,
        "the run supervising A's container is a tracked task of its engine"
    );
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(15), pa.stop_engine())
        .await
        .expect("the stop drains the run's task at once, without waiting for the container");
    let pa = stopped.start_engine(&chain);

    let r = wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Settled).then_some(r)
    })
    .await;
    assert_eq!(
        r.intents.iter().map(|i| i.kind).collect::<Vec<_>>(),
        [TxKind::Lock, TxKind::Assign],
        "one transaction of each kind, whatever the restarts"
    );
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    let count = |f: fn(&Event) -> bool| view.history.iter().filter(|r| f(&r.event)).count();
    assert_eq!(count(|e| matches!(e, Event::JobLocked { .. })), 1);
    assert_eq!(count(|e| matches!(e, Event::JobAssigned { .. })), 1);
    assert_eq!(
        count(|e| matches!(e, Event::JobClaimed { .. })),
        2,
        "one claim per provider"
    );
    assert_eq!(
        orch.indexer
            .jobs_by_orchestrator(&orch.key_hash)
            .expect("q")
            .len(),
        1,
        "no second lock"
    );
    for p in [&pa, &pb] {
        let rec = wait_for("Paid", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            (r.state == ProviderState::Paid).then_some(r)
        })
        .await;
        let index = rec.detail.index.expect("index");
        let exec = p.executor.as_ref().expect("executor");
        let peer = p
            .addr
            .iter()
            .find_map(|x| match x {
                libp2p::multiaddr::Protocol::P2p(id) => Some(id),
                _ => None,
            })
            .expect("the node's address names its peer id");
        let id =
            ganglion_dispatch::executor::RunId::new(executor_job(&job, index, &peer)).expect("id");
        assert_eq!(
            rec.dispatch.as_ref().map(|d| d.executor_job.as_str()),
            Some(id.as_str())
        );
        let done = exec.record(&id).expect("table").expect("dispatched");
        let report = done.report.expect("finished");
        assert_eq!(report.ranks.len(), 1, "one container, started once");
        assert_eq!(
            exec.table().all().expect("table").len(),
            1,
            "the executor saw exactly one job"
        );
        assert!(
            exec.job_containers(&id)
                .await
                .expect("containers")
                .is_empty(),
            "no container left behind"
        );
        assert!(p.dir.join("jobs").exists());
    }
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
