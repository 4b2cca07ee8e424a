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
