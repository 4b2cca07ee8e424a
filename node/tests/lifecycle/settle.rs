//! A job across two providers reaches `Settled`; each provider is paid exactly
//! `pay_for(gpu_seconds, rate)` NTX (the escrow rule, `build::pay_for`) and the orchestrator
//! gets the rest back; `audit verify` passes every check (and `crate::audit` tampers).

use ganglion_contracts::build::pay_for;
use ganglion_indexer::JobStatus;
use ganglion_indexer::event::Event;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use crate::support::{self, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_across_two_providers_settles_and_pays_by_the_escrow_rule() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;

    let before = [
        chain.ntx_of(&pa.key_hash),
        chain.ntx_of(&pb.key_hash),
        chain.ntx_of(&orch.key_hash),
    ];
    let job = orch
        .engine
        .submit(&support::probe_spec(2, 600_000))
        .await
        .expect("lock submitted");
    let record = wait_for("the orchestrator to reach Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert!(
            !matches!(
                r.state,
                OrchestratorState::Cancelled | OrchestratorState::Expired
            ),
            "{r:?}"
        );
        (r.state == OrchestratorState::Settled).then_some(r)
    })
    .await;
    let states: Vec<_> = record.history.iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        [
            OrchestratorState::Locked,
            OrchestratorState::Matching,
            OrchestratorState::Assigning,
            OrchestratorState::Assigned,
            OrchestratorState::Settling,
            OrchestratorState::Settled
        ]
    );
    let kinds: Vec<_> = record.intents.iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [TxKind::Lock, TxKind::Assign, TxKind::Settle],
        "one transaction each"
    );

    // The chain's account of it.
    let view = orch
        .indexer
        .job(&job, 0)
        .expect("indexer")
        .expect("job indexed")
        .value;
    assert_eq!(view.status, JobStatus::Settled);
    assert_eq!(view.assignments.len(), 2);
    let settled = view
        .history
        .iter()
        .find_map(|r| match &r.event {
            Event::JobSettled {
                attestations,
                payments,
                refund,
                ..
            } => Some((attestations.clone(), payments.clone(), *refund)),
            _ => None,
        })
        .expect("settle event");
    let (attestations, payments, refund) = settled;
    let mut paid_total = 0;
    for (node, before) in [(&pa, before[0]), (&pb, before[1])] {
        let i = view
            .assignments
            .iter()
            .position(|x| x.provider == node.key_hash)
            .expect("both providers assigned");
        let att = attestations
            .iter()
            .find(|x| x.provider_index == i as u64)
            .expect("attested");
        // The attested GPU-seconds are the executor's measurement (engine StartedAt →
        // FinishedAt) in milliseconds, to the nearest whole second (the escrow's unit).
        let table = node
            .executor
            .as_ref()
            .expect("executor")
            .table()
            .all()
            .expect("table");
        assert_eq!(table.len(), 1, "one executor job on this provider");
        let report = table[0].report.as_ref().expect("finished");
        assert_eq!(
            att.gpu_seconds,
            ganglion_node::job::provider::attested_gpu_seconds(report.billable_gpu_ms())
        );
        assert!(
            att.gpu_seconds.abs_diff(report.billable_gpu_ms() / 1000) <= 1,
            "within a second of the measurement: {report:?}"
        );
        assert!(
            report.billable_gpu_seconds() >= 1.9,
            "the probe slept 2 s on one GPU: {report:?}"
        );
        assert_eq!(att.exit_code, 0);
        assert!(
            !att.result.is_empty() && !att.logs.is_empty(),
            "CIDs attested"
        );
        let due = pay_for(att.gpu_seconds, view.assignments[i].rate);
        assert!(due > 0);
        assert!(
            payments
                .iter()
                .any(|p| p.to == node.key_hash && p.ntx == due)
        );
        // Wait for the provider's own record too: it saw its payment on chain.
        let r = wait_for("the provider to see its payment", || async {
            let r = node.engine.provider_record(&job).expect("store")?;
            (r.state == ProviderState::Paid).then_some(r)
        })
        .await;
        assert_eq!(
            r.history.iter().map(|t| t.state).collect::<Vec<_>>(),
            [
                ProviderState::Reserved,
                ProviderState::Assigned,
                ProviderState::Preparing,
                ProviderState::Running,
                ProviderState::Finished,
                ProviderState::Attested,
                ProviderState::Paid
            ]
        );
        assert!(r.dispatch.is_some(), "dispatch intent written");
        assert_eq!(
            chain.ntx_of(&node.key_hash),
            before + due,
            "balance rose by exactly the escrow rule's amount"
        );
        paid_total += due;
    }
    assert_eq!(refund, 1_000_000 - paid_total);
    assert_eq!(chain.ntx_of(&orch.key_hash), before[2] - paid_total);

    // `audit verify` re-derives all of it from chain and IPFS only (crate::audit).
    crate::audit::audit_settled_job(&orch, &[&pa, &pb], &job).await;
    for n in [&orch.cancel, &pa.cancel, &pb.cancel] {
        n.cancel();
    }
    orch.engine.shutdown().await;
    pa.engine.shutdown().await;
    pb.engine.shutdown().await;
    chain.handle.shutdown().await;
}
