//! A test replica: a real HTTP/1.1 server on loopback (hyper) that answers like a service's
//! container — `/health` (switchable), `/echo` (the body back), `/slow?ms=N`, `/stream?n=N`
//! (server-sent events, 100 ms apart), `/whoami` — and can stop listening or start breaking
//! connections. It stands in for a container where the test is about the gateway's rules.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ganglion_gateway::{Endpoint, Gateway, Pool, Replica};
use ganglion_market::Serve;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A running test replica.
pub(crate) struct TestReplica {
    pub(crate) name: String,
    pub(crate) addr: SocketAddr,
    pub(crate) healthy: Arc<AtomicBool>,
    /// When set, every request but `/health` has its connection dropped unanswered.
    pub(crate) breaks: Arc<AtomicBool>,
    /// When set, `/echo` answers a head promising the body's length, sends half of it and
    /// drops the connection.
    pub(crate) breaks_mid_body: Arc<AtomicBool>,
    pub(crate) served: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl TestReplica {
    pub(crate) async fn start(name: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let healthy = Arc::new(AtomicBool::new(true));
        let breaks = Arc::new(AtomicBool::new(false));
        let breaks_mid_body = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let state = (
            name.to_string(),
            healthy.clone(),
            breaks.clone(),
            served.clone(),
            breaks_mid_body.clone(),
        );
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    () = token.cancelled() => return,
                    a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
                };
                let state = state.clone();
                let token = token.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { answer(req, &state).await }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc);
                    tokio::select! {
                        () = token.cancelled() => {}
                        _ = conn => {}
                    }
                });
            }
        });
        Self {
            name: name.to_string(),
            addr,
            healthy,
            breaks,
            breaks_mid_body,
            served,
            stop,
        }
    }

    pub(crate) fn replica(&self) -> Replica {
        Replica {
            id: self.name.clone(),
            endpoint: Endpoint::Tcp(self.addr),
            rtt: None,
        }
    }

    /// Stops listening and drops every open connection (a provider gone).
    pub(crate) fn kill(&self) {
        self.stop.cancel();
    }
}

type State = (
    String,
    Arc<AtomicBool>,
    Arc<AtomicBool>,
    Arc<AtomicU64>,
    Arc<AtomicBool>,
);

async fn answer(req: Request<Incoming>, state: &State) -> Result<Response<Body>, std::io::Error> {
    let (name, healthy, breaks, served, breaks_mid_body) = state;
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let number = |key: &str| -> u64 {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    if path == "/health" {
        let ok = healthy.load(Ordering::SeqCst);
        return Ok(reply(
            if ok {
                StatusCode::OK
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            },
            "{}",
        ));
    }
    if breaks.load(Ordering::SeqCst) {
        // Read the request, then drop the connection without a response.
        let _ = req.into_body().collect().await;
        return Err(std::io::Error::other("breaking the connection"));
    }
    served.fetch_add(1, Ordering::SeqCst);
    match path.as_str() {
        "/echo" if breaks_mid_body.load(Ordering::SeqCst) => {
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let half = body.slice(..body.len() / 2);
            let frames = futures::stream::iter(vec![
                Ok(Frame::data(half)),
                Err(std::io::Error::other("replica lost mid-body")),
            ]);
            let mut r = Response::new(StreamBody::new(frames).boxed());
            r.headers_mut().insert(
                "content-length",
                body.len().to_string().parse().expect("len"),
            );
            Ok(r)
        }
        "/echo" => {
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let mut r = Response::new(full(body));
            r.headers_mut()
                .insert("x-test-replica", name.parse().expect("header"));
            Ok(r)
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(number("ms"))).await;
            Ok(reply(
                StatusCode::OK,
                &format!("{{\"replica\":\"{name}\"}}"),
            ))
        }
        "/whoami" => Ok(reply(
            StatusCode::OK,
            &format!("{{\"replica\":\"{name}\"}}"),
        )),
        "/length" => {
            let said = req
                .headers()
                .get("content-length")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_string();
            Ok(reply(StatusCode::OK, &said))
        }
        "/stream" => {
            let n = number("n");
            let frames = futures_stream(n);
            let mut r = Response::new(StreamBody::new(frames).boxed());
            r.headers_mut()
                .insert("content-type", "text/event-stream".parse().expect("ct"));
            Ok(r)
        }
        _ => Ok(reply(
            StatusCode::NOT_FOUND,
            "{\"error\":\"no such route\"}",
        )),
    }
}

/// `n` server-sent events, 100 ms apart.
fn futures_stream(
    n: u64,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + Sync + 'static
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        for i in 0..n {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let event = Frame::data(Bytes::from(format!("data: {{\"i\": {i}}}\n\n")));
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

fn reply(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from(text.to_string())));
    *r.status_mut() = status;
    r
}

/// A `serve` section with a fast health check (`interval_s` 1).
pub(crate) fn serve(max_in_flight: u32, retry_post: bool) -> Serve {
    serde_json::from_value(serde_json::json!({
        "port": 8000,
        "health": { "path": "/health", "interval_s": 1, "timeout_s": 1 },
        "max_in_flight_per_replica": max_in_flight,
        "request_timeout_s": 5,
        "retry_post": retry_post,
    }))
    .expect("serve")
}

/// A gateway listening on loopback with one service `name` over `replicas`, each healthy
/// before this returns (at most 5 s). Replica `i` is given an RTT of `i + 1` ms, so between
/// equally loaded replicas the first listed is chosen.
pub(crate) async fn gateway(
    name: &str,
    serve: &Serve,
    replicas: &[&TestReplica],
) -> (Arc<Gateway>, Arc<Pool>, SocketAddr) {
    let listed: Vec<Replica> = replicas
        .iter()
        .enumerate()
        .map(|(i, r)| Replica {
            rtt: Some(Duration::from_millis(i as u64 + 1)),
            ..r.replica()
        })
        .collect();
    let (gateway, pool, addr) = gateway_over(name, serve, &listed).await;
    wait_until(Duration::from_secs(5), || {
        replicas
            .iter()
            .all(|r| r.healthy.load(Ordering::SeqCst) == healthy(&pool, &r.name))
    })
    .await;
    (gateway, pool, addr)
}

/// A gateway listening on loopback with one service `name` over `replicas` (not waiting for
/// their health).
pub(crate) async fn gateway_over(
    name: &str,
    serve: &Serve,
    replicas: &[Replica],
) -> (Arc<Gateway>, Arc<Pool>, SocketAddr) {
    let gateway = Gateway::new();
    let pool = gateway.add(name, serve).expect("add service");
    for r in replicas {
        pool.add(r.clone());
    }
    let listening = ganglion_gateway::listen(
        "127.0.0.1:0".parse().expect("addr"),
        Arc::clone(&gateway),
        CancellationToken::new(),
    )
    .await
    .expect("listen");
    (gateway, pool, listening.addr)
}

pub(crate) fn healthy(pool: &Pool, id: &str) -> bool {
    pool.views()
        .iter()
        .any(|v| v.replica.id == id && v.health == ganglion_gateway::Health::Healthy)
}

/// Polls `cond` every 20 ms until it holds; panics after `limit`. Returns the time taken.
pub(crate) async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let started = std::time::Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < limit,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// A plain HTTP/1.1 client (the test's user).
pub(crate) fn client() -> hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
> {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// Sends `method` `url` with `body` and reads the whole answer: status, headers, body.
pub(crate) async fn call(
    method: &str,
    url: &str,
    body: &str,
) -> (StatusCode, http::HeaderMap, Bytes) {
    let request = Request::builder()
        .method(method)
        .uri(url)
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let response = client()
        .request(request)
        .await
        .expect("the gateway answers");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    (parts.status, parts.headers, bytes)
}
