//! The engine's network measurements: what this provider's offer carries (its ping row as
//! signed links, `offer_links`), and how the orchestrator's view of them is shown — the
//! matrix its matcher uses ([`ganglion_p2p::matrix::LinkMatrix`], `market_matrix`), its own
//! row, and the pairs of the plan it chose ([`PlanLinks`], `job_status`).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use ganglion_p2p::Client;
use ganglion_p2p::links::{LINK_MAX_AGE_MS, Link, advertised};
use ganglion_p2p::matrix::{LinkMatrix, Pair, providers_by_peer};
use ganglion_p2p::offers::SignedOffer;
use ganglion_p2p::rtt::Rtt;
use ganglion_rpc::audit::{MarketMatrix, MatrixPair, OwnRtt};
use libp2p::PeerId;
use serde::{Deserialize, Serialize};

/// The links of this provider's next offer: its fresh ping windows, peers with a live offer
/// first ([`advertised`]), with the throughput measured to each where there is one. A swarm
/// that does not answer gives no links (the offer still goes out).
pub(crate) async fn offer_links(p2p: &Client, own: &PeerId, now_ms: u64) -> Vec<Link> {
    let now = Instant::now();
    let row = match p2p.rtts().await {
        Ok(row) => row,
        Err(e) => {
            tracing::debug!(error = %e, "no RTT row for the offer");
            return Vec::new();
        }
    };
    let providers: HashSet<PeerId> = p2p
        .market()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|o| PeerId::from_bytes(&o.body.peer_id).ok())
        .collect();
    let mbps: HashMap<PeerId, u32> = p2p.throughputs();
    advertised(&row, own, &providers, &mbps, now, now_ms)
}

/// The measured pairs of a chosen plan, kept with the orchestrator's record at each match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanLinks {
    /// When the plan was chosen, POSIX ms.
    pub matched_ms: u64,
    /// The pairs among the plan's providers the matcher saw (none for a single node).
    pub pairs: Vec<Pair>,
}

/// A pair as the RPC shows it; `age_s` counted at `at_ms`.
pub fn rpc_pair(p: &Pair, at_ms: u64) -> MatrixPair {
    MatrixPair {
        a: hex::encode(p.a),
        b: hex::encode(p.b),
        rtt_p50_us: p.rtt_p50_us,
        rtt_p90_us: p.rtt_p90_us,
        mbps: p.mbps,
        measured_ms: p.measured_ms,
        age_s: p.age_s(at_ms),
        one_sided: p.one_sided,
    }
}

/// `market_matrix`: the matrix assembled from `offers` at `now_ms`, and this node's `row`
/// (its pings, read at `now`) to the providers among them.
pub fn market_matrix(
    offers: &[SignedOffer],
    row: &[(PeerId, Rtt)],
    now: Instant,
    now_ms: u64,
) -> MarketMatrix {
    let matrix = LinkMatrix::assemble(offers, now_ms);
    let by_peer = providers_by_peer(offers, now_ms);
    let mut own: Vec<OwnRtt> = row
        .iter()
        .filter_map(|(peer, rtt)| {
            let provider = by_peer.get(&peer.to_bytes())?;
            Some(OwnRtt {
                provider: hex::encode(provider),
                peer_id: peer.to_string(),
                rtt_latest_us: rtt.latest_us(),
                rtt_p50_us: rtt.p50_us(),
                rtt_p90_us: rtt.p90_us(),
                samples: rtt.samples() as u32,
                age_s: rtt.age(now).as_secs(),
            })
        })
        .collect();
    own.sort_by(|x, y| x.provider.cmp(&y.provider));
    MarketMatrix {
        pairs: matrix.pairs().iter().map(|p| rpc_pair(p, now_ms)).collect(),
        own,
        max_age_s: LINK_MAX_AGE_MS / 1000,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ganglion_p2p::rtt::RttMatrix;

    use super::*;

    fn offer(i: u8, peer: PeerId, links: Vec<Link>) -> SignedOffer {
        ganglion_p2p::test_utils::signed_offer([i; 28], peer, links, 0, u64::MAX)
    }

    /// A two-node job of one GPU per node within `max_rtt_ms`, matched on the market of
    /// `offers` at `now_ms` as the orchestrator's match step builds it.
    fn place(offers: &[SignedOffer], max_rtt_ms: u32, now_ms: u64) -> Result<usize, String> {
        use ganglion_market::matching::{Requirements, match_gang};
        use ganglion_market::snapshot::{MarketSnapshot, SnapshotOptions};
        let spec = ganglion_market::spec::Ensemble::from_json_str(
            &serde_json::json!({
                "image": { "local": "probe" },
                "command": ["true"],
                "gpus": { "count": 2 },
                "placement": {
                    "min_gpus_per_node": 1, "max_gpus_per_node": 1, "max_nodes": 2,
                    "max_rtt_ms": max_rtt_ms
                },
                "limits": { "max_duration_s": 60, "max_rate_ntx_per_gpu_hour": 10 },
                "budget_ntx": 1_000_000,
                "deadline_ms": 1_000_000_000,
            })
            .to_string(),
        )
        .expect("spec");
        let matrix = LinkMatrix::assemble(offers, now_ms);
        let market: Vec<_> = offers.iter().map(|o| o.body.market.clone()).collect();
        let snapshot =
            MarketSnapshot::build(&market, &matrix.samples(), SnapshotOptions::default())
                .expect("snapshot");
        match_gang(&Requirements::from_ensemble(&spec), &snapshot)
            .map(|plan| plan.nodes.len())
            .map_err(|no_fit| no_fit.to_string())
    }

    fn with_gpu(mut o: SignedOffer) -> SignedOffer {
        o.body.market.gpus = vec![ganglion_market::snapshot::OfferedGpus {
            model: ganglion_market::snapshot::GpuModel {
                name: "g".into(),
                vram_mib: 1024,
                ..Default::default()
            },
            free: 1,
            declared: false,
        }];
        o
    }

    #[test]
    fn the_matcher_places_on_fresh_links_within_the_bound_only() {
        let (x, y) = (PeerId::random(), PeerId::random());
        let link = |to: PeerId, p50_us: u32, measured_ms: u64| Link {
            peer: to.to_bytes(),
            rtt_p50_us: p50_us,
            rtt_p90_us: p50_us * 2,
            mbps: None,
            measured_ms,
        };
        let now = 10_000_000;
        let market = |xy_us: u32, yx_us: u32, measured_ms: u64| {
            [
                with_gpu(offer(1, x, vec![link(y, xy_us, measured_ms)])),
                with_gpu(offer(2, y, vec![link(x, yx_us, measured_ms)])),
            ]
        };
        // Both ends within 5 ms: placed on both.
        assert_eq!(place(&market(1_000, 3_000, now - 1_000), 5, now), Ok(2));
        // One end over the bound: the worse end counts, refused naming the bound.
        let over = place(&market(1_000, 7_000, now), 5, now).expect_err("over");
        assert!(over.contains("placement.max_rtt_ms 5"), "{over}");
        assert!(over.contains("1 over"), "{over}");
        // The p90 (twice the p50 here) is shown, not judged: 3 ms p50, 6 ms p90 fits 5 ms.
        assert_eq!(place(&market(3_000, 3_000, now), 5, now), Ok(2));
        // Stale on both ends: unmeasured, refused naming the bound.
        let stale =
            place(&market(1_000, 1_000, now - LINK_MAX_AGE_MS - 1), 5, now).expect_err("stale");
        assert!(stale.contains("placement.max_rtt_ms"), "{stale}");
        assert!(stale.contains("1 unmeasured"), "{stale}");
        // No links at all: the same.
        let bare = [with_gpu(offer(1, x, vec![])), with_gpu(offer(2, y, vec![]))];
        assert!(place(&bare, 5, now).is_err());
    }

    #[test]
    fn the_matrix_and_the_own_row_as_the_rpc_shows_them() {
        let (x, y, stranger) = (PeerId::random(), PeerId::random(), PeerId::random());
        let link = Link {
            peer: y.to_bytes(),
            rtt_p50_us: 700,
            rtt_p90_us: 900,
            mbps: None,
            measured_ms: 95_000,
        };
        let offers = [offer(1, x, vec![link]), offer(2, y, vec![])];
        let now = Instant::now();
        let mut pings = RttMatrix::default();
        pings.record(y, Duration::from_micros(400), now);
        pings.record(stranger, Duration::from_micros(100), now);
        let row: Vec<_> = pings.iter().map(|(p, r)| (*p, *r)).collect();
        let m = market_matrix(&offers, &row, now, 100_000);
        assert_eq!(m.max_age_s, 300);
        assert_eq!(
            m.pairs,
            [MatrixPair {
                a: hex::encode([1u8; 28]),
                b: hex::encode([2u8; 28]),
                rtt_p50_us: 700,
                rtt_p90_us: 900,
                mbps: None,
                measured_ms: 95_000,
                age_s: 5,
                one_sided: true,
            }]
        );
        assert_eq!(m.own.len(), 1, "only providers are in the own row");
        assert_eq!(m.own[0].provider, hex::encode([2u8; 28]));
        assert_eq!(m.own[0].peer_id, y.to_string());
        assert_eq!((m.own[0].rtt_p50_us, m.own[0].samples), (400, 1));
    }
}
