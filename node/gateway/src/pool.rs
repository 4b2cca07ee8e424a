//! One service's replicas as the gateway sees them: where each one listens, whether it may
//! take requests, what it holds now and what it has served. A [`Lease`] is one forwarded
//! request: taking it counts the request as outstanding on its replica, finishing or dropping
//! it (when the response body has ended or the client went away) releases it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::connect::Endpoint;
use crate::route::{self, Candidate, Choice};

/// Most latency samples kept per service (the newest); [`Pool::load`] reads those within its
/// window.
const LATENCY_SAMPLES: usize = 8192;

/// Where one replica answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replica {
    /// Stable name within the service: the provider's key hash (hex) and the replica's number,
    /// or any unique label.
    pub id: String,
    /// Where it answers: its HTTP address (cluster address and `serve.port`), or its
    /// provider's node over libp2p.
    pub endpoint: Endpoint,
    /// Round-trip time to the replica's node measured by the p2p layer; absent until known,
    /// in which case the health probes' own round trip stands in.
    pub rtt: Option<Duration>,
}

/// Whether a replica may take requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Added, has not yet passed a health check: never routed to.
    Starting,
    /// Passed its last health check, and no request has failed to reach it since.
    Healthy,
    /// Failed a health check or could not be reached by a request: out of rotation until a
    /// check passes again.
    Failing,
}

/// What a replica has served through this gateway: the per-request side of the bill
/// (DESIGN §3: receipts carry GPU time; these counts let the bill be read per request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Requests answered (any status the replica sent).
    pub requests: u64,
    /// Requests that did not reach the replica or broke off before their response ended.
    pub failed: u64,
    /// Request body bytes sent to it.
    pub bytes_in: u64,
    /// Response body bytes received from it and passed on.
    pub bytes_out: u64,
}

/// A replica's state, as `job status` and the console show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicaView {
    /// The replica.
    pub replica: Replica,
    /// Its health.
    pub health: Health,
    /// Requests outstanding now.
    pub outstanding: u32,
    /// What it has served.
    pub usage: Usage,
    /// Smoothed round trip of its health probes, ms (µs precision).
    pub probe_rtt_ms: Option<f64>,
}

/// A service's load over a recent window: what the autoscaler reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Load {
    /// Replicas that may take requests.
    pub healthy: u32,
    /// Replicas in the pool, in any state.
    pub replicas: u32,
    /// Requests outstanding now, over all replicas.
    pub in_flight: u32,
    /// Responses whose head arrived in the window, per second.
    pub requests_per_s: f64,
    /// Median time to the response head in the window, ms; `None` without samples.
    pub p50_ms: Option<f64>,
    /// 90th percentile of the same, ms.
    pub p90_ms: Option<f64>,
}

#[derive(Debug)]
struct Slot {
    replica: Replica,
    health: Health,
    outstanding: u32,
    usage: Usage,
    probe_rtt: Option<Duration>,
    /// Since when it has not been healthy (added, or failing since).
    unhealthy_since: Option<Instant>,
    /// Whether it has ever passed a health check.
    ever_healthy: bool,
}

impl Slot {
    fn rtt(&self) -> Duration {
        self.replica
            .rtt
            .or(self.probe_rtt)
            .unwrap_or(Duration::from_secs(1))
    }
}

/// The replicas of one service.
#[derive(Debug)]
pub struct Pool {
    slots: Mutex<Vec<Slot>>,
    latencies: Mutex<VecDeque<(Instant, Duration)>>,
    limit: u32,
}

/// The pool's answer when no replica can take a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every healthy replica holds its limit.
    AllFull,
    /// No untried replica is healthy.
    NoneHealthy,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these counters half-written in a way that
    // matters more than losing the gateway: keep serving.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Pool {
    /// An empty pool whose replicas each take at most `max_in_flight` requests at once
    /// (`serve.max_in_flight_per_replica`).
    pub fn new(max_in_flight: u32) -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::new(Vec::new()),
            latencies: Mutex::new(VecDeque::with_capacity(LATENCY_SAMPLES)),
            limit: max_in_flight.max(1),
        })
    }

    /// Adds a replica in [`Health::Starting`] (it takes requests once a health check passes),
    /// or updates the address and RTT of the one with the same id, keeping its state.
    pub fn add(&self, replica: Replica) {
        let mut slots = lock(&self.slots);
        match slots.iter_mut().find(|s| s.replica.id == replica.id) {
            Some(slot) => slot.replica = replica,
            None => slots.push(Slot {
                replica,
                health: Health::Starting,
                outstanding: 0,
                usage: Usage::default(),
                probe_rtt: None,
                unhealthy_since: Some(Instant::now()),
                ever_healthy: false,
            }),
        }
    }

    /// Takes a replica out of the pool (released, or its provider left); requests it holds
    /// finish, nothing new reaches it. Returns its last view.
    pub fn remove(&self, id: &str) -> Option<ReplicaView> {
        let mut slots = lock(&self.slots);
        let at = slots.iter().position(|s| s.replica.id == id)?;
        let slot = slots.remove(at);
        Some(view(&slot))
    }

    /// The replicas, for the health prober.
    pub fn replicas(&self) -> Vec<Replica> {
        lock(&self.slots)
            .iter()
            .map(|s| s.replica.clone())
            .collect()
    }

    /// Every replica's state, in the order they were added.
    pub fn views(&self) -> Vec<ReplicaView> {
        lock(&self.slots).iter().map(view).collect()
    }

    /// Records a health check of `id`: passed (with its round trip) or failed (with why).
    pub fn record_probe(&self, id: &str, passed: Result<Duration, String>) {
        let mut slots = lock(&self.slots);
        let Some(slot) = slots.iter_mut().find(|s| s.replica.id == id) else {
            return;
        };
        match passed {
            Ok(rtt) => {
                if slot.health != Health::Healthy {
                    tracing::info!(replica = %id, "replica passed its health check: in rotation");
                }
                slot.health = Health::Healthy;
                slot.unhealthy_since = None;
                slot.ever_healthy = true;
                // Exponentially smoothed (weight 1/4 to the new sample), like TCP's SRTT.
                slot.probe_rtt = Some(match slot.probe_rtt {
                    Some(old) => (old * 3 + rtt) / 4,
                    None => rtt,
                });
            }
            Err(reason) => {
                if slot.health == Health::Healthy {
                    tracing::warn!(replica = %id, %reason, "replica failed its health check: out of rotation");
                } else if slot.health == Health::Starting {
                    tracing::debug!(replica = %id, %reason, "replica not healthy yet");
                }
                slot.health = Health::Failing;
                slot.unhealthy_since.get_or_insert_with(Instant::now);
            }
        }
    }

    /// Takes a lease on the replica [`route::choose`] picks, skipping the ids in `tried`.
    ///
    /// # Errors
    /// [`Refused`] when no replica can take the request.
    pub fn lease(self: &Arc<Self>, tried: &[String]) -> Result<Lease, Refused> {
        let mut slots = lock(&self.slots);
        let candidates: Vec<Candidate> = slots
            .iter()
            .map(|s| Candidate {
                healthy: s.health == Health::Healthy,
                outstanding: s.outstanding,
                rtt: s.rtt(),
            })
            .collect();
        let tried: Vec<usize> = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| tried.contains(&s.replica.id))
            .map(|(i, _)| i)
            .collect();
        match route::choose(&candidates, &tried, self.limit) {
            Choice::Replica(i) => {
                let slot = &mut slots[i];
                slot.outstanding += 1;
                Ok(Lease {
                    pool: Arc::clone(self),
                    id: slot.replica.id.clone(),
                    endpoint: slot.replica.endpoint,
                    started: Instant::now(),
                    bytes_in: 0,
                    bytes_out: 0,
                    answered: false,
                    done: false,
                })
            }
            Choice::AllFull => Err(Refused::AllFull),
            Choice::NoneHealthy => Err(Refused::NoneHealthy),
        }
    }

    /// The replicas given up as lost: failing (out of rotation after having served) for at
    /// least `failing`, or never healthy since they were added for at least `starting` (a
    /// model may take a while to load).
    pub fn lost(&self, failing: Duration, starting: Duration) -> Vec<String> {
        let now = Instant::now();
        lock(&self.slots)
            .iter()
            .filter(|s| {
                let limit = match s.health {
                    Health::Healthy => return false,
                    Health::Failing if s.ever_healthy => failing,
                    _ => starting,
                };
                s.unhealthy_since
                    .is_some_and(|since| now.duration_since(since) >= limit)
            })
            .map(|s| s.replica.id.clone())
            .collect()
    }

    /// The load over the last `window`.
    pub fn load(&self, window: Duration) -> Load {
        let (healthy, replicas, in_flight) = {
            let slots = lock(&self.slots);
            (
                slots.iter().filter(|s| s.health == Health::Healthy).count() as u32,
                slots.len() as u32,
                slots.iter().map(|s| s.outstanding).sum(),
            )
        };
        let now = Instant::now();
        let mut recent: Vec<Duration> = lock(&self.latencies)
            .iter()
            .filter(|(at, _)| now.duration_since(*at) <= window)
            .map(|(_, d)| *d)
            .collect();
        recent.sort_unstable();
        let pct = |p: f64| -> Option<f64> {
            let last = recent.len().checked_sub(1)?;
            // Nearest rank: the smallest sample with at least p of them at or below it.
            let rank = ((p * recent.len() as f64).ceil() as usize).clamp(1, last + 1) - 1;
            Some(recent[rank].as_secs_f64() * 1e3)
        };
        Load {
            healthy,
            replicas,
            in_flight,
            requests_per_s: recent.len() as f64 / window.as_secs_f64().max(1e-3),
            p50_ms: pct(0.5),
            p90_ms: pct(0.9),
        }
    }

    fn mark_unreachable(&self, id: &str) {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.iter_mut().find(|s| s.replica.id == id)
            && slot.health == Health::Healthy
        {
            tracing::warn!(replica = %id, "request could not reach the replica: out of rotation until its next health check passes");
            slot.health = Health::Failing;
            slot.unhealthy_since.get_or_insert_with(Instant::now);
        }
    }

    fn release(&self, lease: &Lease) {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.iter_mut().find(|s| s.replica.id == lease.id) {
            slot.outstanding = slot.outstanding.saturating_sub(1);
            slot.usage.bytes_in += lease.bytes_in;
            slot.usage.bytes_out += lease.bytes_out;
            if lease.answered && lease.done {
                slot.usage.requests += 1;
            } else {
                slot.usage.failed += 1;
            }
        }
    }
}

fn view(s: &Slot) -> ReplicaView {
    ReplicaView {
        replica: s.replica.clone(),
        health: s.health,
        outstanding: s.outstanding,
        usage: s.usage,
        probe_rtt_ms: s.probe_rtt.map(|d| d.as_secs_f64() * 1e3),
    }
}

/// One request forwarded to one replica; counted as outstanding there until dropped.
#[derive(Debug)]
pub struct Lease {
    pool: Arc<Pool>,
    id: String,
    endpoint: Endpoint,
    started: Instant,
    bytes_in: u64,
    bytes_out: u64,
    answered: bool,
    done: bool,
}

impl Lease {
    /// The replica's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the replica answers.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The request body was sent: `bytes` of it.
    pub fn sent(&mut self, bytes: u64) {
        self.bytes_in = bytes;
    }

    /// The response head arrived: its latency joins the service's window.
    pub fn answered(&mut self) {
        self.answered = true;
        let mut window = lock(&self.pool.latencies);
        if window.len() == LATENCY_SAMPLES {
            window.pop_front();
        }
        window.push_back((Instant::now(), self.started.elapsed()));
    }

    /// `bytes` more of the response body were passed on.
    pub fn received(&mut self, bytes: u64) {
        self.bytes_out += bytes;
    }

    /// The response body ended in full.
    pub fn done(&mut self) {
        self.done = true;
    }

    /// The request never reached the replica (refused, reset, unreachable): out of rotation
    /// until its next health check passes.
    pub fn unreachable(&self) {
        self.pool.mark_unreachable(&self.id);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.release(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_lost_after_its_own_grace_failing_or_starting() {
        let pool = Pool::new(4);
        pool.add(Replica {
            id: "r".into(),
            endpoint: Endpoint::Tcp("127.0.0.1:9".parse().expect("addr")),
            rtt: None,
        });
        let (none, long) = (Duration::ZERO, Duration::from_secs(3600));
        // Never healthy yet: the starting grace applies.
        assert_eq!(pool.lost(none, long), Vec::<String>::new());
        assert_eq!(pool.lost(long, none), vec!["r".to_string()]);
        // Healthy: never lost.
        pool.record_probe("r", Ok(Duration::from_millis(1)));
        assert!(pool.lost(none, none).is_empty());
        // Failing after it served: the failing grace applies.
        pool.record_probe("r", Err("refused".into()));
        assert_eq!(pool.lost(none, long), vec!["r".to_string()]);
        assert!(pool.lost(long, none).is_empty());
        assert_eq!(pool.views()[0].health, Health::Failing);
    }
}
