//! Health checks: every `serve.health.interval_s` each replica of a service is sent
//! `GET serve.health.path`; a 2xx answer within `timeout_s` puts it in rotation, anything else
//! takes it out. A replica that stops answering is therefore out of rotation within one
//! interval plus one timeout, at most two intervals (the timeout is at most the interval), and
//! sooner when a forwarded request cannot reach it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::connect::Upstream;
use crate::pool::{Pool, Replica};

/// A service's health check in the gateway's units.
#[derive(Debug, Clone)]
pub struct Check {
    /// Path probed.
    pub path: String,
    /// Time between rounds.
    pub interval: Duration,
    /// Time one probe may take.
    pub timeout: Duration,
}

impl Check {
    /// From a spec's `serve.health`.
    pub fn from_spec(h: &ganglion_market::service::HealthCheck) -> Self {
        Self {
            path: h.path.clone(),
            interval: Duration::from_secs(u64::from(h.interval_s.max(1))),
            timeout: Duration::from_secs(u64::from(h.timeout_s.max(1))),
        }
    }
}

/// Probes `replica` once: its round trip when it answered 2xx in time, else why not.
///
/// # Errors
/// The reason in words: no answer in time, the connection failed, another status.
pub async fn probe(
    upstream: &Upstream,
    replica: &Replica,
    check: &Check,
) -> Result<Duration, String> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(upstream.url(&replica.endpoint, &check.path))
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let answered = tokio::time::timeout(check.timeout, async {
        let response = upstream
            .client()
            .request(request)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status();
        // Read the body so the connection can be reused.
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("answer broke off: {e}"))?;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("answered {status}"))
        }
    })
    .await;
    match answered {
        Ok(Ok(())) => Ok(started.elapsed()),
        Ok(Err(reason)) => Err(reason),
        Err(_) => Err(format!("no answer within {:?}", check.timeout)),
    }
}

/// Probes every replica of `pool` each interval until `stop` is cancelled (the first round at
/// once).
pub fn spawn_prober(
    pool: Arc<Pool>,
    upstream: Upstream,
    check: Check,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(check.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let mut round = JoinSet::new();
            for replica in pool.replicas() {
                let (upstream, check) = (upstream.clone(), check.clone());
                round.spawn(async move {
                    let passed = probe(&upstream, &replica, &check).await;
                    (replica.id, passed)
                });
            }
            while let Some(done) = round.join_next().await {
                if let Ok((id, passed)) = done {
                    pool.record_probe(&id, passed);
                }
            }
        }
    })
}
