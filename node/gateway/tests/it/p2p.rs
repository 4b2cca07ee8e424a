//! Replicas reached through their provider's node over libp2p (`/ganglion/service/1`): two
//! real swarms on loopback (TCP + noise + yamux, `libp2p-stream`), the provider's side
//! resolving a job's rank to its replica's address and letting only one peer through.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use ganglion_gateway::p2p::{self, StreamError, Target};
use ganglion_gateway::{Endpoint, Gateway, Health, Replica};
use http::StatusCode;
use http_body_util::BodyExt;
use libp2p::swarm::SwarmEvent;
use libp2p::{Multiaddr, PeerId, Swarm};
use tokio_util::sync::CancellationToken;

use crate::support::{TestReplica, call, serve, wait_until};

const JOB: [u8; 32] = [7; 32];

/// A swarm with only the stream behaviour, listening on loopback and driven in the
/// background; returns its id, address and stream control.
async fn swarm() -> (
    PeerId,
    Multiaddr,
    libp2p_stream::Control,
    Swarm<libp2p_stream::Behaviour>,
) {
    let mut swarm = ganglion_gateway::test_utils::stream_swarm();
    let addr = loop {
        if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
            break address;
        }
    };
    let control = swarm.behaviour().new_control();
    (*swarm.local_peer_id(), addr, control, swarm)
}

/// Connects `from` to `to` at `addr`, then drives both swarms in the background.
async fn connect(
    mut from: Swarm<libp2p_stream::Behaviour>,
    mut to: Swarm<libp2p_stream::Behaviour>,
    addr: Multiaddr,
) {
    from.dial(addr).expect("dial");
    let (mut a, mut b) = (false, false);
    while !(a && b) {
        tokio::select! {
            e = from.select_next_some() => a |= matches!(e, SwarmEvent::ConnectionEstablished { .. }),
            e = to.select_next_some() => b |= matches!(e, SwarmEvent::ConnectionEstablished { .. }),
        }
    }
    tokio::spawn(async move {
        loop {
            from.select_next_some().await;
        }
    });
    tokio::spawn(async move {
        loop {
            to.select_next_some().await;
        }
    });
}

/// A provider's node serving `/ganglion/service/1` for job [`JOB`], rank 0 → `replica`, to
/// `allowed` only; and a gateway node connected to it. Returns the gateway's control and the
/// provider's peer id and address.
async fn provider_and_gateway(replica: SocketAddr) -> (libp2p_stream::Control, PeerId, Multiaddr) {
    let (provider, provider_addr, mut provider_control, provider_swarm) = swarm().await;
    let (gateway, _, gateway_control, gateway_swarm) = swarm().await;
    let resolve = move |peer: &PeerId, target: &Target| {
        if *peer != gateway {
            return Err(format!("{peer} is not this job's orchestrator"));
        }
        match (target.job == JOB, target.rank) {
            (true, 0) => Ok(replica),
            (true, rank) => Err(format!("no replica of rank {rank} runs here")),
            (false, _) => Err("no such job runs here".to_string()),
        }
    };
    let incoming = p2p::accept(&mut provider_control).expect("accept once");
    tokio::spawn(p2p::serve(
        incoming,
        p2p::by_address(resolve),
        CancellationToken::new(),
    ));
    connect(gateway_swarm, provider_swarm, provider_addr.clone()).await;
    (gateway_control, provider, provider_addr)
}

#[tokio::test]
async fn a_replica_behind_its_providers_node_is_reached_over_libp2p_streaming_included() {
    let a = TestReplica::start("a").await;
    let (control, provider, _) = provider_and_gateway(a.addr).await;
    let gateway = Gateway::with_streams(Some(control));
    // Room for all 32 concurrent requests below (8 would answer some of them 503).
    let pool = gateway.add("svc", &serve(32, false)).expect("service");
    pool.add(Replica {
        id: "a".into(),
        endpoint: Endpoint::P2p {
            peer: provider,
            target: Target { job: JOB, rank: 0 },
        },
        rtt: None,
    });
    let listening = ganglion_gateway::listen(
        "127.0.0.1:0".parse().expect("addr"),
        Arc::clone(&gateway),
        CancellationToken::new(),
    )
    .await
    .expect("listen");
    let addr = listening.addr;
    // Health checks travel over the stream too.
    wait_until(Duration::from_secs(5), || {
        crate::support::healthy(&pool, "a")
    })
    .await;

    let body = r#"{"texts":["over libp2p"]}"#;
    let (status, headers, got) = call("POST", &format!("http://{addr}/svc/echo"), body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, body.as_bytes());
    assert_eq!(headers["x-test-replica"], "a");

    // Concurrent requests share the provider's connection (a stream each, kept alive).
    let calls: Vec<_> = (0..32)
        .map(|i| {
            tokio::spawn(async move {
                call("POST", &format!("http://{addr}/svc/echo"), &format!("n{i}")).await
            })
        })
        .collect();
    for (i, c) in calls.into_iter().enumerate() {
        let (status, _, got) = c.await.expect("joined");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got, format!("n{i}").as_bytes());
    }

    // Server-sent events arrive as they are sent, through the stream.
    let request = http::Request::get(format!("http://{addr}/svc/stream?n=5"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let started = Instant::now();
    let mut body = crate::support::client()
        .request(request)
        .await
        .expect("answer")
        .into_body();
    let mut arrivals = Vec::new();
    while let Some(frame) = body.frame().await {
        if frame.expect("frame").is_data() {
            arrivals.push(started.elapsed());
        }
    }
    assert_eq!(arrivals.len(), 5, "{arrivals:?}");
    assert!(
        arrivals[4] >= arrivals[0] + Duration::from_millis(300),
        "{arrivals:?}"
    );
    let view = &pool.views()[0];
    assert_eq!(view.usage.requests, 34);
    assert!(
        view.replica
            .endpoint
            .to_string()
            .starts_with(&format!("p2p://{provider}/"))
    );
}

#[tokio::test]
async fn a_stream_for_another_job_or_rank_is_refused_and_such_a_replica_never_serves() {
    let a = TestReplica::start("a").await;
    let (mut control, provider, _) = provider_and_gateway(a.addr).await;
    let refused = p2p::open(
        &mut control,
        provider,
        Target {
            job: [8; 32],
            rank: 0,
        },
    )
    .await;
    assert!(
        matches!(&refused, Err(StreamError::Refused(r)) if r.contains("no such job")),
        "{refused:?}"
    );
    let refused = p2p::open(&mut control, provider, Target { job: JOB, rank: 3 }).await;
    assert!(
        matches!(&refused, Err(StreamError::Refused(r)) if r.contains("rank 3")),
        "{refused:?}"
    );

    let gateway = Gateway::with_streams(Some(control));
    let pool = gateway.add("svc", &serve(8, false)).expect("service");
    pool.add(Replica {
        id: "wrong".into(),
        endpoint: Endpoint::P2p {
            peer: provider,
            target: Target { job: JOB, rank: 3 },
        },
        rtt: None,
    });
    let listening = ganglion_gateway::listen(
        "127.0.0.1:0".parse().expect("addr"),
        Arc::clone(&gateway),
        CancellationToken::new(),
    )
    .await
    .expect("listen");
    // Two health rounds (1 s apart) pass; it is still not healthy, and nothing is forwarded.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_ne!(pool.views()[0].health, Health::Healthy);
    let (status, headers, _) =
        call("GET", &format!("http://{}/svc/whoami", listening.addr), "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.contains_key("retry-after"));
    assert_eq!(a.served.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn another_peer_is_refused_even_for_the_right_job_and_rank() {
    let a = TestReplica::start("a").await;
    let (_control, provider, provider_addr) = provider_and_gateway(a.addr).await;
    // A third node, connected to the provider, asks for the right job and rank.
    let (_, _, mut control, mut stranger) = swarm().await;
    stranger.dial(provider_addr).expect("dial");
    loop {
        if let SwarmEvent::ConnectionEstablished { .. } = stranger.select_next_some().await {
            break;
        }
    }
    tokio::spawn(async move {
        loop {
            stranger.select_next_some().await;
        }
    });
    let refused = p2p::open(&mut control, provider, Target { job: JOB, rank: 0 }).await;
    assert!(
        matches!(&refused, Err(StreamError::Refused(r)) if r.contains("not this job's orchestrator")),
        "{refused:?}"
    );
    assert_eq!(a.served.load(std::sync::atomic::Ordering::SeqCst), 0);
}
