//! A provider dies mid-job: the other claims its pay; after the deadline and the claim window
//! the orchestrator expires the job: the defaulter's bond is slashed by at most its
//! assignment's value (DESIGN §3.1 G4), the orchestrator recovers at most what it paid, the
//! rest of the slash is burnt, and the unpaid budget is refunded. The dead provider, restarted,
//! sees its slash.

use ganglion_contracts::v2::rules::{pay_for, slash_of, split_slashes};
use ganglion_indexer::JobStatus;
use ganglion_indexer::event::Event;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::job::store::TxKind;

use super::support::{STAKE, World, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_provider_is_slashed_at_expiry_and_the_attested_one_paid() {
    let world = World::two_providers().await;
    let before = world.ntx();
    let World {
        chain,
        b,
        orch,
        pa,
        pb,
        ..
    } = world;

    let job = orch.submit_probe(3, 20_000).await;
    wait_for("provider B dispatched", || async {
        let r = pb.engine.provider_record(&job).expect("store")?;
        matches!(r.state, ProviderState::Preparing | ProviderState::Running).then_some(())
    })
    .await;
    // B's job engine dies before its container ends: it never attests.
    let pb = pb.stop_engine().await;

    // A claims its own pay meanwhile.
    wait_for("A sees its payment", || async {
        let r = pa.engine.provider_record(&job).expect("store")?;
        (r.state == ProviderState::Paid).then_some(())
    })
    .await;
    let r = wait_for("Expired", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert_ne!(r.state, OrchestratorState::Settled, "B never claimed");
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
    let started_at = view.started_at_ms().expect("assigned");
    let (refund, slashes, recovered, burnt) = view
        .history
        .iter()
        .find_map(|r| match &r.event {
            Event::JobExpired {
                refund,
                slashes,
                recovered,
                burnt,
                ..
            } => Some((*refund, slashes.clone(), *recovered, *burnt)),
            _ => None,
        })
        .expect("expire event");
    let i = view
        .assignments
        .iter()
        .position(|x| x.provider == pa.key_hash)
        .expect("A assigned");
    let b_index = 1 - i;
    let due = view
        .history
        .iter()
        .find_map(|r| match &r.event {
            Event::JobClaimed {
                index,
                gpu_ms,
                paid,
                ..
            } if *index == i as u64 => {
                assert_eq!(*paid, pay_for(*gpu_ms, view.assignments[i].rate));
                Some(*paid)
            }
            _ => None,
        })
        .expect("A claimed");
    assert!(due > 0, "A paid for its work");
    // The slash: B's assignment's value for its window, capped by its stake; the orchestrator
    // recovers at most what it paid (A's pay), the rest is burnt.
    let slash = slash_of(
        &view.assignments[b_index],
        STAKE,
        started_at,
        view.deadline_ms,
    );
    assert!(slash > 0 && slash <= STAKE);
    assert_eq!(slashes.len(), 1, "{slashes:?}");
    assert_eq!(slashes[0].provider, b.payment_hash());
    assert_eq!(slashes[0].amount, slash);
    let (to_orchestrator, burn) = split_slashes(slash, due);
    assert_eq!((recovered, burnt), (to_orchestrator, burn));
    assert_eq!(chain.ntx_of(&pa.key_hash), before[0] + due, "A paid");
    assert_eq!(
        chain.ntx_of(&b.payment_hash()),
        before[1],
        "B earned nothing"
    );
    assert_eq!(refund, view.budget - due + to_orchestrator);
    assert_eq!(
        chain.ntx_of(&orch.key_hash),
        before[2] - due + to_orchestrator,
        "the orchestrator gets the rest and recovers at most its loss"
    );
    // `audit verify` of the expired job passes: B is a listed defaulter, its slash within G4.
    let report =
        ganglion_node::audit::verify(&orch.indexer, orch.blocks.as_ref(), Some(&orch.p2p), &job)
            .await
            .expect("audit");
    assert!(report.pass, "{report:#?}");
    assert!(
        report
            .checks
            .iter()
            .any(|c| c.name == format!("default[{b_index}]")),
        "B's default is checked: {report:#?}"
    );
    assert!(
        !report
            .checks
            .iter()
            .any(|c| c.name == format!("payment[{b_index}]")),
        "no payment check for B"
    );
    // B comes back: its record ends in Slashed, and it attests nothing late.
    let pb = pb.start_engine(&chain);
    let rb = wait_for("B sees its slash", || async {
        let r = pb.engine.provider_record(&job).expect("store")?;
        r.state.is_terminal().then_some(r)
    })
    .await;
    assert_eq!(rb.state, ProviderState::Slashed, "{rb:?}");
    assert!(
        rb.intents.is_empty(),
        "B claims nothing late: {:?}",
        rb.intents
    );
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
