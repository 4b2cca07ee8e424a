//! The p2p layer with real swarms on loopback TCP (port 0): offers, rejection, accept round
//! trip through the escrow validator, cluster hellos, expiry, RTT, rate limits.
//! Inbound accept requests, cluster hellos and heartbeats are handed to whoever drains the
//! node's inbound channel (the job engine in a node; the test here) and answered with what it
//! says.
//!
//! Every wait is for an event or a reply under [`TIMEOUT`]; nothing sleeps for correctness.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::signed::sign;
use ganglion_market::snapshot::Offer as MarketOffer;
use ganglion_p2p::inbound::Inbound;
use ganglion_p2p::offers::{BondSnapshot, LiveBond, OfferBody, OfferRejection};
use ganglion_p2p::protocols::{
    AcceptRequest, AcceptResponse, ClusterHello, ClusterResponse, HeartbeatRefusal,
    HeartbeatResponse, RefusalReason,
};
use ganglion_p2p::{self as p2p, Client, Config, Event};
use libp2p::{Multiaddr, PeerId};
use tokio::sync::mpsc::{Receiver, UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;

pub(crate) use ganglion_p2p::test_utils::{Ident, TIMEOUT, ident, wait_for};

const MAGIC: u64 = 42;

fn live_bond(id: &Ident) -> LiveBond {
    id.live_bond(4)
}

pub(crate) fn test_config() -> Config {
    Config {
        network_magic: MAGIC,
        listen: vec![],
        ping_interval: Duration::from_millis(200),
        gossip_heartbeat: Duration::from_millis(100),
        prune_interval: Duration::from_millis(100),
        ..Config::default()
    }
}

pub(crate) struct Node {
    pub(crate) id: Ident,
    pub(crate) client: Client,
    pub(crate) events: Receiver<Event>,
    pub(crate) inbound: Option<Receiver<Inbound>>,
    pub(crate) addr: Multiaddr,
    task: JoinHandle<()>,
}

impl Node {
    /// Answers every inbound request as a node that is no provider and takes part in no job:
    /// accept requests `NotProvider`, cluster hellos and heartbeats `UnknownJob`.
    pub(crate) fn serve_as_bystander(&mut self) {
        let mut inbound = self.inbound.take().expect("inbound not taken yet");
        let client = self.client.clone();
        tokio::spawn(async move {
            while let Some(request) = inbound.recv().await {
                let _ = match request {
                    Inbound::Accept { responder, .. } => {
                        client
                            .respond_accept(
                                responder,
                                AcceptResponse::Refused(RefusalReason::NotProvider),
                            )
                            .await
                    }
                    Inbound::Cluster { responder, .. } => {
                        client
                            .respond_cluster(responder, ClusterResponse::UnknownJob)
                            .await
                    }
                    Inbound::Heartbeat { responder, .. } => {
                        client
                            .respond_heartbeat(
                                responder,
                                HeartbeatResponse::Refused(HeartbeatRefusal::UnknownJob),
                            )
                            .await
                    }
                };
            }
        });
    }

    /// Answers cluster hellos as a node's job engine does, from `hellos` (this node's hello
    /// per job and the peers assigned to it, changeable while it serves): an assigned peer
    /// gets the job's hello, any other `NotAssigned`, a job not in `hellos` `UnknownJob`.
    /// Every hello answered with ours is reported; other requests are dropped unanswered.
    pub(crate) fn serve_cluster(
        &mut self,
        hellos: Hellos,
    ) -> UnboundedReceiver<(PeerId, ClusterHello)> {
        let mut inbound = self.inbound.take().expect("inbound not taken yet");
        let client = self.client.clone();
        let (taken_tx, taken) = unbounded_channel();
        tokio::spawn(async move {
            while let Some(request) = inbound.recv().await {
                let Inbound::Cluster {
                    peer,
                    request,
                    responder,
                } = request
                else {
                    continue;
                };
                let answer = match hellos.lock().expect("lock").get(&request.job_id) {
                    Some((_, assigned)) if !assigned.contains(&peer) => {
                        ClusterResponse::NotAssigned
                    }
                    Some((own, _)) => ClusterResponse::Hello(own.clone()),
                    None => ClusterResponse::UnknownJob,
                };
                if matches!(answer, ClusterResponse::Hello(_)) {
                    let _ = taken_tx.send((peer, request));
                }
                let _ = client.respond_cluster(responder, answer).await;
            }
        });
        taken
    }
}

/// A node's own cluster hello per job and the peers assigned to the job with it.
pub(crate) type Hellos = Arc<Mutex<HashMap<JobId, (ClusterHello, Vec<PeerId>)>>>;

pub(crate) async fn start(id: Ident, bonds: BondSnapshot, config: Config) -> Node {
    let (client, event_loop, events, inbound) =
        p2p::new(id.key.clone(), config, bonds).expect("swarm builds");
    let task = tokio::spawn(event_loop.run());
    let addr = client
        .listen("/ip4/127.0.0.1/tcp/0".parse().unwrap())
        .await
        .expect("listens")
        .with(libp2p::multiaddr::Protocol::P2p(id.peer));
    Node {
        id,
        client,
        events,
        inbound: Some(inbound),
        addr,
        task,
    }
}

/// Waits until `node` has seen `n` distinct peers join the offer topic.
async fn wait_topic_peers(node: &mut Node, n: usize) {
    let mut seen = std::collections::HashSet::new();
    while seen.len() < n {
        let p = wait_for(&mut node.events, |e| match e {
            Event::TopicPeerJoined { peer } => Some(*peer),
            _ => None,
        })
        .await;
        seen.insert(p);
    }
}

pub(crate) fn offer_body(id: &Ident, now_ms: u64, ttl_ms: u64) -> OfferBody {
    OfferBody {
        network_magic: MAGIC,
        bond: id.bond,
        peer_id: id.peer.to_bytes(),
        addrs: vec![],
        market: MarketOffer {
            provider: id.provider,
            bond_gpus: 4,
            price_per_gpu_hour: 1_000_000,
            score: 100,
            uplink_mbps: 1000,
            max_job_duration_s: None,
            max_job_nodes: None,
            gpus: vec![],
            direct_capable: false,
            compute: ganglion_market::snapshot::Compute::Unmeasured,
        },
        issued_ms: now_ms,
        expires_ms: now_ms + ttl_ms,
        links: vec![],
    }
}

/// Starts `n` nodes, all bonded, connected in a line (i dials i−1), and waits until each sees
/// its neighbours on the offer topic.
pub(crate) async fn line(n: u8) -> Vec<Node> {
    let ids: Vec<Ident> = (0..n).map(ident).collect();
    let bonds = BondSnapshot::new(ids.iter().map(live_bond));
    let mut nodes = Vec::new();
    for id in ids {
        nodes.push(start(id, bonds.clone(), test_config()).await);
    }
    for i in 1..nodes.len() {
        let prev = nodes[i - 1].addr.clone();
        nodes[i].client.dial(prev).await.expect("dials");
    }
    let last = nodes.len() - 1;
    for (i, node) in nodes.iter_mut().enumerate() {
        let degree = if i == 0 || i == last { 1 } else { 2 };
        wait_topic_peers(node, degree).await;
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_offers_propagate_across_five_nodes_in_a_line() {
    let mut nodes = line(5).await;
    let now = p2p::now_ms();
    let offer = offer_body(&nodes[4].id, now, 60_000).sign(&nodes[4].id.attest);
    nodes[4]
        .client
        .publish_offer(offer)
        .await
        .expect("publishes");
    let provider = nodes[4].id.provider;
    for node in nodes.iter_mut().take(4) {
        wait_for(&mut node.events, |e| match e {
            Event::OfferAccepted { provider: p, .. } if *p == provider => Some(()),
            Event::OfferRejected { reason, .. } => panic!("valid offer rejected: {reason}"),
            _ => None,
        })
        .await;
        let market = node.client.market().await.unwrap();
        assert_eq!(market.len(), 1);
        assert_eq!(market[0].body.market.provider, provider);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_forged_and_unbonded_offers_are_rejected_not_forwarded_and_cost_score() {
    // 1 (forger, bonded) — 0 — 2: node 2 hears node 1 only through node 0.
    let ids: Vec<Ident> = (0..3).map(ident).collect();
    let bonds = BondSnapshot::new(ids.iter().map(live_bond));
    let mut n0 = start(ids[0].clone(), bonds.clone(), test_config()).await;
    let mut n1 = start(ids[1].clone(), bonds.clone(), test_config()).await;
    let mut n2 = start(ids[2].clone(), bonds.clone(), test_config()).await;
    n1.client.dial(n0.addr.clone()).await.unwrap();
    n2.client.dial(n0.addr.clone()).await.unwrap();
    wait_topic_peers(&mut n0, 2).await;
    wait_topic_peers(&mut n1, 1).await;
    wait_topic_peers(&mut n2, 1).await;
    let now = p2p::now_ms();

    // Forged: signed with a key that is not the bond's attest key.
    let forged = offer_body(&n1.id, now, 60_000).sign(&SigningKey::from_bytes(&[7; 32]));
    n1.client.publish_raw(forged.encode()).await.unwrap();
    let r = wait_for(&mut n0.events, |e| match e {
        Event::OfferRejected { via, reason } if *via == n1.id.peer => Some(reason.clone()),
        Event::OfferAccepted { .. } => panic!("forged offer accepted"),
        _ => None,
    })
    .await;
    assert_eq!(r, OfferRejection::BadSignature);

    // Unbonded: a bond reference the snapshot does not hold, for a provider with no live
    // bond (a bonded provider's moved bond is followed: `BondSnapshot::backing`), correctly
    // signed.
    let mut body = offer_body(&n1.id, now + 1, 60_000);
    body.bond.index = 99;
    body.market.provider = [0xee; 28];
    n1.client
        .publish_raw(body.sign(&n1.id.attest).encode())
        .await
        .unwrap();
    let r = wait_for(&mut n0.events, |e| match e {
        Event::OfferRejected { via, reason } if *via == n1.id.peer => Some(reason.clone()),
        Event::OfferAccepted { .. } => panic!("unbonded offer accepted"),
        _ => None,
    })
    .await;
    assert!(matches!(r, OfferRejection::Unbonded(_)), "{r:?}");
    assert!(n0.client.market().await.unwrap().is_empty());
    let score = n0
        .client
        .peer_score(n1.id.peer)
        .await
        .unwrap()
        .expect("scored");
    assert!(score < 0.0, "forger's score {score}");

    // A valid offer from the same peer still flows, and it is the first offer event node 2
    // ever sees: the rejected ones were not forwarded.
    let good = offer_body(&n1.id, now + 2, 60_000).sign(&n1.id.attest);
    n1.client.publish_offer(good).await.unwrap();
    let provider = n1.id.provider;
    wait_for(&mut n2.events, |e| match e {
        Event::OfferAccepted { provider: p, .. } if *p == provider => Some(()),
        Event::OfferRejected { reason, .. } => panic!("node 2 saw a forwarded bad offer: {reason}"),
        _ => None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_node_that_goes_away_drops_out_after_its_offer_expires() {
    let mut nodes = line(3).await;
    let now = p2p::now_ms();
    let offer = offer_body(&nodes[2].id, now, 1_500).sign(&nodes[2].id.attest);
    nodes[2].client.publish_offer(offer).await.unwrap();
    let provider = nodes[2].id.provider;
    let gone_peer = nodes[2].id.peer;
    wait_for(&mut nodes[0].events, |e| match e {
        Event::OfferAccepted { provider: p, .. } if *p == provider => Some(()),
        _ => None,
    })
    .await;
    // Node 2 goes away.
    let n2 = nodes.pop().unwrap();
    n2.task.abort();
    drop(n2);
    wait_for(&mut nodes[1].events, |e| match e {
        Event::PeerDisconnected { peer } if *peer == gone_peer => Some(()),
        _ => None,
    })
    .await;
    wait_for(&mut nodes[0].events, |e| match e {
        Event::OfferExpired { provider: p } if *p == provider => Some(()),
        _ => None,
    })
    .await;
    assert!(nodes[0].client.market().await.unwrap().is_empty());
    assert!(p2p::now_ms() >= now + 1_500, "dropped before expiry");
}

/// The harness world's clock: its deadlines are in chain time, starting 2026-01-01.
fn harness_clock() -> u64 {
    ganglion_contracts::test_utils::ZERO_TIME
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_acceptance_round_trip_is_accepted_by_the_escrow_validator() {
    use ganglion_contracts::test_utils::harness_v2::Harness;
    use ganglion_contracts::test_utils::{NTX, assert_script_fails};
    use ganglion_contracts::v2::build;

    let mut h = Harness::new(1);
    // Room for both jobs of the test.
    h.post_bonds_for(2);
    let (mut job, _) = h.lock(10 * NTX, 3600);
    let mut req = h.assign_request(&job);
    let a = req.assignments[0].clone();

    let (orch_id, prov_id) = (ident(0), ident(1));
    let config = Config {
        clock: harness_clock,
        ..test_config()
    };
    let mut prov = start(prov_id.clone(), BondSnapshot::default(), config.clone()).await;
    let orch = start(orch_id, BondSnapshot::default(), config).await;
    // The provider's engine, as the test plays it: it signs the acceptance of the terms it
    // was asked for with the bond's attest key and refuses any other job.
    let mut inbound = prov.inbound.take().expect("inbound");
    let (client, attest, me) = (
        prov.client.clone(),
        h.providers[0].attest.clone(),
        h.providers[0].party.hash,
    );
    let first = job.id;
    tokio::spawn(async move {
        while let Some(Inbound::Accept {
            request, responder, ..
        }) = inbound.recv().await
        {
            let answer = if request.job_id == first {
                let msg = ganglion_contracts::v2::signed::Acceptance {
                    job_id: request.job_id,
                    spec: request.spec.clone(),
                    gpus: request.gpus,
                    rate: request.rate,
                    deadline_ms: request.deadline_ms,
                    accept_by_ms: request.accept_by_ms,
                    receipt_interval_ms: request.receipt_interval_ms,
                }
                .signed_bytes();
                AcceptResponse::Accepted {
                    signature: sign(&attest, &msg),
                    attest_key: attest.verifying_key().to_bytes(),
                    provider: me,
                    reserved_until_ms: request.deadline_ms,
                }
            } else {
                AcceptResponse::Refused(RefusalReason::NoCapacity { free: 0 })
            };
            let _ = client.respond_accept(responder, answer).await;
        }
    });
    orch.client.dial(prov.addr.clone()).await.unwrap();

    let ask = AcceptRequest {
        job_id: job.id,
        bond: prov_id.bond,
        gpus: a.gpus,
        rate: a.rate,
        deadline_ms: job.deadline_ms,
        spec: job.spec.clone(),
        accept_by_ms: a.accept_by_ms,
        receipt_interval_ms: job.receipt_interval_ms,
    };
    let resp = orch
        .client
        .accept(prov_id.peer, ask.clone())
        .await
        .expect("answer");
    let AcceptResponse::Accepted {
        signature,
        attest_key,
        provider,
        ..
    } = resp
    else {
        panic!("refused: {resp:?}");
    };
    assert_eq!(attest_key, a.attest_key);
    assert_eq!(provider, a.provider);

    // The engine's refusal comes back as it was given.
    let mut other = ask.clone();
    other.job_id = JobId([0xee; 32]);
    assert_eq!(
        orch.client.accept(prov_id.peer, other).await.unwrap(),
        AcceptResponse::Refused(RefusalReason::NoCapacity { free: 0 })
    );

    // The signature from the wire goes into the assign tx; the validator accepts it.
    req.acceptances[0] = signature.clone();
    h.assign_with(&mut job, &req)
        .expect("escrow validator accepts the p2p acceptance");

    // And one flipped bit makes it fail.
    let (job2, _) = h.lock(10 * NTX, 3600);
    let mut req2 = h.assign_request(&job2);
    let mut bad = signature;
    bad[0] ^= 1;
    req2.acceptances[0] = bad;
    let draft = build::assign(&h.dep, h.env(), &req2).expect("assign draft");
    assert_script_fails(h.balance(draft, &h.orch));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_requests_nobody_takes_are_refused_at_once_not_timed_out() {
    // A node whose engine is gone (inbound receiver dropped) answers at once: rate-limited.
    let mut target = start(ident(0), BondSnapshot::default(), test_config()).await;
    drop(target.inbound.take());
    let asker = start(ident(1), BondSnapshot::default(), test_config()).await;
    asker.client.dial(target.addr.clone()).await.unwrap();
    let ask = AcceptRequest {
        job_id: JobId([1; 32]),
        bond: ident(0).bond,
        gpus: 1,
        rate: 1,
        deadline_ms: u64::MAX,
        spec: vec![],
        accept_by_ms: u64::MAX,
        receipt_interval_ms: 10_000,
    };
    let started = std::time::Instant::now();
    assert_eq!(
        asker.client.accept(target.id.peer, ask).await.unwrap(),
        AcceptResponse::Refused(RefusalReason::RateLimited)
    );
    assert!(
        started.elapsed() < test_config().request_timeout,
        "answered before the request timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_cluster_requests_nobody_takes_are_refused_at_once_not_timed_out() {
    // A node whose engine is gone (inbound receiver dropped) answers at once: rate-limited.
    let mut target = start(ident(0), BondSnapshot::default(), test_config()).await;
    drop(target.inbound.take());
    let asker = start(ident(1), BondSnapshot::default(), test_config()).await;
    asker.client.dial(target.addr.clone()).await.unwrap();
    let hello = ClusterHello {
        job_id: JobId([9; 32]),
        overlay_key: [1; 32],
        overlay_addrs: vec!["100.64.0.2/32".into()],
        endpoints: vec!["127.0.0.1:51820".into()],
    };
    let started = std::time::Instant::now();
    assert_eq!(
        asker
            .client
            .cluster_hello(target.id.peer, hello)
            .await
            .unwrap(),
        ClusterResponse::RateLimited
    );
    assert!(
        started.elapsed() < test_config().request_timeout,
        "answered before the request timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_cluster_hello_flood_is_rate_limited_before_the_engine() {
    let config = Config {
        inbound_burst: 5,
        inbound_per_second: 1,
        ..test_config()
    };
    let mut target = start(ident(0), BondSnapshot::default(), config).await;
    target.serve_as_bystander();
    let flooder = start(ident(1), BondSnapshot::default(), test_config()).await;
    flooder.client.dial(target.addr.clone()).await.unwrap();
    let hello = ClusterHello {
        job_id: JobId([9; 32]),
        overlay_key: [1; 32],
        overlay_addrs: vec!["100.64.0.2/32".into()],
        endpoints: vec!["127.0.0.1:51820".into()],
    };
    let answers = futures::future::join_all(
        (0..40).map(|_| flooder.client.cluster_hello(target.id.peer, hello.clone())),
    )
    .await;
    let limited = answers
        .iter()
        .filter(|a| matches!(a, Ok(ClusterResponse::RateLimited)))
        .count();
    // Answered by the engine (a bystander: `UnknownJob`).
    let served = answers
        .iter()
        .filter(|a| matches!(a, Ok(ClusterResponse::UnknownJob)))
        .count();
    let refused_by_stream_cap = answers.iter().filter(|a| a.is_err()).count();
    // As for accept requests: the burst (5) and at most one refill token reach the engine.
    assert!(served <= 6, "{served} of 40 served: {answers:?}");
    assert_eq!(limited + served + refused_by_stream_cap, 40);
    assert!(limited >= 20, "only {limited} of 40 rate limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_cluster_hellos_are_exchanged_between_the_nodes_of_a_job() {
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(start(ident(i), BondSnapshot::default(), test_config()).await);
    }
    let job = JobId([9; 32]);
    let hello = |i: u8| ClusterHello {
        job_id: job,
        overlay_key: [i; 32],
        overlay_addrs: vec![format!("100.64.0.{}/32", i + 1)],
        endpoints: vec![format!("127.0.0.1:{}", 51820 + u16::from(i))],
    };
    // Each node's engine, as the test plays it: its hello for the job, for all three nodes.
    let peers: Vec<_> = nodes.iter().map(|n| n.id.peer).collect();
    let mut books = Vec::new();
    let mut taken = Vec::new();
    for (i, node) in nodes.iter_mut().enumerate() {
        let book = Hellos::default();
        book.lock()
            .expect("lock")
            .insert(job, (hello(i as u8), peers.clone()));
        taken.push(node.serve_cluster(book.clone()));
        books.push(book);
    }
    for i in 1..3 {
        let addr = nodes[i].addr.clone();
        nodes[0].client.dial(addr).await.unwrap();
        let peer = nodes[i].id.peer;
        let resp = nodes[0].client.cluster_hello(peer, hello(0)).await.unwrap();
        assert_eq!(resp, ClusterResponse::Hello(hello(i as u8)));
        let got = tokio::time::timeout(TIMEOUT, taken[i].recv())
            .await
            .expect("in time")
            .expect("the engine took a hello");
        assert_eq!(got, (nodes[0].id.peer, hello(0)));
    }
    let mut unknown = hello(0);
    unknown.job_id = JobId([10; 32]);
    let peer = nodes[1].id.peer;
    assert_eq!(
        nodes[0].client.cluster_hello(peer, unknown).await.unwrap(),
        ClusterResponse::UnknownJob
    );
    // Bound to the assignment: node 1's engine now has the job for node 2 only; node 0 is
    // refused and its hello is not taken.
    books[1]
        .lock()
        .expect("lock")
        .insert(job, (hello(1), vec![nodes[2].id.peer]));
    assert_eq!(
        nodes[0].client.cluster_hello(peer, hello(0)).await.unwrap(),
        ClusterResponse::NotAssigned
    );
    assert!(taken[1].try_recv().is_err(), "a refused hello is not taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_ping_fills_the_rtt_matrix() {
    let mut nodes = line(3).await;
    let middle = nodes[1].id.peer;
    let rtt = wait_for(&mut nodes[0].events, |e| match e {
        Event::RttMeasured { peer, rtt } if *peer == middle => Some(*rtt),
        _ => None,
    })
    .await;
    assert!(rtt < Duration::from_secs(1), "loopback RTT {rtt:?}");
    let row = nodes[0].client.rtts().await.unwrap();
    assert!(
        row.iter()
            .any(|(p, r)| *p == middle && r.rtt < Duration::from_secs(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_request_flood_is_rate_limited_and_the_node_keeps_serving() {
    let config = Config {
        inbound_burst: 5,
        inbound_per_second: 1,
        ..test_config()
    };
    let mut target = start(ident(0), BondSnapshot::default(), config).await;
    target.serve_as_bystander();
    let flooder = start(ident(1), BondSnapshot::default(), test_config()).await;
    let other = start(ident(2), BondSnapshot::default(), test_config()).await;
    flooder.client.dial(target.addr.clone()).await.unwrap();
    other.client.dial(target.addr.clone()).await.unwrap();
    let ask = AcceptRequest {
        job_id: JobId([1; 32]),
        bond: ident(0).bond,
        gpus: 1,
        rate: 1,
        deadline_ms: u64::MAX,
        spec: vec![],
        accept_by_ms: u64::MAX,
        receipt_interval_ms: 10_000,
    };
    let answers = futures::future::join_all(
        (0..40).map(|_| flooder.client.accept(target.id.peer, ask.clone())),
    )
    .await;
    let limited = answers
        .iter()
        .filter(|a| matches!(a, Ok(AcceptResponse::Refused(RefusalReason::RateLimited))))
        .count();
    let served = answers
        .iter()
        .filter(|a| matches!(a, Ok(AcceptResponse::Refused(RefusalReason::NotProvider))))
        .count();
    let refused_by_stream_cap = answers.iter().filter(|a| a.is_err()).count();
    // The bucket lets the burst (5) through, plus at most one refill token while the flood
    // lasts; the rest is refused by the bucket or, past MAX_CONCURRENT_STREAMS, by yamux.
    assert!(served <= 6, "{served} of 40 served: {answers:?}");
    assert_eq!(limited + served + refused_by_stream_cap, 40);
    assert!(limited >= 20, "only {limited} of 40 rate limited");
    // Another peer is still served (this node is no provider, so the answer is NotProvider).
    assert_eq!(
        other.client.accept(target.id.peer, ask).await.unwrap(),
        AcceptResponse::Refused(RefusalReason::NotProvider)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_two_nodes_connect_through_a_relay_node_on_loopback() {
    // R serves as relay; A reserves a slot on R and listens on the circuit; B dials A through R.
    let relay_config = Config {
        relay_server: true,
        ..test_config()
    };
    let r = start(ident(0), BondSnapshot::default(), relay_config).await;
    let mut a = Node::without_listen(ident(1)).await;
    // A's engine is in no job: it answers a cluster hello `UnknownJob`.
    a.serve_as_bystander();
    let mut b = start(ident(2), BondSnapshot::default(), test_config()).await;
    // A relay serves reservations only with a confirmed external address (here: loopback).
    r.client.add_external_address(r.addr.clone()).await.unwrap();
    a.client
        .dial(r.addr.clone())
        .await
        .expect("A reaches the relay");
    let circuit = r.addr.clone().with(libp2p::multiaddr::Protocol::P2pCircuit);
    let reserved = a
        .client
        .listen(circuit.clone())
        .await
        .expect("reservation on the relay");
    assert!(reserved.to_string().contains("/p2p-circuit"), "{reserved}");
    let via_relay = circuit.with(libp2p::multiaddr::Protocol::P2p(a.id.peer));
    let peer = b
        .client
        .dial(via_relay)
        .await
        .expect("B reaches A via the relay");
    assert_eq!(peer, a.id.peer);
    wait_for(&mut b.events, |e| match e {
        Event::RelayedConnection { peer } if *peer == a.id.peer => Some(()),
        _ => None,
    })
    .await;
    // A request travels over the relayed connection.
    let hello = ClusterHello {
        job_id: JobId([3; 32]),
        overlay_key: [1; 32],
        overlay_addrs: vec![],
        endpoints: vec![],
    };
    assert_eq!(
        b.client.cluster_hello(a.id.peer, hello).await.unwrap(),
        ClusterResponse::UnknownJob
    );
}

impl Node {
    /// A node that listens nowhere directly (as behind a NAT): reachable only through a relay.
    async fn without_listen(id: Ident) -> Node {
        Self::without_listen_with(id, test_config()).await
    }

    /// A node with `config` that listens nowhere directly.
    async fn without_listen_with(id: Ident, config: Config) -> Node {
        let (client, event_loop, events, inbound) =
            p2p::new(id.key.clone(), config, BondSnapshot::default()).expect("swarm builds");
        let task = tokio::spawn(event_loop.run());
        Node {
            addr: Multiaddr::empty(),
            id,
            client,
            events,
            inbound: Some(inbound),
            task,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_relayed_connection_is_upgraded_by_dcutr_on_loopback() {
    // Without a NAT the "punch" is a plain simultaneous dial, but the DCUtR exchange (observed
    // addresses over identify, CONNECT/SYNC over the relayed stream) is the real one.
    let relay_config = Config {
        relay_server: true,
        ..test_config()
    };
    let r = start(ident(0), BondSnapshot::default(), relay_config).await;
    r.client.add_external_address(r.addr.clone()).await.unwrap();
    let mut a = start(ident(1), BondSnapshot::default(), test_config()).await;
    let mut b = start(ident(2), BondSnapshot::default(), test_config()).await;
    a.client.dial(r.addr.clone()).await.unwrap();
    b.client.dial(r.addr.clone()).await.unwrap();
    let circuit = r.addr.clone().with(libp2p::multiaddr::Protocol::P2pCircuit);
    a.client.listen(circuit.clone()).await.expect("reservation");
    let via_relay = circuit.with(libp2p::multiaddr::Protocol::P2p(a.id.peer));
    b.client.dial(via_relay).await.expect("relayed connection");
    let a_peer = a.id.peer;
    let b_peer = b.id.peer;
    // Whichever side reports first: the initiator (A, which accepted the relayed connection)
    // or B.
    let succeeded = tokio::select! {
        s = wait_for(&mut a.events, |e| match e {
            Event::HolePunchFinished { peer, succeeded } if *peer == b_peer => Some(*succeeded),
            _ => None,
        }) => s,
        s = wait_for(&mut b.events, |e| match e {
            Event::HolePunchFinished { peer, succeeded } if *peer == a_peer => Some(*succeeded),
            _ => None,
        }) => s,
    };
    assert!(succeeded, "DCUtR did not upgrade the relayed connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_bootstrap_peers_from_config_are_dialed_at_start() {
    let seed = start(ident(0), BondSnapshot::default(), test_config()).await;
    let config = Config {
        bootstrap: vec![seed.addr.clone()],
        ..test_config()
    };
    let mut joiner = Node::without_listen_with(ident(1), config).await;
    let seed_peer = seed.id.peer;
    wait_for(&mut joiner.events, |e| match e {
        Event::PeerConnected { peer } if *peer == seed_peer => Some(()),
        _ => None,
    })
    .await;
    assert!(
        joiner
            .client
            .connected_peers()
            .await
            .unwrap()
            .contains(&seed_peer)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_listen_addrs_list_every_interface_of_an_unspecified_listen_routable_first() {
    // Other tests on this host add and remove interfaces (Docker networks, veth pairs) while
    // this one runs, so "every interface" is judged against the host's IPv4 addresses seen
    // before and after: the ones present throughout must be listed, and nothing else may be.
    let ipv4s = || -> BTreeSet<std::net::IpAddr> {
        if_addrs::get_if_addrs()
            .expect("interfaces")
            .into_iter()
            .map(|i| i.ip())
            .filter(std::net::IpAddr::is_ipv4)
            .collect()
    };
    let before = ipv4s();
    let node = start(ident(60), BondSnapshot::default(), test_config()).await;
    let any = node
        .client
        .listen("/ip4/0.0.0.0/tcp/0".parse().expect("literal"))
        .await
        .expect("listens");
    let port = |a: &Multiaddr| {
        a.iter().find_map(|p| match p {
            libp2p::multiaddr::Protocol::Tcp(port) => Some(port),
            _ => None,
        })
    };
    let ip = |a: &Multiaddr| {
        a.iter().find_map(|p| match p {
            libp2p::multiaddr::Protocol::Ip4(ip) => Some(std::net::IpAddr::V4(ip)),
            _ => None,
        })
    };
    let loopback = |a: &Multiaddr| a.to_string().starts_with("/ip4/127.");
    // The listener reports interfaces as the kernel announces them: wait (bounded) until the
    // addresses present throughout are all listed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (all, listed, seen, stable) = loop {
        let all = node.client.listen_addrs().await.expect("loop alive");
        let after = ipv4s();
        let listed: BTreeSet<std::net::IpAddr> = all
            .iter()
            .filter(|a| port(a) == port(&any))
            .filter_map(ip)
            .collect();
        let stable: BTreeSet<_> = before.intersection(&after).copied().collect();
        let seen: BTreeSet<_> = before.union(&after).copied().collect();
        if stable.is_subset(&listed) || tokio::time::Instant::now() > deadline {
            break (all, listed, seen, stable);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(stable.is_subset(&listed), "missing {stable:?} in {all:?}");
    assert!(
        listed.is_subset(&seen),
        "not an interface: {listed:?} vs {seen:?}"
    );
    let of_any = all.iter().filter(|a| port(a) == port(&any)).count();
    assert_eq!(of_any, listed.len(), "one address per interface: {all:?}");
    // The 0.0.0.0 listener's loopback address is there.
    assert!(listed.iter().any(std::net::IpAddr::is_loopback), "{all:?}");
    // Routable ones come first: no loopback address before a non-loopback one.
    let first_loopback = all.iter().position(loopback).expect("a loopback address");
    assert!(all[first_loopback..].iter().all(loopback), "{all:?}");
    // The 127.0.0.1 listener of `start` is listed too.
    assert!(all.iter().any(|a| port(a) != port(&any)), "{all:?}");
}
