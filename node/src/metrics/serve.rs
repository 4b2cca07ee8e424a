//! `GET /metrics` over HTTP/1.1 (hyper) on its own listener: each request refreshes the
//! [`Collector`] and answers its OpenMetrics text. No token: the endpoint is read-only and
//! listens on localhost unless configured otherwise (`[metrics] listen`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use ganglion_indexer::store::Kv;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::collect::Collector;
use super::registry::CONTENT_TYPE as OPENMETRICS;

/// The path the metrics are served at.
pub const PATH: &str = "/metrics";

/// A running metrics endpoint.
#[derive(Debug)]
pub struct Serving {
    /// The bound address (the configured one, with the port chosen when it was 0).
    pub addr: SocketAddr,
    /// The accept loop; it ends when the `stop` token given to [`start`] is cancelled.
    pub task: JoinHandle<()>,
}

/// Binds `addr` and serves `GET /metrics` from `collector` until `stop` is cancelled:
/// 200 with the text, 404 for another path, 405 for another method, 500 with the cause
/// when the node's stores cannot be read.
///
/// # Errors
/// The bind error (address in use, permission).
pub async fn start<S: Kv + 'static>(
    addr: SocketAddr,
    collector: Arc<Collector<S>>,
    stop: CancellationToken,
) -> std::io::Result<Serving> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics: accept failed");
                        continue;
                    }
                },
            };
            let collector = collector.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let collector = collector.clone();
                    async move { Ok::<_, Infallible>(answer(&collector, &req).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = stop.cancelled() => {}
                    served = conn => if let Err(e) = served {
                        tracing::debug!(%peer, error = %e, "metrics: connection ended");
                    },
                }
            });
        }
    });
    Ok(Serving { addr, task })
}

async fn answer<S: Kv>(collector: &Collector<S>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r
    };
    if req.uri().path() != PATH {
        return reply(
            StatusCode::NOT_FOUND,
            format!("not found: try GET {PATH}\n"),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
        r.headers_mut()
            .insert(ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Err(e) = collector.refresh().await {
        tracing::warn!(error = %e, "metrics: scrape failed");
        return reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"));
    }
    let mut r = reply(StatusCode::OK, collector.metrics().encode());
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(OPENMETRICS),
    );
    r
}

#[cfg(test)]
mod tests {
    use ganglion_contracts::params::AssetClass;
    use ganglion_contracts::time::SlotConfig;
    use ganglion_contracts::v2::datum::JobId;
    use ganglion_contracts::v2::params::Params;
    use ganglion_indexer::store::MemoryKv;
    use ganglion_indexer::{Indexer, Watch};
    use http_body_util::{BodyExt, Empty};

    use super::*;
    use crate::job::engine::ProviderRole;
    use crate::job::provider::ProviderDetail;
    use crate::job::state::{ProviderEvent, ProviderState};
    use crate::job::store::{JobRecord, JobStore};
    use crate::metrics::Sources;
    use ganglion_p2p as p2p;

    async fn request(addr: SocketAddr, method: Method, path: &str) -> (StatusCode, String, String) {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string())
            .body(Empty::<Bytes>::new())
            .expect("request");
        let resp = sender.send_request(req).await.expect("response");
        let status = resp.status();
        let ctype = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (status, ctype, String::from_utf8_lossy(&body).into_owned())
    }

    fn count(text: &str, line_start: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(line_start))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {line_start:?} in\n{text}"))
    }

    /// A real job store, swarm (no peers) and indexer (no blocks) behind a real listener: the
    /// provider record's states and dispatch latency are served, each job observed once.
    #[tokio::test]
    async fn the_endpoint_serves_the_stores_jobs_and_observes_each_dispatch_once() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = JobStore::open(&tmp.path().join("jobs.sled")).expect("store");
        let job = JobId([7; 32]);
        let record = JobRecord::new(
            job,
            ProviderState::Reserved,
            ProviderDetail::default(),
            1_000,
        );
        store.create::<ProviderRole>(&record).expect("created");
        for (event, at) in [
            (ProviderEvent::AssignmentSeen, 10_000),
            (ProviderEvent::Dispatched, 10_100),
            (ProviderEvent::Started, 11_500),
        ] {
            store
                .apply::<ProviderRole>(&job, event, at, None)
                .expect("legal");
        }
        let key = libp2p::identity::Keypair::generate_ed25519();
        let (client, event_loop, _events, _inbound) = p2p::new(
            key,
            p2p::Config {
                listen: vec![],
                ..p2p::Config::default()
            },
            p2p::offers::BondSnapshot::default(),
        )
        .expect("swarm");
        let swarm = tokio::spawn(event_loop.run());
        let watch = Watch::v2(
            [1; 28],
            Params {
                ntx: AssetClass {
                    policy: [2; 28],
                    name: b"NTX".to_vec(),
                },
                min_bond_per_gpu: 1,
                unbonding_delay_ms: 1,
                claim_window_ms: 1,
            },
        );
        let collector = Arc::new(Collector::new(Sources {
            store: store.clone(),
            executor: None,
            p2p: client,
            indexer: Arc::new(Indexer::new(MemoryKv::new(), watch, 10)),
            clock: SlotConfig {
                zero_time: 0,
                zero_slot: 0,
                slot_length: 1000,
            },
        }));
        let stop = CancellationToken::new();
        let serving = start(([127, 0, 0, 1], 0).into(), collector, stop.clone())
            .await
            .expect("binds");

        let (status, ctype, text) = request(serving.addr, Method::GET, PATH).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(ctype, OPENMETRICS);
        assert_eq!(
            count(&text, "ganglion_jobs{role=\"provider\",state=\"running\"}"),
            1.0
        );
        assert_eq!(
            count(&text, "ganglion_jobs{role=\"provider\",state=\"paid\"}"),
            0.0
        );
        assert_eq!(
            count(
                &text,
                "ganglion_jobs{role=\"orchestrator\",state=\"settled\"}"
            ),
            0.0
        );
        assert_eq!(count(&text, "ganglion_p2p_peers"), 0.0);
        assert_eq!(count(&text, "ganglion_market_offers"), 0.0);
        assert_eq!(count(&text, "ganglion_dispatch_latency_seconds_count"), 1.0);
        assert_eq!(count(&text, "ganglion_dispatch_latency_seconds_sum"), 1.5);
        assert_eq!(
            count(&text, "ganglion_chain_tip_lag_slots"),
            0.0,
            "no tip yet: the lag is left as it was"
        );

        // The job moves on: the gauges follow, the latency is not observed a second time.
        store
            .apply::<ProviderRole>(&job, ProviderEvent::Exited, 14_000, None)
            .expect("legal");
        let (_, _, text) = request(serving.addr, Method::GET, PATH).await;
        assert_eq!(
            count(&text, "ganglion_jobs{role=\"provider\",state=\"running\"}"),
            0.0
        );
        assert_eq!(
            count(&text, "ganglion_jobs{role=\"provider\",state=\"finished\"}"),
            1.0
        );
        assert_eq!(count(&text, "ganglion_dispatch_latency_seconds_count"), 1.0);

        let (status, _, _) = request(serving.addr, Method::POST, PATH).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        let (status, _, _) = request(serving.addr, Method::GET, "/").await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        stop.cancel();
        serving.task.await.expect("the accept loop ends");
        swarm.abort();
    }
}
