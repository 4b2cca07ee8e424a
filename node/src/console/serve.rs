//! The console's listener (HTTP/1.1 on hyper, with a header read timeout and a connection
//! cap) and its routes (axum); every answer carries `X-Frame-Options: DENY`, `nosniff` and a
//! same-origin content security policy:
//!
//! | route | answers |
//! |---|---|
//! | `GET /` | redirect to `/jobs` |
//! | `GET /jobs`, `/market`, `/provider`, `/search?q=` | the pages of [`super::pages`] |
//! | `GET /jobs/{id}` | a job's page (404 when neither the node nor the chain knows it) |
//! | `GET /jobs/{id}/live` | the job page's live part (an HTML fragment) |
//! | `GET /jobs/{id}/events` | `job_subscribe` relayed as server-sent events (`job_event`, then `end`) |
//! | `GET /jobs/{id}/logs`, `/jobs/{id}/outputs` | every rank's log, the output files |
//! | `GET /ipfs/{cid}` | a UnixFS file from the node's blockstore (at most [`MAX_DOWNLOAD`] bytes) |
//! | `POST /jobs/{id}/stop` | `job_stop`; needs the RPC cookie's token (form field or cookie) |
//!
//! Anything else: 404. A page never panics on bad input: a malformed id or CID is a 404 with
//! why.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, COOKIE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::Stream;
use ganglion_rpc::types::JobEvent;
use ganglion_storage::blockstore::Blockstore;
use maud::{Markup, html};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::html;
use super::pages;
use super::source::Source;

/// The largest file `GET /ipfs/{cid}` serves, bytes (64 MiB); larger ones: `ganglion storage
/// cat`.
pub const MAX_DOWNLOAD: u64 = 64 << 20;

/// The cookie an accepted token is kept in (HTTP-only, same-site strict).
const TOKEN_COOKIE: &str = "ganglion_token";

/// What the console serves from.
#[derive(Clone)]
pub struct Console {
    /// The node's RPC methods.
    pub source: Source,
    /// The RPC cookie's token: actions need it.
    pub token: String,
    /// The node's blockstore (`/ipfs/{cid}` downloads).
    pub blocks: Arc<dyn Blockstore>,
}

/// A running console.
#[derive(Debug)]
pub struct Serving {
    /// The bound address (the port chosen when it was 0).
    pub addr: SocketAddr,
    /// The server; it ends when the `stop` token given to [`start`] is cancelled.
    pub task: JoinHandle<Result<(), String>>,
}

/// How long a client may take to send a request's headers, seconds (a slow or stalled client
/// is dropped instead of holding a connection).
pub const HEADER_READ_TIMEOUT_S: u64 = 10;

/// Connections served at once; more wait in the listener's backlog (open files are shared
/// with the swarm and the RPC server).
pub const MAX_CONNECTIONS: usize = 256;

/// Binds `addr` and serves the console until `stop` is cancelled (HTTP/1.1 on hyper, each
/// connection given [`HEADER_READ_TIMEOUT_S`] for its headers, at most [`MAX_CONNECTIONS`] at
/// once).
///
/// # Errors
/// The bind error (address in use, permission).
pub async fn start(
    addr: SocketAddr,
    console: Console,
    stop: CancellationToken,
) -> std::io::Result<Serving> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let app = router(console);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let task = tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return Ok(());
            };
            let (stream, peer) = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "console: accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let mut http = hyper::server::conn::http1::Builder::new();
                http.timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(std::time::Duration::from_secs(HEADER_READ_TIMEOUT_S));
                let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::select! {
                    () = stop.cancelled() => {}
                    served = conn => if let Err(e) = served {
                        tracing::debug!(%peer, error = %e, "console: connection ended");
                    },
                }
            });
        }
    });
    Ok(Serving { addr, task })
}

/// Every route of the console (module docs).
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/jobs") }))
        .route("/jobs", get(jobs))
        .route("/jobs/{id}", get(job))
        .route("/jobs/{id}/live", get(job_live))
        .route("/jobs/{id}/events", get(job_events))
        .route("/jobs/{id}/logs", get(job_logs))
        .route("/jobs/{id}/outputs", get(job_outputs))
        .route("/jobs/{id}/stop", post(job_stop))
        .route("/market", get(market))
        .route("/provider", get(provider))
        .route("/search", get(search))
        .route("/ipfs/{cid}", get(download))
        .route(
            html::CSS_PATH,
            get(|| async { asset("text/css; charset=utf-8", html::CSS) }),
        )
        .route(
            html::JS_PATH,
            get(|| async { asset("text/javascript; charset=utf-8", html::JS) }),
        )
        .fallback(|| async { not_found("No such page.") })
        .layer(axum::middleware::map_response(hardened))
        .with_state(Arc::new(console))
}

/// Headers on every answer: no framing (the stop form cannot be clickjacked), no MIME
/// sniffing, and a content security policy allowing only the console's own script and style
/// sheet (inline `style` attributes colour the heat map).
async fn hardened(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
             img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
        ),
    );
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    r
}

type Shared = State<Arc<Console>>;

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(kind)),
            (CACHE_CONTROL, HeaderValue::from_static("max-age=300")),
        ],
        body,
    )
        .into_response()
}

fn not_found(why: &str) -> Response {
    let body = html::page(
        "Not found",
        "",
        html! { h1 { "Not found" } p.notice { (why) } },
    );
    (StatusCode::NOT_FOUND, body).into_response()
}

/// A job id as the RPC takes it (64 hex digits), lower-cased; `None` when it is not one.
fn job_id(id: &str) -> Option<String> {
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
}

/// The 404 for a path segment that is not a job id.
fn not_a_job(id: &str) -> Response {
    not_found(&format!("{id:?} is not a job id (64 hex digits)."))
}

fn no_store(m: Markup) -> Response {
    ([(CACHE_CONTROL, HeaderValue::from_static("no-store"))], m).into_response()
}

async fn jobs(State(c): Shared) -> Response {
    no_store(pages::jobs::render(&c.source).await)
}

async fn market(State(c): Shared) -> Response {
    no_store(pages::market::render(&c.source).await)
}

async fn provider(State(c): Shared) -> Response {
    no_store(pages::provider::render(&c.source).await)
}

#[derive(Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
}

async fn search(State(c): Shared, Query(q): Query<SearchQuery>) -> Response {
    no_store(pages::search::render(&c.source, &q.q).await)
}

/// Whether the request's cookie carries the token.
fn has_token(c: &Console, headers: &HeaderMap) -> bool {
    cookie_token(headers).is_some_and(|t| ganglion_rpc::auth::token_matches(&t, &c.token))
}

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == TOKEN_COOKIE)
        .map(|(_, v)| v.to_string())
}

async fn job(State(c): Shared, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let Some(id) = job_id(&id) else {
        return not_a_job(&id);
    };
    match pages::job::render(&c.source, &id, has_token(&c, &headers)).await {
        Ok(page) => no_store(page),
        Err(e) if e.is_not_found() => not_found(&e.message),
        Err(e) => no_store(html::page("Job", "/jobs", html::unavailable("The job", &e))),
    }
}

async fn job_live(State(c): Shared, Path(id): Path<String>) -> Response {
    let Some(id) = job_id(&id) else {
        return not_a_job(&id);
    };
    let records = match c.source.job(&id).await {
        Ok(r) => r,
        Err(e) => return (StatusCode::NOT_FOUND, e.message).into_response(),
    };
    if let Err(e) = pages::job::known(&c.source, &id, &records).await {
        return (StatusCode::NOT_FOUND, e.message).into_response();
    }
    no_store(pages::job::live(&c.source, &id, &records).await)
}

async fn job_logs(State(c): Shared, Path(id): Path<String>) -> Response {
    match job_id(&id) {
        Some(id) => no_store(pages::job::logs(&c.source, &id).await),
        None => not_a_job(&id),
    }
}

async fn job_outputs(State(c): Shared, Path(id): Path<String>) -> Response {
    match job_id(&id) {
        Some(id) => no_store(pages::job::outputs(&c.source, &id).await),
        None => not_a_job(&id),
    }
}

/// `job_subscribe` as server-sent events: each [`JobEvent`] as a `job_event` event (its JSON
/// as data), then one `end` event when the subscription closes (every record terminal, or
/// the node stopping).
async fn job_events(State(c): Shared, Path(id): Path<String>) -> Response {
    let Some(id) = job_id(&id) else {
        return not_a_job(&id);
    };
    let sub = match c.source.events(&id).await {
        Ok(s) => s,
        Err(e) => return (StatusCode::NOT_FOUND, e.message).into_response(),
    };
    Sse::new(relay(sub))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn relay(
    sub: ganglion_rpc::jsonrpsee::core::server::Subscription,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(Some(sub), |state| async move {
        let mut sub = state?;
        match sub.next::<JobEvent>().await {
            Some(Ok((ev, _))) => {
                let data = serde_json::to_string(&ev).unwrap_or_else(|_| "{}".into());
                Some((
                    Ok(Event::default().event("job_event").data(data)),
                    Some(sub),
                ))
            }
            Some(Err(e)) => Some((Ok(Event::default().event("end").data(e.to_string())), None)),
            None => Some((Ok(Event::default().event("end").data("closed")), None)),
        }
    })
}

#[derive(Deserialize)]
struct TokenForm {
    #[serde(default)]
    token: String,
}

/// `job_stop` for the job's page: with the token from the form (then kept in a cookie) or
/// from the cookie; 403 without it.
async fn job_stop(
    State(c): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let Some(id) = job_id(&id) else {
        return not_a_job(&id);
    };
    let from_form = !form.token.is_empty();
    let given = if from_form {
        Some(form.token.trim().to_string())
    } else {
        cookie_token(&headers)
    };
    if !given.is_some_and(|t| ganglion_rpc::auth::token_matches(&t, &c.token)) {
        let body = html::page(
            "Forbidden",
            "/jobs",
            html! { h1 { "Not stopped" } p.notice { "Stopping a job needs the node's RPC token (the content of "
            code { "<data dir>/rpc.cookie" } ")." } p { a href={ "/jobs/" (id) } { "Back to the job" } } },
        );
        return (StatusCode::FORBIDDEN, body).into_response();
    }
    // Only a job this node orchestrates can be stopped here; anything else is not found.
    let mine = c
        .source
        .job(&id)
        .await
        .is_ok_and(|records| records.iter().any(|r| r.role == "orchestrator"));
    if !mine {
        return not_found(&format!("this node orchestrates no job {id}"));
    }
    let mut r = match c.source.stop(&id).await {
        Ok(_) => Redirect::to(&format!("/jobs/{id}")).into_response(),
        Err(e) => {
            let body = html! { h1 { "Not stopped" } p.notice { (e.message) }
            p { a href={ "/jobs/" (id) } { "Back to the job" } } };
            (
                StatusCode::CONFLICT,
                html::page("Not stopped", "/jobs", body),
            )
                .into_response()
        }
    };
    if from_form
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{TOKEN_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            c.token
        ))
    {
        r.headers_mut().insert(SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
struct DownloadQuery {
    /// The name to save the file as (`?filename=`, as IPFS gateways take it).
    filename: Option<String>,
}

/// A file name safe in a `Content-Disposition` header: its last path component with only
/// `[A-Za-z0-9._-]` kept; `None` when no letter or digit is left.
fn safe_filename(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let kept: String = last
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect();
    kept.chars()
        .any(|c| c.is_ascii_alphanumeric())
        .then_some(kept)
}

/// `GET /ipfs/{cid}`: a UnixFS file from the blockstore, as an attachment.
async fn download(
    State(c): Shared,
    Path(cid): Path<String>,
    Query(q): Query<DownloadQuery>,
) -> Response {
    let Ok(root) = cid::Cid::try_from(cid.as_str()) else {
        return not_found(&format!("{cid:?} is not a CID."));
    };
    let blocks = c.blocks.clone();
    let read = tokio::task::spawn_blocking(move || {
        let mut out = Capped::default();
        ganglion_storage::unixfs::cat(&blocks, &root, &mut out)
            .map(|_| out.bytes)
            .map_err(|e| e.to_string())
    })
    .await;
    match read {
        Ok(Ok(bytes)) => (
            [
                (
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
                (
                    CONTENT_DISPOSITION,
                    HeaderValue::from_str(&format!(
                        "attachment; filename=\"{}\"",
                        q.filename
                            .as_deref()
                            .and_then(safe_filename)
                            .unwrap_or_else(|| root.to_string())
                    ))
                    .unwrap_or(HeaderValue::from_static("attachment")),
                ),
            ],
            bytes,
        )
            .into_response(),
        Ok(Err(e)) => not_found(&format!(
            "{root} cannot be served as a file from this node's blockstore: {e}. A job's \
             attested logs and outputs are fetched from its providers when its logs or \
             outputs page is opened; a directory downloads file by file from the outputs page."
        )),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// A writer that refuses to grow past [`MAX_DOWNLOAD`].
#[derive(Default)]
struct Capped {
    bytes: Vec<u8>,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() as u64 + buf.len() as u64 > MAX_DOWNLOAD {
            return Err(std::io::Error::other(format!(
                "larger than {MAX_DOWNLOAD} bytes: use `ganglion storage cat`"
            )));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::safe_filename;

    #[test]
    fn download_names_keep_only_a_plain_last_component() {
        assert_eq!(safe_filename("result.bin").as_deref(), Some("result.bin"));
        assert_eq!(
            safe_filename("out/dir/a b\"c.txt").as_deref(),
            Some("abc.txt")
        );
        assert_eq!(safe_filename("..\\..\\evil.sh").as_deref(), Some("evil.sh"));
        assert_eq!(safe_filename("\r\n"), None);
        assert_eq!(safe_filename(".."), None);
    }
}
