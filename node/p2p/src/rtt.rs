//! The latency matrix: ping round trips to peers, each with its age.
//!
//! Fed by the ping behaviour (one sample per ping interval per connection). Per peer it keeps
//! the latest sample, a smoothed value and a rolling window of the last [`RTT_WINDOW`] samples
//! whose median (p50) and 90th percentile (p90) are what a provider advertises in its offer
//! ([`crate::links`]) and what the matcher's `max_rtt_ms` is judged by ([`crate::matrix`]).
//! A sample older than the caller's bound should count as missing (out of any RTT bound).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use libp2p::PeerId;

/// Most peers the matrix remembers. With more, the stalest sample is evicted first. 4096 peers
/// × ~220 bytes (peer id, two durations, an instant, the 16-sample window, the map's
/// overhead) is about 1 MiB.
pub const MAX_RTT_PEERS: usize = 4096;

/// Samples per peer in the rolling window the percentiles are taken over. At the default ping
/// interval (5 s) that is the last 80 s.
pub const RTT_WINDOW: usize = 16;

/// A gap longer than this between two samples of a peer (the connection was lost and found
/// again) starts its window afresh: the percentiles describe one stretch of connectivity, not
/// a path that may have changed since.
pub const RTT_WINDOW_GAP: Duration = Duration::from_secs(60);

/// One peer's round trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    /// Latest round trip.
    pub rtt: Duration,
    /// Smoothed round trip (EWMA, α = 1/4).
    pub smoothed: Duration,
    /// When the latest sample arrived.
    pub at: Instant,
    /// The last [`RTT_WINDOW`] samples, µs (saturating at `u32::MAX`), as a ring: slot
    /// `next` is overwritten first once `len == RTT_WINDOW`.
    window: [u32; RTT_WINDOW],
    /// Samples in `window` (1 ..= [`RTT_WINDOW`]).
    len: u8,
    /// Next slot to write.
    next: u8,
}

/// A duration in whole µs, saturating at `u32::MAX` (about 71 minutes).
fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl Rtt {
    /// A peer's first sample.
    fn first(rtt: Duration, at: Instant) -> Self {
        let mut window = [0; RTT_WINDOW];
        window[0] = micros(rtt);
        Self {
            rtt,
            smoothed: rtt,
            at,
            window,
            len: 1,
            next: 1,
        }
    }

    /// Adds a sample: the EWMA moves, the window takes it (evicting the oldest when full),
    /// or starts again after a gap longer than [`RTT_WINDOW_GAP`].
    fn push(&mut self, rtt: Duration, at: Instant) {
        if at.saturating_duration_since(self.at) > RTT_WINDOW_GAP {
            *self = Self::first(rtt, at);
            return;
        }
        self.smoothed = (self.smoothed * 3 + rtt) / 4;
        self.rtt = rtt;
        self.at = at;
        self.window[usize::from(self.next)] = micros(rtt);
        self.next = ((usize::from(self.next) + 1) % RTT_WINDOW) as u8;
        self.len = (usize::from(self.len) + 1).min(RTT_WINDOW) as u8;
    }

    /// Smoothed round trip, ms (rounded up).
    pub fn millis(&self) -> u64 {
        self.smoothed.as_micros().div_ceil(1000) as u64
    }

    /// Age of the latest sample.
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.at)
    }

    /// Latest round trip, µs.
    pub fn latest_us(&self) -> u32 {
        micros(self.rtt)
    }

    /// Samples in the window (1 ..= [`RTT_WINDOW`]).
    pub fn samples(&self) -> usize {
        usize::from(self.len)
    }

    /// The `p`-th percentile (0 < p ≤ 100) of the window, µs, by the nearest-rank method: the
    /// ⌈p/100 × n⌉-th smallest of the n samples (p50 of 16 samples is the 8th smallest, p90
    /// the 15th; of one sample, that sample).
    pub fn percentile_us(&self, p: u32) -> u32 {
        let n = self.samples();
        let mut sorted = self.window;
        let sorted = &mut sorted[..n];
        sorted.sort_unstable();
        let rank = (p.clamp(1, 100) as usize * n).div_ceil(100);
        sorted[rank.clamp(1, n) - 1]
    }

    /// Median round trip of the window, µs.
    pub fn p50_us(&self) -> u32 {
        self.percentile_us(50)
    }

    /// 90th-percentile round trip of the window, µs.
    pub fn p90_us(&self) -> u32 {
        self.percentile_us(90)
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
        if let Some(old) = self.peers.get_mut(&peer) {
            old.push(rtt, at);
            return;
        }
        if self.peers.len() >= MAX_RTT_PEERS
            && let Some(oldest) = self.peers.iter().min_by_key(|(_, r)| r.at).map(|(p, _)| *p)
        {
            self.peers.remove(&oldest);
        }
        self.peers.insert(peer, Rtt::first(rtt, at));
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn smoothing_and_age() {
        let mut m = RttMatrix::default();
        let p = PeerId::random();
        let t0 = Instant::now();
        m.record(p, ms(8), t0);
        m.record(p, ms(4), t0 + Duration::from_secs(1));
        let r = m
            .get(&p, Duration::from_secs(5), t0 + Duration::from_secs(2))
            .unwrap();
        assert_eq!(r.rtt, ms(4));
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
    fn percentiles_of_the_rolling_window() {
        let mut m = RttMatrix::default();
        let p = PeerId::random();
        let t0 = Instant::now();
        m.record(p, ms(3), t0);
        let r = m.get(&p, Duration::MAX, t0).unwrap();
        assert_eq!((r.samples(), r.p50_us(), r.p90_us()), (1, 3_000, 3_000));
        // 1..=16 ms in a shuffled order: p50 = 8th smallest, p90 = 15th smallest.
        let mut m = RttMatrix::default();
        for (i, v) in [9, 2, 16, 5, 1, 12, 7, 14, 3, 10, 6, 15, 4, 11, 8, 13]
            .into_iter()
            .enumerate()
        {
            m.record(p, ms(v), t0 + Duration::from_secs(i as u64));
        }
        let r = m.get(&p, Duration::MAX, t0).unwrap();
        assert_eq!(r.samples(), RTT_WINDOW);
        assert_eq!(r.p50_us(), 8_000);
        assert_eq!(r.p90_us(), 15_000);
        assert_eq!(r.latest_us(), 13_000);
        // The window rolls: 16 more samples of 100 ms push every earlier one out.
        for i in 0..RTT_WINDOW as u64 {
            m.record(p, ms(100), t0 + Duration::from_secs(20 + i));
        }
        let r = m.get(&p, Duration::MAX, t0).unwrap();
        assert_eq!((r.p50_us(), r.p90_us()), (100_000, 100_000));
        // One spike moves p90 only once it is more than a tenth of the window.
        m.record(p, ms(900), t0 + Duration::from_secs(40));
        let r = m.get(&p, Duration::MAX, t0).unwrap();
        assert_eq!((r.p50_us(), r.p90_us()), (100_000, 100_000));
        m.record(p, ms(900), t0 + Duration::from_secs(41));
        let r = m.get(&p, Duration::MAX, t0).unwrap();
        assert_eq!((r.p50_us(), r.p90_us()), (100_000, 900_000));
    }

    #[test]
    fn a_gap_restarts_the_window() {
        let mut m = RttMatrix::default();
        let p = PeerId::random();
        let t0 = Instant::now();
        for i in 0..8 {
            m.record(p, ms(50), t0 + Duration::from_secs(i));
        }
        let later = t0 + Duration::from_secs(7) + RTT_WINDOW_GAP + Duration::from_secs(1);
        m.record(p, ms(2), later);
        let r = m.get(&p, Duration::MAX, later).unwrap();
        assert_eq!((r.samples(), r.p50_us(), r.p90_us()), (1, 2_000, 2_000));
        assert_eq!(r.smoothed, ms(2));
    }

    #[test]
    fn huge_samples_saturate() {
        let mut m = RttMatrix::default();
        let p = PeerId::random();
        let t0 = Instant::now();
        m.record(p, Duration::from_secs(10_000), t0);
        assert_eq!(m.get(&p, Duration::MAX, t0).unwrap().p90_us(), u32::MAX);
    }

    #[test]
    fn evicts_the_stalest_when_full() {
        let mut m = RttMatrix::default();
        let t0 = Instant::now();
        let first = PeerId::random();
        m.record(first, ms(1), t0);
        for i in 1..MAX_RTT_PEERS {
            m.record(PeerId::random(), ms(1), t0 + ms(i as u64));
        }
        assert_eq!(m.len(), MAX_RTT_PEERS);
        // A known peer's new sample evicts nobody.
        let known = *m.iter().find(|(p, _)| **p != first).unwrap().0;
        m.record(known, ms(2), t0 + Duration::from_secs(50));
        assert_eq!(m.len(), MAX_RTT_PEERS);
        assert!(m.get(&first, Duration::MAX, t0).is_some());
        m.record(PeerId::random(), ms(1), t0 + Duration::from_secs(100));
        assert_eq!(m.len(), MAX_RTT_PEERS);
        assert!(m.get(&first, Duration::MAX, t0).is_none());
    }
}
