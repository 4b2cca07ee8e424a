//! Properties of the matcher on small random markets: it never over-allocates, every
//! constraint holds, the result is deterministic (also under offer reordering), and it equals
//! an exhaustive brute force over every provider set and every allocation.

use std::cmp::Reverse;
use std::collections::HashMap;

use ganglion_market::spec::{Interconnect, Vendor};
use ganglion_market::{
    MarketSnapshot, Offer, OfferedGpus, Plan, ProviderLoad, Requirements, RttSample,
    SnapshotOptions, match_gang,
};
use proptest::prelude::*;

use ganglion_market::test_utils::{a100, id, mi250, req, rtx3090};

fn arb_offer(i: u8) -> impl Strategy<Value = Offer> {
    (
        prop::collection::vec((0usize..3, 0u32..=4), 1..=2),
        0u32..=6,
        1u64..=4,
        1u32..=3,
        prop::bool::ANY,
        prop::option::of(1u32..=3),
        prop::option::of(prop::sample::select(vec![60u64, 7200])),
        prop::bool::ANY,
    )
        .prop_map(
            move |(groups, bond, price, score, fast, nodes, dur, direct)| Offer {
                provider: id(i),
                bond_gpus: bond,
                price_per_gpu_hour: price,
                score,
                uplink_mbps: if fast { 10_000 } else { 100 },
                max_job_duration_s: dur,
                max_job_nodes: nodes,
                gpus: groups
                    .into_iter()
                    .map(|(m, free)| OfferedGpus {
                        model: [a100(), rtx3090(), mi250()][m].clone(),
                        free,
                        declared: false,
                    })
                    .collect(),
                direct_capable: direct,
            },
        )
}

fn arb_market() -> impl Strategy<Value = (Vec<Offer>, Vec<RttSample>)> {
    (1usize..=6).prop_flat_map(|n| {
        let offers = (0..n).map(|i| arb_offer(i as u8 + 1)).collect::<Vec<_>>();
        let pairs = n * (n - 1) / 2;
        (
            offers,
            prop::collection::vec(prop::option::of((1u32..=10, prop::bool::ANY)), pairs),
        )
            .prop_map(move |(offers, samples)| {
                let mut rtts = Vec::new();
                let mut k = 0;
                for a in 0..n {
                    for b in a + 1..n {
                        if let Some((ms, flip)) = samples[k] {
                            let (x, y) = if flip { (b, a) } else { (a, b) };
                            rtts.push(RttSample {
                                a: id(x as u8 + 1),
                                b: id(y as u8 + 1),
                                rtt_us: ms * 1000,
                            });
                        }
                        k += 1;
                    }
                }
                (offers, rtts)
            })
    })
}

fn arb_req() -> impl Strategy<Value = Requirements> {
    (
        1u32..=8,
        0usize..3,
        prop::bool::ANY,
        prop::bool::ANY,
        prop::bool::ANY,
        1u32..=3,
        prop::option::of(2u32..=4),
        1u32..=4,
        prop::option::of(Just(5_000u32)),
        prop::option::of(Just(1_000u32)),
        prop::sample::select(vec![2u64, 3, u64::MAX]),
    )
        .prop_map(
            |(count, v, vram, a100s, nvlink, m, maxg, nodes, rtt, bw, rate)| {
                let mut r = req(count);
                r.vendor = [Vendor::Any, Vendor::Nvidia, Vendor::Amd][v];
                r.min_vram_gib = if vram { 40 } else { 0 };
                if a100s {
                    r.models = vec!["*A100*".into(), "*MI250*".into()];
                }
                if nvlink && r.vendor == Vendor::Nvidia {
                    r.interconnect = Interconnect::Nvlink;
                }
                r.min_gpus_per_node = m.min(count);
                r.max_gpus_per_node = maxg.map(|g| g.max(r.min_gpus_per_node));
                r.max_nodes = nodes;
                r.max_rtt_us = rtt;
                r.min_bandwidth_mbps = bw;
                r.max_rate = rate;
                r
            },
        )
}

/// GPUs `o` can give one node under `r`, from the raw offer (independent of the snapshot).
fn eligible(o: &Offer, r: &Requirements) -> u32 {
    if o.bond_gpus == 0
        || o.price_per_gpu_hour > r.max_rate
        || o.max_job_duration_s.is_some_and(|d| d < r.max_duration_s)
    {
        return 0;
    }
    let ok = o
        .gpus
        .iter()
        .filter(|g| !g.declared && r.rejects_model(&g.model).is_none())
        .map(|g| g.free);
    let e = if r.interconnect == Interconnect::Any {
        ok.sum()
    } else {
        ok.max().unwrap_or(0)
    };
    let e = e
        .min(o.bond_gpus)
        .min(r.max_gpus_per_node.unwrap_or(u32::MAX));
    if e < r.min_gpus_per_node { 0 } else { e }
}

fn rtt_between(rtts: &[RttSample], a: [u8; 28], b: [u8; 28]) -> Option<u32> {
    rtts.iter()
        .filter(|s| (s.a == a && s.b == b) || (s.a == b && s.b == a))
        .map(|s| s.rtt_us)
        .max()
}

fn set_ok(offers: &[Offer], rtts: &[RttSample], r: &Requirements, set: &[usize]) -> bool {
    let k = set.len() as u32;
    if k > r.max_nodes {
        return false;
    }
    if k >= 2 {
        for (x, &i) in set.iter().enumerate() {
            let o = &offers[i];
            if o.max_job_nodes.is_some_and(|n| n < k)
                || r.min_bandwidth_mbps.is_some_and(|b| o.uplink_mbps < b)
            {
                return false;
            }
            if let Some(bound) = r.max_rtt_us {
                for &j in &set[x + 1..] {
                    if rtt_between(rtts, o.provider, offers[j].provider).is_none_or(|t| t > bound) {
                        return false;
                    }
                }
            }
        }
    }
    true
}

type Key = (usize, u128, Reverse<u64>, Vec<u32>);

/// Exhaustive: every subset of at most `max_nodes` providers, every allocation.
fn brute_force(offers: &[Offer], rtts: &[RttSample], r: &Requirements) -> Option<Key> {
    let mut order: Vec<usize> = (0..offers.len()).collect();
    order.sort_by_key(|&i| {
        let o = &offers[i];
        (
            o.price_per_gpu_hour,
            Reverse(o.score),
            Reverse(o.direct_capable),
            o.provider,
        )
    });
    let rank: HashMap<usize, u32> = order
        .iter()
        .enumerate()
        .map(|(r, &i)| (i, r as u32))
        .collect();
    let mut best: Option<Key> = None;
    for mask in 1u32..(1 << offers.len()) {
        let set: Vec<usize> = (0..offers.len()).filter(|i| mask >> i & 1 == 1).collect();
        if !set_ok(offers, rtts, r, &set) {
            continue;
        }
        let caps: Vec<u32> = set.iter().map(|&i| eligible(&offers[i], r)).collect();
        if caps.contains(&0) {
            continue;
        }
        let mut alloc = vec![0u32; set.len()];
        let mut found: Option<(u128, Reverse<u64>)> = None;
        enumerate(
            &caps,
            r.min_gpus_per_node,
            r.count,
            0,
            &mut alloc,
            &mut |g| {
                let cost: u128 = set
                    .iter()
                    .zip(g)
                    .map(|(&i, &n)| u128::from(n) * u128::from(offers[i].price_per_gpu_hour))
                    .sum();
                let score: u64 = set
                    .iter()
                    .zip(g)
                    .map(|(&i, &n)| u64::from(n) * u64::from(offers[i].score))
                    .sum();
                let k = (cost, Reverse(score));
                if found.as_ref().is_none_or(|f| k < *f) {
                    found = Some(k);
                }
            },
        );
        if let Some((cost, score)) = found {
            let mut ranks: Vec<u32> = set.iter().map(|i| rank[i]).collect();
            ranks.sort_unstable();
            let key = (set.len(), cost, score, ranks);
            if best.as_ref().is_none_or(|b| key < *b) {
                best = Some(key);
            }
        }
    }
    best
}

fn enumerate(
    caps: &[u32],
    m: u32,
    left: u32,
    i: usize,
    g: &mut Vec<u32>,
    f: &mut impl FnMut(&[u32]),
) {
    if i == caps.len() {
        if left == 0 {
            f(g);
        }
        return;
    }
    for n in m..=caps[i].min(left) {
        g[i] = n;
        enumerate(caps, m, left - n, i + 1, g, f);
    }
}

fn key(plan: &Plan) -> Key {
    (
        plan.nodes.len(),
        plan.price_per_hour,
        Reverse(plan.score),
        plan.nodes.iter().map(|n| n.rank).collect(),
    )
}

fn check_valid(plan: &Plan, offers: &[Offer], rtts: &[RttSample], r: &Requirements) {
    assert_eq!(plan.gpus(), r.count, "places exactly the GPUs asked for");
    let mut set = Vec::new();
    for n in &plan.nodes {
        let i = offers
            .iter()
            .position(|o| o.provider == n.provider)
            .expect("plan names a known provider");
        let o = &offers[i];
        assert!(
            n.gpus >= r.min_gpus_per_node,
            "never below min_gpus_per_node"
        );
        assert!(
            n.gpus <= eligible(o, r),
            "never over-allocates eligible, free, bonded GPUs"
        );
        assert!(n.gpus <= o.bond_gpus);
        assert!(n.rate == o.price_per_gpu_hour && n.rate <= r.max_rate);
        set.push(i);
    }
    let mut distinct = set.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), set.len(), "a provider appears once");
    assert!(
        set_ok(offers, rtts, r, &set),
        "node-count, RTT and bandwidth constraints hold"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plan_is_valid_optimal_and_deterministic(
        (offers, rtts) in arb_market(),
        r in arb_req(),
        full in prop::collection::vec(prop::sample::select(vec![false, false, false, true]), 6),
    ) {
        // Providers at their max_concurrent_jobs: the matcher gets their loads; the brute
        // force and the validity checks see them as unbonded (never eligible).
        let loads: Vec<ProviderLoad> = offers
            .iter()
            .zip(&full)
            .map(|(o, &f)| ProviderLoad {
                provider: o.provider,
                active_jobs: if f { 2 } else { 1 },
                max_concurrent_jobs: 2,
            })
            .collect();
        let snap = MarketSnapshot::build_with_loads(&offers, &rtts, &loads, SnapshotOptions::default())
            .expect("distinct");
        let got = match_gang(&r, &snap);
        let orig = offers.clone();
        let offers: Vec<Offer> = offers
            .into_iter()
            .zip(&full)
            .map(|(mut o, &f)| {
                if f {
                    o.bond_gpus = 0;
                }
                o
            })
            .collect();
        let want = brute_force(&offers, &rtts, &r);
        match (&got, &want) {
            (Ok(plan), Some(best)) => {
                check_valid(plan, &offers, &rtts, &r);
                prop_assert!(plan.exhaustive);
                prop_assert_eq!(&key(plan), best);
            }
            (Err(no), None) => {
                prop_assert_eq!(no.requested, r.count);
            }
            _ => prop_assert!(false, "matcher {:?} vs brute force {:?}", got, want),
        }
        // Deterministic, also when offers and samples arrive in another order.
        let mut rev = orig;
        rev.reverse();
        let mut rrev = rtts.clone();
        rrev.reverse();
        let snap2 = MarketSnapshot::build_with_loads(&rev, &rrev, &loads, SnapshotOptions::default())
            .expect("distinct");
        prop_assert_eq!(match_gang(&r, &snap2), got);
    }
}
