//! An orchestrator's command that outlives the job's deadline (DESIGN §3.1 G3, "no forced
//! default"): the probe would sleep ten minutes, the deadline is 40 s away. Each provider cuts
//! its run to end before the deadline (the spec's limit, fitted to it), claims the GPU time it
//! ran and is paid; nobody is slashed and nothing expires.

use ganglion_dispatch::executor::FailureReason;
use ganglion_indexer::JobStatus;
use ganglion_indexer::event::Event;
use ganglion_node::job::state::{OrchestratorState, ProviderState};

use super::support::{self, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_command_that_outlives_the_deadline_is_stopped_in_time_and_paid() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let before = [chain.ntx_of(&pa.key_hash), chain.ntx_of(&pb.key_hash)];
    let spec = support::probe_spec(600, 40_000);
    let deadline_ms = spec.deadline_ms;
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert_ne!(r.state, OrchestratorState::Expired, "{r:?}");
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, JobStatus::Claimed);
    assert!(view.defaulters().is_empty(), "nobody defaulted");
    for (p, before) in [(&pa, before[0]), (&pb, before[1])] {
        let r = wait_for("the provider paid", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            assert_ne!(r.state, ProviderState::Slashed);
            (r.state == ProviderState::Paid).then_some(r)
        })
        .await;
        // Its run was cut by the limit fitted to the deadline, not by the command's end.
        let exec = p.executor.as_ref().expect("executor");
        let rec = &exec.table().all().expect("table")[0];
        let report = rec.report.as_ref().expect("ended");
        assert!(
            matches!(
                report.failure(),
                Some(FailureReason::WallClockExceeded { .. } | FailureReason::Stopped { .. })
            ),
            "{report:?}"
        );
        let ended_ms = r
            .history
            .iter()
            .find(|t| t.state == ProviderState::Finished)
            .expect("finished")
            .at_ms;
        assert!(ended_ms < deadline_ms, "stopped before the deadline");
        let paid: u64 = view
            .history
            .iter()
            .filter_map(|h| match &h.event {
                Event::JobClaimed { provider, paid, .. } if *provider == p.key_hash => Some(*paid),
                _ => None,
            })
            .sum();
        assert!(paid > 0, "the GPU time it ran is paid");
        assert_eq!(chain.ntx_of(&p.key_hash), before + paid);
    }
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
