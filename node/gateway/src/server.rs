//! The gateway's HTTP listener: `/{service}/…` goes to that service's replicas (the rest of
//! the path and the query unchanged), `GET /_gateway/services` shows every service's replicas
//! and load as JSON.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::body::{self, GatewayBody};
use crate::connect::Upstream;
use crate::error::GatewayError;
use crate::forward::{self, Policy};
use crate::health::{self, Check};
use crate::pool::{Load, Pool, ReplicaView};

/// The window [`Gateway::status`] reads the load over.
pub const STATUS_WINDOW: Duration = Duration::from_secs(10);

/// One routed service.
#[derive(Debug)]
pub struct Service {
    /// Its replicas.
    pub pool: Arc<Pool>,
    /// How its requests are forwarded.
    pub policy: Policy,
    stop: CancellationToken,
}

/// A service's replicas and load, as `GET /_gateway/services` answers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServiceStatus {
    /// Every replica.
    pub replicas: Vec<ReplicaView>,
    /// The load over the last [`STATUS_WINDOW`].
    pub load: Load,
}

/// The services one gateway routes.
#[derive(Debug)]
pub struct Gateway {
    services: RwLock<BTreeMap<String, Arc<Service>>>,
    upstream: Upstream,
}

impl Gateway {
    /// A gateway routing nothing yet, reaching replicas over TCP only.
    pub fn new() -> Arc<Self> {
        Self::with_streams(None)
    }

    /// A gateway routing nothing yet, reaching replicas over TCP and, with `streams` (the
    /// node's swarm), through their providers' nodes over libp2p ([`crate::p2p`]).
    pub fn with_streams(streams: Option<libp2p_stream::Control>) -> Arc<Self> {
        Arc::new(Self {
            services: RwLock::new(BTreeMap::new()),
            upstream: Upstream::new(streams),
        })
    }

    /// Routes `/{name}/…` to a new, empty pool for a service whose spec says `serve`, and
    /// starts probing its replicas' health (until [`Gateway::remove`]). Add replicas to the
    /// returned pool.
    ///
    /// # Errors
    /// [`GatewayError::BadName`], [`GatewayError::Duplicate`].
    pub fn add(
        &self,
        name: &str,
        serve: &ganglion_market::Serve,
    ) -> Result<Arc<Pool>, GatewayError> {
        if !valid_name(name) {
            return Err(GatewayError::BadName(name.to_string()));
        }
        let mut services = self
            .services
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if services.contains_key(name) {
            return Err(GatewayError::Duplicate(name.to_string()));
        }
        let pool = Pool::new(serve.max_in_flight_per_replica);
        let stop = CancellationToken::new();
        health::spawn_prober(
            Arc::clone(&pool),
            self.upstream.clone(),
            Check::from_spec(&serve.health),
            stop.clone(),
        );
        services.insert(
            name.to_string(),
            Arc::new(Service {
                pool: Arc::clone(&pool),
                policy: Policy::from_serve(serve),
                stop,
            }),
        );
        Ok(pool)
    }

    /// Stops routing `name` and probing its replicas; requests in flight finish.
    pub fn remove(&self, name: &str) -> bool {
        let removed = self
            .services
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name);
        if let Some(service) = &removed {
            service.stop.cancel();
        }
        removed.is_some()
    }

    /// The service routed as `name`.
    pub fn service(&self, name: &str) -> Option<Arc<Service>> {
        self.services
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Every service's replicas and load.
    pub fn status(&self) -> BTreeMap<String, ServiceStatus> {
        let services = self
            .services
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        services
            .iter()
            .map(|(name, s)| {
                (
                    name.clone(),
                    ServiceStatus {
                        replicas: s.pool.views(),
                        load: s.pool.load(STATUS_WINDOW),
                    },
                )
            })
            .collect()
    }

    /// Answers one request from `peer`.
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        peer: Option<SocketAddr>,
    ) -> Response<GatewayBody> {
        let path = request.uri().path();
        let Some(rest) = path.strip_prefix('/') else {
            return forward::error(StatusCode::NOT_FOUND, "no service in the path");
        };
        let (name, tail) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if name == "_gateway" {
            return if tail == "/services" {
                self.answer_status(request.method())
            } else {
                forward::error(
                    StatusCode::NOT_FOUND,
                    "the gateway's own route is GET /_gateway/services",
                )
            };
        }
        let Some(service) = self.service(name) else {
            return forward::error(
                StatusCode::NOT_FOUND,
                &format!("no service `{name}` is routed by this gateway"),
            );
        };
        let path_and_query = match request.uri().query() {
            Some(q) => format!("{tail}?{q}"),
            None => tail.to_string(),
        };
        let (head, incoming) = request.into_parts();
        let limit = service.policy.max_request_bytes;
        let body = match Limited::new(incoming, limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return forward::error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("request body above {limit} bytes"),
                );
            }
            Err(e) => {
                return forward::error(
                    StatusCode::BAD_REQUEST,
                    &format!("cannot read the request body: {e}"),
                );
            }
        };
        forward::forward(
            &service.pool,
            &self.upstream,
            &service.policy,
            &head,
            body,
            &path_and_query,
            peer,
        )
        .await
    }

    fn answer_status(&self, method: &Method) -> Response<GatewayBody> {
        if method != Method::GET && method != Method::HEAD {
            let mut r = forward::error(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only");
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        match serde_json::to_string(&self.status()) {
            Ok(json) => {
                let json = if method == Method::HEAD {
                    String::new()
                } else {
                    json
                };
                let mut r = Response::new(body::full(json));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static("application/json"),
                );
                r
            }
            Err(e) => forward::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    }
}

/// `[a-z0-9-]{1,63}` not starting with `-`.
fn valid_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A running listener.
#[derive(Debug)]
pub struct Listening {
    /// The bound address (the port chosen when 0 was asked).
    pub addr: SocketAddr,
    /// The accept loop; once the `stop` token given to [`listen`] is cancelled it accepts no
    /// more connections, lets the requests in flight finish (each connection closes after its
    /// current response, streaming ones included) and ends when they have, or after
    /// [`DRAIN`].
    pub task: JoinHandle<()>,
}

/// Longest a stopping gateway waits for its requests in flight.
pub const DRAIN: Duration = Duration::from_secs(30);

/// Binds `addr` and answers requests with `gateway` until `stop` is cancelled, then drains
/// (see [`Listening::task`]).
///
/// # Errors
/// [`GatewayError::Bind`].
pub async fn listen(
    addr: SocketAddr,
    gateway: Arc<Gateway>,
    stop: CancellationToken,
) -> Result<Listening, GatewayError> {
    let bind = |source| GatewayError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let task = tokio::spawn(async move {
        let connections = tokio_util::task::TaskTracker::new();
        loop {
            let (stream, peer) = tokio::select! {
                () = stop.cancelled() => {
                    connections.close();
                    if !connections.is_empty() {
                        tracing::info!(connections = connections.len(), "gateway stopping: finishing the requests in flight");
                    }
                    if tokio::time::timeout(DRAIN, connections.wait()).await.is_err() {
                        tracing::warn!("gateway stopped with requests still in flight after {DRAIN:?}");
                    }
                    return;
                }
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "gateway: accept failed");
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let gateway = Arc::clone(&gateway);
            let stop = stop.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let gateway = Arc::clone(&gateway);
                    async move { Ok::<_, Infallible>(gateway.handle(req, Some(peer)).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                let mut conn = std::pin::pin!(conn);
                let served = tokio::select! {
                    () = stop.cancelled() => {
                        // Finish the response in progress (if any), then close.
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                    served = conn.as_mut() => served,
                };
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "gateway: connection ended");
                }
            });
        }
    });
    Ok(Listening { addr, task })
}
