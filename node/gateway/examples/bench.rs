//! Gateway overhead and throughput, measured against calling the replica directly, in one
//! process on loopback:
//!
//!   cargo run -p ganglion-gateway --example bench --release [-- SECONDS]
//!
//! A small HTTP/1.1 replica (hyper, a 2-byte body) listens on loopback; a gateway routes a
//! service to it. Latency: sequential requests on one keep-alive connection, direct and
//! through the gateway, alternating in rounds so both see the same machine; p50 and p99 of
//! each and their difference. Throughput: 64 concurrent keep-alive clients for SECONDS
//! (default 5), direct and through the gateway. The load generator, the gateway and the
//! replica share this machine's cores, so the throughput through the gateway is a floor.
//! The same again with the replica behind a provider's node reached over libp2p
//! (`/ganglion/service/1`: two swarms in this process, TCP + noise + yamux on loopback).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use ganglion_gateway::p2p::{self, Target};
use ganglion_gateway::{Endpoint, Gateway, Replica};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use libp2p::swarm::SwarmEvent;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

async fn replica() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// A provider's node serving the replica at `upstream` as job [0; 32] rank 0, and a gateway
/// node connected to it: the gateway's stream control and the provider's id.
async fn provider_link(upstream: SocketAddr) -> (libp2p_stream::Control, libp2p::PeerId) {
    let (mut provider, mut gateway) = (
        ganglion_gateway::test_utils::stream_swarm(),
        ganglion_gateway::test_utils::stream_swarm(),
    );
    let addr = loop {
        if let SwarmEvent::NewListenAddr { address, .. } = provider.select_next_some().await {
            break address;
        }
    };
    let provider_id = *provider.local_peer_id();
    let mut provider_control = provider.behaviour().new_control();
    let incoming = p2p::accept(&mut provider_control).expect("accept");
    let resolve = move |_: &libp2p::PeerId, _: &Target| Ok(upstream);
    tokio::spawn(p2p::serve(
        incoming,
        p2p::by_address(resolve),
        CancellationToken::new(),
    ));
    gateway.dial(addr).expect("dial");
    loop {
        tokio::select! {
            e = gateway.select_next_some() => if matches!(e, SwarmEvent::ConnectionEstablished { .. }) { break },
            _ = provider.select_next_some() => {}
        }
    }
    let control = gateway.behaviour().new_control();
    tokio::spawn(async move {
        loop {
            gateway.select_next_some().await;
        }
    });
    tokio::spawn(async move {
        loop {
            provider.select_next_some().await;
        }
    });
    (control, provider_id)
}

fn client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(connector)
}

async fn get(client: &HttpClient, url: &str) {
    let request = Request::get(url)
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = client.request(request).await.expect("answered");
    assert!(response.status().is_success(), "{}", response.status());
    response.into_body().collect().await.expect("body");
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[rank].as_secs_f64() * 1e6
}

async fn throughput(url: &str, seconds: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let client = client();
    let until = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (client, url, done) = (client.clone(), url.to_string(), Arc::clone(&done));
            tokio::spawn(async move {
                while Instant::now() < until {
                    get(&client, &url).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let started = Instant::now();
    for t in tasks {
        t.await.expect("client");
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let upstream = replica().await;
    let (control, provider) = provider_link(upstream).await;
    let gateway = Gateway::with_streams(Some(control));
    let serve: ganglion_market::Serve = serde_json::from_value(serde_json::json!({
        "port": 8000, "max_in_flight_per_replica": 4096,
        "health": { "path": "/", "interval_s": 1, "timeout_s": 1 },
    }))
    .expect("serve");
    let pool = gateway.add("bench", &serve).expect("service");
    pool.add(Replica {
        id: "r0".into(),
        endpoint: Endpoint::Tcp(upstream),
        rtt: None,
    });
    let p2p_pool = gateway.add("bench-p2p", &serve).expect("service");
    p2p_pool.add(Replica {
        id: "r0-p2p".into(),
        endpoint: Endpoint::P2p {
            peer: provider,
            target: Target {
                job: [0; 32],
                rank: 0,
            },
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
    while pool.load(Duration::from_secs(1)).healthy == 0
        || p2p_pool.load(Duration::from_secs(1)).healthy == 0
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let direct_url = format!("http://{upstream}/");
    let gateway_url = format!("http://{}/bench/", listening.addr);
    let p2p_url = format!("http://{}/bench-p2p/", listening.addr);

    // Latency: 20 rounds of 500 sequential requests each way, alternating.
    let client = client();
    for url in [&direct_url, &gateway_url, &p2p_url] {
        for _ in 0..500 {
            get(&client, url).await;
        }
    }
    let (mut direct, mut through, mut over_p2p) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..20 {
        for (url, samples) in [
            (&direct_url, &mut direct),
            (&gateway_url, &mut through),
            (&p2p_url, &mut over_p2p),
        ] {
            for _ in 0..500 {
                let t = Instant::now();
                get(&client, url).await;
                samples.push(t.elapsed());
            }
        }
    }
    direct.sort_unstable();
    through.sort_unstable();
    over_p2p.sort_unstable();
    println!("latency, {} sequential requests each (µs):", direct.len());
    println!(
        "  direct          p50 {:8.1}  p99 {:8.1}",
        pct(&direct, 0.5),
        pct(&direct, 0.99)
    );
    println!(
        "  through gateway p50 {:8.1}  p99 {:8.1}",
        pct(&through, 0.5),
        pct(&through, 0.99)
    );
    println!(
        "  gateway overhead p50 {:6.1} µs  p99 {:6.1} µs",
        pct(&through, 0.5) - pct(&direct, 0.5),
        pct(&through, 0.99) - pct(&direct, 0.99)
    );

    println!(
        "  over libp2p     p50 {:8.1}  p99 {:8.1}  (overhead p50 {:.1} µs, p99 {:.1} µs)",
        pct(&over_p2p, 0.5),
        pct(&over_p2p, 0.99),
        pct(&over_p2p, 0.5) - pct(&direct, 0.5),
        pct(&over_p2p, 0.99) - pct(&direct, 0.99)
    );

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "throughput, 64 keep-alive clients for {seconds} s ({cores} cores shared by clients, gateway and replica):"
    );
    let d = throughput(&direct_url, seconds).await;
    println!("  direct          {d:10.0} requests/s");
    let g = throughput(&gateway_url, seconds).await;
    println!(
        "  through gateway {g:10.0} requests/s ({:.0} % of direct)",
        100.0 * g / d
    );
    let p = throughput(&p2p_url, seconds).await;
    println!(
        "  over libp2p     {p:10.0} requests/s ({:.0} % of direct)",
        100.0 * p / d
    );
    let served: u64 = pool.views().iter().map(|v| v.usage.requests).sum();
    println!("  the replica's usage counted {served} requests through the gateway");
}
