//! The provider-to-provider latency matrix an orchestrator matches on, assembled from the
//! [`Link`]s inside the live, verified offers (each provider reports its own row; see
//! [`crate::links`]). Pure: the offers and the clock in, the pairs out.
//!
//! Rules ([`LinkMatrix::assemble`]):
//! - each offer's peer id names its provider (`market.provider`); a link to a peer no live
//!   offer names, to the offer's own peer, or to a peer two offers claim, is ignored;
//! - a link from an expired offer (`expires_ms ≤ now`) or measured more than
//!   [`LINK_MAX_AGE_MS`] ago is dropped: a pair without a fresh link is absent, and the
//!   matcher treats an absent pair as out of any `placement.max_rtt_ms`;
//! - both ends report the pair: the worse of the two counts — the larger p50, the larger
//!   p90, the lower throughput, the older measurement — since either direction can be what
//!   slows a collective;
//! - one end only: its figures count and the pair is flagged [`Pair::one_sided`].
//!
//! The matcher compares `max_rtt_ms` with the pair's **median** RTT ([`Pair::rtt_p50_us`],
//! [`LinkMatrix::samples`]): the median of the ping window is what a steady collective
//! sees, and one slow ping (a busy event loop, a retransmit) does not move it, where it would
//! move the p90 of a 16-sample window for a minute and drop a good pair. The p90 is kept
//! and shown (`ganglion market`, `ganglion job status`) so that jitter can be seen.

use std::collections::HashMap;

use ganglion_market::snapshot::{ProviderId, RttSample};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::links::LINK_MAX_AGE_MS;
use super::links::Link;
use super::offers::SignedOffer;

/// One provider pair of the matrix, `a < b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// One end (the smaller key hash).
    #[serde(with = "hex::serde")]
    pub a: ProviderId,
    /// The other end.
    #[serde(with = "hex::serde")]
    pub b: ProviderId,
    /// Median round trip, µs (what `placement.max_rtt_ms` is judged by).
    pub rtt_p50_us: u32,
    /// 90th-percentile round trip, µs.
    pub rtt_p90_us: u32,
    /// Measured throughput, Mbit/s; `None` = neither end measured it.
    #[serde(default)]
    pub mbps: Option<u32>,
    /// When the (older) measurement was taken, POSIX ms.
    pub measured_ms: u64,
    /// Only one end reported the pair.
    #[serde(default)]
    pub one_sided: bool,
}

impl Pair {
    /// The worse of two reports of one pair (see the module docs).
    fn worse(&self, other: &Pair) -> Pair {
        Pair {
            a: self.a,
            b: self.b,
            rtt_p50_us: self.rtt_p50_us.max(other.rtt_p50_us),
            rtt_p90_us: self.rtt_p90_us.max(other.rtt_p90_us),
            mbps: match (self.mbps, other.mbps) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            },
            measured_ms: self.measured_ms.min(other.measured_ms),
            one_sided: false,
        }
    }

    /// Age of the measurement at `now_ms`, whole seconds.
    pub fn age_s(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.measured_ms) / 1000
    }

    /// Whether this pair joins `x` and `y` (either order).
    pub fn joins(&self, x: &ProviderId, y: &ProviderId) -> bool {
        (self.a == *x && self.b == *y) || (self.a == *y && self.b == *x)
    }
}

/// The pairs with a fresh measurement, ordered by `(a, b)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkMatrix {
    pairs: Vec<Pair>,
}

/// Each live offer's peer id (bytes) → its provider; peers two offers claim are left out.
pub fn providers_by_peer<'a>(
    offers: impl IntoIterator<Item = &'a SignedOffer>,
    now_ms: u64,
) -> HashMap<Vec<u8>, ProviderId> {
    let mut by_peer: HashMap<Vec<u8>, Option<ProviderId>> = HashMap::new();
    for o in offers.into_iter().filter(|o| o.body.expires_ms > now_ms) {
        let provider = o.body.market.provider;
        by_peer
            .entry(o.body.peer_id.clone())
            .and_modify(|p| {
                if *p != Some(provider) {
                    *p = None;
                }
            })
            .or_insert(Some(provider));
    }
    by_peer
        .into_iter()
        .filter_map(|(peer, p)| p.map(|p| (peer, p)))
        .collect()
}

impl LinkMatrix {
    /// Assembles the matrix from `offers` (verified ones: the live market) at `now_ms`, by
    /// the rules of the module docs.
    pub fn assemble<'a>(offers: impl IntoIterator<Item = &'a SignedOffer>, now_ms: u64) -> Self {
        let offers: Vec<&SignedOffer> = offers
            .into_iter()
            .filter(|o| o.body.expires_ms > now_ms)
            .collect();
        let by_peer = providers_by_peer(offers.iter().copied(), now_ms);
        // (reporter, other end) → the reporter's worst fresh link to it.
        let mut directed: HashMap<(ProviderId, ProviderId), Pair> = HashMap::new();
        for o in &offers {
            let from = o.body.market.provider;
            for link in o.body.links.iter().filter(|l| l.is_fresh(now_ms)) {
                let Some(&to) = by_peer.get(&link.peer) else {
                    continue;
                };
                if to == from {
                    continue;
                }
                let pair = Self::oriented(from, to, link);
                directed
                    .entry((from, to))
                    .and_modify(|p| *p = p.worse(&pair))
                    .or_insert(pair);
            }
        }
        let mut pairs: Vec<Pair> = Vec::new();
        for ((from, to), pair) in &directed {
            if from > to && directed.contains_key(&(*to, *from)) {
                continue; // taken with its other end
            }
            pairs.push(match directed.get(&(*to, *from)) {
                Some(back) => pair.worse(back),
                None => Pair {
                    one_sided: true,
                    ..pair.clone()
                },
            });
        }
        pairs.sort_by_key(|p| (p.a, p.b));
        Self { pairs }
    }

    fn oriented(from: ProviderId, to: ProviderId, link: &Link) -> Pair {
        Pair {
            a: from.min(to),
            b: from.max(to),
            rtt_p50_us: link.rtt_p50_us,
            rtt_p90_us: link.rtt_p90_us,
            mbps: link.mbps,
            measured_ms: link.measured_ms,
            one_sided: false,
        }
    }

    /// Every pair, ordered by `(a, b)`.
    pub fn pairs(&self) -> &[Pair] {
        &self.pairs
    }

    /// The pair joining `x` and `y`, if measured.
    pub fn between(&self, x: &ProviderId, y: &ProviderId) -> Option<&Pair> {
        let key = (*x.min(y), *x.max(y));
        self.pairs
            .binary_search_by_key(&key, |p| (p.a, p.b))
            .ok()
            .map(|i| &self.pairs[i])
    }

    /// The measured pairs among `providers` (a plan's nodes), ordered by `(a, b)`.
    pub fn among(&self, providers: &[ProviderId]) -> Vec<Pair> {
        self.pairs
            .iter()
            .filter(|p| providers.contains(&p.a) && providers.contains(&p.b))
            .cloned()
            .collect()
    }

    /// The matcher's input ([`ganglion_market::snapshot::MarketSnapshot::build`]): one sample
    /// per pair, its median RTT and its measured throughput (without one, the matcher falls
    /// back to both ends' advertised uplinks).
    pub fn samples(&self) -> Vec<RttSample> {
        self.pairs
            .iter()
            .map(|p| RttSample {
                a: p.a,
                b: p.b,
                rtt_us: p.rtt_p50_us,
                mbps: p.mbps,
            })
            .collect()
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair is measured.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use libp2p::PeerId;

    use super::*;
    use crate::links::LINK_MAX_AGE_MS;

    const NOW: u64 = 10_000_000;

    struct P {
        provider: ProviderId,
        peer: PeerId,
    }

    fn p(i: u8) -> P {
        P {
            provider: [i; 28],
            peer: PeerId::random(),
        }
    }

    fn link(to: &P, p50: u32, p90: u32, mbps: Option<u32>, measured_ms: u64) -> Link {
        Link {
            peer: to.peer.to_bytes(),
            rtt_p50_us: p50,
            rtt_p90_us: p90,
            mbps,
            measured_ms,
        }
    }

    fn offer(from: &P, links: Vec<Link>, expires_ms: u64) -> SignedOffer {
        crate::test_utils::signed_offer(from.provider, from.peer, links, NOW - 1_000, expires_ms)
    }

    #[test]
    fn both_ends_disagree_the_worse_counts() {
        let (x, y) = (p(1), p(2));
        let offers = [
            offer(
                &x,
                vec![link(&y, 900, 1_500, Some(800), NOW - 4_000)],
                NOW + 1,
            ),
            offer(
                &y,
                vec![link(&x, 1_200, 1_300, Some(950), NOW - 2_000)],
                NOW + 1,
            ),
        ];
        let m = LinkMatrix::assemble(&offers, NOW);
        assert_eq!(
            m.pairs(),
            [Pair {
                a: [1; 28],
                b: [2; 28],
                rtt_p50_us: 1_200,
                rtt_p90_us: 1_500,
                mbps: Some(800),
                measured_ms: NOW - 4_000,
                one_sided: false,
            }]
        );
        assert_eq!(m.pairs()[0].age_s(NOW), 4);
        assert!(m.between(&[2; 28], &[1; 28]).is_some());
        assert_eq!(
            m.samples(),
            [RttSample {
                a: [1; 28],
                b: [2; 28],
                rtt_us: 1_200,
                mbps: Some(800),
            }]
        );
        // One end measured throughput, the other did not: the measured figure counts.
        let offers = [
            offer(&x, vec![link(&y, 900, 900, None, NOW)], NOW + 1),
            offer(&y, vec![link(&x, 900, 900, Some(70), NOW)], NOW + 1),
        ];
        assert_eq!(LinkMatrix::assemble(&offers, NOW).pairs()[0].mbps, Some(70));
    }

    #[test]
    fn one_end_only_is_flagged_one_sided() {
        let (x, y, z) = (p(3), p(1), p(2));
        let offers = [
            offer(&x, vec![link(&y, 500, 700, None, NOW)], NOW + 1),
            offer(&y, vec![], NOW + 1),
            offer(&z, vec![link(&x, 2_000, 2_500, None, NOW)], NOW + 1),
        ];
        let m = LinkMatrix::assemble(&offers, NOW);
        assert_eq!(m.len(), 2);
        let xy = m.between(&[3; 28], &[1; 28]).expect("x-y");
        assert_eq!((xy.a, xy.b), ([1; 28], [3; 28]), "ordered a < b");
        assert!(xy.one_sided);
        assert_eq!((xy.rtt_p50_us, xy.rtt_p90_us), (500, 700));
        assert!(m.between(&[2; 28], &[3; 28]).expect("z-x").one_sided);
        assert!(m.between(&[1; 28], &[2; 28]).is_none(), "never measured");
        assert_eq!(m.among(&[[1; 28], [3; 28]]).len(), 1);
    }

    #[test]
    fn stale_links_and_links_of_expired_offers_are_dropped() {
        let (x, y, z) = (p(1), p(2), p(3));
        let offers = [
            // x's link to y is past the freshness bound; y's to x is fresh: one-sided.
            offer(
                &x,
                vec![
                    link(&y, 100, 100, None, NOW - LINK_MAX_AGE_MS - 1),
                    link(&z, 100, 100, None, NOW),
                ],
                NOW + 1,
            ),
            offer(
                &y,
                vec![link(&x, 300, 300, None, NOW - LINK_MAX_AGE_MS)],
                NOW + 1,
            ),
            // z's offer expired: neither its links nor links to it count.
            offer(&z, vec![link(&x, 100, 100, None, NOW)], NOW),
        ];
        let m = LinkMatrix::assemble(&offers, NOW);
        assert_eq!(m.len(), 1, "{m:?}");
        let xy = &m.pairs()[0];
        assert!(xy.one_sided);
        assert_eq!(xy.rtt_p50_us, 300);
        // Later, y's link is stale too: no pair at all.
        assert!(LinkMatrix::assemble(&offers[..2], NOW + 1).is_empty());
    }

    #[test]
    fn unknown_peers_self_links_and_ambiguous_peers_are_ignored() {
        let (x, y, stranger) = (p(1), p(2), p(9));
        let mut twin = offer(&p(5), vec![], NOW + 1);
        twin.body.peer_id = y.peer.to_bytes(); // a second provider claims y's peer
        let offers = [
            offer(
                &x,
                vec![
                    link(&stranger, 100, 100, None, NOW),
                    link(&x, 100, 100, None, NOW),
                    link(&y, 100, 100, None, NOW),
                    Link {
                        peer: vec![1, 2, 3],
                        ..link(&y, 100, 100, None, NOW)
                    },
                ],
                NOW + 1,
            ),
            offer(&y, vec![], NOW + 1),
            twin,
        ];
        assert!(LinkMatrix::assemble(&offers, NOW).is_empty());
        assert_eq!(LinkMatrix::assemble(&offers[..2], NOW).len(), 1);
        assert_eq!(
            providers_by_peer(&offers, NOW).len(),
            1,
            "only x's peer is unambiguous"
        );
    }

    #[test]
    fn a_reporter_with_two_links_to_one_peer_reports_the_worse() {
        let (x, y) = (p(1), p(2));
        let offers = [
            offer(
                &x,
                vec![
                    link(&y, 100, 200, None, NOW),
                    link(&y, 400, 150, None, NOW - 10),
                ],
                NOW + 1,
            ),
            offer(&y, vec![], NOW + 1),
        ];
        let m = LinkMatrix::assemble(&offers, NOW);
        assert_eq!(
            (m.pairs()[0].rtt_p50_us, m.pairs()[0].rtt_p90_us),
            (400, 200)
        );
    }
}
