//! Transports and discovery on loopback: QUIC alongside TCP, Kademlia finding a peer nobody
//! named, AutoNAT confirming a reachable address.
//!
//! Every wait is for an event or a reply under [`TIMEOUT`]; nothing sleeps for correctness.

use std::time::Duration;

use ganglion_p2p::offers::BondSnapshot;
use ganglion_p2p::test_utils::{TIMEOUT, wait_for};
use ganglion_p2p::{self as p2p, Client, Config, Event};
use libp2p::autonat::NatStatus;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId};
use tokio::sync::mpsc::Receiver;

struct Node {
    client: Client,
    events: Receiver<Event>,
    peer: PeerId,
    addr: Multiaddr,
}

fn config() -> Config {
    Config {
        listen: vec![],
        ping_interval: Duration::from_millis(200),
        gossip_heartbeat: Duration::from_millis(100),
        ..Config::default()
    }
}

/// Starts a node listening on `listen` (loopback, port 0).
async fn start(config: Config, listen: &str) -> Node {
    let key = Keypair::generate_ed25519();
    let peer = key.public().to_peer_id();
    let (client, event_loop, events, _inbound) =
        p2p::new(key, config, BondSnapshot::default()).expect("swarm builds");
    tokio::spawn(event_loop.run());
    let addr = client
        .listen(listen.parse().expect("literal"))
        .await
        .expect("listens")
        .with(Protocol::P2p(peer));
    Node {
        client,
        events,
        peer,
        addr,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_two_nodes_connect_over_quic_and_ping_each_other() {
    let a = start(config(), "/ip4/127.0.0.1/udp/0/quic-v1").await;
    assert!(
        a.addr.iter().any(|p| matches!(p, Protocol::QuicV1)),
        "{}",
        a.addr
    );
    let mut b = start(config(), "/ip4/127.0.0.1/udp/0/quic-v1").await;
    let peer = b
        .client
        .dial(a.addr.clone())
        .await
        .expect("dials over QUIC");
    assert_eq!(peer, a.peer);
    // Streams work on the QUIC connection: ping measures a round trip (the only connection).
    let rtt = wait_for(&mut b.events, |e| match e {
        Event::RttMeasured { peer, rtt } if *peer == a.peer => Some(*rtt),
        _ => None,
    })
    .await;
    assert!(rtt < TIMEOUT);
    assert_eq!(
        b.client.connected_peers().await.expect("peers"),
        vec![a.peer]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_kademlia_finds_a_peer_the_node_was_not_told_about() {
    let seed = start(config(), "/ip4/127.0.0.1/tcp/0").await;
    let joined = |listen: Vec<Multiaddr>| Config {
        bootstrap: vec![seed.addr.clone()],
        listen,
        ..config()
    };
    // B and C know only the seed (from their config); B listens before it dials the seed.
    let mut b = {
        let key = Keypair::generate_ed25519();
        let peer = key.public().to_peer_id();
        let (client, event_loop, events, _inbound) = p2p::new(
            key,
            joined(vec!["/ip4/127.0.0.1/tcp/0".parse().expect("literal")]),
            BondSnapshot::default(),
        )
        .expect("swarm builds");
        tokio::spawn(event_loop.run());
        (client, events, peer)
    };
    let seed_peer = seed.peer;
    wait_for(&mut b.1, |e| match e {
        Event::PeerConnected { peer } if *peer == seed_peer => Some(()),
        _ => None,
    })
    .await;
    let c = start(joined(vec![]), "/ip4/127.0.0.1/tcp/0").await;
    assert!(
        !c.client
            .connected_peers()
            .await
            .expect("peers")
            .contains(&b.2)
    );

    // The seed learns B's address from identify; C's lookup goes through the seed. Retry while
    // the seed has not heard of B yet (each lookup is one Kademlia query, bounded by TIMEOUT).
    let addrs = tokio::time::timeout(TIMEOUT, async {
        loop {
            let addrs = c.client.find_peer(b.2).await.expect("lookup");
            if !addrs.is_empty() {
                return addrs;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("Kademlia found B");
    let addr = addrs[0].clone().with_p2p(b.2).unwrap_or_else(|a| a);
    assert_eq!(c.client.dial(addr).await.expect("dials B"), b.2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_autonat_confirms_a_reachable_address_through_an_opt_in_server() {
    // Loopback is not a global IP: both sides allow it (a devnet setting; default is global only).
    let server = start(
        Config {
            autonat_server: true,
            autonat_only_global_ips: false,
            ..config()
        },
        "/ip4/127.0.0.1/tcp/0",
    )
    .await;
    let mut client = start(
        Config {
            autonat_only_global_ips: false,
            autonat_boot_delay: Duration::from_millis(200),
            ..config()
        },
        "/ip4/127.0.0.1/tcp/0",
    )
    .await;
    assert_eq!(
        client.client.nat_status().await.expect("status"),
        NatStatus::Unknown
    );
    client
        .client
        .dial(server.addr.clone())
        .await
        .expect("dials");
    let status = wait_for(&mut client.events, |e| match e {
        Event::NatStatusChanged { status } => Some(status.clone()),
        _ => None,
    })
    .await;
    let NatStatus::Public(addr) = status else {
        panic!("expected Public, got {status:?}");
    };
    // The server dialled back the client's own listen address.
    let listen: Multiaddr = client.addr.iter().take(2).collect();
    assert_eq!(addr.iter().take(2).collect::<Multiaddr>(), listen);
    assert!(
        client
            .client
            .nat_status()
            .await
            .expect("status")
            .is_public()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_autonat_serving_is_opt_in_a_default_node_refuses_to_dial_back() {
    let plain = start(
        Config {
            autonat_only_global_ips: false,
            ..config()
        },
        "/ip4/127.0.0.1/tcp/0",
    )
    .await;
    let mut client = start(
        Config {
            autonat_only_global_ips: false,
            autonat_boot_delay: Duration::from_millis(300),
            ..config()
        },
        "/ip4/127.0.0.1/tcp/0",
    )
    .await;
    client.client.dial(plain.addr.clone()).await.expect("dials");
    let plain_peer = plain.peer;
    let reason = wait_for(&mut client.events, |e| match e {
        Event::NatProbeFailed {
            peer: Some(p),
            reason,
        } if *p == plain_peer => Some(reason.clone()),
        Event::NatStatusChanged { status } => panic!("a default node served a probe: {status:?}"),
        _ => None,
    })
    .await;
    assert!(reason.contains("DialRefused"), "{reason}");
    assert_eq!(
        client.client.nat_status().await.expect("status"),
        NatStatus::Unknown
    );
}
