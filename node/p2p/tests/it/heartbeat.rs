//! `/ganglion/heartbeat/1` with real swarms on loopback TCP (port 0): a provider's heartbeat
//! reaches the orchestrator's engine (the test here) with the right peer and fields, and the
//! engine's signed receipt comes back and verifies under the receipt key; refusals come back
//! typed; a full or closed engine channel, a flood and too many unanswered heartbeats are
//! answered `RateLimited` at once and hand nothing over, while other peers are still served.
//!
//! Every wait is for an event or a reply under [`TIMEOUT`]; nothing sleeps for correctness.

use ed25519_dalek::SigningKey;
use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::signed::Receipt;
use ganglion_p2p::inbound::{INBOUND_CHANNEL, Inbound};
use ganglion_p2p::offers::BondSnapshot;
use ganglion_p2p::protocols::{
    AcceptRequest, HeartbeatRefusal, HeartbeatRequest, HeartbeatResponse, RankSummary,
    SignedReceipt,
};
use ganglion_p2p::{Config, Event, MAX_HEARTBEATS_IN_FLIGHT};
use libp2p::PeerId;
use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::swarm::{Node, TIMEOUT, ident, start, test_config, wait_for};

const JOB: JobId = JobId([0x11; 32]);
const GPUS: u32 = 4;

fn receipt_key() -> SigningKey {
    SigningKey::from_bytes(&[0x42; 32])
}

fn heartbeat(job_id: JobId, provider_index: u64, running: u32) -> HeartbeatRequest {
    HeartbeatRequest {
        job_id,
        provider_index,
        ranks: RankSummary {
            running,
            exited: GPUS - running,
            gpu_ms: 90_000,
            progress: Some(12),
        },
        sent_at_ms: 1_700_000_000_000,
        log: None,
        unformed: None,
    }
}

/// The orchestrator side of [`JOB`] as a job engine would judge it: `provider` holds
/// assignment 1 with [`GPUS`] ranks, the deadline is `deadline_ms`; a heartbeat that passes
/// gets a receipt acknowledging up to now. Every heartbeat the engine sees is reported.
fn serve_receipts(
    node: &mut Node,
    provider: PeerId,
    deadline_ms: u64,
) -> UnboundedReceiver<(PeerId, HeartbeatRequest)> {
    let mut inbound = node.inbound.take().expect("inbound not taken yet");
    let client = node.client.clone();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(request) = inbound.recv().await {
            let Inbound::Heartbeat {
                peer,
                request,
                responder,
            } = request
            else {
                continue;
            };
            let now = ganglion_p2p::now_ms();
            let answer = if request.job_id != JOB {
                HeartbeatResponse::Refused(HeartbeatRefusal::UnknownJob)
            } else if request.provider_index != 1 || peer != provider {
                HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
            } else if now > deadline_ms {
                HeartbeatResponse::Refused(HeartbeatRefusal::PastDeadline { deadline_ms })
            } else if request.ranks.running < GPUS {
                HeartbeatResponse::Refused(HeartbeatRefusal::RanksNotRunning {
                    running: request.ranks.running,
                    expected: GPUS,
                })
            } else {
                let receipt = Receipt {
                    job_id: request.job_id,
                    provider_index: request.provider_index,
                    acknowledged_until_ms: now,
                };
                HeartbeatResponse::Receipt(SignedReceipt::sign(&receipt, &receipt_key()))
            };
            let _ = seen_tx.send((peer, request));
            if client.respond_heartbeat(responder, answer).await.is_err() {
                return;
            }
        }
    });
    seen
}

/// The next heartbeat the engine reports, under [`TIMEOUT`].
async fn next_seen(
    seen: &mut UnboundedReceiver<(PeerId, HeartbeatRequest)>,
) -> (PeerId, HeartbeatRequest) {
    tokio::time::timeout(TIMEOUT, seen.recv())
        .await
        .expect("in time")
        .expect("the engine runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_heartbeat_comes_back_with_a_receipt_signed_by_the_receipt_key() {
    let provider = start(ident(1), BondSnapshot::default(), test_config()).await;
    let mut orch = start(ident(0), BondSnapshot::default(), test_config()).await;
    let mut seen = serve_receipts(&mut orch, provider.id.peer, u64::MAX);
    provider.client.dial(orch.addr.clone()).await.unwrap();

    let before = ganglion_p2p::now_ms();
    let ask = heartbeat(JOB, 1, GPUS);
    let answer = provider
        .client
        .request_receipt(orch.id.peer, ask.clone())
        .await
        .expect("answered");
    let (peer, request) = next_seen(&mut seen).await;
    assert_eq!(peer, provider.id.peer, "the sender is named");
    assert_eq!(request, ask, "the heartbeat arrives as sent");

    let HeartbeatResponse::Receipt(signed) = answer else {
        panic!("a receipt, not {answer:?}")
    };
    let key = receipt_key().verifying_key().to_bytes();
    let receipt = signed.verify(&key, JOB, 1).expect("verifies");
    assert!(receipt.acknowledged_until_ms >= before);
    // The contracts' own check over the bytes the escrow's Claim rebuilds.
    ganglion_contracts::v2::signed::verify(&key, &receipt.signed_bytes(), &signed.signature)
        .expect("the contracts verify it");
    // Not under another key.
    let outsider = SigningKey::from_bytes(&[0x43; 32])
        .verifying_key()
        .to_bytes();
    assert!(signed.verify(&outsider, JOB, 1).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_refused_heartbeats_come_back_with_a_typed_reason() {
    let provider = start(ident(1), BondSnapshot::default(), test_config()).await;
    let outsider = start(ident(2), BondSnapshot::default(), test_config()).await;
    let mut orch = start(ident(0), BondSnapshot::default(), test_config()).await;
    let _seen = serve_receipts(&mut orch, provider.id.peer, u64::MAX);
    provider.client.dial(orch.addr.clone()).await.unwrap();
    outsider.client.dial(orch.addr.clone()).await.unwrap();
    let to = orch.id.peer;

    let ask = |req| provider.client.request_receipt(to, req);
    assert_eq!(
        ask(heartbeat(JobId([0x12; 32]), 1, GPUS)).await.unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::UnknownJob)
    );
    assert_eq!(
        ask(heartbeat(JOB, 1, GPUS - 1)).await.unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::RanksNotRunning {
            running: GPUS - 1,
            expected: GPUS
        })
    );
    assert_eq!(
        ask(heartbeat(JOB, 0, GPUS)).await.unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );
    // Assignment 1 is the provider's: another peer naming it gets nothing.
    assert_eq!(
        outsider
            .client
            .request_receipt(to, heartbeat(JOB, 1, GPUS))
            .await
            .unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );

    // Past the deadline.
    let late = start(ident(3), BondSnapshot::default(), test_config()).await;
    let mut past = start(ident(4), BondSnapshot::default(), test_config()).await;
    let _seen = serve_receipts(&mut past, late.id.peer, 1);
    late.client.dial(past.addr.clone()).await.unwrap();
    assert_eq!(
        late.client
            .request_receipt(past.id.peer, heartbeat(JOB, 1, GPUS))
            .await
            .unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::PastDeadline { deadline_ms: 1 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_heartbeats_are_rate_limited_at_once_while_the_engine_channel_is_full_or_closed() {
    let config = Config {
        inbound_burst: 100,
        ..test_config()
    };
    let mut orch = start(ident(0), BondSnapshot::default(), config).await;
    let mut inbound = orch.inbound.take().expect("inbound");
    let filler = start(ident(1), BondSnapshot::default(), test_config()).await;
    let filler2 = start(ident(3), BondSnapshot::default(), test_config()).await;
    let provider = start(ident(2), BondSnapshot::default(), test_config()).await;
    filler.client.dial(orch.addr.clone()).await.unwrap();
    filler2.client.dial(orch.addr.clone()).await.unwrap();
    provider.client.dial(orch.addr.clone()).await.unwrap();
    let to = orch.id.peer;

    // Fill the engine's channel (nobody drains it): 30 accept requests from each of two peers
    // (under the 32 streams per protocol and connection), 4 heartbeats from a third.
    let accept = AcceptRequest {
        job_id: JOB,
        bond: ganglion_contracts::tx::TxoRef {
            tx_hash: [0; 32],
            index: 0,
        },
        gpus: 1,
        rate: 1,
        deadline_ms: u64::MAX,
        spec: vec![],
        accept_by_ms: u64::MAX,
        receipt_interval_ms: 10_000,
    };
    let mut pending = Vec::new();
    for _ in 0..30 {
        let (c, a) = (filler.client.clone(), accept.clone());
        pending.push(tokio::spawn(async move {
            let _ = c.accept(to, a).await;
        }));
        let (c, a) = (filler2.client.clone(), accept.clone());
        pending.push(tokio::spawn(async move {
            let _ = c.accept(to, a).await;
        }));
    }
    for _ in 0..4 {
        let c = provider.client.clone();
        pending.push(tokio::spawn(async move {
            let _ = c.request_receipt(to, heartbeat(JOB, 1, GPUS)).await;
        }));
    }
    assert_eq!(INBOUND_CHANNEL, 64);
    tokio::time::timeout(TIMEOUT, async {
        while inbound.len() < INBOUND_CHANNEL {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the channel fills");

    // Full: answered at once, nothing handed over.
    let started = std::time::Instant::now();
    assert_eq!(
        provider
            .client
            .request_receipt(to, heartbeat(JOB, 1, GPUS))
            .await
            .unwrap(),
        HeartbeatResponse::RateLimited
    );
    assert!(started.elapsed() < test_config().request_timeout);
    let mut heartbeats = 0;
    for _ in 0..INBOUND_CHANNEL {
        if let Some(Inbound::Heartbeat { .. }) = inbound.recv().await {
            heartbeats += 1;
        }
    }
    assert_eq!(heartbeats, 4, "the refused heartbeat was not handed over");
    assert!(inbound.try_recv().is_err(), "nothing else was handed over");

    // Closed: answered at once as well.
    drop(inbound);
    assert_eq!(
        provider
            .client
            .request_receipt(to, heartbeat(JOB, 1, GPUS))
            .await
            .unwrap(),
        HeartbeatResponse::RateLimited
    );
    for p in pending {
        let _ = p.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_heartbeat_flood_is_rate_limited_and_another_peer_is_still_served() {
    let config = Config {
        inbound_burst: 5,
        inbound_per_second: 1,
        ..test_config()
    };
    let flooder = start(ident(1), BondSnapshot::default(), test_config()).await;
    let other = start(ident(2), BondSnapshot::default(), test_config()).await;
    let mut orch = start(ident(0), BondSnapshot::default(), config).await;
    // The flooder is the job's provider: what the engine sees of it, it answers with a receipt.
    let mut seen = serve_receipts(&mut orch, flooder.id.peer, u64::MAX);
    flooder.client.dial(orch.addr.clone()).await.unwrap();
    other.client.dial(orch.addr.clone()).await.unwrap();
    let to = orch.id.peer;

    let answers = futures::future::join_all(
        (0..40).map(|_| flooder.client.request_receipt(to, heartbeat(JOB, 1, GPUS))),
    )
    .await;
    let receipts = answers
        .iter()
        .filter(|a| matches!(a, Ok(HeartbeatResponse::Receipt(_))))
        .count();
    let limited = answers
        .iter()
        .filter(|a| matches!(a, Ok(HeartbeatResponse::RateLimited)))
        .count();
    let refused_by_stream_cap = answers.iter().filter(|a| a.is_err()).count();
    // The bucket lets the burst (5) through, plus at most one refill token while the flood
    // lasts; the rest is refused by the bucket or, past MAX_CONCURRENT_STREAMS, by yamux.
    assert!(receipts <= 6, "{receipts} of 40 served: {answers:?}");
    assert_eq!(receipts + limited + refused_by_stream_cap, 40);
    assert!(limited >= 20, "only {limited} of 40 rate limited");
    wait_for(&mut orch.events, |e| match e {
        Event::RateLimited { peer } if *peer == flooder.id.peer => Some(()),
        _ => None,
    })
    .await;

    // Another peer is still served (it is not the job's provider: NotAssigned, by the engine).
    assert_eq!(
        other
            .client
            .request_receipt(to, heartbeat(JOB, 1, GPUS))
            .await
            .unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );
    // The engine saw the receipts it gave and the other peer's heartbeat, nothing more: the
    // refused heartbeats changed nothing.
    for _ in 0..receipts {
        assert_eq!(next_seen(&mut seen).await.0, flooder.id.peer);
    }
    assert_eq!(next_seen(&mut seen).await.0, other.id.peer);
    assert!(seen.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_peer_has_at_most_eight_heartbeats_with_the_engine() {
    let mut orch = start(ident(0), BondSnapshot::default(), test_config()).await;
    let mut inbound = orch.inbound.take().expect("inbound");
    let flooder = start(ident(1), BondSnapshot::default(), test_config()).await;
    let other = start(ident(2), BondSnapshot::default(), test_config()).await;
    flooder.client.dial(orch.addr.clone()).await.unwrap();
    other.client.dial(orch.addr.clone()).await.unwrap();
    let to = orch.id.peer;

    // 12 heartbeats (under the token bucket's burst of 20); the engine answers none yet.
    let sent = MAX_HEARTBEATS_IN_FLIGHT + 4;
    let (answers_tx, mut answers) = mpsc::unbounded_channel();
    for _ in 0..sent {
        let (c, tx) = (flooder.client.clone(), answers_tx.clone());
        tokio::spawn(async move {
            let _ = tx.send(c.request_receipt(to, heartbeat(JOB, 1, GPUS)).await);
        });
    }
    for _ in 0..sent - MAX_HEARTBEATS_IN_FLIGHT {
        let answer = tokio::time::timeout(TIMEOUT, answers.recv())
            .await
            .expect("in time")
            .expect("answered");
        assert_eq!(answer.unwrap(), HeartbeatResponse::RateLimited);
    }
    // Every heartbeat has been judged by the loop now: exactly 8 were handed over.
    assert_eq!(inbound.len(), MAX_HEARTBEATS_IN_FLIGHT);
    let mut held = Vec::new();
    for _ in 0..MAX_HEARTBEATS_IN_FLIGHT {
        match inbound.recv().await {
            Some(Inbound::Heartbeat {
                peer, responder, ..
            }) => {
                assert_eq!(peer, flooder.id.peer);
                held.push(responder);
            }
            other => panic!("a heartbeat, not {other:?}"),
        }
    }
    // Taken out of the channel but unanswered: still in flight, still refused.
    assert_eq!(
        flooder
            .client
            .request_receipt(to, heartbeat(JOB, 1, GPUS))
            .await
            .unwrap(),
        HeartbeatResponse::RateLimited
    );
    // Another peer is handed over.
    let c = other.client.clone();
    let other_ask =
        tokio::spawn(async move { c.request_receipt(to, heartbeat(JOB, 1, GPUS)).await });
    match tokio::time::timeout(TIMEOUT, inbound.recv()).await {
        Ok(Some(Inbound::Heartbeat {
            peer, responder, ..
        })) => {
            assert_eq!(peer, other.id.peer);
            orch.client
                .respond_heartbeat(
                    responder,
                    HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned),
                )
                .await
                .unwrap();
        }
        other => panic!("the other peer's heartbeat, not {other:?}"),
    }
    assert_eq!(
        other_ask.await.unwrap().unwrap(),
        HeartbeatResponse::Refused(HeartbeatRefusal::NotAssigned)
    );
    // Answered, the flooder's heartbeats leave; it is handed over again.
    for responder in held {
        orch.client
            .respond_heartbeat(
                responder,
                HeartbeatResponse::Refused(HeartbeatRefusal::TooEarly { retry_at_ms: 1 }),
            )
            .await
            .unwrap();
    }
    for _ in 0..MAX_HEARTBEATS_IN_FLIGHT {
        let answer = tokio::time::timeout(TIMEOUT, answers.recv())
            .await
            .expect("in time")
            .expect("answered");
        assert_eq!(
            answer.unwrap(),
            HeartbeatResponse::Refused(HeartbeatRefusal::TooEarly { retry_at_ms: 1 })
        );
    }
    let c = flooder.client.clone();
    let again = tokio::spawn(async move { c.request_receipt(to, heartbeat(JOB, 1, GPUS)).await });
    match tokio::time::timeout(TIMEOUT, inbound.recv()).await {
        Ok(Some(Inbound::Heartbeat { peer, .. })) => assert_eq!(peer, flooder.id.peer),
        other => panic!("the flooder's heartbeat, not {other:?}"),
    }
    drop(inbound);
    let _ = again.await;
}
