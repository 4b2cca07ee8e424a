//! Network measurements between swarms on loopback: ping windows become the signed links of
//! a provider's offer, verified on receipt and assembled into the latency matrix; providers
//! probe each other's throughput within the rate limits; a provider connects to the market's
//! other providers by itself.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ganglion_p2p as p2p;
use ganglion_p2p::links::{LINK_MAX_AGE_MS, advertised};
use ganglion_p2p::matrix::LinkMatrix;
use ganglion_p2p::mesh::{MeshConfig, keep_connected};
use ganglion_p2p::probe::{ProbeConfig, Prober, probe};
use libp2p::PeerId;

use super::swarm::{Node, TIMEOUT, line, offer_body};

/// Polls `f` every 50 ms until it yields `Some`, panicking with `what` after [`TIMEOUT`].
async fn poll<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Some(t) = f().await {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Publishes `node`'s offer with `links` filled from its ping row.
async fn publish_with_links(node: &Node, providers: &HashSet<PeerId>) -> usize {
    let now_ms = p2p::now_ms();
    let row = node.client.rtts().await.expect("rtts");
    let mut body = offer_body(&node.id, now_ms, 60_000);
    body.links = advertised(
        &row,
        &node.id.peer,
        providers,
        &node.client.throughputs(),
        Instant::now(),
        now_ms,
    );
    let n = body.links.len();
    node.client
        .publish_offer(body.sign(&node.id.attest))
        .await
        .expect("publishes");
    n
}

/// Waits until `node` has a ping window of at least 2 samples to each of `peers`.
async fn wait_pinged(node: &Node, peers: &[PeerId]) {
    poll("ping samples to every peer", || async {
        let row = node.client.rtts().await.expect("rtts");
        peers
            .iter()
            .all(|p| row.iter().any(|(q, r)| q == p && r.samples() >= 2))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_offers_carry_signed_ping_links_and_the_matrix_is_assembled_from_them() {
    // Three swarms, each connected to the other two, pinging every 200 ms.
    let nodes = line(3).await;
    let first = nodes[0].addr.clone();
    nodes[2].client.dial(first).await.expect("dials");
    let peers: Vec<PeerId> = nodes.iter().map(|n| n.id.peer).collect();
    let providers: HashSet<PeerId> = peers.iter().copied().collect();
    for n in &nodes {
        let others: Vec<PeerId> = peers.iter().copied().filter(|p| *p != n.id.peer).collect();
        wait_pinged(n, &others).await;
    }

    // Every provider offers (without links yet): the market maps peers to providers.
    for n in &nodes {
        let body = offer_body(&n.id, p2p::now_ms(), 60_000);
        n.client
            .publish_offer(body.sign(&n.id.attest))
            .await
            .expect("publishes");
    }
    let node1 = &nodes[1];
    poll("three offers at node 1", || async {
        (node1.client.market().await.expect("market").len() == 3).then_some(())
    })
    .await;

    // Provider 0's next offer carries a link to each other provider, and it verifies at node 1
    // (signature over the links included: only verified offers enter the market).
    tokio::time::sleep(Duration::from_millis(2)).await; // a newer issued_ms
    assert_eq!(publish_with_links(&nodes[0], &providers).await, 2);
    let provider0 = nodes[0].id.provider;
    let market = poll("provider 0's links at node 1", || async {
        let market = node1.client.market().await.expect("market");
        market
            .iter()
            .any(|o| o.body.market.provider == provider0 && o.body.links.len() == 2)
            .then_some(market)
    })
    .await;
    let offer = market
        .iter()
        .find(|o| o.body.market.provider == provider0)
        .expect("provider 0's offer");
    let mut linked: Vec<Vec<u8>> = offer.body.links.iter().map(|l| l.peer.clone()).collect();
    linked.sort();
    let mut want = vec![peers[1].to_bytes(), peers[2].to_bytes()];
    want.sort();
    assert_eq!(linked, want);
    let now_ms = p2p::now_ms();
    for l in &offer.body.links {
        assert!(l.rtt_p50_us > 0 && l.rtt_p50_us <= l.rtt_p90_us, "{l:?}");
        assert!(l.rtt_p90_us < 1_000_000, "loopback: {l:?}");
        assert!(
            l.measured_ms <= now_ms && now_ms - l.measured_ms < LINK_MAX_AGE_MS,
            "{l:?}"
        );
    }
    // Only provider 0 reported: its two pairs are one-sided, 1–2 is unmeasured.
    let m = LinkMatrix::assemble(&market, now_ms);
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(m.pairs().iter().all(|p| p.one_sided));
    // Every provider reports: three pairs, each from both ends.
    for n in &nodes[1..] {
        assert_eq!(publish_with_links(n, &providers).await, 2);
    }
    let node0 = &nodes[0];
    let m = poll("three two-sided pairs at node 0", || async {
        let market = node0.client.market().await.expect("market");
        let m = LinkMatrix::assemble(&market, p2p::now_ms());
        (m.len() == 3 && m.pairs().iter().all(|p| !p.one_sided)).then_some(m)
    })
    .await;
    assert_eq!(m.samples().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_providers_probe_each_others_throughput_within_the_rate_limits() {
    let nodes = line(2).await;
    let providers: HashSet<PeerId> = nodes.iter().map(|n| n.id.peer).collect();
    for n in &nodes {
        publish_with_links(n, &providers).await;
    }
    for (i, n) in nodes.iter().enumerate() {
        let other = nodes[1 - i].id.provider;
        poll("the other's offer", || async {
            let m = n.client.market().await.expect("market");
            m.iter()
                .any(|o| o.body.market.provider == other)
                .then_some(())
        })
        .await;
    }
    let config = ProbeConfig {
        tick: Duration::from_millis(100),
        ..ProbeConfig::default()
    };
    for n in &nodes {
        let prober = Prober::new(&n.client, n.id.peer, config.clone()).expect("registers");
        tokio::spawn(prober.run());
        assert!(
            Prober::new(&n.client, n.id.peer, config.clone()).is_err(),
            "one prober per swarm"
        );
    }
    let (a, b) = (&nodes[0], &nodes[1]);
    let mbps = poll("node 0's probe of node 1", || async {
        a.client.throughputs().get(&b.id.peer).copied()
    })
    .await;
    assert!(mbps >= 1, "{mbps}");
    // The figure goes into the links of the next offer.
    let row = a.client.rtts().await.expect("rtts");
    let links = advertised(
        &row,
        &a.id.peer,
        &providers,
        &a.client.throughputs(),
        Instant::now(),
        p2p::now_ms(),
    );
    assert!(
        links
            .iter()
            .any(|l| l.peer == b.id.peer.to_bytes() && l.mbps == Some(mbps))
    );
    // Node 1 answered node 0 once; another probe from node 0 within the gap is refused.
    let mut control = a.client.streams();
    assert!(
        probe(&mut control, b.id.peer, Duration::from_secs(5))
            .await
            .is_err(),
        "a second probe within the inbound gap is refused"
    );
    // Node 1 probes node 0 too, and each peer at most once per `every`: its one figure stays.
    let before = poll("node 1's probe of node 0", || async {
        let t = b.client.throughputs();
        t.contains_key(&a.id.peer).then_some(t)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(b.client.throughputs(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_a_provider_connects_to_the_other_providers_of_the_market() {
    // 0 — 1 — 2: node 0 knows node 2 only from its offer.
    let nodes = line(3).await;
    let providers: HashSet<PeerId> = nodes.iter().map(|n| n.id.peer).collect();
    for n in &nodes {
        publish_with_links(n, &providers).await;
    }
    let (a, c) = (&nodes[0], &nodes[2]);
    poll("node 2's offer at node 0", || async {
        let m = a.client.market().await.expect("market");
        m.iter()
            .any(|o| o.body.peer_id == c.id.peer.to_bytes())
            .then_some(())
    })
    .await;
    assert!(
        !a.client
            .connected_peers()
            .await
            .expect("peers")
            .contains(&c.id.peer)
    );
    tokio::spawn(keep_connected(
        a.client.clone(),
        a.id.peer,
        MeshConfig {
            every: Duration::from_millis(200),
            retry: Duration::from_millis(500),
        },
    ));
    poll("node 0 connected to node 2", || async {
        let connected = a.client.connected_peers().await.expect("peers");
        connected.contains(&c.id.peer).then_some(())
    })
    .await;
    // And it pings it: its next offer can carry the link.
    wait_pinged(a, &[c.id.peer]).await;
}
