//! A provider dies mid-job: after the deadline the orchestrator expires the job; the provider
//! that attested is paid by the escrow rule, the defaulter's bond is slashed (`slash_bps` of
//! its stake to the orchestrator) and the rest is refunded. The dead provider, restarted, sees
//! its slash.

use ganglion_contracts::build::pay_for;
use ganglion_indexer::JobStatus;
use ganglion_indexer::event::Event;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use crate::support::{self, STAKE, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_provider_is_slashed_at_expiry_and_the_attested_one_paid() {
    let World {
        chain,
        b,
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
        .submit(&support::probe_spec(3, 20_000))
        .await
        .expect("lock submitted");
    wait_for("provider B dispatched", || async {
        let r = pb.engine.provider_record(&job).expect("store")?;
        matches!(r.state, ProviderState::Preparing | ProviderState::Running).then_some(())
    })
    .await;
    // B's job engine dies before its container ends: it never attests.
    let pb = pb.stop_engine().await;

    let r = wait_for("Expired", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert_ne!(r.state, OrchestratorState::Settled, "B never attested");
        (r.state == OrchestratorState::Expired).then_some(r)
    })
    .await;
    assert_eq!(
        r.intents.iter().map(|i| i.kind).collect::<Vec<_>>(),
        [TxKind::Lock, TxKind::Assign, TxKind::Expire]
    );
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, JobStatus::Expired);
    assert_eq!(view.defaulters(), vec![b.payment_hash()]);
    let (atts, refund) = view
        .history
        .iter()
        .find_map(|r| match &r.event {
            Event::JobExpired {
                attestations,
                refund,
                ..
            } => Some((attestations.clone(), *refund)),
            _ => None,
        })
        .expect("expire event");
    let slashed: u64 = view
        .history
        .iter()
        .filter_map(|r| match &r.event {
            Event::BondSlashed {
                provider, amount, ..
            } if *provider == b.payment_hash() => Some(*amount),
            _ => None,
        })
        .sum();
    assert_eq!(slashed, chain.deployment.params.slash_amount(STAKE));
    assert!(slashed > 0);
    assert_eq!(atts.len(), 1, "only A attested");
    let i = view
        .assignments
        .iter()
        .position(|x| x.provider == pa.key_hash)
        .expect("A assigned");
    assert_eq!(atts[0].provider_index, i as u64);
    let due = pay_for(atts[0].gpu_seconds, view.assignments[i].rate);
    assert!(
        due > 0,
        "{:?}\n{:?}",
        pa.engine.provider_record(&job),
        pa.executor.as_ref().map(|e| e
            .table()
            .all()
            .map(|all| all.into_iter().map(|r| r.report).collect::<Vec<_>>()))
    );
    assert_eq!(chain.ntx_of(&pa.key_hash), before[0] + due, "A paid");
    assert_eq!(
        chain.ntx_of(&b.payment_hash()),
        before[1],
        "B earned nothing"
    );
    assert_eq!(refund, 1_000_000 - due + slashed);
    // `audit verify` of the expired job passes: B's missing attestation is accounted for as a
    // listed defaulter, the refund carries the slash.
    let report =
        ganglion_node::audit::verify(&orch.indexer, orch.blocks.as_ref(), Some(&orch.p2p), &job)
            .await
            .expect("audit");
    assert!(report.pass, "{report:#?}");
    let b_index = 1 - i;
    let missing = report
        .checks
        .iter()
        .find(|c| c.name == format!("attestation[{b_index}]"))
        .expect("B's attestation check");
    assert!(missing.detail.contains("defaulter"), "{missing:?}");
    assert!(
        !report
            .checks
            .iter()
            .any(|c| c.name == format!("payment[{b_index}]")),
        "no payment check for B"
    );
    assert_eq!(
        chain.ntx_of(&orch.key_hash),
        before[2] - due + slashed,
        "the orchestrator gets the rest and the slash"
    );
    wait_for("A sees its payment", || async {
        let r = pa.engine.provider_record(&job).expect("store")?;
        (r.state == ProviderState::Paid).then_some(())
    })
    .await;
    // B comes back: its record ends in Slashed, and it attests nothing late.
    let pb = pb.start_engine(&chain);
    let rb = wait_for("B sees its slash", || async {
        let r = pb.engine.provider_record(&job).expect("store")?;
        r.state.is_terminal().then_some(r)
    })
    .await;
    assert_eq!(rb.state, ProviderState::Slashed, "{rb:?}");
    assert!(rb.detail.attestation.is_none());
    for c in [&orch.cancel, &pa.cancel, &pb.cancel] {
        c.cancel();
    }
    orch.engine.shutdown().await;
    pa.engine.shutdown().await;
    pb.engine.shutdown().await;
    chain.handle.shutdown().await;
}
