//! Placement defaults and no-fit reports that name the binding limit ("Placement
//! defaults"): one test per limit, each on a market where that limit alone binds.

use ganglion_market::spec::ComputeCapability;
use ganglion_market::{Binding, Constraint, Ensemble, Requirements, match_gang};

use ganglion_market::test_utils::{a100, offer, providers, req, rtt, rtx3090, snap};

/// 2026-01-01T00:00:00Z, POSIX ms.
const NOW_MS: u64 = 1_767_225_600_000;

#[test]
fn default_max_nodes_lets_an_8_gpu_gang_span_four_2_gpu_machines() {
    // The spec says nothing about placement.
    let spec = Ensemble::parse(
        r#"
image: { local: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" }
command: ["torchrun", "train.py"]
gpus: { count: 8 }
limits: { max_duration_s: 3600, max_rate_ntx_per_gpu_hour: 100 }
budget_ntx: 1000
deadline_ms: 99999999999999
"#,
        NOW_MS,
    )
    .expect("a spec without a placement block is valid");
    assert_eq!(spec.placement.max_nodes, None);
    let r = Requirements::from_ensemble(&spec);
    assert_eq!(r.max_nodes, 8, "absent = up to gpus.count machines");
    let m = snap(
        &(1..=4).map(|i| offer(i, a100(), 2, 10)).collect::<Vec<_>>(),
        &[],
    );
    let plan = match_gang(&r, &m).expect("four machines hold it");
    assert_eq!(providers(&plan), vec![(1, 2), (2, 2), (3, 2), (4, 2)]);
    // One machine is still preferred when one holds the job.
    let m = snap(&[offer(1, a100(), 2, 10), offer(2, a100(), 8, 50)], &[]);
    assert_eq!(providers(&match_gang(&r, &m).expect("fits")), vec![(2, 8)]);
}

#[test]
fn max_nodes_names_the_machines_needed() {
    let m = snap(
        &(1..=4).map(|i| offer(i, a100(), 2, 10)).collect::<Vec<_>>(),
        &[],
    );
    let mut r = req(8);
    r.max_nodes = 3;
    let no = match_gang(&r, &m).expect_err("3 machines hold 6");
    assert_eq!(
        no.binding,
        Binding::MaxNodes {
            max_nodes: 3,
            nodes_needed: 4,
            largest_node: 2
        }
    );
    assert!(
        no.to_string()
            .contains("placement.max_nodes 3: the eligible GPUs need at least 4 machines"),
        "{no}"
    );
    r.max_nodes = 4;
    assert!(match_gang(&r, &m).is_ok());
    // One GPU per machine on two machines, eight asked: no number of machines is enough, and
    // the report says so instead of a machine count.
    r.max_gpus_per_node = Some(1);
    r.max_nodes = 2;
    let no = match_gang(&r, &m).expect_err("at most 4 GPUs, one per machine");
    assert!(
        no.to_string().contains(
            "placement.max_nodes 2: all the eligible machines together cannot hold the GPUs \
             asked (at most 1 on one)"
        ) && !no.to_string().contains("4294967295"),
        "{no}"
    );
}

#[test]
fn min_gpus_per_node_names_the_largest_excluded_node() {
    let m = snap(
        &[
            offer(1, a100(), 3, 10),
            offer(2, a100(), 3, 10),
            offer(3, a100(), 2, 10),
        ],
        &[],
    );
    let mut r = req(8);
    r.min_gpus_per_node = 4;
    let no = match_gang(&r, &m).expect_err("no machine has 4");
    assert_eq!(
        no.binding,
        Binding::MinGpusPerNode {
            min_gpus_per_node: 4,
            largest_excluded_node: 3,
            eligible_without: 8
        }
    );
    assert!(
        no.to_string().starts_with(
            "no plan for 8 GPUs: placement.min_gpus_per_node 4: the excluded providers have at most 3"
        ),
        "{no}"
    );
}

#[test]
fn max_rtt_names_the_bound_and_the_pairs() {
    let offers = [
        offer(1, a100(), 4, 10),
        offer(2, a100(), 4, 10),
        offer(3, a100(), 4, 10),
    ];
    let m = snap(&offers, &[rtt(1, 2, 40), rtt(2, 3, 30)]);
    let mut r = req(8);
    r.max_rtt_us = Some(20_000);
    let no = match_gang(&r, &m).expect_err("every pair is over 20 ms or unmeasured");
    assert_eq!(
        no.binding,
        Binding::MaxRtt {
            max_rtt_ms: 20,
            nodes_needed: 2,
            pairs_within: 0,
            pairs_over: 2,
            pairs_unmeasured: 1
        }
    );
    assert!(no.to_string().contains("placement.max_rtt_ms 20"), "{no}");
    r.max_rtt_us = Some(30_000);
    assert_eq!(
        providers(&match_gang(&r, &m).expect("2-3 is within 30 ms")),
        vec![(2, 4), (3, 4)]
    );
}

#[test]
fn min_bandwidth_names_the_slow_providers() {
    let mut slow = offer(1, a100(), 4, 10);
    slow.uplink_mbps = 400;
    let m = snap(&[slow, offer(2, a100(), 4, 10)], &[]);
    let mut r = req(8);
    r.min_bandwidth_mbps = Some(1_000);
    let no = match_gang(&r, &m).expect_err("only one fast provider");
    assert_eq!(
        no.binding,
        Binding::MinBandwidth {
            min_bandwidth_mbps: 1_000,
            providers_below: 1,
            gpus_below: 4,
            fastest_below_mbps: 400
        }
    );
    assert!(
        no.to_string().contains(
            "placement.min_bandwidth_mbps 1000: 1 eligible providers (4 GPUs) are below it"
        ),
        "{no}"
    );
}

#[test]
fn provider_max_job_nodes_is_named_apart_from_the_spec_limits() {
    let mut solo = offer(1, a100(), 4, 10);
    solo.max_job_nodes = Some(1);
    let m = snap(&[solo, offer(2, a100(), 4, 10)], &[]);
    let no = match_gang(&req(8), &m).expect_err("provider 1 only runs single-node jobs");
    assert_eq!(
        no.binding,
        Binding::ProviderMaxJobNodes {
            nodes_needed: 2,
            providers_refusing: 1
        }
    );
}

#[test]
fn vram_names_the_class_and_the_largest_excluded_card() {
    let m = snap(&[offer(1, rtx3090(), 8, 10), offer(2, a100(), 2, 10)], &[]);
    let mut r = req(4);
    r.min_vram_gib = 40;
    let no = match_gang(&r, &m).expect_err("only 2 GPUs of 40 GB and more");
    assert_eq!(
        no.binding,
        Binding::Vram {
            min_vram_gib: 40,
            largest_excluded_mib: 24 * 1024,
            eligible_without: 10
        }
    );
    assert!(
        no.to_string().contains(
            "gpus.min_vram_gib 40: the largest excluded GPU reports 24576 MiB, below the 40 GB class"
        ),
        "{no}"
    );
}

#[test]
fn compute_capability_names_the_best_excluded() {
    let m = snap(&[offer(1, rtx3090(), 8, 10)], &[]);
    let mut r = req(2);
    r.min_compute_capability = Some(ComputeCapability { major: 9, minor: 0 });
    let no = match_gang(&r, &m).expect_err("an RTX 3090 is 8.6");
    assert_eq!(
        no.binding,
        Binding::ComputeCapability {
            min: ComputeCapability { major: 9, minor: 0 },
            best_excluded: Some(ComputeCapability { major: 8, minor: 6 }),
            eligible_without: 8
        }
    );
    assert!(
        no.to_string()
            .contains("gpus.min_compute_capability 9.0: the best excluded GPU has 8.6"),
        "{no}"
    );
}

#[test]
fn price_names_the_ceiling_and_the_cheapest_excluded() {
    let m = snap(&[offer(1, a100(), 8, 250), offer(2, a100(), 8, 300)], &[]);
    let mut r = req(4);
    r.max_rate = 200;
    let no = match_gang(&r, &m).expect_err("every provider is dearer");
    assert_eq!(
        no.binding,
        Binding::MaxRate {
            max_rate: 200,
            cheapest_excluded: 250,
            eligible_without: 16
        }
    );
    assert!(
        no.to_string().contains(
            "limits.max_rate_ntx_per_gpu_hour 200 is below the cheapest excluded price 250"
        ),
        "{no}"
    );
}

#[test]
fn the_binding_exclusion_is_the_one_whose_lifting_reaches_the_count() {
    // 2 cheap 24 GB GPUs and 8 80 GB ones above the rate: lifting the rate alone gives back 8
    // (enough for 6); lifting the VRAM class alone only the 2 cheap ones.
    let m = snap(&[offer(1, rtx3090(), 2, 10), offer(2, a100(), 8, 500)], &[]);
    let mut r = req(6);
    r.min_vram_gib = 40;
    r.max_rate = 100;
    let no = match_gang(&r, &m).expect_err("nothing eligible");
    assert_eq!(no.binding.constraint(), Constraint::MaxRate, "{no}");
    let got: Vec<Constraint> = no.excluded.iter().map(|e| e.constraint).collect();
    assert_eq!(got, vec![Constraint::MaxRate, Constraint::Vram]);
}
