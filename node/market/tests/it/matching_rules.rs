//! One test per matcher rule, on hand-built markets.

use ganglion_market::spec::{ComputeCapability, Interconnect, Vendor};
use ganglion_market::test_utils::{a100, id, mi250, offer, providers, req, rtt, rtx3090, snap};
use ganglion_market::{
    Constraint, MarketSnapshot, Offer, OfferedGpus, ProviderLoad, Requirements, SnapshotOptions,
    match_gang,
};

#[test]
fn one_machine_preferred_over_cheaper_split() {
    let m = snap(
        &[
            offer(1, rtx3090(), 2, 10),
            offer(2, rtx3090(), 2, 10),
            offer(3, a100(), 4, 100),
        ],
        &[rtt(1, 2, 1)],
    );
    let plan = match_gang(&req(4), &m).expect("fits");
    assert_eq!(providers(&plan), vec![(3, 4)]);
}

#[test]
fn direct_capable_providers_win_ties_but_never_beat_price_or_machine_count() {
    let direct = |i, free, price| Offer {
        direct_capable: true,
        ..offer(i, rtx3090(), free, price)
    };
    // Equal price and score: the relay-only providers 1 and 2 have the lower key hashes, yet
    // the direct-capable 3 and 4 are chosen, alone and in a pair.
    let m = snap(
        &[
            offer(1, rtx3090(), 2, 10),
            offer(2, rtx3090(), 2, 10),
            direct(3, 2, 10),
            direct(4, 2, 10),
        ],
        &[rtt(1, 2, 1), rtt(3, 4, 1), rtt(1, 3, 1)],
    );
    assert_eq!(
        providers(&match_gang(&req(2), &m).expect("fits")),
        vec![(3, 2)]
    );
    assert_eq!(
        providers(&match_gang(&req(4), &m).expect("fits")),
        vec![(3, 2), (4, 2)]
    );
    // A cheaper relay-only provider still wins over a direct-capable one.
    let m = snap(&[offer(1, rtx3090(), 2, 9), direct(2, 2, 10)], &[]);
    assert_eq!(
        providers(&match_gang(&req(2), &m).expect("fits")),
        vec![(1, 2)]
    );
    // One relay-only machine still beats two direct-capable ones.
    let m = snap(
        &[
            offer(1, rtx3090(), 4, 10),
            direct(2, 2, 10),
            direct(3, 2, 10),
        ],
        &[rtt(2, 3, 1)],
    );
    assert_eq!(
        providers(&match_gang(&req(4), &m).expect("fits")),
        vec![(1, 4)]
    );
}

#[test]
fn fewest_machines_then_price() {
    let m = snap(
        &[
            offer(1, rtx3090(), 2, 10),
            offer(2, rtx3090(), 2, 10),
            offer(3, rtx3090(), 2, 10),
            offer(4, a100(), 4, 50),
            offer(5, a100(), 2, 40),
        ],
        &[],
    );
    // 6 GPUs: two nodes (4 A100 + 2 of the cheapest 3090s) beat three even cheaper nodes.
    let plan = match_gang(&req(6), &m).expect("fits");
    assert_eq!(providers(&plan), vec![(1, 2), (4, 4)]);
    assert_eq!(plan.price_per_hour, 2 * 10 + 4 * 50);
    // With at most 2 GPUs per node it takes three nodes: the three cheapest.
    let mut r = req(6);
    r.max_gpus_per_node = Some(2);
    let plan = match_gang(&r, &m).expect("fits");
    assert_eq!(providers(&plan), vec![(1, 2), (2, 2), (3, 2)]);
}

#[test]
fn cheapest_set_wins_among_equal_node_counts() {
    let m = snap(
        &[
            offer(1, a100(), 4, 30),
            offer(2, a100(), 4, 20),
            offer(3, a100(), 4, 25),
        ],
        &[],
    );
    let plan = match_gang(&req(8), &m).expect("fits");
    assert_eq!(providers(&plan), vec![(2, 4), (3, 4)]);
}

#[test]
fn rtt_bound_excludes_far_pairs_and_unmeasured_pairs() {
    let offers = [
        offer(1, a100(), 4, 10),
        offer(2, a100(), 4, 10),
        offer(3, a100(), 4, 90),
    ];
    let mut r = req(8);
    r.max_rtt_us = Some(5_000);
    let m = snap(&offers, &[rtt(1, 2, 40), rtt(2, 3, 2)]);
    assert_eq!(
        providers(&match_gang(&r, &m).expect("fits")),
        vec![(2, 4), (3, 4)]
    );
    // Without any sample between 2 and 3, nothing fits, and the report names max_rtt_ms.
    let m = snap(&offers, &[rtt(1, 2, 40)]);
    let no = match_gang(&r, &m).expect_err("no close pair");
    assert_eq!(no.binding.constraint(), Constraint::MaxRtt, "{no}");
    assert!(
        no.excluded
            .iter()
            .any(|e| e.constraint == Constraint::MaxRtt),
        "{no}"
    );
}

#[test]
fn never_below_min_gpus_per_node() {
    let m = snap(&[offer(1, a100(), 6, 10), offer(2, a100(), 1, 1)], &[]);
    let mut r = req(7);
    r.min_gpus_per_node = 2;
    let no = match_gang(&r, &m).expect_err("1-GPU provider cannot take a share");
    assert!(
        no.excluded
            .iter()
            .any(|e| e.constraint == Constraint::MinGpusPerNode)
    );
    r.min_gpus_per_node = 1;
    assert_eq!(match_gang(&r, &m).expect("fits").nodes.len(), 2);
}

#[test]
fn max_nodes_respected() {
    let m = snap(
        &[
            offer(1, a100(), 2, 10),
            offer(2, a100(), 2, 10),
            offer(3, a100(), 2, 10),
        ],
        &[],
    );
    let mut r = req(6);
    r.max_nodes = 2;
    assert!(match_gang(&r, &m).is_err());
    r.max_nodes = 3;
    assert_eq!(match_gang(&r, &m).expect("fits").nodes.len(), 3);
}

#[test]
fn per_gpu_filters_vendor_vram_cc_arch_models_interconnect() {
    let m = snap(
        &[
            offer(1, rtx3090(), 8, 1),
            offer(2, a100(), 8, 5),
            offer(3, mi250(), 8, 3),
        ],
        &[],
    );
    let pick = |r: &Requirements| match_gang(r, &m).expect("fits").nodes[0].provider[0];
    let mut r = req(4);
    assert_eq!(pick(&r), 1, "cheapest without filters");
    r.vendor = Vendor::Amd;
    assert_eq!(pick(&r), 3);
    let mut r = req(4);
    r.min_vram_gib = 40;
    assert_eq!(pick(&r), 3, "MI250X is cheaper than A100 and has 128 GiB");
    r.min_compute_capability = Some(ComputeCapability { major: 8, minor: 0 });
    assert_eq!(pick(&r), 2, "compute capability excludes AMD");
    let mut r = req(4);
    r.rocm_arch = vec!["gfx90a".into()];
    assert_eq!(pick(&r), 3);
    let mut r = req(4);
    r.models = vec!["*a100*".into()];
    assert_eq!(pick(&r), 2);
    let mut r = req(4);
    r.interconnect = Interconnect::Nvlink;
    assert_eq!(pick(&r), 2);
}

#[test]
fn interconnect_takes_one_fabric_domain_per_node() {
    let mut o = offer(1, a100(), 4, 10);
    o.gpus.push(OfferedGpus {
        model: a100(),
        free: 4,
        declared: false,
    });
    o.gpus[1].model.name = "NVIDIA A100-SXM4-80GB (second board)".into();
    let m = snap(&[o], &[]);
    let mut r = req(8);
    assert!(
        match_gang(&r, &m).is_ok(),
        "without the requirement the groups add up"
    );
    r.interconnect = Interconnect::Nvlink;
    let no = match_gang(&r, &m).expect_err("two domains of 4 are not one of 8");
    assert!(
        no.excluded
            .iter()
            .any(|e| e.constraint == Constraint::Interconnect)
    );
}

#[test]
fn bond_price_duration_and_node_limits() {
    let mut unbonded = offer(1, a100(), 8, 1);
    unbonded.bond_gpus = 0;
    let mut small_bond = offer(2, a100(), 8, 2);
    small_bond.bond_gpus = 2;
    let mut short = offer(3, a100(), 8, 3);
    short.max_job_duration_s = Some(60);
    let pricey = offer(4, a100(), 8, 1_000);
    let m = snap(&[unbonded, small_bond, short, pricey], &[]);
    let mut r = req(4);
    r.max_rate = 100;
    let no = match_gang(&r, &m).expect_err("nothing eligible");
    let got: Vec<Constraint> = no.excluded.iter().map(|e| e.constraint).collect();
    assert_eq!(
        got,
        vec![
            Constraint::NoBond,
            Constraint::MaxRate,
            Constraint::Duration,
            Constraint::BondSize
        ]
    );
    assert_eq!(no.eligible_gpus, 2);
    assert!(
        no.to_string()
            .contains("no live bond: 8 GPUs (1 providers)"),
        "{no}"
    );
    // The small bond still covers a 2-GPU job.
    let mut r2 = req(2);
    r2.max_rate = 100;
    assert_eq!(match_gang(&r2, &m).expect("fits").nodes[0].provider[0], 2);
}

#[test]
fn provider_at_max_concurrent_jobs_is_excluded_and_reported() {
    let offers = [offer(1, a100(), 8, 1), offer(2, a100(), 8, 5)];
    let load = |i: u8, active: u32| ProviderLoad {
        provider: id(i),
        active_jobs: active,
        max_concurrent_jobs: 2,
    };
    // Provider 1 is the cheapest but already runs its two jobs: provider 2 gets the job.
    let m = MarketSnapshot::build_with_loads(
        &offers,
        &[],
        &[load(1, 2), load(2, 1)],
        SnapshotOptions::default(),
    )
    .expect("distinct providers");
    assert_eq!(
        match_gang(&req(4), &m).expect("fits").nodes[0].provider[0],
        2
    );
    // Both full: the no-fit report names the limit and the capacity it took.
    let m = MarketSnapshot::build_with_loads(
        &offers,
        &[],
        &[load(1, 2), load(2, 3)],
        SnapshotOptions::default(),
    )
    .expect("distinct providers");
    let no = match_gang(&req(4), &m).expect_err("both full");
    assert_eq!(no.excluded.len(), 1);
    assert_eq!(no.excluded[0].constraint, Constraint::ConcurrentJobs);
    assert_eq!((no.excluded[0].providers, no.excluded[0].gpus), (2, 16));
    assert!(no.to_string().contains("max_concurrent_jobs"), "{no}");
}

#[test]
fn provider_refusing_multi_node_jobs_only_serves_single_node() {
    let mut solo = offer(1, a100(), 4, 1);
    solo.max_job_nodes = Some(1);
    let m = snap(
        &[solo, offer(2, a100(), 4, 50), offer(3, a100(), 4, 60)],
        &[],
    );
    assert_eq!(
        match_gang(&req(4), &m).expect("fits").nodes[0].provider[0],
        1
    );
    let plan = match_gang(&req(8), &m).expect("fits");
    assert_eq!(providers(&plan), vec![(2, 4), (3, 4)]);
}

#[test]
fn bandwidth_applies_to_multi_node_plans() {
    let mut slow = offer(1, a100(), 4, 1);
    slow.uplink_mbps = 100;
    let m = snap(
        &[slow, offer(2, a100(), 4, 50), offer(3, a100(), 4, 60)],
        &[],
    );
    let mut r = req(8);
    r.min_bandwidth_mbps = Some(1_000);
    assert_eq!(
        providers(&match_gang(&r, &m).expect("fits")),
        vec![(2, 4), (3, 4)]
    );
    r.count = 4;
    assert_eq!(match_gang(&r, &m).expect("fits").nodes[0].provider[0], 1);
}

#[test]
fn declared_gpus_only_on_devnet() {
    let mut o = offer(1, a100(), 4, 1);
    o.gpus[0].declared = true;
    let mainnet = MarketSnapshot::build(&[o.clone()], &[], SnapshotOptions::default()).expect("ok");
    assert!(match_gang(&req(1), &mainnet).is_err());
    let devnet = MarketSnapshot::build(
        &[o],
        &[],
        SnapshotOptions {
            allow_declared: true,
        },
    )
    .expect("ok");
    assert!(match_gang(&req(1), &devnet).is_ok());
}

#[test]
fn equal_price_ties_break_on_score_then_key() {
    let mut hi = offer(9, a100(), 4, 10);
    hi.score = 200;
    let m = snap(&[offer(1, a100(), 4, 10), offer(2, a100(), 4, 10), hi], &[]);
    assert_eq!(
        match_gang(&req(4), &m).expect("fits").nodes[0].provider[0],
        9
    );
    let m = snap(&[offer(2, a100(), 4, 10), offer(1, a100(), 4, 10)], &[]);
    assert_eq!(
        match_gang(&req(4), &m).expect("fits").nodes[0].provider[0],
        1
    );
}

#[test]
fn duplicate_provider_rejected() {
    let e = MarketSnapshot::build(
        &[offer(1, a100(), 4, 10), offer(1, a100(), 2, 5)],
        &[],
        SnapshotOptions::default(),
    );
    assert!(e.is_err());
}

/// A plan met later that only ties on price but scores higher must win: the search's price
/// bounds may cut plans that cost more, never ones that cost the same.
#[test]
fn equal_cost_plan_with_higher_score_found_later_wins() {
    let with_score = |i: u8, price: u64, score: u32| {
        let mut o = offer(i, a100(), 2, price);
        o.score = score;
        o
    };
    // Rank order A(1), B(2, score 10), C(2, score 9), D(3). A's only measured neighbour is D,
    // B's is C: {A, D} is met first (cost 2·1 + 2·3 = 8, score 4), {B, C} later (cost 8,
    // score 38), and B's bound (2·2 + 2·p_C = 8) equals the best cost.
    let m = snap(
        &[
            with_score(1, 1, 1),
            with_score(2, 2, 10),
            with_score(3, 2, 9),
            with_score(4, 3, 1),
        ],
        &[rtt(1, 4, 1), rtt(2, 3, 1)],
    );
    let mut r = req(4);
    r.max_nodes = 2;
    r.max_rtt_us = Some(5_000);
    let plan = match_gang(&r, &m).expect("two 2-node plans fit");
    assert_eq!(providers(&plan), vec![(2, 2), (3, 2)]);
    assert_eq!((plan.price_per_hour, plan.score), (8, 38));
}

/// Among plans equal in nodes, price and score, the lowest ranks win even when the search meets
/// them last (anchors come model by model, not in global rank order).
#[test]
fn full_ties_break_on_ranks_whatever_the_search_order() {
    let m = snap(
        &[
            offer(1, a100(), 2, 5),
            offer(2, rtx3090(), 2, 5),
            offer(3, rtx3090(), 2, 5),
            offer(4, a100(), 2, 5),
            offer(5, a100(), 2, 5),
            // Not NVIDIA: makes the per-model lists shorter than the free-GPU level.
            offer(6, mi250(), 2, 5),
        ],
        &[rtt(4, 5, 1), rtt(2, 3, 1)],
    );
    let mut r = req(4);
    r.vendor = Vendor::Nvidia;
    r.max_nodes = 2;
    r.max_rtt_us = Some(5_000);
    let plan = match_gang(&r, &m).expect("two 2-node plans fit");
    assert_eq!(providers(&plan), vec![(2, 2), (3, 2)]);
}
