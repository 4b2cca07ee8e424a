//! `--workload service`: an inference service through the whole marketplace (issue #24). The
//! embedding model (`scripts/build-embed-image.sh`, all-MiniLM-L6-v2 on CPU) as a
//! `kind: service` job of two to three replicas of one GPU each, routed by the orchestrator's
//! gateway (`[gateway] listen`), on the demo's four providers (the fourth is started for this
//! workload only: the escrow takes a provider once, so a replacement after a scale-up and a
//! release needs one never used). The demo drives it through [`Driver`]: two replicas answer
//! from the assign; load from the demo process brings a third (the orchestrator's node
//! matches, asks and adds a provider by a `Rescale`); idle, the newest is released (it stops
//! and claims) and two are left; the provider of one of them is SIGKILLed, its replica given
//! up and replaced by the provider never used yet, which brings the service back to two
//! replicas; `job stop` ends the service; the killed provider, with no claim, is slashed when
//! the job expires ([`SERVICE_DEADLINE_MS`] after the submission).

use std::net::SocketAddr;
use std::time::Instant;

use ganglion_market::Ensemble;
use ganglion_rpc::types::JobStatus;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use super::DemoError;

/// The service job's deadline, ms after the submission: the sequence takes about a minute
/// (46 s from the submission to `job stop` on this project's machine).
pub const SERVICE_DEADLINE_MS: u64 = 110_000;

/// The service's replicas: `replicas.min` (at the assign, after idle, after the failover).
pub const MIN_REPLICAS: usize = 2;
/// The service's replicas under load: `replicas.max`.
pub const MAX_REPLICAS: usize = 3;

/// Clients the demo's load runs at once (the spec's target is one request in flight per
/// replica: six keep it above target with three replicas).
const CLIENTS: usize = 6;

/// The embedding image (built when absent: about half a minute after the torch image).
///
/// # Errors
/// [`DemoError::Image`] with the build's output.
pub fn image() -> Result<String, DemoError> {
    super::cluster::built_image("build-embed-image.sh")
}

/// The service spec: 2–3 replicas of one GPU, one request in flight per replica as the
/// target (up after 2 s above, down after 5 s below), health checked every second, at
/// `price` per GPU-hour, budget for three replicas over the whole window (the validator's
/// G6 holds at the assign and at every rescale: the unclaimed windows never add up to more
/// than three whole ones).
///
/// # Errors
/// Never for the fixed spec; typed for the parser's sake.
pub fn ensemble(image: &str, price: u64, deadline_ms: u64) -> Result<Ensemble, DemoError> {
    let max_s = super::max_duration_s(SERVICE_DEADLINE_MS / 1000, deadline_ms);
    let json = serde_json::json!({
        "kind": "service",
        "image": { "local": image },
        "command": ["python3", "/workloads/embed_server.py"],
        "env": { "PORT": "8000" },
        "gpus": { "count": 1 },
        "serve": {
            "port": 8000,
            "protocol": "http",
            "health": { "path": "/health", "interval_s": 1, "timeout_s": 1 },
            "retry_post": true,
        },
        "replicas": { "min": MIN_REPLICAS, "max": MAX_REPLICAS },
        "scale": { "target_in_flight_per_replica": 1, "up_after_s": 2, "down_after_s": 5 },
        "limits": { "max_duration_s": max_s, "max_rate_ntx_per_gpu_hour": price },
        // Three replicas at `price` for the whole window, rounded up.
        "budget_ntx": MAX_REPLICAS as u64 * price * (SERVICE_DEADLINE_MS / 1000 + 10) / 3600 + 1,
        "deadline_ms": deadline_ms,
    });
    Ensemble::from_json_str(&json.to_string()).map_err(DemoError::chain)
}

/// What the service demo measured, and what it saw happen.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ServiceNumbers {
    /// The load began (two replicas answering) → the third replica healthy at the gateway,
    /// seconds.
    pub scale_up_s: Option<f64>,
    /// The load ended → back to two replicas (the third released and out of the gateway's
    /// rotation), seconds.
    pub scale_down_s: Option<f64>,
    /// The provider killed → its replacement replica answering a request through the gateway
    /// (two replicas again), seconds.
    pub failover_s: Option<f64>,
    /// Requests answered `200` through the gateway.
    pub requests_ok: u64,
    /// Requests answered otherwise.
    pub requests_failed: u64,
    /// Requests the replicas answered as the orchestrator signed them with its receipts
    /// (each replica's usage up to its last receipt; `job status`'s `service.requests`).
    pub requests_signed: u64,
    /// What the service cost per 1 000 of those, NTX base units.
    pub cost_per_1k_requests: Option<u64>,
    /// Replicas healthy at the gateway at each step reached, in order: answering after the
    /// assign, scaled up, scaled down, recovered after the failover (`[2, 3, 2, 2]` for the
    /// whole sequence).
    pub replicas: Vec<usize>,
    /// The providers (demo names) holding an assignment before the kill, in assignment
    /// order: the assign's two and the scale-up's third.
    pub providers_before_kill: Vec<String>,
    /// The provider whose node was killed.
    pub killed: Option<String>,
    /// The provider whose replica replaced the killed one's.
    pub replacement: Option<String>,
}

/// Where the sequence stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the assign's two replicas to answer.
    Assigned,
    /// Load running, waiting for the third replica.
    Loaded,
    /// Idle, waiting for the newest replica's release.
    Idle,
    /// Provider killed, waiting for the replacement.
    Replacing,
    /// The replacement (this assignment) answers; waiting for its first receipt, so that it
    /// is paid its receipted time.
    Replaced(u64),
    /// `job stop` sent.
    Stopped,
}

/// Drives the service through its sequence, one [`Driver::tick`] per poll of the demo's loop.
pub struct Driver {
    gateway: SocketAddr,
    name: String,
    /// (payment key hash hex, demo name) of each provider.
    providers: Vec<(String, String)>,
    phase: Phase,
    since: Instant,
    load: Option<(CancellationToken, tokio::task::JoinHandle<(u64, u64)>)>,
    /// The replica ids healthy before the kill (the replacement is a new one).
    before_kill: Vec<String>,
    /// The assignment indices running before the kill.
    running_before_kill: Vec<u64>,
    /// What it measured.
    pub numbers: ServiceNumbers,
}

/// What a tick asks the demo's loop to do.
pub enum Action {
    /// Say this in the timeline.
    Say(String),
    /// Kill the provider whose key hash (hex) this is, then say the message.
    Kill(String, String),
    /// Stop the job (`job_stop`), then say the message.
    Stop(String),
}

impl Driver {
    /// A driver of the service `job_hex` routed by the gateway at `gateway`; `providers`
    /// names the demo's providers by payment key hash (hex) for the timeline and the summary.
    pub fn new(gateway: SocketAddr, job_hex: &str, providers: Vec<(String, String)>) -> Self {
        Self {
            gateway,
            name: job_hex.get(..16).unwrap_or(job_hex).to_string(),
            providers,
            phase: Phase::Assigned,
            since: Instant::now(),
            load: None,
            before_kill: Vec::new(),
            running_before_kill: Vec::new(),
            numbers: ServiceNumbers::default(),
        }
    }

    /// The demo name of the provider whose key hash is `key_hash`, else the hash.
    fn name_of(&self, key_hash: &str) -> String {
        self.providers
            .iter()
            .find(|(k, _)| k == key_hash)
            .map_or_else(|| key_hash.to_string(), |(_, n)| n.clone())
    }

    /// The next step of the sequence given the orchestrator's record `orch` (its service's
    /// running assignments and their providers), if one is due.
    pub async fn tick(&mut self, orch: Option<&JobStatus>) -> Option<Action> {
        let healthy = healthy(self.gateway, &self.name).await;
        let secs = || self.since.elapsed().as_secs_f64();
        match self.phase {
            Phase::Assigned if healthy.len() == MIN_REPLICAS => {
                let (status, _) = call(self.gateway, "POST", &self.path(), BODY).await;
                if status != 200 {
                    self.numbers.requests_failed += 1;
                    return None;
                }
                self.numbers.requests_ok += 1;
                let stop = CancellationToken::new();
                self.load = Some((stop.clone(), drive(self.gateway, self.path(), stop)));
                self.numbers.replicas.push(healthy.len());
                self.phase = Phase::Loaded;
                self.since = Instant::now();
                Some(Action::Say(format!(
                    "service answering at http://{}/{}/ ({MIN_REPLICAS} replicas from the \
                     assign); {CLIENTS} clients start posting embeddings",
                    self.gateway, self.name
                )))
            }
            Phase::Loaded if healthy.len() == MAX_REPLICAS => {
                let s = secs();
                self.numbers.scale_up_s = Some(s);
                self.numbers.replicas.push(healthy.len());
                if let Some((stop, task)) = self.load.take() {
                    stop.cancel();
                    let (ok, failed) = task.await.unwrap_or((0, 1));
                    self.numbers.requests_ok += ok;
                    self.numbers.requests_failed += failed;
                }
                self.phase = Phase::Idle;
                self.since = Instant::now();
                Some(Action::Say(format!(
                    "load above target: a third replica answers {s:.1} s after the load began \
                     (a Rescale added a provider); load stopped ({} requests answered 200 so far, \
                     {} not)",
                    self.numbers.requests_ok, self.numbers.requests_failed
                )))
            }
            Phase::Idle if healthy.len() == MIN_REPLICAS => {
                let service = orch?.service.as_ref()?;
                // The newest released on chain too: two assignments run.
                if service.running.len() != MIN_REPLICAS {
                    return None;
                }
                let s = secs();
                let provider_of = |i: u64| {
                    orch?
                        .nodes
                        .get(usize::try_from(i).ok()?)
                        .map(|n| n.provider.clone())
                };
                // The oldest of the two left: an assign's replica.
                let victim = provider_of(service.running[0])?;
                self.numbers.scale_down_s = Some(s);
                self.numbers.replicas.push(healthy.len());
                self.numbers.providers_before_kill = orch?
                    .nodes
                    .iter()
                    .map(|n| self.name_of(&n.provider))
                    .collect();
                self.numbers.killed = Some(self.name_of(&victim));
                self.running_before_kill = service.running.clone();
                self.before_kill = healthy;
                self.phase = Phase::Replacing;
                self.since = Instant::now();
                Some(Action::Kill(
                    victim,
                    format!(
                        "idle: back to {MIN_REPLICAS} replicas {s:.1} s after the load stopped \
                         (the newest released: it stops and claims); now the node of {}, \
                         serving one of the two, is killed",
                        self.numbers.killed.as_deref().unwrap_or_default()
                    ),
                ))
            }
            Phase::Replacing
                if healthy.len() == MIN_REPLICAS
                    && healthy.iter().any(|id| !self.before_kill.contains(id)) =>
            {
                // The replacement: the running assignment that did not run before the kill.
                let service = orch?.service.as_ref()?;
                let &[added] = &service
                    .running
                    .iter()
                    .copied()
                    .filter(|i| !self.running_before_kill.contains(i))
                    .collect::<Vec<_>>()[..]
                else {
                    return None;
                };
                let replacement = orch?
                    .nodes
                    .get(usize::try_from(added).ok()?)
                    .map(|n| self.name_of(&n.provider))?;
                let (status, _) = call(self.gateway, "POST", &self.path(), BODY).await;
                if status != 200 {
                    self.numbers.requests_failed += 1;
                    return None;
                }
                let s = secs();
                self.numbers.failover_s = Some(s);
                self.numbers.requests_ok += 1;
                self.numbers.replicas.push(healthy.len());
                self.phase = Phase::Replaced(added);
                let fresh = if self.numbers.providers_before_kill.contains(&replacement) {
                    "a provider already used"
                } else {
                    "the provider never used yet"
                };
                self.numbers.replacement = Some(replacement.clone());
                Some(Action::Say(format!(
                    "failover: {replacement} ({fresh}) replaces the lost replica, answering \
                     {s:.1} s after the kill: {MIN_REPLICAS} replicas again"
                )))
            }
            // Its usage in the orchestrator's record: the replacement's first receipt.
            Phase::Replaced(added)
                if orch?
                    .nodes
                    .get(usize::try_from(added).ok()?)
                    .is_some_and(|n| n.usage.is_some()) =>
            {
                self.phase = Phase::Stopped;
                Some(Action::Stop(
                    "the replacement's first receipt: it is acknowledged (paid its receipted \
                     time); `job stop` ends the service"
                        .to_string(),
                ))
            }
            _ => None,
        }
    }

    /// Whether the sequence reached `job stop`.
    pub fn stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    fn path(&self) -> String {
        format!("/{}/embed", self.name)
    }
}

const BODY: &str = r#"{"texts": ["A man is eating food."]}"#;

/// Clients posting embeddings back to back until `stop`: (answered 200, not).
fn drive(
    addr: SocketAddr,
    path: String,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<(u64, u64)> {
    tokio::spawn(async move {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let (path, stop) = (path.clone(), stop.clone());
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0, 0);
                    while !stop.is_cancelled() {
                        if call(addr, "POST", &path, BODY).await.0 == 200 {
                            ok += 1;
                        } else {
                            failed += 1;
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        let (mut ok, mut failed) = (0, 0);
        for c in clients {
            let (o, f) = c.await.unwrap_or((0, 1));
            ok += o;
            failed += f;
        }
        (ok, failed)
    })
}

/// The replica ids `GET /_gateway/services` shows healthy for `name`.
async fn healthy(addr: SocketAddr, name: &str) -> Vec<String> {
    let (_, body) = call(addr, "GET", "/_gateway/services", "").await;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    v[name]["replicas"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter(|r| r["health"] == "healthy")
                .filter_map(|r| r["replica"]["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One HTTP/1.1 exchange (`Connection: close`): the status (0 when it failed) and the body.
async fn call(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
    let exchange = async {
        let mut tcp = tokio::net::TcpStream::connect(addr).await?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tcp.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        tcp.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let Ok(Ok(raw)) = tokio::time::timeout(std::time::Duration::from_secs(30), exchange).await
    else {
        return (0, Vec::new());
    };
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (0, Vec::new());
    };
    let status = String::from_utf8_lossy(&raw[..split])
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, raw[split + 4..].to_vec())
}
