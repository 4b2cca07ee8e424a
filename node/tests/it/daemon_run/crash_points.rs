//! Issue 10's crash test: `kill -9` of each node at 20 seeded random points across the
//! lifecycle (lock, match, accept, assign, dispatch, run, receipts, claims). After each kill
//! the node restarts on its data dir and the job must still end `settled`, with:
//! - no job lost: the orchestrator's record reaches `settled` with one lock and one assign
//!   transaction (the providers claim their own pay);
//! - none paid twice: NTX is conserved between the orchestrator and the providers (what the
//!   providers gained is exactly what the orchestrator lost, so no second lock or payment
//!   happened), and every provider that ran a rank was paid;
//! - no container orphaned: one container per rank was started (no double dispatch; a set-up
//!   interrupted before its start is undone and made again) and none of the job's containers
//!   is left once the providers' records say `paid`.
//!
//! The points come from a seeded RNG (`GANGLION_CRASH_SEED`, default below) and are printed,
//! so a failing point can be replayed alone with `GANGLION_CRASH_POINTS=<first>..<end>`.

use std::time::{Duration, Instant};

use ganglion_node::daemon::NodeInfo;
use ganglion_node::datadir::DataDir;
use ganglion_rpc::types::JobStatus;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::http_client::HttpClient;
use jsonrpsee::rpc_params;
use rand::{Rng, SeedableRng};

use super::support::{dev_key, hash_of, wait_for};
use super::{Network, container_events, containers_named, http, start};

/// The default seed of the kill points.
const SEED: u64 = 0x6761_6e67_6c69;
/// How many kill points.
const POINTS: usize = 20;
/// Kill delays after `job_submit` returns, in ms: a 2 s probe job settles 4–5 s after submit
/// here (lock, match, accept, assign, run, claims), so this spans the whole lifecycle.
const DELAY_MS: std::ops::Range<u64> = 0..4_500;

/// One kill: which node (0 = orchestrator, 1.. = providers) and when after the submit.
#[derive(Debug, Clone, Copy)]
struct Point {
    victim: usize,
    delay_ms: u64,
}

fn points() -> (u64, Vec<Point>) {
    let seed = std::env::var("GANGLION_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let all: Vec<Point> = (0..POINTS)
        .map(|_| Point {
            victim: rng.gen_range(0..3),
            delay_ms: rng.gen_range(DELAY_MS),
        })
        .collect();
    (seed, all)
}

/// The range of points to run (`GANGLION_CRASH_POINTS=a..b`), all by default.
fn selected() -> std::ops::Range<usize> {
    std::env::var("GANGLION_CRASH_POINTS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(0..POINTS)
}

/// A JSON-RPC client of the node whose data dir is `dir` (a restart writes a new cookie).
fn client_of(dir: &std::path::Path) -> HttpClient {
    let info = NodeInfo::read(dir).expect("node.json");
    let token = DataDir::open(dir)
        .expect("data dir")
        .read_rpc_cookie()
        .expect("cookie");
    http(&info, &token)
}

/// Restarts the orchestrator on the p2p address it had (`before`): the providers know it as
/// their bootstrap peer and re-dial it there, as they would a real node with a fixed port.
fn restart_in_place(
    kids: &mut super::Children,
    node: &ganglion_node::daemon::devnet::DevnetNode,
    before: &NodeInfo,
) -> NodeInfo {
    let mut config: toml::Table = node.to_toml().parse().expect("config parses");
    let listen: Vec<toml::Value> = before
        .p2p
        .iter()
        .map(|a| {
            let bare = a.split("/p2p/").next().unwrap_or(a);
            toml::Value::String(bare.to_string())
        })
        .collect();
    config
        .get_mut("p2p")
        .and_then(toml::Value::as_table_mut)
        .expect("[p2p]")
        .insert("listen".into(), toml::Value::Array(listen));
    let path = node.data_dir.with_extension("restart.toml");
    std::fs::write(&path, config.to_string()).expect("config written");
    let log = node.data_dir.with_extension("restart.log");
    let mut child =
        ganglion_node::daemon::devnet::spawn(super::ganglion(), &path, &log).expect("spawns");
    let started = tokio::task::block_in_place(|| {
        ganglion_node::daemon::devnet::wait_started(&mut child, &node.data_dir, super::START)
    });
    kids.0.push(child);
    started.unwrap_or_else(|e| {
        panic!(
            "the orchestrator did not restart: {e}\n--- log ---\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })
}

/// On a failing point, copies the nodes' logs to `/var/tmp/ganglion-crash-logs/` (the data dirs
/// are temporary) and says so.
struct KeepLogsOnPanic(Vec<std::path::PathBuf>);

impl Drop for KeepLogsOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let to = std::path::Path::new("/var/tmp/ganglion-crash-logs");
        let _ = std::fs::create_dir_all(to);
        for dir in &self.0 {
            for ext in ["log", "restart.log"] {
                let log = dir.with_extension(ext);
                if let Some(name) = log.file_name() {
                    let _ = std::fs::copy(&log, to.join(name));
                }
            }
        }
        eprintln!("node logs copied to {}", to.display());
    }
}

async fn records(rpc: &HttpClient, id: &str) -> Vec<JobStatus> {
    rpc.request("job_status", rpc_params![id])
        .await
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_at_20_seeded_points_loses_no_job_pays_once_and_orphans_no_container() {
    let (seed, points) = points();
    let range = selected();
    eprintln!("crash points (GANGLION_CRASH_SEED={seed}): {points:?}, running {range:?}");
    let mut net = Network::start().await;
    let orch_dir = net.chain.dir.path().join("orch");
    let dirs: Vec<_> = std::iter::once(orch_dir.clone())
        .chain(net.providers.iter().map(|(n, _)| n.data_dir.clone()))
        .collect();
    let names = ["orchestrator", "pa", "pb"];
    let _logs = KeepLogsOnPanic(dirs.clone());
    let orch_key = hash_of(&dev_key(0));

    for (i, point) in points.iter().enumerate() {
        if !range.contains(&i) {
            continue;
        }
        let t0 = Instant::now();
        let since = ganglion_p2p::now_ms() / 1000;
        let providers_before = net.ntx();
        let orch_before = net.chain.ntx_of(&orch_key);
        let id = net.submit(2).await;

        tokio::time::sleep(Duration::from_millis(point.delay_ms)).await;
        let state_at_kill = records(&client_of(&dirs[point.victim]), &id).await;
        // `kids` holds the processes in the order orchestrator, pa, pb: a restart replaces the
        // victim's entry in place.
        let victim = &mut net.kids.0[point.victim];
        victim.kill().expect("SIGKILL");
        let _ = victim.wait();
        let node = if point.victim == 0 {
            None
        } else {
            Some(net.providers[point.victim - 1].0.clone())
        };
        let mut fresh = super::Children::default();
        let info = match &node {
            Some(n) => start(&mut fresh, n, names[point.victim]),
            None => restart_in_place(&mut fresh, &net.orch_node, &net.orch),
        };
        net.kids.0[point.victim] = fresh.0.pop().expect("the restarted child");
        if point.victim == 0 {
            assert_eq!(
                info.p2p, net.orch.p2p,
                "the orchestrator is back where providers dial"
            );
            net.orch = info;
            net.rpc = client_of(&orch_dir);
        }
        eprintln!(
            "point {i}: killed {} {} ms after submit (its records then: {:?}), restarted",
            names[point.victim],
            point.delay_ms,
            state_at_kill
                .iter()
                .map(|r| format!("{}={}", r.role, r.state))
                .collect::<Vec<_>>(),
        );

        let done = net.settled(&id).await;
        assert_eq!(
            done.txs.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
            ["lock", "assign"],
            "point {i}: one transaction of each kind"
        );
        // The providers that ran a rank end `paid`; then their containers are gone.
        let ran: Vec<usize> = wait_for("the providers' records to end", || async {
            let mut ran = Vec::new();
            for (p, dir) in dirs.iter().enumerate().skip(1) {
                let recs = records(&client_of(dir), &id).await;
                match recs.iter().find(|r| r.role == "provider") {
                    Some(r) if r.state == "paid" => ran.push(p),
                    Some(_) => return None,
                    None => {}
                }
            }
            Some(ran)
        })
        .await;
        assert_eq!(ran.len(), 2, "point {i}: two providers ran the job");
        let gained: Vec<i128> = net
            .ntx()
            .into_iter()
            .zip(&providers_before)
            .map(|(a, b)| i128::from(a) - i128::from(*b))
            .collect();
        let lost = i128::from(orch_before) - i128::from(net.chain.ntx_of(&orch_key));
        for p in &ran {
            assert!(
                gained[p - 1] > 0,
                "point {i}: provider {p} was not paid\n{}",
                job_lines(&dirs[*p])
            );
        }
        assert_eq!(
            gained.iter().sum::<i128>(),
            lost,
            "point {i}: the providers gained exactly what the orchestrator paid (no double lock or pay)"
        );

        let prefix = format!("ganglion-{}", &id[..40]);
        // Starts, not creations: a set-up a crash interrupted before any start is undone and
        // made again. Workload containers end in `-r<rank>`; pod sandboxes (`-pod-<rank>`) are
        // the overlay's and may be made again by a restarted provider.
        let (mut workloads, pods): (Vec<String>, Vec<String>) =
            container_events(since, &prefix, "start")
                .into_iter()
                .partition(|n| !n.contains("-pod-"));
        let n = workloads.len();
        workloads.sort();
        workloads.dedup();
        assert_eq!(
            (n, workloads.len()),
            (2, 2),
            "point {i}: one container started per rank, none twice: {workloads:?} (pods {pods:?})"
        );
        wait_for("the job's containers removed", || async {
            containers_named(&prefix).is_empty().then_some(())
        })
        .await;
        eprintln!("point {i}: settled and clean after {:?}", t0.elapsed());
    }
    drop(net.kids);
    net.chain.handle.shutdown().await;
}

/// The job lines (provider, executor, adoption, set-up) of the node logs beside data dir `dir`
/// (first start and restarts),
/// for the message of a failed payment assertion.
fn job_lines(dir: &std::path::Path) -> String {
    ["log", "restart.log"]
        .iter()
        .map(|ext| std::fs::read_to_string(dir.with_extension(ext)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
        .lines()
        .filter(|l| {
            ["provider", "executor", "adopt", "set-up", "job network"]
                .iter()
                .any(|w| l.contains(w))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
