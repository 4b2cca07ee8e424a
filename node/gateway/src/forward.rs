//! Forwarding one request: choose a replica, send, retry where it is safe, answer.
//!
//! - The request body is read first (at most [`Policy::max_request_bytes`], else `413`), so
//!   it can be sent again.
//! - A request that never reached its replica (connection refused or unreachable) is retried
//!   on another one whatever its method: the replica saw nothing. One that reached it and
//!   failed before the response head, or was answered `503`, is retried only when it is
//!   idempotent (RFC 9110 §9.2.2: `GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS`, `TRACE`) or is a
//!   `POST` the service declares safe to repeat (`serve.retry_post`). At most
//!   [`Policy::max_attempts`] replicas are tried.
//! - Back-pressure: when every healthy replica holds `serve.max_in_flight_per_replica`
//!   requests the answer is `503` with `Retry-After: 1`; with no healthy replica, `503` with
//!   `Retry-After` of one health interval.
//! - A repeatable request's response of at most [`WHOLE_BODY_BYTES`] (by `Content-Length`) is
//!   read whole before it is passed on, so a replica lost mid-body is retried too; larger and
//!   streaming responses (chunked, server-sent events) pass through as they arrive.
//! - A response later than `serve.request_timeout_s` is `504`; a body still streaming then is
//!   cut off. A replica that cannot be reached leaves the rotation at once (the next
//!   passing health check brings it back).
//! - Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded either way; the request gains
//!   `X-Forwarded-For`, the response `X-Ganglion-Replica`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::body::{self, GatewayBody, Metered};
use crate::connect::Upstream;
use crate::pool::{Pool, Refused};

/// How one service's requests are forwarded.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Replicas tried at most for one request (≥ 1).
    pub max_attempts: u32,
    /// Whether a `POST` may be sent again after reaching a replica (`serve.retry_post`).
    pub retry_post: bool,
    /// Time to the end of the response (`serve.request_timeout_s`).
    pub request_timeout: Duration,
    /// Largest request body taken, bytes.
    pub max_request_bytes: usize,
    /// `Retry-After` when no replica is healthy, seconds (one health interval).
    pub retry_after_down_s: u32,
}

impl Policy {
    /// The policy a service's `serve` section asks for: three attempts, 16 MiB bodies.
    pub fn from_serve(serve: &ganglion_market::Serve) -> Self {
        Self {
            max_attempts: 3,
            retry_post: serve.retry_post,
            request_timeout: Duration::from_secs(u64::from(serve.request_timeout_s)),
            max_request_bytes: 16 << 20,
            retry_after_down_s: serve.health.interval_s.max(1),
        }
    }

    fn may_repeat(&self, method: &Method) -> bool {
        matches!(
            *method,
            Method::GET
                | Method::HEAD
                | Method::PUT
                | Method::DELETE
                | Method::OPTIONS
                | Method::TRACE
        ) || (*method == Method::POST && self.retry_post)
    }
}

/// The header naming the replica that answered.
pub const REPLICA_HEADER: &str = "x-ganglion-replica";

/// Forwards a request whose body is already read (`body`) to a replica of `pool`, at
/// `path_and_query` on the replica (the part after `/{service}`), and answers.
pub async fn forward(
    pool: &Arc<Pool>,
    upstream: &Upstream,
    policy: &Policy,
    head: &http::request::Parts,
    body: Bytes,
    path_and_query: &str,
    peer: Option<SocketAddr>,
) -> Response<GatewayBody> {
    let deadline = tokio::time::Instant::now() + policy.request_timeout;
    let repeatable = policy.may_repeat(&head.method);
    let mut tried: Vec<String> = Vec::new();
    let mut last_failure = None;
    while tried.len() < policy.max_attempts.max(1) as usize {
        let mut lease = match pool.lease(&tried) {
            Ok(lease) => lease,
            Err(refused) => {
                if let Some(failure) = last_failure {
                    return failure;
                }
                return match refused {
                    Refused::AllFull => unavailable(1, "every replica is at its in-flight limit"),
                    Refused::NoneHealthy => unavailable(
                        policy.retry_after_down_s,
                        "no replica of the service is healthy",
                    ),
                };
            }
        };
        tried.push(lease.id().to_string());
        let url = upstream.url(lease.endpoint(), path_and_query);
        let request = match upstream_request(head, &body, &url, peer) {
            Ok(r) => r,
            Err(e) => return error(StatusCode::BAD_REQUEST, &format!("cannot forward: {e}")),
        };
        lease.sent(body.len() as u64);
        let sent = tokio::time::timeout_at(deadline, upstream.client().request(request)).await;
        match sent {
            Err(_elapsed) => {
                return error(
                    StatusCode::GATEWAY_TIMEOUT,
                    &format!("replica {} did not answer in time", lease.id()),
                );
            }
            Ok(Err(e)) => {
                let never_reached = e.is_connect();
                if never_reached {
                    lease.unreachable();
                }
                let cause = chain(&e);
                tracing::debug!(replica = %lease.id(), error = %cause, never_reached, "forward failed");
                last_failure = Some(error(
                    StatusCode::BAD_GATEWAY,
                    &format!(
                        "replica {} failed: {cause}{}",
                        lease.id(),
                        if never_reached {
                            ""
                        } else {
                            " (a replica that closes the connection while the request is sent \
                             often refuses a body larger than it takes)"
                        }
                    ),
                ));
                if !(never_reached || repeatable) {
                    break;
                }
            }
            Ok(Ok(response)) => {
                if response.status() == StatusCode::SERVICE_UNAVAILABLE && repeatable {
                    // The replica sheds load: try another before passing its 503 on.
                    let (parts, incoming) = response.into_parts();
                    lease.answered();
                    last_failure = Some(pass_on(parts, incoming, lease, deadline));
                    continue;
                }
                lease.answered();
                let (parts, incoming) = response.into_parts();
                let small = parts
                    .headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    .is_some_and(|n| n <= WHOLE_BODY_BYTES);
                if !(repeatable && small) {
                    return pass_on(parts, incoming, lease, deadline);
                }
                // Read whole before anything is passed on: a replica lost mid-body is then
                // retried like one lost before it answered.
                match tokio::time::timeout_at(deadline, incoming.collect()).await {
                    Ok(Ok(collected)) => {
                        let bytes = collected.to_bytes();
                        lease.received(bytes.len() as u64);
                        lease.done();
                        return answer_whole(parts, bytes, &lease);
                    }
                    Ok(Err(e)) => {
                        lease.unreachable();
                        tracing::debug!(replica = %lease.id(), error = %e, "response broke off");
                        last_failure = Some(error(
                            StatusCode::BAD_GATEWAY,
                            &format!("replica {}'s response broke off: {e}", lease.id()),
                        ));
                    }
                    Err(_elapsed) => {
                        return error(
                            StatusCode::GATEWAY_TIMEOUT,
                            &format!("replica {} did not answer in time", lease.id()),
                        );
                    }
                }
            }
        }
    }
    last_failure.unwrap_or_else(|| error(StatusCode::BAD_GATEWAY, "no replica answered"))
}

/// A repeatable request's response up to this many bytes (by `Content-Length`) is read whole
/// before it is passed on (1 MiB); larger and streaming ones pass through as they arrive.
pub const WHOLE_BODY_BYTES: u64 = 1 << 20;

/// A replica's response head as the client gets it: hop-by-hop headers dropped, the replica
/// named.
fn client_head(parts: &mut http::response::Parts, replica: &str) {
    strip_hop_by_hop(&mut parts.headers);
    if let Ok(v) = HeaderValue::from_str(replica) {
        parts
            .headers
            .insert(HeaderName::from_static(REPLICA_HEADER), v);
    }
}

fn answer_whole(
    mut parts: http::response::Parts,
    bytes: Bytes,
    lease: &crate::pool::Lease,
) -> Response<GatewayBody> {
    client_head(&mut parts, lease.id());
    Response::from_parts(parts, body::full(bytes))
}

fn pass_on(
    mut parts: http::response::Parts,
    incoming: hyper::body::Incoming,
    lease: crate::pool::Lease,
    deadline: tokio::time::Instant,
) -> Response<GatewayBody> {
    client_head(&mut parts, lease.id());
    let sleep = Box::pin(tokio::time::sleep_until(deadline));
    let body = BodyExt::boxed(Metered::new(incoming, lease, sleep));
    Response::from_parts(parts, body)
}

fn upstream_request(
    head: &http::request::Parts,
    body: &Bytes,
    url: &str,
    peer: Option<SocketAddr>,
) -> Result<Request<Full<Bytes>>, http::Error> {
    let mut headers = head.headers.clone();
    strip_hop_by_hop(&mut headers);
    headers.remove(header::HOST);
    // The body was read whole: its length is known. Said whenever the client said one or sent
    // a body (an empty POST keeps its `Content-Length: 0`; hyper would leave it out).
    if headers.contains_key(header::CONTENT_LENGTH) || !body.is_empty() {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    if let Some(peer) = peer {
        let forwarded = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prior) => format!("{prior}, {}", peer.ip()),
            None => peer.ip().to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&forwarded) {
            headers.insert(HeaderName::from_static("x-forwarded-for"), v);
        }
    }
    let mut request = Request::builder()
        .method(head.method.clone())
        .uri(url)
        .body(Full::new(body.clone()))?;
    *request.headers_mut() = headers;
    Ok(request)
}

/// Removes the headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// including those the `Connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
}

/// An error and its causes, `a: b: c` (hyper-util's own text is only "client error").
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// A JSON error answer: `{"error": "..."}`.
pub fn error(status: StatusCode, message: &str) -> Response<GatewayBody> {
    let text = serde_json::json!({ "error": message }).to_string();
    let mut r = Response::new(body::full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn unavailable(retry_after_s: u32, message: &str) -> Response<GatewayBody> {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    r
}
