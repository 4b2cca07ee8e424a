//! p2p numbers: offer propagation time across 5 loopback nodes, and offers/s one node
//! verifies (decode + checks + ed25519), alone and end to end through gossipsub.
//!
//! `cargo run --release -p ganglion-node --example p2p_bench` (add `-- --quick` for fewer rounds).

use std::time::{Duration, Instant};

use ganglion_market::snapshot::Offer as MarketOffer;
use ganglion_p2p::offers::{BondSnapshot, LiveBond, OfferBody, SignedOffer, verify_offer};
use ganglion_p2p::test_utils::{Ident, ident as id, wait_for};
use ganglion_p2p::{self as p2p, Client, Config, Event};
use libp2p::Multiaddr;
use tokio::sync::mpsc::Receiver;

const MAGIC: u64 = 42;

fn bond(id: &Ident) -> LiveBond {
    id.live_bond(8)
}

fn offer(id: &Ident, issued_ms: u64) -> SignedOffer {
    OfferBody {
        network_magic: MAGIC,
        bond: id.bond,
        peer_id: id.peer.to_bytes(),
        addrs: vec![vec![0u8; 20]; 2],
        market: MarketOffer {
            provider: id.provider,
            bond_gpus: 8,
            price_per_gpu_hour: 1_000_000,
            score: 100,
            uplink_mbps: 1000,
            max_job_duration_s: None,
            max_job_nodes: None,
            gpus: vec![],
            direct_capable: false,
            compute: ganglion_market::snapshot::Compute::Unmeasured,
        },
        issued_ms,
        expires_ms: issued_ms + 600_000,
        links: vec![],
    }
    .sign(&id.attest)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // 1. Verification alone.
    let p = id(0);
    let bonds = BondSnapshot::new([bond(&p)]);
    let now = p2p::now_ms();
    let n = if quick { 2_000 } else { 20_000 };
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| offer(&p, now + i as u64).encode()).collect();
    let t = Instant::now();
    for bytes in &payloads {
        let o = SignedOffer::decode(bytes).expect("decodes");
        verify_offer(&o, MAGIC, Some(&p.peer), &bonds, now).expect("verifies");
    }
    let el = t.elapsed();
    println!(
        "verify: {n} offers ({} B each) decoded + verified in {el:?}: {:.0} offers/s on one core",
        payloads[0].len(),
        n as f64 / el.as_secs_f64()
    );

    let decoded: Vec<SignedOffer> = payloads
        .iter()
        .map(|b| SignedOffer::decode(b).expect("decodes"))
        .collect();
    let key = p.attest.verifying_key().to_bytes();
    let t = Instant::now();
    for o in &decoded {
        ganglion_contracts::v2::signed::verify(&key, &o.body.signed_bytes(), &o.signature)
            .expect("verifies");
    }
    let el = t.elapsed();
    println!(
        "verify, of which re-encode + ed25519 verify: {:.0} offers/s",
        n as f64 / el.as_secs_f64()
    );

    // 2. Five nodes in a line.
    let ids: Vec<Ident> = (0..5).map(id).collect();
    let bonds = BondSnapshot::new(ids.iter().map(bond));
    let config = Config {
        network_magic: MAGIC,
        listen: vec![],
        gossip_heartbeat: Duration::from_millis(100),
        ..Config::default()
    };
    let mut nodes: Vec<(Client, Receiver<Event>, Multiaddr)> = Vec::new();
    for i in &ids {
        let (c, el, ev, _inbound) =
            p2p::new(i.key.clone(), config.clone(), bonds.clone()).expect("swarm");
        tokio::spawn(el.run());
        let a = c
            .listen("/ip4/127.0.0.1/tcp/0".parse().unwrap())
            .await
            .expect("listen");
        nodes.push((c, ev, a.with(libp2p::multiaddr::Protocol::P2p(i.peer))));
    }
    for i in 1..5 {
        let a = nodes[i - 1].2.clone();
        nodes[i].0.dial(a).await.expect("dial");
    }
    for (i, (_, ev, _)) in nodes.iter_mut().enumerate() {
        let want = if i == 0 || i == 4 { 1 } else { 2 };
        let mut seen = std::collections::HashSet::new();
        while seen.len() < want {
            seen.insert(
                wait_for(ev, |e| match e {
                    Event::TopicPeerJoined { peer } => Some(*peer),
                    _ => None,
                })
                .await,
            );
        }
    }
    let rounds = if quick { 10 } else { 50 };
    let mut to_last = Vec::new();
    let mut per_hop: Vec<Vec<Duration>> = vec![Vec::new(); 4];
    for r in 0..rounds {
        let o = offer(&ids[4], p2p::now_ms() + r);
        let t = Instant::now();
        nodes[4].0.publish_offer(o).await.expect("publish");
        for (hop, samples) in per_hop.iter_mut().enumerate() {
            let node = 3 - hop;
            wait_for(&mut nodes[node].1, |e| {
                matches!(e, Event::OfferAccepted { .. }).then_some(())
            })
            .await;
            samples.push(t.elapsed());
        }
        to_last.push(t.elapsed());
    }
    println!(
        "propagation over a 5-node line (4 hops), {rounds} offers: to the far end median {:?}, p95 {:?}, max {:?}; median per hop count 1..4: {:?}",
        pct(&mut to_last.clone(), 0.5),
        pct(&mut to_last.clone(), 0.95),
        pct(&mut to_last, 1.0),
        per_hop.iter_mut().map(|v| pct(v, 0.5)).collect::<Vec<_>>()
    );

    // 3. End to end: node 3 verifies a burst of offers gossiped by node 4.
    let burst = if quick { 500 } else { 3_000 };
    let base = p2p::now_ms() + 1_000;
    // Keep node 3's client alive: its event loop stops when the last client drops.
    let (_client3, mut events, _) = nodes.remove(3);
    let counter = tokio::spawn(async move {
        let mut got = 0u64;
        while got < burst {
            wait_for(&mut events, |e| {
                matches!(e, Event::OfferAccepted { .. }).then_some(())
            })
            .await;
            got += 1;
        }
    });
    let t = Instant::now();
    for k in 0..burst {
        nodes[3]
            .0
            .publish_offer(offer(&ids[4], base + k))
            .await
            .expect("publish");
    }
    counter.await.expect("all offers verified");
    let el = t.elapsed();
    println!(
        "gossip end to end: {burst} offers published by one node, verified by its neighbour in {el:?}: {:.0} offers/s",
        burst as f64 / el.as_secs_f64()
    );
}
