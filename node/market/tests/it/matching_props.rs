//! Properties of the matcher on small random markets: it never over-allocates, every
//! constraint holds (latency groups, pair throughputs and measured compute included), the
//! result is deterministic (also under offer reordering), and it equals an exhaustive brute
//! force over every provider set, every split into latency groups and every allocation.

use std::cmp::Reverse;
use std::collections::HashMap;

use ganglion_market::spec::{Interconnect, Vendor};
use ganglion_market::{
    Compute, MarketSnapshot, Offer, OfferedGpus, Plan, ProviderLoad, Requirements, RttSample,
    SnapshotOptions, match_gang,
};
use proptest::prelude::*;

use ganglion_market::test_utils::{a100, groups, id, mi250, req, rtx3090};

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
        prop::bool::ANY,
    )
        .prop_map(
            move |(groups, bond, price, score, fast, nodes, dur, direct, measured)| Offer {
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
                compute: if measured {
                    Compute::Measured { bench_version: 1 }
                } else {
                    Compute::Unmeasured
                },
            },
        )
}

/// Up to 6 providers and their samples: about half the pairs measured (nearly all when
/// `dense`), about half of those (three in four when `dense`) with a throughput.
fn arb_market(dense: bool) -> impl Strategy<Value = (Vec<Offer>, Vec<RttSample>)> {
    let (sampled, with_mbps) = if dense { (0.95, 0.75) } else { (0.5, 0.5) };
    (1usize..=6).prop_flat_map(move |n| {
        let offers = (0..n).map(|i| arb_offer(i as u8 + 1)).collect::<Vec<_>>();
        let pairs = n * (n - 1) / 2;
        (
            offers,
            prop::collection::vec(
                prop::option::weighted(
                    sampled,
                    (
                        1u32..=10,
                        prop::bool::ANY,
                        prop::option::weighted(
                            with_mbps,
                            prop::sample::select(vec![100u32, 5_000]),
                        ),
                    ),
                ),
                pairs,
            ),
        )
            .prop_map(move |(offers, samples)| {
                let mut rtts = Vec::new();
                let mut k = 0;
                for a in 0..n {
                    for b in a + 1..n {
                        if let Some((ms, flip, mbps)) = samples[k] {
                            let (x, y) = if flip { (b, a) } else { (a, b) };
                            rtts.push(RttSample {
                                a: id(x as u8 + 1),
                                b: id(y as u8 + 1),
                                rtt_us: ms * 1000,
                                mbps,
                            });
                        }
                        k += 1;
                    }
                }
                (offers, rtts)
            })
    })
}

/// Requirements of up to 8 GPUs; with `pairwise`, a throughput floor and latency groups
/// most of the time.
fn arb_req(pairwise: bool) -> impl Strategy<Value = Requirements> {
    let (floor, grouped) = if pairwise { (0.9, 0.7) } else { (0.5, 0.5) };
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
        prop::option::weighted(floor, Just(1_000u32)),
        prop::sample::select(vec![2u64, 3, u64::MAX]),
        prop::option::weighted(grouped, (1u32..=3, prop::sample::select(vec![2u32, 5, 10]))),
    )
        .prop_map(
            |(count, v, vram, a100s, nvlink, m, maxg, nodes, rtt, bw, rate, grouped)| {
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
                // Latency groups where the count splits evenly (the across bound stays 5 ms,
                // so it may be tighter than the groups' own: the matcher must still be exact).
                if let Some((g, ms)) = grouped
                    && count % g == 0
                {
                    r.groups = Some(groups(g, count / g, ms));
                    r.min_gpus_per_node = r.min_gpus_per_node.min(count / g);
                }
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

fn samples(rtts: &[RttSample], a: [u8; 28], b: [u8; 28]) -> impl Iterator<Item = &RttSample> {
    rtts.iter()
        .filter(move |s| (s.a == a && s.b == b) || (s.a == b && s.b == a))
}

fn rtt_between(rtts: &[RttSample], a: [u8; 28], b: [u8; 28]) -> Option<u32> {
    samples(rtts, a, b).map(|s| s.rtt_us).max()
}

/// A pair meets the throughput floor: its lowest measured figure, else both uplinks.
fn pair_fast(rtts: &[RttSample], a: &Offer, b: &Offer, floor: u32) -> bool {
    match samples(rtts, a.provider, b.provider)
        .filter_map(|s| s.mbps)
        .min()
    {
        Some(mbps) => mbps >= floor,
        None => a.uplink_mbps >= floor && b.uplink_mbps >= floor,
    }
}

/// Whether the pair `a`–`b` has a measured RTT within `bound` µs (`None` = no bound).
fn within(rtts: &[RttSample], a: &Offer, b: &Offer, bound: Option<u32>) -> bool {
    bound.is_none_or(|bound| rtt_between(rtts, a.provider, b.provider).is_some_and(|t| t <= bound))
}

/// The per-set rules: node count, providers' node limits, every pair's throughput and (without
/// groups) every pair's RTT. Groups check their RTTs per split ([`split_ok`]).
fn set_ok(offers: &[Offer], rtts: &[RttSample], r: &Requirements, set: &[usize]) -> bool {
    let k = set.len() as u32;
    if k > r.max_nodes {
        return false;
    }
    if k >= 2 {
        for (x, &i) in set.iter().enumerate() {
            let o = &offers[i];
            if o.max_job_nodes.is_some_and(|n| n < k) {
                return false;
            }
            for &j in &set[x + 1..] {
                let p = &offers[j];
                if r.min_bandwidth_mbps
                    .is_some_and(|b| !pair_fast(rtts, o, p, b))
                {
                    return false;
                }
                if r.groups.is_none() && !within(rtts, o, p, r.max_rtt_us) {
                    return false;
                }
            }
        }
    }
    true
}

/// Whether `set` split as `group` (per member) satisfies the groups' RTT rules: pairs inside a
/// group within the groups' bound (and, with one group, `max_rtt_us` too), across groups
/// within `max_rtt_us`.
fn split_ok(
    offers: &[Offer],
    rtts: &[RttSample],
    r: &Requirements,
    set: &[usize],
    group: &[u32],
) -> bool {
    let Some(g) = r.groups else { return true };
    for x in 0..set.len() {
        for y in x + 1..set.len() {
            let (a, b) = (&offers[set[x]], &offers[set[y]]);
            let ok = if group[x] == group[y] {
                within(rtts, a, b, Some(g.max_rtt_us))
                    && (g.count > 1 || within(rtts, a, b, r.max_rtt_us))
            } else {
                within(rtts, a, b, r.max_rtt_us)
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

type Key = (usize, u128, u32, Reverse<u64>, Vec<u32>);

/// The best (price, unmeasured GPUs, score) of placing `count` GPUs on `nodes` (offer index,
/// eligible), each node at least `m`.
fn best_alloc(
    offers: &[Offer],
    nodes: &[(usize, u32)],
    m: u32,
    count: u32,
) -> Option<(u128, u32, Reverse<u64>)> {
    let caps: Vec<u32> = nodes.iter().map(|n| n.1).collect();
    let mut alloc = vec![0u32; nodes.len()];
    let mut found: Option<(u128, u32, Reverse<u64>)> = None;
    enumerate(&caps, m, count, 0, &mut alloc, &mut |g| {
        let (mut cost, mut unmeasured, mut score) = (0u128, 0u32, 0u64);
        for (&(i, _), &n) in nodes.iter().zip(g) {
            let o = &offers[i];
            cost += u128::from(n) * u128::from(o.price_per_gpu_hour);
            unmeasured += if o.compute.is_measured() { 0 } else { n };
            score += u64::from(n) * u64::from(o.score);
        }
        let k = (cost, unmeasured, Reverse(score));
        if found.as_ref().is_none_or(|f| k < *f) {
            found = Some(k);
        }
    });
    found
}

/// The best allocation of `set` under `r`: flat, or the best over every split into groups
/// (the key is a sum over groups, so each group's best adds up to the split's best).
fn best_of_set(
    offers: &[Offer],
    rtts: &[RttSample],
    r: &Requirements,
    set: &[usize],
    caps: &[u32],
) -> Option<(u128, u32, Reverse<u64>)> {
    let nodes: Vec<(usize, u32)> = set.iter().copied().zip(caps.iter().copied()).collect();
    let Some(g) = r.groups else {
        return best_alloc(offers, &nodes, r.min_gpus_per_node, r.count);
    };
    let mut best: Option<(u128, u32, Reverse<u64>)> = None;
    let splits = (g.count as usize).pow(set.len() as u32);
    for code in 0..splits {
        let group: Vec<u32> = (0..set.len())
            .map(|x| (code / (g.count as usize).pow(x as u32) % g.count as usize) as u32)
            .collect();
        if (0..g.count).any(|q| !group.contains(&q)) || !split_ok(offers, rtts, r, set, &group) {
            continue;
        }
        let mut total = Some((0u128, 0u32, Reverse(0u64)));
        for q in 0..g.count {
            let members: Vec<(usize, u32)> = (nodes.iter().zip(&group))
                .filter(|(_, gq)| **gq == q)
                .map(|(n, _)| *n)
                .collect();
            total = match (
                total,
                best_alloc(offers, &members, r.min_gpus_per_node, g.gpus),
            ) {
                (Some(t), Some(b)) => Some((t.0 + b.0, t.1 + b.1, Reverse(t.2.0 + b.2.0))),
                _ => None,
            };
        }
        if let Some(t) = total
            && best.as_ref().is_none_or(|b| t < *b)
        {
            best = Some(t);
        }
    }
    best
}

/// Exhaustive: every subset of at most `max_nodes` providers, every allocation.
fn brute_force(offers: &[Offer], rtts: &[RttSample], r: &Requirements) -> Option<Key> {
    let mut order: Vec<usize> = (0..offers.len()).collect();
    order.sort_by_key(|&i| {
        let o = &offers[i];
        (
            o.price_per_gpu_hour,
            Reverse(o.compute.is_measured()),
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
        if let Some((cost, unmeasured, score)) = best_of_set(offers, rtts, r, &set, &caps) {
            let mut ranks: Vec<u32> = set.iter().map(|i| rank[i]).collect();
            ranks.sort_unstable();
            let key = (set.len(), cost, unmeasured, score, ranks);
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
        plan.unmeasured_gpus(),
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
        assert_eq!(n.measured, o.compute.is_measured());
        set.push(i);
    }
    let group: Vec<u32> = plan.nodes.iter().map(|n| n.group.unwrap_or(0)).collect();
    match r.groups {
        None => assert!(plan.nodes.iter().all(|n| n.group.is_none())),
        Some(g) => {
            // Every group holds exactly its GPUs; groups are numbered by their lowest-ranked
            // node (nodes come in rank order, so first appearances count up from 0).
            let mut seen = Vec::new();
            for q in &group {
                if !seen.contains(q) {
                    assert_eq!(*q, seen.len() as u32, "groups numbered by lowest rank");
                    seen.push(*q);
                }
            }
            assert_eq!(seen.len() as u32, g.count);
            for q in 0..g.count {
                let sum: u32 = (plan.nodes.iter())
                    .filter(|n| n.group == Some(q))
                    .map(|n| n.gpus)
                    .sum();
                assert_eq!(sum, g.gpus, "group {q} holds exactly its GPUs");
            }
            assert!(
                split_ok(offers, rtts, r, &set, &group),
                "group RTT rules hold"
            );
        }
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

/// The matcher against the brute force on one market: valid, optimal, exhaustive,
/// deterministic under reordering. Providers marked `full` are at their
/// `max_concurrent_jobs`: the matcher gets their loads; the brute force and the validity checks
/// see them as unbonded (never eligible).
fn check(
    offers: Vec<Offer>,
    rtts: Vec<RttSample>,
    r: &Requirements,
    full: &[bool],
) -> Result<(), TestCaseError> {
    let loads: Vec<ProviderLoad> = offers
        .iter()
        .zip(full)
        .map(|(o, &f)| ProviderLoad {
            provider: o.provider,
            active_jobs: if f { 2 } else { 1 },
            max_concurrent_jobs: 2,
        })
        .collect();
    let snap = MarketSnapshot::build_with_loads(&offers, &rtts, &loads, SnapshotOptions::default())
        .expect("distinct");
    let got = match_gang(r, &snap);
    let orig = offers.clone();
    let offers: Vec<Offer> = offers
        .into_iter()
        .zip(full)
        .map(|(mut o, &f)| {
            if f {
                o.bond_gpus = 0;
            }
            o
        })
        .collect();
    let want = brute_force(&offers, &rtts, r);
    match (&got, &want) {
        (Ok(plan), Some(best)) => {
            check_valid(plan, &offers, &rtts, r);
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
    prop_assert_eq!(match_gang(r, &snap2), got);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plan_is_valid_optimal_and_deterministic(
        (offers, rtts) in arb_market(false),
        r in arb_req(false),
        full in prop::collection::vec(prop::sample::select(vec![false, false, false, true]), 6),
    ) {
        check(offers, rtts, &r, &full)?;
    }

    /// The same on dense matrices with pair throughputs, a throughput floor and latency groups
    /// most of the time: the pairwise rules get exercised.
    #[test]
    fn grouped_and_throughput_plans_are_valid_optimal_and_deterministic(
        (offers, rtts) in arb_market(true),
        r in arb_req(true),
        full in prop::collection::vec(prop::sample::select(vec![false, false, false, true]), 6),
    ) {
        check(offers, rtts, &r, &full)?;
    }
}
