//! The autoscaler's rule: from a service's [`Load`] sampled over time, when to add a replica
//! and when to release one (`scale` in the spec; the orchestrator's node acts on the answer
//! by assigning one more provider under the service's escrow, or by letting one claim and
//! leave).
//!
//! - Fewer replicas than `replicas.min` (a replica failed or its provider left): add one at
//!   once — `min` is the hot standby and is restored without waiting.
//! - Load above target continuously for `up_after_s` and fewer than `replicas.max`: add one.
//!   Above target means more than `target_in_flight_per_replica` requests in flight per
//!   healthy replica, or a p90 above `target_p90_ms`.
//! - Load low enough that one replica fewer would still be at or under target, continuously
//!   for `down_after_s`, and more than `replicas.min`: release one.
//! - After a change, both clocks start again (the new replica must be seen before the next
//!   decision).

use std::time::{Duration, Instant};

use ganglion_market::service::{Replicas, Scale, ScaleTarget};

use crate::pool::Load;

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep the replicas as they are.
    Hold,
    /// Match and assign one more replica.
    Add,
    /// Release one replica (its provider claims and leaves).
    Release,
}

/// The autoscaler of one service.
#[derive(Debug, Clone)]
pub struct Autoscaler {
    replicas: Replicas,
    target: Option<ScaleTarget>,
    up_after: Duration,
    down_after: Duration,
    above_since: Option<Instant>,
    below_since: Option<Instant>,
}

impl Autoscaler {
    /// For a service's `replicas` and `scale` (`None`: a fixed count of `replicas.min`).
    pub fn new(replicas: Replicas, scale: Option<&Scale>) -> Self {
        Self {
            replicas,
            target: scale.and_then(Scale::target),
            up_after: Duration::from_secs(scale.map_or(1, |s| u64::from(s.up_after_s))),
            down_after: Duration::from_secs(scale.map_or(1, |s| u64::from(s.down_after_s))),
            above_since: None,
            below_since: None,
        }
    }

    /// The decision at `now` for `load`, where `wanted` is the number of replicas running or
    /// being started (those the gateway routes to and those assigned but not yet healthy).
    pub fn decide(&mut self, now: Instant, load: &Load, wanted: u32) -> Decision {
        if wanted < self.replicas.min {
            return self.changed(Decision::Add);
        }
        let Some(target) = self.target else {
            return Decision::Hold;
        };
        let healthy = load.healthy.max(1);
        let (above, below) = match target {
            ScaleTarget::InFlightPerReplica(per) => {
                let per = u64::from(per);
                let in_flight = u64::from(load.in_flight);
                (
                    in_flight > per * u64::from(healthy),
                    in_flight <= per * u64::from(healthy.saturating_sub(1)),
                )
            }
            ScaleTarget::P90Ms(ms) => match load.p90_ms {
                Some(p90) => {
                    let ms = f64::from(ms);
                    // Latency does not scale down linearly with replicas; below half the
                    // target stands for "one fewer would still meet it".
                    (p90 > ms, p90 <= ms / 2.0)
                }
                None => (false, true),
            },
        };
        if above {
            self.below_since = None;
            let since = *self.above_since.get_or_insert(now);
            if now.duration_since(since) >= self.up_after && wanted < self.replicas.max {
                return self.changed(Decision::Add);
            }
        } else if below {
            self.above_since = None;
            let since = *self.below_since.get_or_insert(now);
            if now.duration_since(since) >= self.down_after && wanted > self.replicas.min {
                return self.changed(Decision::Release);
            }
        } else {
            self.above_since = None;
            self.below_since = None;
        }
        Decision::Hold
    }

    fn changed(&mut self, d: Decision) -> Decision {
        self.above_since = None;
        self.below_since = None;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(healthy: u32, in_flight: u32) -> Load {
        Load {
            healthy,
            replicas: healthy,
            in_flight,
            requests_per_s: 0.0,
            p50_ms: None,
            p90_ms: None,
        }
    }

    fn scaler() -> Autoscaler {
        Autoscaler::new(
            Replicas {
                min: 2,
                max: 3,
                share_providers: false,
            },
            Some(&Scale {
                target_in_flight_per_replica: Some(4),
                target_p90_ms: None,
                up_after_s: 10,
                down_after_s: 30,
            }),
        )
    }

    #[test]
    fn load_above_target_adds_one_after_up_after_s_and_never_beyond_max() {
        let mut s = scaler();
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        assert_eq!(s.decide(at(0), &load(2, 9), 2), Decision::Hold);
        assert_eq!(s.decide(at(9), &load(2, 9), 2), Decision::Hold);
        assert_eq!(s.decide(at(10), &load(2, 9), 2), Decision::Add);
        // The clock starts again; at max nothing more is added however long the load stays.
        assert_eq!(s.decide(at(11), &load(3, 40), 3), Decision::Hold);
        assert_eq!(s.decide(at(100), &load(3, 40), 3), Decision::Hold);
    }

    #[test]
    fn a_dip_restarts_the_clock() {
        let mut s = scaler();
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        assert_eq!(s.decide(at(0), &load(2, 9), 2), Decision::Hold);
        // At target exactly (8 = 4 × 2): neither above nor low enough to release.
        assert_eq!(s.decide(at(5), &load(2, 8), 2), Decision::Hold);
        assert_eq!(s.decide(at(12), &load(2, 9), 2), Decision::Hold);
        assert_eq!(s.decide(at(22), &load(2, 9), 2), Decision::Add);
    }

    #[test]
    fn low_load_releases_one_after_down_after_s_and_keeps_min() {
        let mut s = scaler();
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        // 8 in flight over 3: one fewer would hold 4 each, at target: low enough.
        assert_eq!(s.decide(at(0), &load(3, 8), 3), Decision::Hold);
        assert_eq!(s.decide(at(29), &load(3, 8), 3), Decision::Hold);
        assert_eq!(s.decide(at(30), &load(3, 8), 3), Decision::Release);
        assert_eq!(s.decide(at(31), &load(2, 0), 2), Decision::Hold);
        assert_eq!(s.decide(at(500), &load(2, 0), 2), Decision::Hold);
    }

    #[test]
    fn a_lost_replica_below_min_is_replaced_at_once() {
        let mut s = scaler();
        let now = Instant::now();
        assert_eq!(s.decide(now, &load(1, 0), 1), Decision::Add);
        // Without `scale` the count is fixed at min, and min is still restored.
        let mut fixed = Autoscaler::new(
            Replicas {
                min: 2,
                max: 2,
                share_providers: false,
            },
            None,
        );
        assert_eq!(fixed.decide(now, &load(2, 100), 2), Decision::Hold);
        assert_eq!(fixed.decide(now, &load(1, 100), 1), Decision::Add);
    }

    #[test]
    fn a_p90_target_scales_on_latency() {
        let mut s = Autoscaler::new(
            Replicas {
                min: 1,
                max: 4,
                share_providers: false,
            },
            Some(&Scale {
                target_in_flight_per_replica: None,
                target_p90_ms: Some(200),
                up_after_s: 1,
                down_after_s: 1,
            }),
        );
        let t0 = Instant::now();
        let slow = Load {
            p90_ms: Some(450.0),
            ..load(1, 3)
        };
        let fast = Load {
            p90_ms: Some(40.0),
            ..load(2, 3)
        };
        assert_eq!(s.decide(t0, &slow, 1), Decision::Hold);
        assert_eq!(
            s.decide(t0 + Duration::from_secs(1), &slow, 1),
            Decision::Add
        );
        assert_eq!(
            s.decide(t0 + Duration::from_secs(2), &fast, 2),
            Decision::Hold
        );
        assert_eq!(
            s.decide(t0 + Duration::from_secs(3), &fast, 2),
            Decision::Release
        );
    }
}

/// Whoever starts and stops a service's replicas for the [`Controller`]: the orchestrator's
/// engine (assign one more provider under the service's escrow, or let one claim and leave),
/// or in tests a local container engine.
pub trait Fleet: Send + Sync + 'static {
    /// Replicas running or being started (what [`Autoscaler::decide`] calls `wanted`).
    fn wanted(&self) -> u32;
    /// Starts one more replica and adds it to the pool (it takes requests once its health check
    /// passes). Returns once it is asked for, not when it is up.
    ///
    /// # Errors
    /// Why it could not be started, in words (logged; the controller asks again on a later
    /// tick while the rule still says so).
    fn add(&self) -> BoxFuture<'_, Result<(), String>>;
    /// Takes one replica out of the pool and stops it (the fleet chooses which).
    ///
    /// # Errors
    /// Why not, in words (logged).
    fn release(&self) -> BoxFuture<'_, Result<(), String>>;
    /// The replica `id` has been unhealthy too long ([`Controller::replace_failing_after`],
    /// [`Controller::replace_starting_after`]): it is lost (its container died, its provider
    /// left, it never came up). The fleet takes it out of the pool and stops
    /// counting it in [`Fleet::wanted`] (its provider is paid for its receipted time only);
    /// the rule then replaces it when fewer than `replicas.min` are left.
    ///
    /// # Errors
    /// Why not, in words (logged).
    fn lost(&self, id: &str) -> BoxFuture<'_, Result<(), String>>;
}

/// A boxed future, as [`Fleet`]'s methods return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The control loop: every `tick` it hands replicas unhealthy too long to the [`Fleet`] as
/// lost, reads the pool's load over `window`, asks the [`Autoscaler`] and tells
/// the fleet (so a lost replica below `replicas.min` is replaced at once).
#[derive(Debug, Clone)]
pub struct Controller {
    /// How often the load is read (default 1 s).
    pub tick: Duration,
    /// The window the load is read over (default 10 s; p90 targets need one).
    pub window: Duration,
    /// How long a replica that served may stay out of rotation before it is given up as lost
    /// and replaced (default 15 s: a few health intervals, so a passing hiccup is not a loss).
    pub replace_failing_after: Duration,
    /// How long a new replica may take to pass its first health check before it is given up
    /// (default 120 s: a model's load, an image's first start).
    pub replace_starting_after: Duration,
}

impl Default for Controller {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(1),
            window: Duration::from_secs(10),
            replace_failing_after: Duration::from_secs(15),
            replace_starting_after: Duration::from_secs(120),
        }
    }
}

impl Controller {
    /// Runs the loop for `pool` until `stop` is cancelled.
    pub fn spawn(
        self,
        pool: std::sync::Arc<crate::pool::Pool>,
        mut scaler: Autoscaler,
        fleet: std::sync::Arc<dyn Fleet>,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(self.tick);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                for id in pool.lost(self.replace_failing_after, self.replace_starting_after) {
                    match fleet.lost(&id).await {
                        Ok(()) => {
                            tracing::warn!(replica = %id, "autoscaler: replica lost (unhealthy too long): out of the service")
                        }
                        Err(e) => {
                            tracing::warn!(replica = %id, error = %e, "autoscaler: the fleet could not drop a lost replica")
                        }
                    }
                }
                let load = pool.load(self.window);
                let wanted = fleet.wanted();
                let outcome = match scaler.decide(Instant::now(), &load, wanted) {
                    Decision::Hold => continue,
                    Decision::Add => fleet.add().await.map(|()| "added a replica"),
                    Decision::Release => fleet.release().await.map(|()| "released a replica"),
                };
                match outcome {
                    Ok(what) => tracing::info!(
                        wanted_before = wanted,
                        wanted = fleet.wanted(),
                        healthy = load.healthy,
                        in_flight = load.in_flight,
                        p90_ms = load.p90_ms,
                        "autoscaler: {what}"
                    ),
                    Err(e) => tracing::warn!(error = %e, "autoscaler: the fleet refused"),
                }
            }
        })
    }
}
