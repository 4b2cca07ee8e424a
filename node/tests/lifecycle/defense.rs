//! The node defends itself (DESIGN §3.1 G7): an orchestrator takes an attestation only for a
//! job it runs, assigned on chain, from a provider the assignment names, signed with that
//! assignment's key. Forgeries by a bonded co-provider or a stranger, attestations for jobs it
//! does not know and a flood change no record, and the job still settles and pays.

use ed25519_dalek::SigningKey;
use ganglion_contracts::datum::JobId;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::signed::{AttestationBody, sign};
use ganglion_node::job::state::OrchestratorState;
use ganglion_p2p::offers::BondSnapshot;
use ganglion_p2p::protocols::{AttestMessage, AttestResponse};
use ganglion_p2p::{self as p2p, Config};
use libp2p::PeerId;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;

use crate::support::{self, World, wait_for};

fn forged(job: JobId, provider: KeyHash, key: &SigningKey, gpu_seconds: u64) -> AttestMessage {
    let body = AttestationBody {
        job_id: job,
        provider,
        result: vec![],
        logs: vec![],
        gpu_seconds,
        exit_code: 0,
    };
    AttestMessage {
        job_id: job,
        provider,
        result: vec![],
        logs: vec![],
        gpu_seconds,
        exit_code: 0,
        signature: sign(key, &body.signed_bytes()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_and_foreign_attestations_are_refused_and_change_no_record() {
    let World {
        chain,
        b,
        orch,
        pa,
        pb,
    } = World::two_providers().await;
    let before = [chain.ntx_of(&pa.key_hash), chain.ntx_of(&pb.key_hash)];
    let job = orch
        .engine
        .submit(&support::probe_spec(4, 600_000))
        .await
        .expect("lock submitted");
    wait_for("Assigned", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Assigned).then_some(())
    })
    .await;

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
    let Some(Protocol::P2p(orch_peer)) = orch.addr.iter().last() else {
        panic!("the orchestrator's address names its peer")
    };
    let orch_peer: PeerId = orch_peer;
    stranger.dial(orch.addr.clone()).await.expect("dial");
    let ask = |m: AttestMessage| {
        let stranger = stranger.clone();
        async move { stranger.attest(orch_peer, m).await.expect("answered") }
    };

    // Bonded provider B signs an attestation naming A, for A's pay: refused.
    assert_eq!(
        ask(forged(job, pa.key_hash, &b.attest, 3_600)).await,
        AttestResponse::Invalid
    );
    // A key no assignment of the job names, correctly self-signed: refused.
    let outsider = SigningKey::from_bytes(&[0x77; 32]);
    assert_eq!(
        ask(forged(job, [0x77; 28], &outsider, 3_600)).await,
        AttestResponse::Invalid
    );
    // A job the orchestrator does not run: not taken.
    assert_eq!(
        ask(forged(JobId([0x42; 32]), pa.key_hash, &b.attest, 1)).await,
        AttestResponse::UnknownJob
    );
    // A flood: each forgery refused or rate-limited, none stored.
    let flood = futures::future::join_all((0..40u64).map(|i| {
        let stranger = stranger.clone();
        let m = forged(job, pa.key_hash, &b.attest, i);
        async move { stranger.attest(orch_peer, m).await }
    }))
    .await;
    for a in &flood {
        assert!(
            matches!(
                a,
                Ok(AttestResponse::Invalid | AttestResponse::RateLimited) | Err(_)
            ),
            "{a:?}"
        );
    }
    assert!(
        flood
            .iter()
            .any(|a| matches!(a, Ok(AttestResponse::RateLimited))),
        "the flood hits the per-peer limit"
    );
    // Whatever is held (the honest providers' own, once they attested) is checked good.
    let assigned = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    for m in orch.engine.store().attestations(&job).expect("store") {
        assert_eq!(
            ganglion_node::job::attestations::check(&m, Some(&assigned)),
            Ok(()),
            "a forgery was stored: {m:?}"
        );
    }

    // The honest providers' attestations still get through and the job settles and pays.
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
    // Finished: its attestations are no longer held.
    wait_for("the finished job's attestations to go", || async {
        orch.engine
            .store()
            .attestations(&job)
            .expect("store")
            .is_empty()
            .then_some(())
    })
    .await;
}
