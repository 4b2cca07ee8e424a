//! `job stop` on a running job (issue 18): the orchestrator refuses its providers' next
//! heartbeats as `Stopped`; each provider stops its containers and claims the GPU time it
//! ran (bounded by its last receipt), the last claim refunds the rest, long before the
//! deadline; nobody is slashed.

use ganglion_dispatch::executor::FailureReason;
use ganglion_indexer::JobStatus as ChainStatus;
use ganglion_node::job::JobControl as _;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_rpc::types::JobStatus;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

use super::support::{self, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_job_ends_with_its_providers_paid_for_what_ran() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    // The probe would sleep ten minutes; the deadline is fifteen away.
    let job = orch.submit_probe(600, 900_000).await;
    for p in [&pa, &pb] {
        wait_for("the provider running", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            (r.state == ProviderState::Running).then_some(())
        })
        .await;
    }
    // The orchestrator's `job_status` shows both shares running (their heartbeats
    // acknowledged) with the GPU time they report.
    let (_server, c) = super::content::serve(&orch).await;
    let running = wait_for("both nodes running in job_status", || async {
        let all: Vec<JobStatus> = c
            .request("job_status", rpc_params![hex::encode(job.0)])
            .await
            .expect("job_status");
        let o = all.into_iter().find(|s| s.role == "orchestrator")?;
        o.nodes
            .iter()
            .all(|n| n.state == "running" && n.gpu_ms.is_some_and(|g| g > 0))
            .then_some(o)
    })
    .await;
    assert_eq!(running.nodes.len(), 2);
    assert_eq!(running.outcome, None, "not final yet");
    let control = orch.engine.handle();
    control.stop(&job).await.expect("stopped");
    control
        .stop(&job)
        .await
        .expect("a second stop changes nothing");
    let stopped_at = orch
        .engine
        .orchestrator_record(&job)
        .expect("store")
        .expect("record")
        .detail
        .stopped_at_ms
        .expect("marked stopped");
    wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert_ne!(r.state, OrchestratorState::Expired, "{r:?}");
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, ChainStatus::Claimed);
    let all: Vec<JobStatus> = c
        .request("job_status", rpc_params![hex::encode(job.0)])
        .await
        .expect("job_status");
    let o = all
        .iter()
        .find(|s| s.role == "orchestrator")
        .expect("record");
    assert_eq!(o.outcome.as_deref(), Some("stopped"), "{o:#?}");
    assert!(view.defaulters().is_empty(), "nobody defaulted");
    assert!(
        view.deadline_ms.saturating_sub(stopped_at) > 600_000,
        "settled long before the deadline"
    );
    for p in [&pa, &pb] {
        let exec = p.executor.as_ref().expect("executor");
        let rec = &exec.table().all().expect("table")[0];
        let report = rec.report.as_ref().expect("ended");
        assert!(
            matches!(
                report.failure(),
                Some(FailureReason::Stopped { why }) if why.contains("orchestrator stopped")
            ),
            "{report:?}"
        );
    }
    let paid: Vec<u64> = view
        .claims
        .iter()
        .map(|c| c.expect("claimed").paid)
        .collect();
    assert!(
        paid.iter().all(|p| *p > 0),
        "the GPU time they ran is paid: {paid:?}"
    );
    // A stopped job cannot be stopped again once ended.
    assert!(control.stop(&job).await.is_err());
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
