//! Network-aware placement (issue #21): measured compute first at equal price, pair
//! throughputs, the failing pair named in a no-fit report, and latency groups.

use ganglion_market::spec::{Rule, SpecError};
use ganglion_market::test_utils::{
    a100, groups, id, link, measured, offer, providers, req, rtt, rtx3090, snap,
};
use ganglion_market::{
    Binding, Compute, Constraint, Ensemble, Offer, PairBound, Plan, Requirements, RttSample,
    match_gang,
};

/// 2026-01-01T00:00:00Z, POSIX ms.
const NOW_MS: u64 = 1_767_225_600_000;

/// A 1-GPU-per-node spec of `gpus` GPUs with `placement` (YAML lines under `placement:`).
fn spec(gpus: u32, placement: &str) -> Result<Ensemble, SpecError> {
    Ensemble::parse(
        &format!(
            r#"
image: {{ local: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" }}
command: ["torchrun", "train.py"]
gpus: {{ count: {gpus} }}
placement:
{placement}
limits: {{ max_duration_s: 3600, max_rate_ntx_per_gpu_hour: 100 }}
budget_ntx: 100000
deadline_ms: 99999999999999
"#
        ),
        NOW_MS,
    )
}

fn requirements(gpus: u32, placement: &str) -> Requirements {
    let s = spec(gpus, placement).unwrap_or_else(|e| panic!("valid spec: {e}"));
    Requirements::from_ensemble(&s)
}

/// A plan as `(provider byte, GPUs, group)` triples, in plan (rank) order.
fn grouped(plan: &Plan) -> Vec<(u8, u32, Option<u32>)> {
    (plan.nodes.iter())
        .map(|n| (n.provider[0], n.gpus, n.group))
        .collect()
}

// --- 1. Measured compute ---------------------------------------------------------------------

#[test]
fn at_equal_price_a_measured_offer_beats_a_higher_declared_score() {
    let boasting = Offer {
        score: 900,
        ..offer(1, a100(), 4, 10)
    };
    let m = snap(&[boasting.clone(), measured(2, a100(), 4, 10)], &[]);
    let plan = match_gang(&req(4), &m).expect("fits");
    assert_eq!(
        providers(&plan),
        vec![(2, 4)],
        "measured first at equal price"
    );
    assert!(plan.nodes[0].measured);
    assert_eq!(plan.unmeasured_gpus(), 0);
    // A lower price still wins, measured or not.
    let m = snap(
        &[
            Offer {
                price_per_gpu_hour: 9,
                ..boasting
            },
            measured(2, a100(), 4, 10),
        ],
        &[],
    );
    let plan = match_gang(&req(4), &m).expect("fits");
    assert_eq!(providers(&plan), vec![(1, 4)]);
    assert!(!plan.nodes[0].measured);
}

#[test]
fn at_equal_price_a_multi_node_plan_on_measured_offers_wins() {
    let boasting = |i| Offer {
        score: 900,
        ..offer(i, rtx3090(), 2, 10)
    };
    let m = snap(
        &[
            boasting(1),
            boasting(2),
            measured(3, rtx3090(), 2, 10),
            measured(4, rtx3090(), 2, 10),
        ],
        &[rtt(1, 2, 1), rtt(3, 4, 1)],
    );
    let plan = match_gang(&req(4), &m).expect("fits");
    assert_eq!(providers(&plan), vec![(3, 2), (4, 2)]);
    // Within one plan the measured node takes the extra GPUs (greedy in rank order).
    let m = snap(
        &[boasting(1), measured(2, rtx3090(), 4, 10)],
        &[rtt(1, 2, 1)],
    );
    let mut r = req(5);
    r.max_nodes = 2;
    let plan = match_gang(&r, &m).expect("fits");
    assert_eq!(providers(&plan), vec![(2, 4), (1, 1)]);
    assert_eq!(plan.unmeasured_gpus(), 1);
}

#[test]
fn compute_is_absent_in_older_offers_and_tagged_when_measured() {
    let mut json = serde_json::to_value(offer(1, a100(), 1, 10)).expect("JSON");
    assert!(
        json.get("compute").is_none(),
        "unmeasured is not written: {json}"
    );
    json.as_object_mut()
        .expect("object")
        .remove("direct_capable");
    let old: Offer = serde_json::from_value(json).expect("an older offer parses");
    assert_eq!(old.compute, Compute::Unmeasured);
    let json = serde_json::to_value(measured(1, a100(), 1, 10)).expect("JSON");
    assert_eq!(
        json["compute"],
        serde_json::json!({ "kind": "measured", "bench_version": 1 })
    );
    let back: Offer = serde_json::from_value(json).expect("round trip");
    assert_eq!(back.compute, Compute::Measured { bench_version: 1 });
    // A sample without a throughput is written as before.
    let json = serde_json::to_value(rtt(1, 2, 3)).expect("JSON");
    assert!(json.get("mbps").is_none(), "{json}");
    let s: RttSample =
        serde_json::from_value(serde_json::json!({ "a": id(1), "b": id(2), "rtt_us": 5 }))
            .expect("an older sample parses");
    assert_eq!(s.mbps, None);
}

// --- 2. Pair throughput ----------------------------------------------------------------------

#[test]
fn a_measured_pair_counts_instead_of_the_uplinks() {
    let slow = |i| Offer {
        uplink_mbps: 400,
        ..offer(i, a100(), 2, 10)
    };
    let mut r = req(4);
    r.min_bandwidth_mbps = Some(1_000);
    // Slow uplinks, nothing measured: refused per node.
    let m = snap(&[slow(1), slow(2)], &[rtt(1, 2, 1)]);
    let no = match_gang(&r, &m).expect_err("uplinks below the floor");
    assert_eq!(no.binding.constraint(), Constraint::MinBandwidth);
    // The pair measured at 5 Gbit/s: the measurement counts.
    let m = snap(&[slow(1), slow(2)], &[link(1, 2, 1, 5_000)]);
    let plan = match_gang(&r, &m).expect("the measured pair is fast");
    assert_eq!(providers(&plan), vec![(1, 2), (2, 2)]);
    // Measured twice: the lower figure counts.
    let m = snap(
        &[slow(1), slow(2)],
        &[link(1, 2, 1, 5_000), link(2, 1, 1, 900)],
    );
    assert!(match_gang(&r, &m).is_err(), "the lower sample counts");
}

#[test]
fn a_slow_measured_pair_is_avoided_and_named() {
    // 1 and 2 are the cheapest, fast uplinks, but their pair measures 300 Mbit/s.
    let m = snap(
        &[
            offer(1, a100(), 2, 10),
            offer(2, a100(), 2, 10),
            offer(3, a100(), 2, 20),
        ],
        &[link(1, 2, 1, 300), rtt(1, 3, 1), rtt(2, 3, 1)],
    );
    let mut r = req(4);
    r.min_bandwidth_mbps = Some(1_000);
    r.max_rtt_us = Some(5_000);
    let plan = match_gang(&r, &m).expect("1-3 is fast (uplinks)");
    assert_eq!(providers(&plan), vec![(1, 2), (3, 2)]);
    // Without provider 3: the RTT passes, the pair's throughput does not.
    let m = snap(
        &[offer(1, a100(), 2, 10), offer(2, a100(), 2, 10)],
        &[link(1, 2, 1, 300)],
    );
    let no = match_gang(&r, &m).expect_err("the only pair is slow");
    assert_eq!(
        no.binding,
        Binding::MinPairBandwidth {
            min_bandwidth_mbps: 1_000,
            nodes_needed: 2,
            pairs_below: 1,
            slow_providers: 0
        }
    );
    let pair = no.pair.as_deref().expect("the pair is named");
    assert_eq!((pair.a, pair.b), (id(1), id(2)));
    assert_eq!(
        (pair.mbps, pair.rtt_us, pair.bound),
        (Some(300), Some(1_000), PairBound::MinMbps(1_000))
    );
    let shown = no.to_string();
    assert!(
        shown.contains("placement.min_bandwidth_mbps")
            && shown.contains("01010101…–02020202…")
            && shown.contains("measured 300 Mbit/s, bound 1000 Mbit/s"),
        "{shown}"
    );
}

// --- 3. The failing pair in the no-fit report ------------------------------------------------

/// Three providers of 2 GPUs: 1–2 at 2 ms, both 40 ms from 3.
fn near_and_far() -> ganglion_market::MarketSnapshot {
    snap(
        &[
            offer(1, a100(), 2, 10),
            offer(2, a100(), 2, 10),
            offer(3, a100(), 2, 5),
        ],
        &[rtt(1, 2, 2), rtt(1, 3, 40), rtt(2, 3, 40)],
    )
}

#[test]
fn a_10_ms_bound_picks_the_near_pair_over_the_cheaper_far_one() {
    let r = requirements(4, "  max_rtt_ms: 10");
    assert_eq!(r.max_rtt_us, Some(10_000));
    let plan = match_gang(&r, &near_and_far()).expect("1-2 is 2 ms apart");
    assert_eq!(providers(&plan), vec![(1, 2), (2, 2)]);
}

#[test]
fn a_1_ms_bound_is_refused_naming_the_field_and_the_closest_pair() {
    let r = requirements(4, "  max_rtt_ms: 1");
    let no = match_gang(&r, &near_and_far()).expect_err("no pair within 1 ms");
    assert_eq!(no.binding.constraint(), Constraint::MaxRtt);
    let pair = no.pair.as_deref().expect("a pair is named");
    assert_eq!(pair.constraint, Constraint::MaxRtt);
    assert_eq!((pair.a, pair.b), (id(1), id(2)), "the closest failing pair");
    assert_eq!(
        (pair.rtt_us, pair.bound),
        (Some(2_000), PairBound::MaxRttUs(1_000))
    );
    let shown = no.to_string();
    assert!(
        shown.contains("placement.max_rtt_ms 1:")
            && shown.contains("closest failing placement.max_rtt_ms: pair 01010101…–02020202…")
            && shown.contains("measured 2 ms, bound 1 ms"),
        "{shown}"
    );
    let json = serde_json::to_value(&no).expect("JSON");
    assert_eq!(json["pair"]["a"], hex::encode(id(1)));
    assert_eq!(
        json["pair"]["bound"],
        serde_json::json!({ "max_rtt_us": 1000 })
    );
}

#[test]
fn an_unmeasured_pair_is_reported_as_unmeasured() {
    let m = snap(&[offer(1, a100(), 2, 10), offer(2, a100(), 2, 10)], &[]);
    let r = requirements(4, "  max_rtt_ms: 10");
    let no = match_gang(&r, &m).expect_err("never measured");
    let pair = no.pair.as_deref().expect("a pair is named");
    assert_eq!((pair.a, pair.b, pair.rtt_us), (id(1), id(2), None));
    let shown = no.to_string();
    assert!(
        shown.contains("placement.max_rtt_ms: pair 01010101…–02020202… unmeasured"),
        "{shown}"
    );
}

// --- 4. Latency groups -----------------------------------------------------------------------

/// Four 1-GPU providers: near pairs 1–3 (1 ms) and 2–4 (2 ms), every other pair 50 ms.
fn two_sites() -> ganglion_market::MarketSnapshot {
    snap(
        &(1..=4).map(|i| offer(i, a100(), 1, 10)).collect::<Vec<_>>(),
        &[
            rtt(1, 3, 1),
            rtt(2, 4, 2),
            rtt(1, 2, 50),
            rtt(1, 4, 50),
            rtt(3, 2, 50),
            rtt(3, 4, 50),
        ],
    )
}

#[test]
fn two_groups_each_take_a_near_pair_numbered_by_their_lowest_rank() {
    let r = requirements(
        4,
        "  max_gpus_per_node: 1\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
    );
    assert_eq!(r.groups, Some(groups(2, 2, 5)));
    let plan = match_gang(&r, &two_sites()).expect("two near pairs");
    assert_eq!(
        grouped(&plan),
        vec![
            (1, 1, Some(0)),
            (2, 1, Some(1)),
            (3, 1, Some(0)),
            (4, 1, Some(1))
        ]
    );
    assert!(plan.exhaustive);
    // Without groups and without an RTT bound the same job is one flat gang.
    let flat = match_gang(&requirements(4, "  max_gpus_per_node: 1"), &two_sites()).expect("fits");
    assert!(flat.nodes.iter().all(|n| n.group.is_none()));
}

#[test]
fn a_between_groups_bound_below_their_distance_is_named() {
    let r = requirements(
        4,
        "  max_rtt_ms: 20\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
    );
    let no = match_gang(&r, &two_sites()).expect_err("the groups are 50 ms apart");
    assert_eq!(no.binding.constraint(), Constraint::MaxRtt, "{no}");
    let pair = no.pair.as_deref().expect("a pair is named");
    assert_eq!(
        (pair.constraint, pair.rtt_us, pair.bound),
        (
            Constraint::MaxRtt,
            Some(50_000),
            PairBound::MaxRttUs(20_000)
        )
    );
    assert!(no.to_string().contains("placement.max_rtt_ms 20:"), "{no}");
    // 50 ms between the groups is allowed with a bound of 50.
    let r = requirements(
        4,
        "  max_rtt_ms: 50\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
    );
    assert_eq!(match_gang(&r, &two_sites()).expect("fits").nodes.len(), 4);
}

#[test]
fn groups_that_cannot_form_name_the_group_bound() {
    // 2–4 is 2 ms apart: no second group within 1 ms.
    let r = requirements(4, "  groups: { count: 2, gpus: 2, max_rtt_ms: 1 }");
    let no = match_gang(&r, &two_sites()).expect_err("one near pair only");
    assert_eq!(no.binding.constraint(), Constraint::GroupMaxRtt, "{no}");
    assert!(
        matches!(
            no.binding,
            Binding::GroupMaxRtt {
                max_rtt_ms: 1,
                groups: 2,
                gpus_per_group: 2,
                ..
            }
        ),
        "{no}"
    );
    let pair = no.pair.as_deref().expect("a pair is named");
    assert_eq!(
        (pair.a, pair.b, pair.rtt_us),
        (id(2), id(4), Some(2_000)),
        "the closest pair over 1 ms"
    );
    assert!(
        no.to_string().contains("placement.groups.max_rtt_ms 1:"),
        "{no}"
    );
}

#[test]
fn groups_take_the_cheapest_split() {
    // Provider 5 is cheap and 3 ms from 1, far from the rest: {1, 5} and {2, 4} beat
    // {1, 3} and {2, 4}.
    let mut offers: Vec<Offer> = (1..=4).map(|i| offer(i, a100(), 1, 10)).collect();
    offers.push(offer(5, a100(), 1, 5));
    let mut rtts = vec![
        rtt(1, 3, 1),
        rtt(2, 4, 2),
        rtt(1, 5, 3),
        rtt(1, 2, 50),
        rtt(1, 4, 50),
        rtt(3, 2, 50),
        rtt(3, 4, 50),
    ];
    let r = requirements(4, "  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }");
    let plan = match_gang(&r, &snap(&offers, &rtts)).expect("fits");
    assert_eq!(
        grouped(&plan),
        vec![
            (5, 1, Some(0)),
            (1, 1, Some(0)),
            (2, 1, Some(1)),
            (4, 1, Some(1))
        ]
    );
    assert_eq!(plan.price_per_hour, 35);
    // With a bound across groups, 5 must also be within it of 2 and 4: unmeasured, so not.
    let r = requirements(
        4,
        "  max_rtt_ms: 60\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
    );
    let plan = match_gang(&r, &snap(&offers, &rtts)).expect("fits");
    assert_eq!(
        plan.nodes.iter().map(|n| n.provider[0]).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    // Measured at 55 ms, it is back in.
    rtts.extend([rtt(5, 2, 55), rtt(5, 4, 55)]);
    let plan = match_gang(&r, &snap(&offers, &rtts)).expect("fits");
    assert_eq!(plan.price_per_hour, 35);
}

#[test]
fn a_group_may_be_one_machine_and_groups_span_whole_machines_only() {
    // Two 4-GPU machines never measured against each other: two groups of 4, one each (no
    // bound across groups, no pair inside a group).
    let m = snap(&[offer(1, a100(), 4, 10), offer(2, a100(), 4, 10)], &[]);
    let r = requirements(8, "  groups: { count: 2, gpus: 4, max_rtt_ms: 1 }");
    let plan = match_gang(&r, &m).expect("a machine per group");
    assert_eq!(grouped(&plan), vec![(1, 4, Some(0)), (2, 4, Some(1))]);
    // One 8-GPU machine cannot be two groups.
    let m = snap(&[offer(1, a100(), 8, 10)], &[]);
    let no = match_gang(&r, &m).expect_err("a group is a set of whole nodes");
    assert_eq!(
        no.binding,
        Binding::GroupMachines {
            groups: 2,
            machines: 1
        },
        "{no}"
    );
    assert!(no.pair.is_none(), "no pair is to blame: {no}");
    // One group of 8 on it is a plain single-machine plan, in group 0.
    let r = requirements(8, "  groups: { count: 1, gpus: 8, max_rtt_ms: 1 }");
    let plan = match_gang(&r, &m).expect("one machine");
    assert_eq!(grouped(&plan), vec![(1, 8, Some(0))]);
}

/// Three 2-GPU machines, every pair well within the groups' bound, cannot be four groups of
/// one GPU: the report names the machine count, not the latency bound.
#[test]
fn more_groups_than_eligible_machines_names_the_machine_count_not_the_rtt() {
    let offers: Vec<Offer> = (1..=3).map(|i| offer(i, a100(), 2, 10)).collect();
    let m = snap(&offers, &[rtt(1, 2, 1), rtt(1, 3, 1), rtt(2, 3, 1)]);
    let r = requirements(4, "  groups: { count: 4, gpus: 1, max_rtt_ms: 500 }");
    let no = match_gang(&r, &m).expect_err("a machine serves one group");
    assert_eq!(no.binding.constraint(), Constraint::GroupMachines, "{no}");
    assert_eq!(
        no.binding,
        Binding::GroupMachines {
            groups: 4,
            machines: 3
        }
    );
    let text = no.to_string();
    assert!(
        text.contains(
            "placement.groups.count 4: 4 groups need 4 machines (a machine serves one group), 3 \
             eligible"
        ),
        "{text}"
    );
    assert!(
        !text.contains("max_rtt_ms"),
        "the latency is not to blame: {text}"
    );
    assert!(no.pair.is_none(), "{no}");
    // A fourth machine, as near, and it fits: one group per machine.
    let mut offers = offers;
    offers.push(offer(4, a100(), 2, 10));
    let rtts: Vec<RttSample> = [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]
        .into_iter()
        .map(|(a, b)| rtt(a, b, 1))
        .collect();
    let plan = match_gang(&r, &snap(&offers, &rtts)).expect("four machines");
    assert_eq!(plan.nodes.len(), 4);
}

#[test]
fn placement_groups_are_validated_field_by_field() {
    let invalid = |placement: &str, count: u32| match spec(count, placement) {
        Err(SpecError::Invalid { field, rule }) => (field, rule),
        other => panic!("{placement}: expected a validation error, got {other:?}"),
    };
    let (field, rule) = invalid("  groups: { count: 2, gpus: 3, max_rtt_ms: 5 }", 4);
    assert_eq!(field, "placement.groups");
    assert_eq!(
        rule,
        Rule::GroupsMismatch {
            groups: 2,
            gpus: 3,
            product: 6,
            count: 4
        }
    );
    // The product is the true one, not saturated at u32::MAX (which gpus.count may be).
    let (_, rule) = invalid(
        "  groups: { count: 65536, gpus: 65536, max_rtt_ms: 5 }",
        u32::MAX,
    );
    assert_eq!(
        rule.to_string(),
        "65536 groups × 65536 GPUs is 4294967296, not gpus.count (4294967295)"
    );
    let (field, rule) = invalid(
        "  max_rtt_ms: 4\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
        4,
    );
    assert_eq!(field, "placement.max_rtt_ms");
    assert!(matches!(rule, Rule::BelowGroupRtt { .. }), "{rule}");
    for (placement, field) in [
        (
            "  groups: { count: 0, gpus: 2, max_rtt_ms: 5 }",
            "placement.groups.count",
        ),
        (
            "  groups: { count: 2, gpus: 0, max_rtt_ms: 5 }",
            "placement.groups.gpus",
        ),
        (
            "  groups: { count: 2, gpus: 2, max_rtt_ms: 0 }",
            "placement.groups.max_rtt_ms",
        ),
        (
            "  max_nodes: 1\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
            "placement.groups.count",
        ),
        (
            "  min_gpus_per_node: 3\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
            "placement.groups.gpus",
        ),
    ] {
        assert_eq!(invalid(placement, 4).0, field, "{placement}");
    }
    // Strict like every other block: all three fields, nothing else.
    for placement in [
        "  groups: { count: 2, gpus: 2 }",
        "  groups: { count: 2, gpus: 2, max_rtt_ms: 5, colour: blue }",
    ] {
        let e = spec(4, placement).expect_err(placement);
        assert!(
            matches!(e, SpecError::Syntax { .. }) && e.field().starts_with("placement.groups"),
            "{placement}: {e}"
        );
    }
    // JSON too.
    let yaml = spec(
        4,
        "  max_rtt_ms: 20\n  groups: { count: 2, gpus: 2, max_rtt_ms: 5 }",
    )
    .expect("valid");
    let json = serde_json::to_string(&yaml).expect("JSON");
    assert!(
        json.contains(r#""groups":{"count":2,"gpus":2,"max_rtt_ms":5}"#),
        "{json}"
    );
    assert_eq!(Ensemble::parse(&json, NOW_MS).expect("valid JSON"), yaml);
}
