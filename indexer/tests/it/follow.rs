//! Following a real devnet over N2N and N2C, through an injected rollback: real
//! transactions built by `ganglion-contracts`, validated by the devnet's ledger (phase-1 and
//! uplc), forged into blocks, served over the Ouroboros mini-protocols.

use std::sync::atomic::{AtomicUsize, Ordering};

use ed25519_dalek::SigningKey;
use ganglion_cardano::time::slot_to_posix_ms;
use ganglion_contracts::tx::{Draft, Output, Utxo};
use ganglion_contracts::v2::build::{self, AssignRequest, BondRequest, ClaimRequest, LockRequest};
use ganglion_contracts::v2::datum::{Assignment, JobId};
use ganglion_contracts::v2::payout::Payout;
use ganglion_contracts::v2::redeemer::Attestation;
use ganglion_contracts::v2::rules::{claim_bound_gpu_ms, pay_for};
use ganglion_contracts::v2::signed::{self, Acceptance, AttestationBody};
use ganglion_indexer::store::{Kv, MemoryKv};
use ganglion_indexer::sync::SyncConfig;
use ganglion_indexer::{ClaimOutcome, Event, Indexer};
use tokio_util::sync::CancellationToken;

use crate::devnet::{Chain, caught_up, deploy, dev_party, lock_small, receipt_key, spawn_follower};

/// A bond of `gpus` GPUs at the minimum stake (1 NTX per GPU), paid to the provider's key.
fn bond_request(
    provider: &ganglion_contracts::test_utils::world::Party,
    attest_key: [u8; 32],
    peer_id: Vec<u8>,
    gpus: u64,
) -> BondRequest {
    BondRequest {
        provider: provider.hash,
        attest_key,
        peer_id,
        payout: Payout::enterprise(provider.hash),
        gpus,
        stake: gpus * 1_000_000,
    }
}

/// A memory store that counts its commits.
#[derive(Default)]
struct CountingCommits {
    kv: MemoryKv,
    commits: AtomicUsize,
}

impl Kv for CountingCommits {
    fn get(&self, key: &[u8]) -> ganglion_indexer::Result<Option<Vec<u8>>> {
        self.kv.get(key)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> ganglion_indexer::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv.scan_prefix(prefix)
    }
    fn range(&self, from: &[u8], to: &[u8]) -> ganglion_indexer::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv.range(from, to)
    }
    fn commit(&self, writes: Vec<ganglion_indexer::store::Write>) -> ganglion_indexer::Result<()> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.kv.commit(writes)
    }
    fn flush(&self) -> ganglion_indexer::Result<()> {
        self.kv.flush()
    }
}

/// Receipts every minute.
const RECEIPT_INTERVAL_MS: u64 = 60_000;
/// 3 600 000 base units per GPU-hour: one base unit per GPU-millisecond.
const RATE: u64 = 3_600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_the_devnet_through_a_rollback_and_matches_a_fresh_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chain = Chain::start(dir.path()).await;
    let (dep, watch) = deploy(&chain).await;

    // Follower 1: N2N, from origin, following live.
    let cancel = CancellationToken::new();
    let (live, live_rx, sync) = spawn_follower(
        Indexer::new(MemoryKv::new(), watch.clone(), 10),
        SyncConfig::new(chain.n2n()),
        &cancel,
    );

    // Bond, lock, rollback, lock + cancel, lock + assign + claim.
    let provider = dev_party(&chain.env, 1);
    let attest = SigningKey::from_bytes(&[7; 32]);
    let bond = bond_request(
        &provider,
        attest.verifying_key().to_bytes(),
        vec![1, 2, 3],
        2,
    );
    let posted = chain
        .run(
            build::post_bond(&dep, &chain.env, &bond).expect("bond"),
            &provider,
            &[],
        )
        .await;
    let bond_utxo = chain
        .utxos(&dep.address(&chain.env))
        .into_iter()
        .find(|u| u.reference.tx_hash == posted.hash)
        .expect("bond output");
    let orch = dev_party(&chain.env, 2);
    // Budget: 2 GPUs at the rate for the whole hour-long window (DESIGN §3.1 G6).
    let lock = |seed: Utxo, slot: u64| LockRequest {
        orchestrator: orch.hash,
        receipt_key: receipt_key().verifying_key().to_bytes(),
        spec: vec![1, 85, 18, 32],
        gpus: 2,
        max_rate: RATE,
        budget: 2 * 3_600_000,
        deadline_ms: slot_to_posix_ms(&chain.env.slot_config, slot + 3600).expect("after zero"),
        receipt_interval_ms: RECEIPT_INTERVAL_MS,
        seed,
        valid_until_slot: slot + 300,
    };
    // Split the orchestrator's genesis UTxO so that two locks can use different seeds.
    let mut split = Draft::default();
    split.pay(Output::new(
        orch.address.clone(),
        ganglion_contracts::tx::Value::lovelace(100_000_000),
    ));
    chain.run(split, &orch, &[]).await;
    let seed = chain
        .utxos(&orch.address)
        .into_iter()
        .next()
        .expect("orchestrator funds");
    let first_seed = seed.reference;
    let (draft, job) = build::lock(&dep, &chain.env, &lock(seed, chain.slot())).expect("lock");
    chain.run(draft, &orch, &[]).await;
    caught_up(&live_rx, &chain, &live).await;
    assert!(
        live.job(&job, 0).expect("query").is_some(),
        "the lock was indexed"
    );

    // Roll the lock back: the live follower must forget it.
    chain.handle.rollback(1).await.expect("rollback");
    caught_up(&live_rx, &chain, &live).await;
    assert!(
        live.job(&job, 0).expect("query").is_none(),
        "the rolled-back lock is gone"
    );

    // A new lock (another seed, so another job id) and its cancel on the new fork.
    let seed = chain
        .utxos(&orch.address)
        .into_iter()
        .find(|u| u.reference != first_seed)
        .expect("orchestrator funds");
    let (draft, job2) = build::lock(&dep, &chain.env, &lock(seed, chain.slot())).expect("lock");
    assert_ne!(job2, job);
    chain.run(draft, &orch, &[]).await;
    let escrow = chain
        .utxos(&dep.address(&chain.env))
        .into_iter()
        .find(|u| u.output.value.quantity(&dep.script.hash, &job2.0) == 1)
        .expect("escrow");
    chain
        .run(
            build::cancel(&dep, &chain.env, &escrow).expect("cancel"),
            &orch,
            &[],
        )
        .await;

    // A third job, assigned to the provider, who claims its pay (closing the escrow).
    let seed = chain
        .utxos(&orch.address)
        .into_iter()
        .find(|u| u.reference != first_seed)
        .expect("orchestrator funds");
    let slot = chain.slot();
    let req = lock(seed, slot);
    let deadline_ms = req.deadline_ms;
    let (draft, job3) = build::lock(&dep, &chain.env, &req).expect("lock");
    chain.run(draft, &orch, &[]).await;
    let escrow = |id: JobId| {
        chain
            .utxos(&dep.address(&chain.env))
            .into_iter()
            .find(|u| u.output.value.quantity(&dep.script.hash, &id.0) == 1)
            .expect("escrow")
    };
    let slot = chain.slot();
    let accept_by_ms = slot_to_posix_ms(&chain.env.slot_config, slot + 600).expect("after zero");
    let assignment = Assignment {
        provider: provider.hash,
        attest_key: attest.verifying_key().to_bytes(),
        payout: Payout::enterprise(provider.hash),
        gpus: 2,
        rate: RATE,
        accept_by_ms,
        started_at_ms: slot_to_posix_ms(&chain.env.slot_config, slot).expect("after zero"),
        until_ms: deadline_ms,
    };
    let acceptance = Acceptance {
        job_id: job3,
        spec: req.spec.clone(),
        gpus: 2,
        rate: RATE,
        deadline_ms,
        accept_by_ms,
        receipt_interval_ms: RECEIPT_INTERVAL_MS,
    };
    let assign = AssignRequest {
        escrow: escrow(job3),
        assignments: vec![assignment],
        acceptances: vec![signed::sign(&attest, &acceptance.signed_bytes())],
        bonds: vec![bond_utxo],
        valid_from_slot: slot,
        valid_until_slot: slot + 300,
    };
    chain
        .run(
            build::assign(&dep, &chain.env, &assign).expect("assign"),
            &orch,
            &[],
        )
        .await;
    // Let a few slots pass, then claim all the time provably elapsed since the assign (no
    // receipt: at most one interval), with the claim's lower bound one slot back.
    let started_ms = slot_to_posix_ms(&chain.env.slot_config, slot).expect("after zero");
    while chain.slot() < slot + 4 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let from = chain.slot() - 1;
    let gpu_ms = claim_bound_gpu_ms(
        2,
        started_ms,
        deadline_ms,
        RECEIPT_INTERVAL_MS,
        None,
        slot_to_posix_ms(&chain.env.slot_config, from).expect("after zero"),
    );
    assert!(gpu_ms > 0, "time passed since the assign");
    let body = AttestationBody {
        job_id: job3,
        provider: provider.hash,
        result: vec![1, 85, 0],
        logs: vec![1, 85, 1],
        gpu_ms,
        exit_code: 0,
    };
    let claim = ClaimRequest {
        escrow: escrow(job3),
        index: 0,
        attestation: Attestation {
            result: body.result.clone(),
            logs: body.logs.clone(),
            gpu_ms,
            exit_code: 0,
            signature: signed::sign(&attest, &body.signed_bytes()),
        },
        receipt: None,
        valid_from_slot: from,
        valid_until_slot: from + 300,
        release: None,
    };
    chain
        .run(
            build::claim(&dep, &chain.env, &claim).expect("claim"),
            &orch,
            &[],
        )
        .await;
    caught_up(&live_rx, &chain, &live).await;
    let claimed = live.job(&job3, 0).expect("query").expect("indexed");
    assert_eq!(claimed.value.status, ganglion_indexer::JobStatus::Claimed);
    assert_eq!(
        claimed.value.payments[0].ntx,
        pay_for(gpu_ms, RATE),
        "one base unit per GPU-millisecond"
    );
    assert!(claimed.value.history.iter().any(|r| matches!(
        &r.event,
        Event::JobClaimed {
            outcome: ClaimOutcome::Closed { refund },
            ..
        } if *refund == 2 * 3_600_000 - pay_for(gpu_ms, RATE)
    )));
    // The assign's acceptance signature is kept with its event (auditors re-verify it).
    let kept = claimed.value.history.iter().find_map(|r| match &r.event {
        Event::JobAssigned { acceptances, .. } => Some(acceptances.clone()),
        _ => None,
    });
    assert_eq!(kept, Some(assign.acceptances.clone()));

    // Follower 2: N2C over TCP, from origin, after the fact: it catches up in runs of blocks,
    // one commit each, not one commit per block.
    let (fresh, fresh_rx, sync2) = spawn_follower(
        Indexer::new(CountingCommits::default(), watch.clone(), 10),
        SyncConfig::new(chain.n2c()),
        &cancel,
    );
    caught_up(&fresh_rx, &chain, &fresh).await;
    let blocks = fresh.tip().expect("tip").expect("some").height;
    let commits = fresh.kv().commits.load(Ordering::SeqCst) as u64;
    assert!(
        blocks >= 6 && commits * 3 <= blocks,
        "caught up on {blocks} blocks in {commits} commits"
    );

    let events: Vec<Event> = fresh
        .events(0, u64::MAX)
        .expect("events")
        .into_iter()
        .map(|r| r.event)
        .collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::BondPosted { provider: p, .. } if *p == provider.hash))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::JobCancelled { job_id, .. } if *job_id == job2))
    );
    assert!(
        !events.iter().any(|e| e.job_id() == Some(job)),
        "the rolled-back job never existed on this chain"
    );
    assert_eq!(
        live.kv().scan_prefix(b"").expect("dump"),
        fresh.kv().scan_prefix(b"").expect("dump"),
        "the follower that lived through the rollback equals a fresh replay"
    );

    cancel.cancel();
    sync.await.expect("join").expect("sync ends cleanly");
    sync2.await.expect("join").expect("sync ends cleanly");
    chain.handle.shutdown().await;
}

/// Random rollbacks of depth 1–10 injected by the devnet during a scripted run of bonds and
/// jobs: the follower that lived through them equals a fresh replay of the final chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_devnet_rollbacks_leave_the_same_state_as_a_fresh_replay() {
    // On failure the sync loop's log (reconnects, intersections) is printed with the panic.
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let chain = Chain::start(dir.path()).await;
    let (dep, watch) = deploy(&chain).await;
    let cancel = CancellationToken::new();
    let (live, live_rx, sync) = spawn_follower(
        Indexer::new(MemoryKv::new(), watch.clone(), 10),
        SyncConfig::new(chain.n2n()),
        &cancel,
    );

    let mut rng: u64 = std::env::var("GANGLION_ROLLBACK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()));
    eprintln!("rollback test seed: {rng} (set GANGLION_ROLLBACK_SEED to replay)");
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let orch = dev_party(&chain.env, 2);
    let mut rollbacks = 0;
    let mut highest = 0;
    const K: u64 = 10;
    for step in 0..24u32 {
        // Alternate bonds (providers 1 and 3, re-posted after a rollback undid them) and locks.
        let provider = dev_party(&chain.env, 1 + 2 * (step % 2));
        let bonded = chain
            .utxos(&dep.address(&chain.env))
            .iter()
            .any(|u| u.output.value.quantity(&dep.script.hash, &provider.hash) == 1);
        if step % 3 == 0 && !bonded {
            let req = bond_request(&provider, [9; 32], vec![step as u8], 1);
            chain
                .run(
                    build::post_bond(&dep, &chain.env, &req).expect("bond"),
                    &provider,
                    &[],
                )
                .await;
        } else {
            lock_small(&chain, &dep, &orch).await;
        }
        let height = chain.handle.tip().map_or(0, |t| t.number);
        highest = highest.max(height);
        if next() % 3 == 0 {
            // Keep the deploy block (height 1): the deployment must survive. Like a node's
            // immutable tip, neither the devnet nor the indexer undoes a block more than k
            // below the highest block ever seen, so the fork point stays within that window.
            let floor = highest.saturating_sub(K).max(1);
            let depth = (1 + next() % K).min(height.saturating_sub(floor));
            if depth > 0 {
                chain.handle.rollback(depth).await.expect("rollback");
                rollbacks += 1;
                // Forge whatever the mempool kept, so the chain moves on from the fork point.
                let _ = chain.handle.forge_now().await;
            }
        }
        caught_up(&live_rx, &chain, &live).await;
    }
    eprintln!("{rollbacks} rollbacks injected");
    // Grow the chain past the highest block seen, so both indexers keep undo records for the
    // same last k blocks (a rollback leaves the live one without those below its old high).
    while chain.handle.tip().map_or(0, |t| t.number) <= highest {
        lock_small(&chain, &dep, &orch).await;
    }
    caught_up(&live_rx, &chain, &live).await;

    let (fresh, fresh_rx, sync2) = spawn_follower(
        Indexer::new(MemoryKv::new(), watch, 10),
        SyncConfig::new(chain.n2c()),
        &cancel,
    );
    caught_up(&fresh_rx, &chain, &fresh).await;
    assert!(!fresh.events(0, u64::MAX).expect("events").is_empty());
    assert_eq!(
        live.kv().scan_prefix(b"").expect("dump"),
        fresh.kv().scan_prefix(b"").expect("dump"),
        "state after random rollbacks equals a fresh replay"
    );
    cancel.cancel();
    sync.await.expect("join").expect("sync");
    sync2.await.expect("join").expect("sync");
    chain.handle.shutdown().await;
}

/// A fresh indexer can start at the tip or at a given point instead of origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_indexer_starts_at_the_tip_or_a_point() {
    use ganglion_indexer::sync::Start;
    let dir = tempfile::tempdir().expect("tempdir");
    let chain = Chain::start(dir.path()).await;
    let (dep, watch) = deploy(&chain).await;
    let provider = dev_party(&chain.env, 1);
    let bond = bond_request(&provider, [9; 32], vec![1], 1);
    chain
        .run(
            build::post_bond(&dep, &chain.env, &bond).expect("bond"),
            &provider,
            &[],
        )
        .await;
    let deploy_block = chain
        .handle
        .chain()
        .store()
        .block(1)
        .expect("store")
        .expect("block 1");
    let at_bond = chain.handle.tip().expect("tip");
    let cancel = CancellationToken::new();
    let mut started = Vec::new();
    for start in [
        Start::Tip,
        Start::Point(deploy_block.at.slot, *deploy_block.at.hash),
    ] {
        let mut config = SyncConfig::new(chain.n2n());
        config.start = start;
        started.push(spawn_follower(
            Indexer::new(MemoryKv::new(), watch.clone(), 10),
            config,
            &cancel,
        ));
    }
    // Both followers have found their start before the next block.
    for (ix, rx, _) in &started {
        let deadline = std::time::Instant::now() + crate::devnet::WAIT;
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "follower never intersected"
            );
            let n = tokio::task::block_in_place(|| {
                rx.recv_timeout(std::time::Duration::from_millis(200))
            });
            if matches!(n, Ok(ganglion_indexer::Notification::Intersected { .. })) {
                break;
            }
        }
        let _ = ix;
    }
    // One more block (a lock) after both started.
    let orch = dev_party(&chain.env, 2);
    lock_small(&chain, &dep, &orch).await;
    for (i, (ix, rx, _)) in started.iter().enumerate() {
        caught_up(rx, &chain, ix).await;
        let events: Vec<Event> = ix
            .events(0, u64::MAX)
            .expect("events")
            .into_iter()
            .map(|r| r.event)
            .collect();
        let bonded = events.iter().any(|e| matches!(e, Event::BondPosted { .. }));
        let locked = events.iter().any(|e| matches!(e, Event::JobLocked { .. }));
        assert!(
            locked,
            "start {i}: the lock after the start point is indexed"
        );
        // From the tip (the bond's block): the bond is history. From the deploy block: it is seen.
        assert_eq!(
            bonded,
            i == 1,
            "start {i}: bond seen only when starting before it (tip was {})",
            at_bond.number
        );
    }
    cancel.cancel();
    for (_, _, task) in started {
        task.await.expect("join").expect("sync");
    }
    chain.handle.shutdown().await;
}
