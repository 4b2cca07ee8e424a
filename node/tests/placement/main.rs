//! Network-aware placement across real node processes on a delaying network.
//!
//! Needs root (namespaces, raw sockets). Not root: skipped loudly. Root but `ip` or `ethtool`
//! missing: fails, naming what is missing (CI runs as root and installs both).
//!
//! A binary of its own, apart from `tests/it` (the one integration binary): it changes the
//! host's network (namespaces, veths) and runs, or is skipped, on its own.

mod cluster;
mod delaynet;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use cluster::{Cluster, Provider};
use delaynet::{DelayNet, in_netns};
use ganglion_rpc::api::{JobApiClient, MarketApiClient};
use ganglion_rpc::types::JobStatus;

/// Every provider's price but the cheap one's, NTX base units per GPU-hour.
const PRICE: u64 = 3_600_000;

/// The delay matrix over ports (0 = this host, `h + 1` = host `h`) with the round trips
/// `pairs` (host, host, ms) between hosts and none to this host.
fn matrix(hosts: usize, pairs: &[(usize, usize, u32)]) -> Vec<Vec<u32>> {
    let mut m = vec![vec![0; hosts + 1]; hosts + 1];
    for &(a, b, ms) in pairs {
        m[a + 1][b + 1] = ms;
        m[b + 1][a + 1] = ms;
    }
    m
}

/// Waits until the orchestrator's matrix holds a measurement of every pair of `providers`
/// (both ends reporting it); returns the matrix.
async fn full_matrix(c: &Cluster) -> ganglion_rpc::audit::MarketMatrix {
    let keys: Vec<&str> = c
        .providers
        .iter()
        .map(|p| p.payment_key_hash.as_str())
        .collect();
    let pairs = keys.len() * (keys.len() - 1) / 2;
    let end = Instant::now() + Duration::from_secs(180);
    let mut last = None;
    while Instant::now() < end {
        if let Ok(m) = MarketApiClient::matrix(c.orchestrator.rpc()).await {
            let both_ends = m
                .pairs
                .iter()
                .filter(|p| keys.contains(&p.a.as_str()) && keys.contains(&p.b.as_str()))
                .filter(|p| !p.one_sided)
                .count();
            if both_ends == pairs {
                return m;
            }
            last = Some(m);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "the orchestrator's matrix never held all {pairs} pairs: {last:#?}\n--- orchestrator ---\n{}",
        c.log("orchestrator", 40)
    )
}

/// Submits `spec` (JSON) to the orchestrator; returns the job id.
async fn submit(c: &Cluster, spec: serde_json::Value) -> String {
    JobApiClient::submit(c.orchestrator.rpc(), spec)
        .await
        .expect("job_submit")
        .job_id
}

/// The orchestrator's record of `job` once `done` holds of it, within `timeout`.
async fn orchestrator_record(
    c: &Cluster,
    job: &str,
    timeout: Duration,
    done: impl Fn(&JobStatus) -> bool,
) -> JobStatus {
    let end = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < end {
        if let Ok(records) = JobApiClient::status(c.orchestrator.rpc(), job.to_string()).await
            && let Some(r) = records.into_iter().find(|r| r.role == "orchestrator")
        {
            if done(&r) {
                return r;
            }
            last = Some(r);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "job {job} never got there: {last:#?}\n--- orchestrator ---\n{}",
        c.log("orchestrator", 60)
    )
}

/// A spec of `gpus` GPUs on the probe image (a short run), with `placement`.
fn probe_spec(gpus: u32, placement: serde_json::Value) -> serde_json::Value {
    let image = ganglion_node::demo::cluster::probe_image().expect("the probe image");
    serde_json::json!({
        "image": { "local": image },
        "command": ["echo", "placed", "sleep", "5"],
        "gpus": { "count": gpus },
        "placement": placement,
        "limits": { "max_duration_s": 120, "max_rate_ntx_per_gpu_hour": PRICE },
        "budget_ntx": 2_500_000,
        "deadline": "+10m",
    })
}

/// `Some(net)` to go on; `None` (after saying so loudly) when not root.
fn delay_net(hosts: usize, rtt_ms: Vec<Vec<u32>>) -> Option<DelayNet> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: not root; the delaying network needs namespaces and raw sockets");
        return None;
    }
    if let Some(why) = delaynet::unavailable() {
        panic!("root, but the delaying network cannot be built here: {why}");
    }
    Some(DelayNet::new(hosts, rtt_ms).expect("build the delaying network"))
}

/// Median of `n` one-byte TCP round trips from namespace `from` to `to`'s echo server, ms.
fn tcp_rtt_ms(net: &DelayNet, from: usize, to: usize, n: usize) -> f64 {
    let server = net.host(to).clone();
    let addr = std::net::SocketAddr::from((server.ip, 7700 + to as u16));
    let listening = std::sync::Arc::new(std::sync::Barrier::new(2));
    let ready = listening.clone();
    let echo = in_netns(&server.netns, move || {
        let l = TcpListener::bind(addr).expect("bind");
        ready.wait();
        let (mut c, _) = l.accept().expect("accept");
        let mut b = [0u8; 1];
        while c.read_exact(&mut b).is_ok() {
            if c.write_all(&b).is_err() {
                break;
            }
        }
    })
    .expect("enter the server's namespace");
    listening.wait();
    let client = in_netns(&net.host(from).netns, move || {
        let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
        c.set_nodelay(true).expect("nodelay");
        let mut b = [7u8; 1];
        let mut samples: Vec<f64> = (0..n)
            .map(|_| {
                let t = Instant::now();
                c.write_all(&b).expect("write");
                c.read_exact(&mut b).expect("read");
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[n / 2]
    })
    .expect("enter the client's namespace");
    let rtt = client.join().expect("client").expect("entered");
    echo.join().expect("echo");
    rtt
}

/// The harness itself: a round trip between two hosts takes at least the matrix's value, and
/// a near pair stays well below a far one.
#[test]
fn the_delaying_bridge_adds_each_pairs_round_trip() {
    // Port 0 is this host; hosts 0 and 1 are 4 ms apart, host 2 is 40 ms from both.
    let rtt = vec![
        vec![0, 0, 0, 0],
        vec![0, 0, 4, 40],
        vec![0, 4, 0, 40],
        vec![0, 40, 40, 0],
    ];
    let Some(net) = delay_net(3, rtt) else { return };
    let near = tcp_rtt_ms(&net, 0, 1, 9);
    let far = tcp_rtt_ms(&net, 0, 2, 9);
    eprintln!("TCP round trip: near pair {near:.2} ms (4 added), far pair {far:.2} ms (40 added)");
    assert!(near >= 4.0, "near pair {near:.2} ms, below the 4 ms added");
    assert!(far >= 40.0, "far pair {far:.2} ms, below the 40 ms added");
    assert!(
        near < 20.0,
        "near pair {near:.2} ms: the bridge adds far too much"
    );
}

/// Three providers of two GPUs: A and B 4 ms apart, C 60 ms from both and the cheapest, so
/// that a plan blind to latency would take C. A 4-GPU spec with `max_rtt_ms: 20` is placed on
/// A and B (the plan's measured link says so, and the chain's assignment names them); a bound
/// below every pair (2 ms) is refused with the field and a pair named.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_max_rtt_spec_takes_the_near_pair_and_a_bound_below_every_pair_names_one() {
    let Some(net) = delay_net(3, matrix(3, &[(0, 1, 4), (0, 2, 60), (1, 2, 60)])) else {
        return;
    };
    let c = Cluster::start(
        net,
        &[
            Provider {
                host: 0,
                gpus: 2,
                price: PRICE,
                overlay: "",
            },
            Provider {
                host: 1,
                gpus: 2,
                price: PRICE,
                overlay: "",
            },
            Provider {
                host: 2,
                gpus: 2,
                price: PRICE / 2,
                overlay: "",
            },
        ],
    )
    .await;
    let (a, b, far) = (
        c.providers[0].payment_key_hash.clone(),
        c.providers[1].payment_key_hash.clone(),
        c.providers[2].payment_key_hash.clone(),
    );
    let m = full_matrix(&c).await;
    let rtt = |x: &str, y: &str| {
        m.pairs
            .iter()
            .find(|p| (p.a == x && p.b == y) || (p.a == y && p.b == x))
            .map(|p| p.rtt_p50_us)
            .expect("pair in the matrix")
    };
    assert!((4_000..20_000).contains(&rtt(&a, &b)), "{m:#?}");
    assert!(rtt(&a, &far) >= 60_000 && rtt(&b, &far) >= 60_000, "{m:#?}");

    // A bound below every pair first, while every provider is free: refused, naming the
    // field and the closest failing pair (A, B).
    let placement = serde_json::json!({ "min_gpus_per_node": 2, "max_rtt_ms": 2 });
    let tight = submit(&c, probe_spec(4, placement)).await;
    let r = orchestrator_record(&c, &tight, Duration::from_secs(60), |r| {
        r.last_error.is_some()
    })
    .await;
    let why = r.last_error.clone().unwrap_or_default();
    assert_eq!(r.state, "matching", "{r:#?}");
    assert!(why.contains("placement.max_rtt_ms"), "{why}");
    assert!(
        why.contains(&a[..8]) && why.contains(&b[..8]),
        "the closest pair (A, B) is named: {why}"
    );

    let placement = serde_json::json!({ "min_gpus_per_node": 2, "max_rtt_ms": 20 });
    let job = submit(&c, probe_spec(4, placement)).await;
    let r = orchestrator_record(&c, &job, Duration::from_secs(120), |r| r.nodes.len() == 2).await;
    let assigned: BTreeSet<&str> = r.nodes.iter().map(|n| n.provider.as_str()).collect();
    assert_eq!(assigned, BTreeSet::from([a.as_str(), b.as_str()]), "{r:#?}");
    assert_eq!(r.links.len(), 1, "the plan's one pair: {r:#?}");
    assert!(r.links[0].rtt_p50_us < 20_000, "{r:#?}");
}

/// The grouped workload, compiled in: hierarchical data parallelism over latency groups.
const GROUPED_TRAIN_PY: &str = include_str!("../../../examples/workloads/grouped_train.py");

/// Four providers of one GPU: two near pairs (3 ms inside) 50 ms apart. `placement.groups` of
/// two groups of two GPUs within 10 ms puts each near pair in a group — listed group by group
/// in the assignment — and `examples/workloads/grouped_train.py` runs across the four
/// providers' containers (the overlay between their namespaces) with every rank agreeing on
/// its group and its weights: the job succeeds only if every rank exits 0, which each does
/// only when all checksums and the two-level gradient sums agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn latency_groups_are_the_near_pairs_and_the_grouped_workload_agrees() {
    let pairs = [
        (0, 1, 3),
        (2, 3, 3),
        (0, 2, 50),
        (0, 3, 50),
        (1, 2, 50),
        (1, 3, 50),
    ];
    let Some(net) = delay_net(4, matrix(4, &pairs)) else {
        return;
    };
    let image = ganglion_node::demo::torch::image(|_| {}).expect("the torch image");
    let one = |host| Provider {
        host,
        gpus: 1,
        price: PRICE,
        overlay: "",
    };
    let c = Cluster::start(net, &[one(0), one(1), one(2), one(3)]).await;
    full_matrix(&c).await;
    let key = |i: usize| c.providers[i].payment_key_hash.clone();
    let spec = serde_json::json!({
        "image": { "local": image },
        "command": ["sh", "-c", "python3 -c \"$GROUPED_TRAIN_PY\""],
        "env": {
            "GROUPED_TRAIN_PY": GROUPED_TRAIN_PY,
            "TRAIN_STEPS": "10",
            "DDP_TIMEOUT": "120",
            "HOME": "/tmp",
        },
        "gpus": { "count": 4 },
        "placement": {
            "max_rtt_ms": 200,
            "groups": { "count": 2, "gpus": 2, "max_rtt_ms": 10 },
        },
        "distributed": { "framework": "torch" },
        "limits": { "max_duration_s": 300, "max_rate_ntx_per_gpu_hour": PRICE },
        "budget_ntx": 2_500_000,
        "deadline": "+10m",
    });
    let job = submit(&c, spec).await;
    let r = orchestrator_record(&c, &job, Duration::from_secs(120), |r| r.nodes.len() == 4).await;
    // Listed group by group: ranks 0-1 are one near pair, ranks 2-3 the other.
    let group =
        |i: usize| BTreeSet::from([r.nodes[i].provider.clone(), r.nodes[i + 1].provider.clone()]);
    let near = [
        BTreeSet::from([key(0), key(1)]),
        BTreeSet::from([key(2), key(3)]),
    ];
    assert!(
        near.contains(&group(0)) && near.contains(&group(2)),
        "{r:#?}"
    );
    assert_ne!(group(0), group(2), "{r:#?}");
    // `job status` names each node's group, as the plan placed it.
    let groups: Vec<Option<u32>> = r.nodes.iter().map(|n| n.group).collect();
    assert_eq!(groups, [Some(0), Some(0), Some(1), Some(1)], "{r:#?}");
    let r = orchestrator_record(&c, &job, Duration::from_secs(420), |r| r.outcome.is_some()).await;
    assert_eq!(r.outcome.as_deref(), Some("succeeded"), "{r:#?}");
}

/// A pair whose overlay link cannot form: provider 2 drops every UDP datagram and refuses to
/// relay (`[overlay] relay = false`), and it is the cheapest, so the first plan holds it. No
/// link of that plan works: no rank starts, both nodes fail within the link timeout claiming
/// no GPU time, nothing is paid; the orchestrator locks the spec again as a new job without
/// the pair's two nodes (two nodes cannot tell which end failed), and that job runs on the
/// other two.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_network_cannot_form_is_never_charged_and_is_matched_again() {
    let Some(net) = delay_net(4, matrix(4, &[])) else {
        return;
    };
    const FAST: &str = "link_timeout_s = 15";
    const CUT_OFF: &str = "link_timeout_s = 15\nrelay = false";
    let blocked = net.host(2).netns.clone();
    for chain in ["INPUT", "OUTPUT"] {
        let out = std::process::Command::new("ip")
            .args([
                "netns", "exec", &blocked, "iptables", "-A", chain, "-p", "udp", "-j", "DROP",
            ])
            .output()
            .expect("run iptables");
        assert!(out.status.success(), "iptables: {out:?}");
    }
    let at = |host, price, overlay| Provider {
        host,
        gpus: 1,
        price,
        overlay,
    };
    let c = Cluster::start(
        net,
        &[
            at(0, PRICE / 2, FAST),
            at(1, PRICE, FAST),
            at(2, PRICE / 4, CUT_OFF),
            at(3, PRICE, FAST),
        ],
    )
    .await;
    full_matrix(&c).await;
    let key = |i: usize| c.providers[i].payment_key_hash.clone();
    let job = submit(&c, probe_spec(2, serde_json::json!({}))).await;
    let first =
        orchestrator_record(&c, &job, Duration::from_secs(60), |r| r.nodes.len() == 2).await;
    let culprits: BTreeSet<String> = first.nodes.iter().map(|n| n.provider.clone()).collect();
    assert!(
        culprits.contains(&key(2)),
        "the cheapest is in the plan: {first:#?}"
    );
    // Both nodes fail within the link timeout (an upper bound with room for the claims).
    let r = orchestrator_record(&c, &job, Duration::from_secs(180), |r| {
        r.state == "settled" && r.successor.is_some()
    })
    .await;
    assert_eq!(r.outcome.as_deref(), Some("failed"), "{r:#?}");
    for n in &r.nodes {
        assert_eq!(n.gpu_ms, Some(0), "no GPU time attested: {r:#?}");
        assert_eq!(
            n.paid.as_ref().map(|p| p.get()),
            Some(0),
            "nothing paid: {r:#?}"
        );
        let why = n.reason.as_deref().unwrap_or_default();
        assert!(why.contains("did not form"), "named reason: {r:#?}");
    }
    let error = r.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("the job network did not form") && error.contains("matched again as job"),
        "{r:#?}"
    );
    // The new job: the same spec, without the pair that could not link, runs to the end.
    let next = r.successor.clone().expect("a successor");
    let s = orchestrator_record(&c, &next, Duration::from_secs(300), |r| r.outcome.is_some()).await;
    assert_eq!(s.predecessor.as_deref(), Some(job.as_str()), "{s:#?}");
    assert_eq!(s.outcome.as_deref(), Some("succeeded"), "{s:#?}");
    let placed: BTreeSet<String> = s.nodes.iter().map(|n| n.provider.clone()).collect();
    assert!(placed.is_disjoint(&culprits), "{s:#?}");
    assert!(
        s.nodes
            .iter()
            .all(|n| n.paid.as_ref().is_some_and(|p| p.get() > 0)),
        "{s:#?}"
    );
}
