//! The node defends itself (DESIGN §3.1 G7): an orchestrator gives a receipt only for a job it
//! runs, assigned on chain, to the peer the assignment's bond names. Heartbeats from a bonded
//! co-provider for another provider's assignment, from a stranger, for jobs it does not know,
//! and a flood get no receipt and change nothing — nor does their report that the job's
//! network did not form; the job still settles and pays.

use ganglion_contracts::v2::datum::JobId;
use ganglion_node::job::state::OrchestratorState;
use ganglion_p2p::offers::BondSnapshot;
use ganglion_p2p::protocols::{
    HeartbeatRefusal, HeartbeatRequest, HeartbeatResponse, RankSummary, Unformed,
};
use ganglion_p2p::{self as p2p, Client, Config};
use libp2p::PeerId;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;

use super::support::{World, wait_for};

fn beat(job: JobId, provider_index: u64) -> HeartbeatRequest {
    HeartbeatRequest {
        job_id: job,
        provider_index,
        ranks: RankSummary {
            running: 1,
            exited: 0,
            gpu_ms: 1_000,
            progress: None,
        },
        sent_at_ms: p2p::now_ms(),
        log: None,
        unformed: None,
    }
}

async fn ask(from: &Client, to: PeerId, req: HeartbeatRequest) -> HeartbeatResponse {
    from.request_receipt(to, req).await.expect("answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heartbeats_from_anyone_but_the_assigned_provider_get_no_receipt() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let before = [chain.ntx_of(&pa.key_hash), chain.ntx_of(&pb.key_hash)];
    let job = orch.submit_probe(6, 600_000).await;
    wait_for("Assigned", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Assigned).then_some(())
    })
    .await;
    let Some(Protocol::P2p(orch_peer)) = orch.addr.iter().last() else {
        panic!("the orchestrator's address names its peer")
    };
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    let index_of = |k| {
        view.assignments
            .iter()
            .position(|a| a.provider == k)
            .expect("assigned") as u64
    };
    let (ia, ib) = (index_of(pa.key_hash), index_of(pb.key_hash));

    // Bonded provider B asks for a receipt on A's assignment: refused.
    assert_eq!(
        ask(&pb.p2p, orch_peer, beat(job, ia)).await,
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );
    // A stranger's swarm reaches the orchestrator.
    let (stranger, event_loop, _events, _inbound) = p2p::new(
        Keypair::generate_ed25519(),
        Config {
            listen: vec![],
            ..Config::default()
        },
        BondSnapshot::default(),
    )
    .expect("swarm");
    tokio::spawn(event_loop.run());
    stranger.dial(orch.addr.clone()).await.expect("dial");
    for i in [ia, ib, 7] {
        assert_eq!(
            ask(&stranger, orch_peer, beat(job, i)).await,
            HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned),
            "a stranger, index {i}"
        );
    }
    // A report that the job's network did not form, from anyone but the assignment's own
    // node: refused, and the job is neither stopped nor marked (G7).
    let unformed = |i: u64| HeartbeatRequest {
        unformed: Some(Unformed {
            unreachable: vec![i ^ 1],
        }),
        ..beat(job, i)
    };
    assert_eq!(
        ask(&pb.p2p, orch_peer, unformed(ia)).await,
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );
    assert_eq!(
        ask(&stranger, orch_peer, unformed(ib)).await,
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );
    let r = orch
        .engine
        .orchestrator_record(&job)
        .expect("store")
        .expect("known");
    assert!(
        r.detail.unformed.is_empty() && r.detail.stopped_at_ms.is_none(),
        "{r:?}"
    );
    // A job the orchestrator does not run.
    assert_eq!(
        ask(&stranger, orch_peer, beat(JobId([0x42; 32]), 0)).await,
        HeartbeatResponse::Refused(HeartbeatRefusal::UnknownJob)
    );
    // A flood: each refused or rate-limited, never a receipt.
    let flood = futures::future::join_all((0..40u64).map(|i| {
        let stranger = stranger.clone();
        async move { stranger.request_receipt(orch_peer, beat(job, i % 2)).await }
    }))
    .await;
    for a in &flood {
        assert!(
            matches!(
                a,
                Ok(HeartbeatResponse::Refused(_) | HeartbeatResponse::RateLimited) | Err(_)
            ),
            "{a:?}"
        );
    }
    assert!(
        flood
            .iter()
            .any(|a| matches!(a, Ok(HeartbeatResponse::RateLimited))),
        "the flood hits the per-peer limit"
    );

    // The honest providers' heartbeats still get receipts; the job settles and pays.
    wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert!(
            !matches!(
                r.state,
                OrchestratorState::Cancelled | OrchestratorState::Expired
            ),
            "{r:?}"
        );
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;
    let view = pa.indexer.job(&job, 0).expect("q").expect("known").value;
    for (p, before) in [(&pa, before[0]), (&pb, before[1])] {
        let paid: u64 = view
            .payments
            .iter()
            .filter(|x| x.to == p.key_hash)
            .map(|x| x.ntx)
            .sum();
        assert!(paid > 0, "an honest provider was paid");
        assert_eq!(chain.ntx_of(&p.key_hash), before + paid);
    }
    for p in [&pa, &pb] {
        assert!(
            view.history.iter().any(|r| matches!(
                &r.event,
                ganglion_indexer::event::Event::JobClaimed { provider, receipt: Some(_), .. }
                    if *provider == p.key_hash
            )),
            "each provider claimed with a receipt of its own"
        );
    }
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
