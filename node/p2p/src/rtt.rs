//! The latency matrix: ping round trips to peers, each with its age.
//!
//! Fed by the ping behaviour (one sample per ping interval per connection). The matcher's
//! `max_rtt_ms` compares against these values; a sample older than the caller's bound should
//! count as missing (out of any RTT bound).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use libp2p::PeerId;

/// Most peers the matrix remembers. With more, the stalest sample is evicted first. 4096 peers
/// × ~80 bytes stays well under 1 MiB.
pub const MAX_RTT_PEERS: usize = 4096;

/// One measured round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    /// Latest round trip.
    pub rtt: Duration,
    /// Smoothed round trip (EWMA, α = 1/4).
    pub smoothed: Duration,
    /// When the latest sample arrived.
    pub at: Instant,
}

impl Rtt {
    /// Smoothed round trip, ms (rounded up).
    pub fn millis(&self) -> u64 {
        self.smoothed.as_micros().div_ceil(1000) as u64
    }

    /// Age of the latest sample.
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.at)
    }
}

/// RTTs from this node to its peers.
#[derive(Debug, Clone, Default)]
pub struct RttMatrix {
    peers: HashMap<PeerId, Rtt>,
}

impl RttMatrix {
    /// Records a ping result.
    pub fn record(&mut self, peer: PeerId, rtt: Duration, at: Instant) {
        if !self.peers.contains_key(&peer)
            && self.peers.len() >= MAX_RTT_PEERS
            && let Some(oldest) = self.peers.iter().min_by_key(|(_, r)| r.at).map(|(p, _)| *p)
        {
            self.peers.remove(&oldest);
        }
        let smoothed = match self.peers.get(&peer) {
            Some(old) => (old.smoothed * 3 + rtt) / 4,
            None => rtt,
        };
        self.peers.insert(peer, Rtt { rtt, smoothed, at });
    }

    /// The sample for `peer`, if one is younger than `max_age`.
    pub fn get(&self, peer: &PeerId, max_age: Duration, now: Instant) -> Option<Rtt> {
        self.peers
            .get(peer)
            .filter(|r| r.age(now) <= max_age)
            .copied()
    }

    /// Every sample, with its peer.
    pub fn iter(&self) -> impl Iterator<Item = (&PeerId, &Rtt)> {
        self.peers.iter()
    }

    /// Peers with a sample younger than `max_age` and a smoothed RTT ≤ `max_rtt_ms`.
    pub fn within(&self, max_rtt_ms: u64, max_age: Duration, now: Instant) -> Vec<PeerId> {
        self.peers
            .iter()
            .filter(|(_, r)| r.age(now) <= max_age && r.millis() <= max_rtt_ms)
            .map(|(p, _)| *p)
            .collect()
    }

    /// Number of peers with a sample.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_and_age() {
        let mut m = RttMatrix::default();
        let p = PeerId::random();
        let t0 = Instant::now();
        m.record(p, Duration::from_millis(8), t0);
        m.record(p, Duration::from_millis(4), t0 + Duration::from_secs(1));
        let r = m
            .get(&p, Duration::from_secs(5), t0 + Duration::from_secs(2))
            .unwrap();
        assert_eq!(r.rtt, Duration::from_millis(4));
        assert_eq!(r.millis(), 7);
        assert!(
            m.get(&p, Duration::from_secs(5), t0 + Duration::from_secs(10))
                .is_none()
        );
        assert_eq!(
            m.within(7, Duration::from_secs(5), t0 + Duration::from_secs(2)),
            vec![p]
        );
        assert!(
            m.within(6, Duration::from_secs(5), t0 + Duration::from_secs(2))
                .is_empty()
        );
    }

    #[test]
    fn evicts_the_stalest_when_full() {
        let mut m = RttMatrix::default();
        let t0 = Instant::now();
        let first = PeerId::random();
        m.record(first, Duration::from_millis(1), t0);
        for i in 1..MAX_RTT_PEERS {
            m.record(
                PeerId::random(),
                Duration::from_millis(1),
                t0 + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(m.len(), MAX_RTT_PEERS);
        m.record(
            PeerId::random(),
            Duration::from_millis(1),
            t0 + Duration::from_secs(100),
        );
        assert_eq!(m.len(), MAX_RTT_PEERS);
        assert!(m.get(&first, Duration::MAX, t0).is_none());
    }
}
