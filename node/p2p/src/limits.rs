//! Per-peer limits on inbound requests: a token bucket over all request-response protocols
//! ([`RateLimiter`]) and, for heartbeats, a cap on the requests waiting for the job engine's
//! answer ([`InFlight`], [`MAX_HEARTBEATS_IN_FLIGHT`]); the streams per protocol and connection
//! ([`MAX_CONCURRENT_STREAMS`]).

use std::collections::HashMap;
use std::time::Instant;

use libp2p::PeerId;
use libp2p::request_response::InboundRequestId;

/// Concurrent inbound + outbound streams per request-response protocol and connection.
pub const MAX_CONCURRENT_STREAMS: usize = 32;
/// Heartbeats one peer may have with the job engine, unanswered, at once. A provider sends one
/// per job per receipt interval and the engine answers in milliseconds, so 8 covers a provider
/// on 8 jobs of one orchestrator whose heartbeats coincide; a flood cannot take more than 8 of
/// the [`INBOUND_CHANNEL`](crate::inbound::INBOUND_CHANNEL) places.
pub const MAX_HEARTBEATS_IN_FLIGHT: usize = 8;

/// A token bucket per peer: `burst` requests at once, refilled at `per_second`.
///
/// Entries are removed when a peer's last connection closes ([`RateLimiter::forget`]), so the
/// map is bounded by the number of connected peers; [`MAX_TRACKED_PEERS`] caps it anyway.
#[derive(Debug)]
pub struct RateLimiter {
    burst: f64,
    per_second: f64,
    buckets: HashMap<PeerId, (f64, Instant)>,
}

/// Most peers tracked at once; beyond it, unknown peers are refused until some disconnect.
pub const MAX_TRACKED_PEERS: usize = 8192;

impl RateLimiter {
    /// A limiter allowing `burst` requests at once and `per_second` sustained, per peer.
    pub fn new(burst: u32, per_second: u32) -> Self {
        Self {
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            buckets: HashMap::new(),
        }
    }

    /// Takes one token for `peer`; false when the peer is over its rate.
    pub fn allow(&mut self, peer: PeerId, now: Instant) -> bool {
        if !self.buckets.contains_key(&peer) && self.buckets.len() >= MAX_TRACKED_PEERS {
            return false;
        }
        let (tokens, last) = self.buckets.entry(peer).or_insert((self.burst, now));
        let refill = now.saturating_duration_since(*last).as_secs_f64() * self.per_second;
        *tokens = (*tokens + refill).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Drops a peer's bucket.
    pub fn forget(&mut self, peer: &PeerId) {
        self.buckets.remove(peer);
    }
}

/// At most `max` requests per peer handed to the job engine and not yet answered: one peer
/// cannot take more than `max` places of the engine's inbound channel
/// ([`crate::inbound::INBOUND_CHANNEL`]) however fast its token bucket refills.
///
/// A request leaves when its response was sent or it failed (answered, dropped unanswered,
/// timed out, connection closed: request-response reports each), and every request of a peer
/// leaves when its last connection closes ([`InFlight::forget`]). Only peers the
/// [`RateLimiter`] lets through get here, so the map holds at most `max` ×
/// [`MAX_TRACKED_PEERS`] entries.
/// `Id` is the request's id (request-response's [`InboundRequestId`] in the event loop).
#[derive(Debug)]
pub struct InFlight<Id = InboundRequestId> {
    max: usize,
    requests: HashMap<Id, PeerId>,
    per_peer: HashMap<PeerId, usize>,
}

impl<Id: std::hash::Hash + Eq> InFlight<Id> {
    /// A cap of `max` unanswered requests per peer.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            requests: HashMap::new(),
            per_peer: HashMap::new(),
        }
    }

    /// Counts request `id` of `peer` in flight; false (and nothing counted) when `peer` has
    /// `max` in flight already.
    pub fn try_start(&mut self, peer: PeerId, id: Id) -> bool {
        if self.max == 0 {
            return false;
        }
        let n = self.per_peer.entry(peer).or_insert(0);
        if *n >= self.max {
            return false;
        }
        *n += 1;
        self.requests.insert(id, peer);
        true
    }

    /// Request `id` was answered or failed. Unknown ids are ignored.
    pub fn finish(&mut self, id: Id) {
        if let Some(peer) = self.requests.remove(&id)
            && let Some(n) = self.per_peer.get_mut(&peer)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_peer.remove(&peer);
            }
        }
    }

    /// Requests of `peer` in flight.
    pub fn of(&self, peer: &PeerId) -> usize {
        self.per_peer.get(peer).copied().unwrap_or(0)
    }

    /// Drops every request of `peer` (its last connection closed).
    pub fn forget(&mut self, peer: &PeerId) {
        if self.per_peer.remove(peer).is_some() {
            self.requests.retain(|_, p| p != peer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn burst_then_refill() {
        let mut l = RateLimiter::new(3, 2);
        let p = PeerId::random();
        let t = Instant::now();
        assert!((0..3).all(|_| l.allow(p, t)));
        assert!(!l.allow(p, t));
        assert!(l.allow(p, t + Duration::from_millis(500)));
        assert!(!l.allow(p, t + Duration::from_millis(500)));
        // another peer has its own bucket
        assert!(l.allow(PeerId::random(), t));
    }

    #[test]
    fn in_flight_caps_each_peer_until_answers_come_back() {
        let mut f = InFlight::new(2);
        let (p, q) = (PeerId::random(), PeerId::random());
        assert!(f.try_start(p, 1u64));
        assert!(f.try_start(p, 2));
        assert!(!f.try_start(p, 3), "a third is refused");
        assert!(f.try_start(q, 4), "another peer has its own cap");
        f.finish(1);
        f.finish(99); // unknown: ignored
        assert_eq!(f.of(&p), 1);
        assert!(f.try_start(p, 5));
        f.forget(&p);
        assert_eq!(f.of(&p), 0);
        assert_eq!(f.of(&q), 1);
        f.finish(2); // forgotten already: ignored
        assert_eq!(f.of(&q), 1);
        assert!(!InFlight::new(0).try_start(p, 1u64));
    }
}
