//! `--workload service`: an inference service through the whole marketplace (issue #24). The
//! embedding model (`scripts/build-embed-image.sh`, all-MiniLM-L6-v2 on CPU) as a
//! `kind: service` job of one to two replicas of one GPU each, routed by the orchestrator's
//! gateway (`[gateway] listen`). The demo drives it through [`Driver`]: one replica answers;
//! load from the demo process brings a second (the orchestrator's node matches, asks and adds
//! a provider by a `Rescale`); idle, the newest is released (it stops and claims); the
//! provider running the replica left is SIGKILLed, its replica given up and replaced by the
//! third provider; `job stop` ends the service; the killed provider, with no claim, is slashed
//! when the job expires ([`SERVICE_DEADLINE_MS`] after the submission).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use ganglion_market::Ensemble;
use ganglion_rpc::types::JobStatus;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use super::DemoError;

/// The service job's deadline, ms after the submission: the sequence takes about a minute.
pub const SERVICE_DEADLINE_MS: u64 = 110_000;

/// Clients the demo's load runs at once (the spec's target is one request in flight per
/// replica).
const CLIENTS: usize = 6;

/// The embedding image (built when absent: about half a minute after the torch image).
///
/// # Errors
/// [`DemoError::Image`] with the build's output.
pub fn image() -> Result<String, DemoError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-embed-image.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| DemoError::Image(format!("{}: {e}", script.display()).into()))?;
    if !out.status.success() {
        return Err(DemoError::Image(
            String::from_utf8_lossy(&out.stderr).into_owned().into(),
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(|l| l.trim().to_string())
        .ok_or_else(|| DemoError::Image("build-embed-image.sh printed no tag".into()))
}

/// The service spec: 1–2 replicas of one GPU, one request in flight per replica as the
/// target (up after 2 s above, down after 5 s below), health checked every second, at
/// `price` per GPU-hour, budget for two replicas over the whole window.
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
        "replicas": { "min": 1, "max": 2 },
        "scale": { "target_in_flight_per_replica": 1, "up_after_s": 2, "down_after_s": 5 },
        "limits": { "max_duration_s": max_s, "max_rate_ntx_per_gpu_hour": price },
        // Two replicas at `price` for the whole window, rounded up.
        "budget_ntx": 2 * price * (SERVICE_DEADLINE_MS / 1000 + 10) / 3600 + 1,
        "deadline_ms": deadline_ms,
    });
    Ensemble::from_json_str(&json.to_string()).map_err(DemoError::chain)
}

/// What the service demo measured.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ServiceNumbers {
    /// The load began → the second replica healthy at the gateway, seconds.
    pub scale_up_s: Option<f64>,
    /// The load ended → back to one replica, seconds.
    pub scale_down_s: Option<f64>,
    /// The provider killed → a replacement replica healthy, seconds.
    pub failover_s: Option<f64>,
    /// Requests answered `200` through the gateway.
    pub requests_ok: u64,
    /// Requests answered otherwise.
    pub requests_failed: u64,
}

/// Where the sequence stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the first replica to answer.
    FirstReplica,
    /// Load running, waiting for the second replica.
    Loaded,
    /// Idle, waiting for the newest replica's release.
    Idle,
    /// Provider killed, waiting for the replacement.
    Replacing,
    /// `job stop` sent.
    Stopped,
}

/// Drives the service through its sequence, one [`Driver::tick`] per poll of the demo's loop.
pub struct Driver {
    gateway: SocketAddr,
    name: String,
    phase: Phase,
    since: Instant,
    load: Option<(CancellationToken, tokio::task::JoinHandle<(u64, u64)>)>,
    /// The replica ids healthy before the kill (the replacement is a new one).
    before_kill: Vec<String>,
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
    /// A driver of the service `job_hex` routed by the gateway at `gateway`.
    pub fn new(gateway: SocketAddr, job_hex: &str) -> Self {
        Self {
            gateway,
            name: job_hex.get(..16).unwrap_or(job_hex).to_string(),
            phase: Phase::FirstReplica,
            since: Instant::now(),
            load: None,
            before_kill: Vec::new(),
            numbers: ServiceNumbers::default(),
        }
    }

    /// The next step of the sequence given the orchestrator's record `orch` (its service's
    /// running assignments and their providers), if one is due.
    pub async fn tick(&mut self, orch: Option<&JobStatus>) -> Option<Action> {
        let healthy = healthy(self.gateway, &self.name).await;
        let secs = || self.since.elapsed().as_secs_f64();
        match self.phase {
            Phase::FirstReplica if healthy.len() == 1 => {
                let (status, _) = call(self.gateway, "POST", &self.path(), BODY).await;
                if status != 200 {
                    return None;
                }
                let stop = CancellationToken::new();
                self.load = Some((stop.clone(), drive(self.gateway, self.path(), stop)));
                self.phase = Phase::Loaded;
                self.since = Instant::now();
                Some(Action::Say(format!(
                    "service answering at http://{}/{}/ (1 replica); {CLIENTS} clients start \
                     posting embeddings",
                    self.gateway, self.name
                )))
            }
            Phase::Loaded if healthy.len() == 2 => {
                let s = secs();
                self.numbers.scale_up_s = Some(s);
                if let Some((stop, task)) = self.load.take() {
                    stop.cancel();
                    let (ok, failed) = task.await.unwrap_or((0, 1));
                    self.numbers.requests_ok += ok;
                    self.numbers.requests_failed += failed;
                }
                self.phase = Phase::Idle;
                self.since = Instant::now();
                Some(Action::Say(format!(
                    "load above target: a second replica answers {s:.1} s after the load began \
                     (a Rescale added a provider); load stopped ({} requests answered 200, \
                     {} not)",
                    self.numbers.requests_ok, self.numbers.requests_failed
                )))
            }
            Phase::Idle if healthy.len() == 1 => {
                let s = secs();
                self.numbers.scale_down_s = Some(s);
                let running = orch?.service.as_ref()?.running.clone();
                let [index] = running[..] else { return None };
                let provider = orch?
                    .nodes
                    .get(usize::try_from(index).ok()?)?
                    .provider
                    .clone();
                self.before_kill = healthy;
                self.phase = Phase::Replacing;
                self.since = Instant::now();
                Some(Action::Kill(
                    provider,
                    format!(
                        "idle: back to one replica {s:.1} s after the load stopped (the newest \
                         released: it stops and claims); now its provider's node is killed"
                    ),
                ))
            }
            Phase::Replacing if healthy.len() == 1 && !self.before_kill.contains(&healthy[0]) => {
                let (status, _) = call(self.gateway, "POST", &self.path(), BODY).await;
                if status != 200 {
                    return None;
                }
                let s = secs();
                self.numbers.failover_s = Some(s);
                self.numbers.requests_ok += 1;
                self.phase = Phase::Stopped;
                Some(Action::Stop(format!(
                    "failover: {} replaces the lost replica, answering {s:.1} s after the kill; \
                     `job stop` ends the service",
                    healthy[0]
                )))
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
