//! The orchestrator vanishes once the job is assigned: the providers, holding every
//! attestation, settle it themselves ("any peer holding all the attestations may
//! submit the settle") and are paid by the escrow rule.

use ganglion_contracts::build::pay_for;
use ganglion_indexer::JobStatus;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use crate::support::{self, Chain, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn providers_settle_a_job_whose_orchestrator_vanished() {
    let mut chain = Chain::start().await;
    chain.settle_grace_ms = 2_000;
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers_on(chain).await;
    let before = [chain.ntx_of(&pa.key_hash), chain.ntx_of(&pb.key_hash)];

    let job = orch
        .engine
        .submit(&support::probe_spec(2, 600_000))
        .await
        .expect("lock submitted");
    wait_for("Assigned", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Assigned).then_some(())
    })
    .await;
    // The orchestrator's engine dies (its swarm still relays, so the providers still reach
    // each other through it or directly).
    let orch = orch.stop_engine().await;

    let mut settlers = Vec::new();
    for p in [&pa, &pb] {
        let r = wait_for("the provider to be paid", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            (r.state == ProviderState::Paid).then_some(r)
        })
        .await;
        if r.intent(TxKind::Settle).is_some() {
            settlers.push(p.key_hash);
        }
    }
    assert!(!settlers.is_empty(), "a provider submitted the settle");
    let view = pa.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, JobStatus::Settled);
    for (p, before) in [(&pa, before[0]), (&pb, before[1])] {
        let paid: u64 = view
            .payments
            .iter()
            .filter(|x| x.to == p.key_hash)
            .map(|x| x.ntx)
            .sum();
        let i = view
            .assignments
            .iter()
            .position(|x| x.provider == p.key_hash)
            .expect("assigned");
        let rec = p
            .engine
            .provider_record(&job)
            .expect("store")
            .expect("known");
        let att = rec.detail.attestation.expect("attested");
        assert_eq!(paid, pay_for(att.gpu_seconds, view.assignments[i].rate));
        // The probe slept 2 s on one GPU; Docker's StartedAt → FinishedAt may read 1.99 s,
        // and attestations round down.
        assert!(att.gpu_seconds >= 1 && paid > 0, "{att:?}");
        assert_eq!(chain.ntx_of(&p.key_hash), before + paid);
    }
    // The orchestrator comes back and records the settlement it did not make.
    let orch = orch.start_engine(&chain);
    let r = wait_for("the orchestrator to see it settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Settled).then_some(r)
    })
    .await;
    assert!(r.intent(TxKind::Settle).is_none(), "it never submitted one");
    for c in [&orch.cancel, &pa.cancel, &pb.cancel] {
        c.cancel();
    }
    orch.engine.shutdown().await;
    pa.engine.shutdown().await;
    pb.engine.shutdown().await;
    chain.handle.shutdown().await;
}
