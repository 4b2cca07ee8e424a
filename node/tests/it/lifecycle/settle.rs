//! A job across two providers reaches `Settled` (escrow v2): while it runs the orchestrator
//! acknowledges each provider's work with receipts; each provider claims its own pay, exactly
//! `pay_for(gpu_ms, rate)` NTX (the escrow rule, `rules::pay_for`) for the GPU-ms its executor
//! measured, and the last claim refunds the rest to the orchestrator; `audit verify` passes
//! every check (and `super::audit` tampers).

use ganglion_contracts::v2::rules::pay_for;
use ganglion_indexer::JobStatus;
use ganglion_indexer::event::ClaimOutcome;
use ganglion_indexer::event::Event;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use super::support::{World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_across_two_providers_settles_and_pays_by_the_escrow_rule() {
    let world = World::two_providers().await;
    let before = world.ntx();
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = world;
    let job = orch.submit_probe(2, 600_000).await;
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
            OrchestratorState::Settled
        ]
    );
    let kinds: Vec<_> = record.intents.iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [TxKind::Lock, TxKind::Assign],
        "one transaction each; the providers claim their pay themselves"
    );

    // The chain's account of it.
    let view = orch
        .indexer
        .job(&job, 0)
        .expect("indexer")
        .expect("job indexed")
        .value;
    assert_eq!(view.status, JobStatus::Claimed);
    assert_eq!(view.assignments.len(), 2);
    let started_at = view.started_at_ms().expect("assigned");
    let claims: Vec<_> = view
        .history
        .iter()
        .filter_map(|r| match &r.event {
            Event::JobClaimed {
                index,
                provider,
                gpu_ms,
                paid,
                receipt,
                attestation,
                outcome,
                ..
            } => Some((
                *index,
                *provider,
                *gpu_ms,
                *paid,
                receipt.clone(),
                attestation.clone(),
                *outcome,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(claims.len(), 2, "one claim per provider");
    let mut paid_total = 0;
    for (node, before) in [(&pa, before[0]), (&pb, before[1])] {
        let i = view
            .assignments
            .iter()
            .position(|x| x.provider == node.key_hash)
            .expect("both providers assigned");
        let (_, provider, gpu_ms, paid, receipt, att, _) = claims
            .iter()
            .find(|c| c.0 == i as u64)
            .cloned()
            .expect("claimed");
        assert_eq!(provider, node.key_hash, "each provider claimed its own pay");
        // The attested GPU-ms are the executor's measurement (engine StartedAt → FinishedAt),
        // to the millisecond: no rounding before the escrow's own floor.
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
            gpu_ms,
            report.billable_gpu_ms(),
            "the measured GPU-ms, not rounded"
        );
        assert!(
            report.billable_gpu_seconds() >= 1.9,
            "the probe slept 2 s on one GPU: {report:?}"
        );
        // The claim carried the orchestrator's receipt: a heartbeat was acknowledged while
        // the ranks ran, after the assign.
        let receipt = receipt.expect("a receipt was given while the ranks ran");
        assert!(receipt.acknowledged_until_ms >= started_at, "{receipt:?}");
        assert_eq!(att.exit_code, 0);
        assert!(
            !att.result.is_empty() && !att.logs.is_empty(),
            "CIDs attested"
        );
        let due = pay_for(gpu_ms, view.assignments[i].rate);
        assert!(due > 0);
        assert_eq!(paid, due, "paid by the escrow rule");
        // Wait for the provider's own record too: it saw its claim on chain.
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
                ProviderState::Claiming,
                ProviderState::Paid
            ]
        );
        assert!(r.dispatch.is_some(), "dispatch intent written");
        assert_eq!(
            r.intents.iter().map(|i| i.kind).collect::<Vec<_>>(),
            [TxKind::Claim],
            "the provider submitted its own claim, once"
        );
        assert_eq!(
            chain.ntx_of(&node.key_hash),
            before + due,
            "balance rose by exactly the escrow rule's amount"
        );
        paid_total += due;
    }
    let refund = claims
        .iter()
        .find_map(|c| match c.6 {
            ClaimOutcome::Closed { refund } => Some(refund),
            ClaimOutcome::Continues { .. } => None,
        })
        .expect("the last claim closed the escrow");
    let budget = view.budget;
    assert_eq!(refund, budget - paid_total);
    assert_eq!(chain.ntx_of(&orch.key_hash), before[2] - paid_total);
    // Each provider's claim released its bond's commitment to the job (G5), long before the
    // deadline + claim window: the bond backs all its GPUs again.
    assert!(ganglion_p2p::now_ms() < view.claim_window_end_ms);
    for node in [&pa, &pb] {
        let bonds = orch
            .indexer
            .provider(&node.key_hash)
            .expect("indexer")
            .bonds;
        assert_eq!(bonds.len(), 1, "{bonds:?}");
        assert!(
            bonds[0].datum.commitments.iter().all(|c| c.job_id != job),
            "{bonds:?}"
        );
        assert_eq!(bonds[0].free_gpus, bonds[0].datum.gpus);
    }

    // `audit verify` re-derives all of it from chain and IPFS only (super::audit).
    super::audit::audit_settled_job(&orch, &[&pa, &pb], &job).await;
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
