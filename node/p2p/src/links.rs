//! What a provider measured of its network, gossiped inside its signed offer: one [`Link`]
//! per peer with a fresh ping window ([`crate::rtt`]), so that an orchestrator can assemble
//! the provider-to-provider latency matrix the matcher's `placement.max_rtt_ms` needs
//! ([`crate::matrix`]).
//!
//! [`advertised`] turns this node's RTT row into the links of its next offer: samples older
//! than [`LINK_MAX_AGE_MS`] are left out, links to providers (peers with a live offer) come
//! first, then the lowest RTT, at most [`MAX_OFFER_LINKS`]. [`fit`] drops the last links of a
//! body whose signed encoding would exceed [`crate::offers::MAX_OFFER_BYTES`].

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use libp2p::PeerId;
use serde::{Deserialize, Serialize};

use super::offers::{MAX_OFFER_BYTES, OfferBody};
use super::rtt::Rtt;

/// Most links an offer may carry (more is refused as
/// [`OfferRejection::TooManyEntries`](crate::offers::OfferRejection::TooManyEntries)
/// `{ field: "links" }`). A link encodes to about 130 bytes, so 64 take about 8 KiB.
pub const MAX_OFFER_LINKS: usize = 64;

/// Freshness bound of a measurement, ms (5 minutes): a provider advertises no sample older
/// than this, and an orchestrator drops a link whose `measured_ms` is older when it
/// assembles the matrix. A pair of providers with no fresh link is never placed together
/// under a `placement.max_rtt_ms`.
pub const LINK_MAX_AGE_MS: u64 = 300_000;

/// One measured path from the offer's provider to another peer. Part of the signed
/// [`OfferBody`] (CBOR map, serde field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The peer at the other end, libp2p peer id bytes (`PeerId::to_bytes`).
    pub peer: Vec<u8>,
    /// Median round trip of the ping window, µs.
    pub rtt_p50_us: u32,
    /// 90th-percentile round trip of the ping window, µs.
    pub rtt_p90_us: u32,
    /// Measured throughput to the peer, Mbit/s; `None` = not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps: Option<u32>,
    /// When the latest ping sample arrived, POSIX ms (the offer's clock).
    pub measured_ms: u64,
}

impl Link {
    /// Age of the measurement at `now_ms`, ms (0 for one from the future).
    pub fn age_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.measured_ms)
    }

    /// Whether the measurement is at most [`LINK_MAX_AGE_MS`] old at `now_ms`.
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        self.age_ms(now_ms) <= LINK_MAX_AGE_MS
    }
}

/// The links of this node's next offer, from its RTT `row` ([`crate::Client::rtts`]) at
/// `now` (the row's clock) = `now_ms` (the offer's clock, POSIX ms).
///
/// Left out: the node itself (`own`) and samples older than [`LINK_MAX_AGE_MS`]. Order: peers
/// in `providers` (those with a live offer: what a matcher can use) first, then by median RTT,
/// then by peer id; at most [`MAX_OFFER_LINKS`]. `mbps` gives the measured throughput per
/// peer, where there is one.
pub fn advertised(
    row: &[(PeerId, Rtt)],
    own: &PeerId,
    providers: &HashSet<PeerId>,
    mbps: &HashMap<PeerId, u32>,
    now: Instant,
    now_ms: u64,
) -> Vec<Link> {
    let mut fresh: Vec<(bool, Link)> = row
        .iter()
        .filter(|(peer, _)| peer != own)
        .filter_map(|(peer, rtt)| {
            let age_ms = u64::try_from(rtt.age(now).as_millis()).unwrap_or(u64::MAX);
            (age_ms <= LINK_MAX_AGE_MS).then(|| {
                (
                    !providers.contains(peer),
                    Link {
                        peer: peer.to_bytes(),
                        rtt_p50_us: rtt.p50_us(),
                        rtt_p90_us: rtt.p90_us(),
                        mbps: mbps.get(peer).copied(),
                        measured_ms: now_ms.saturating_sub(age_ms),
                    },
                )
            })
        })
        .collect();
    fresh.sort_by(|(x_other, x), (y_other, y)| {
        x_other
            .cmp(y_other)
            .then(x.rtt_p50_us.cmp(&y.rtt_p50_us))
            .then_with(|| x.peer.cmp(&y.peer))
    });
    fresh.truncate(MAX_OFFER_LINKS);
    fresh.into_iter().map(|(_, l)| l).collect()
}

/// Bytes a signature adds to an encoded body, with margin: the `SignedOffer` map's keys and
/// the 64-byte signature as a CBOR array of small integers (up to 2 bytes each).
const SIGNATURE_OVERHEAD: usize = 256;

/// Drops `body`'s last links until its signed encoding fits [`MAX_OFFER_BYTES`]; returns how
/// many were dropped. Only an offer near every other cap (16 addresses, 64 GPU groups with
/// long names) needs it; the links are ordered most useful first ([`advertised`]).
pub fn fit(body: &mut OfferBody) -> usize {
    let mut dropped = 0;
    while !body.links.is_empty() && body.signed_bytes().len() + SIGNATURE_OVERHEAD > MAX_OFFER_BYTES
    {
        body.links.pop();
        dropped += 1;
    }
    dropped
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::rtt::RttMatrix;

    fn row(samples: &[(PeerId, u64, Duration)], now: Instant) -> Vec<(PeerId, Rtt)> {
        let mut m = RttMatrix::default();
        for (peer, rtt_ms, ago) in samples {
            m.record(*peer, Duration::from_millis(*rtt_ms), now - *ago);
        }
        m.iter().map(|(p, r)| (*p, *r)).collect()
    }

    #[test]
    fn fresh_samples_are_advertised_providers_first_then_by_rtt() {
        let now = Instant::now() + Duration::from_secs(3600);
        let (own, prov_slow, prov_fast, other, stale) = (
            PeerId::random(),
            PeerId::random(),
            PeerId::random(),
            PeerId::random(),
            PeerId::random(),
        );
        let r = row(
            &[
                (own, 1, Duration::ZERO),
                (prov_slow, 40, Duration::from_secs(2)),
                (prov_fast, 9, Duration::from_secs(1)),
                (other, 1, Duration::ZERO),
                (stale, 1, Duration::from_millis(LINK_MAX_AGE_MS + 1_000)),
            ],
            now,
        );
        let providers: HashSet<PeerId> = [prov_slow, prov_fast, stale].into();
        let mbps: HashMap<PeerId, u32> = [(prov_fast, 940)].into();
        let links = advertised(&r, &own, &providers, &mbps, now, 1_000_000);
        let peers: Vec<_> = links.iter().map(|l| l.peer.clone()).collect();
        assert_eq!(
            peers,
            vec![prov_fast.to_bytes(), prov_slow.to_bytes(), other.to_bytes()]
        );
        assert_eq!(links[0].rtt_p50_us, 9_000);
        assert_eq!(links[0].mbps, Some(940));
        assert_eq!(links[0].measured_ms, 999_000);
        assert_eq!(links[1].mbps, None);
        assert_eq!(links[1].measured_ms, 998_000);
        assert!(links.iter().all(|l| l.is_fresh(1_000_000)));
        assert!(!links[0].is_fresh(999_000 + LINK_MAX_AGE_MS + 1));
    }

    #[test]
    fn at_most_max_offer_links() {
        let now = Instant::now();
        let samples: Vec<_> = (0..MAX_OFFER_LINKS as u64 + 10)
            .map(|i| (PeerId::random(), 100 - i, Duration::ZERO))
            .collect();
        let links = advertised(
            &row(&samples, now),
            &PeerId::random(),
            &HashSet::new(),
            &HashMap::new(),
            now,
            5,
        );
        assert_eq!(links.len(), MAX_OFFER_LINKS);
        // The lowest RTTs are kept: 27 … 90 ms of 27 … 100 ms.
        assert!(links.iter().all(|l| l.rtt_p50_us <= 90_000));
        assert_eq!(links[0].rtt_p50_us, 27_000);
    }
}
