//! Per-peer rate limits on inbound requests (token buckets).

use std::collections::HashMap;
use std::time::Instant;

use libp2p::PeerId;

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
}
