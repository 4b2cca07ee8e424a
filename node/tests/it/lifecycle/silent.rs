//! The orchestrator goes silent once the job runs (its engine stops: no more receipts). Each
//! provider stops its containers after `missed_receipts` intervals without a receipt, claims
//! its own pay with the last receipt it was given, and is paid by the escrow rule for the
//! work acknowledged plus at most one interval (DESIGN §3.1 G2) — never slashed; the last
//! claim refunds the rest to the orchestrator.

use ganglion_contracts::v2::rules::{claim_bound_gpu_ms, pay_for};
use ganglion_dispatch::executor::{Executor, FailureReason};
use ganglion_indexer::JobStatus;
use ganglion_indexer::event::Event;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use super::support::{World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn providers_stop_and_claim_when_the_orchestrator_goes_silent() {
    let world = World::two_providers().await;
    let before = world.ntx();
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = world;

    // Two minutes of work: it must be stopped long before.
    let job = orch.submit_probe(120, 600_000).await;
    // Both providers run and hold a receipt: then the orchestrator's engine dies (its swarm
    // stays, so heartbeats reach a node that no longer answers them).
    for p in [&pa, &pb] {
        wait_for("a receipt while running", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            let held = p.engine.store().receipt(&job).expect("store");
            (r.state == ProviderState::Running && held.is_some()).then_some(())
        })
        .await;
    }
    let silent_at = ganglion_p2p::now_ms();
    let orch_key = orch.key_hash;
    let orch = orch.stop_engine().await;

    for p in [&pa, &pb] {
        wait_for("the provider to be paid", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            assert_ne!(r.state, ProviderState::Slashed);
            (r.state == ProviderState::Paid).then_some(r)
        })
        .await;
    }
    let stopped_within = ganglion_p2p::now_ms() - silent_at;
    assert!(
        stopped_within < 60_000,
        "stopped and claimed within the intervals, not at the end of the work: {stopped_within} ms"
    );
    let view = pa.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, JobStatus::Claimed);
    let started_at = view.started_at_ms().expect("assigned");
    let interval = view.receipts.interval_ms;
    let mut paid_total = 0;
    for (p, before) in [(&pa, before[0]), (&pb, before[1])] {
        let i = view
            .assignments
            .iter()
            .position(|x| x.provider == p.key_hash)
            .expect("assigned");
        let (gpu_ms, paid, receipt, lower) = view
            .history
            .iter()
            .find_map(|r| match &r.event {
                Event::JobClaimed {
                    index,
                    gpu_ms,
                    paid,
                    receipt,
                    lower_bound_ms,
                    ..
                } if *index == i as u64 => Some((*gpu_ms, *paid, receipt.clone(), *lower_bound_ms)),
                _ => None,
            })
            .expect("claimed");
        let a = &view.assignments[i];
        assert_eq!(paid, pay_for(gpu_ms, a.rate), "the escrow rule");
        let ack = receipt
            .expect("claimed with its last receipt")
            .acknowledged_until_ms;
        // Paid for the work acknowledged plus at most one interval.
        let bound = claim_bound_gpu_ms(
            a.gpus,
            started_at,
            view.deadline_ms,
            interval,
            Some(ack),
            lower.expect("lower bound"),
        );
        assert!(gpu_ms <= bound, "{gpu_ms} ≤ {bound}");
        assert!(
            gpu_ms <= a.gpus * (ack + interval - started_at),
            "at most one interval past the last receipt"
        );
        assert!(gpu_ms > 0 && paid > 0, "the acknowledged work is paid");
        assert_eq!(chain.ntx_of(&p.key_hash), before + paid);
        paid_total += paid;
        // The containers were stopped by the node, not by the end of the work.
        let exec = p.executor.as_ref().expect("executor");
        let rec = &exec.table().all().expect("table")[0];
        let report = rec.report.as_ref().expect("ended");
        assert!(
            matches!(report.failure(), Some(FailureReason::Stopped { .. })),
            "{report:?}"
        );
        assert!(
            exec.job_containers(&rec.plan.job)
                .await
                .expect("containers")
                .is_empty(),
            "no container left running"
        );
        let _ = exec.record(&rec.plan.job);
    }
    // The orchestrator got the rest back with the last claim.
    assert_eq!(chain.ntx_of(&orch_key), before[2] - paid_total);

    // The orchestrator comes back and records the end it did not drive.
    let orch = orch.start_engine(&chain);
    let r = wait_for("the orchestrator to see it settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Settled).then_some(r)
    })
    .await;
    assert!(r.intent(TxKind::Expire).is_none(), "nothing to expire");
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
