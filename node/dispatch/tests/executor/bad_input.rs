//! Each bad input fails the job cleanly: the reason recorded, no leftovers; nothing billable
//! where the node failed to deliver, the measured GPU time where the workload itself failed
//! (`FailureReason::is_workload_outcome`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ganglion_dispatch::executor::docker::DockerExecutor;
use ganglion_dispatch::executor::engine::DockerEngine;
use ganglion_dispatch::executor::plan::{ImageSource, JobPlan};
use ganglion_dispatch::executor::{Executor, FailureReason, JobReport, Phase};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::support::{self, Exec, Node};

async fn run_failing(exec: &Exec, plan: JobPlan) -> (JobReport, Duration) {
    let job = plan.job.clone();
    let t0 = Instant::now();
    let report = exec
        .run(plan)
        .await
        .expect("a failed job is a report, not an error");
    let took = t0.elapsed();
    assert!(
        report.failure().is_some(),
        "must fail: {:?}",
        report.outcome
    );
    let measured: f64 = report.ranks.iter().map(|r| r.gpu_seconds).sum();
    if report
        .failure()
        .is_some_and(FailureReason::is_workload_outcome)
    {
        assert!(
            (report.billable_gpu_seconds() - measured).abs() < 1e-9,
            "the GPU time given to the workload is owed: {report:?}"
        );
    } else {
        assert_eq!(report.billable_gpu_seconds(), 0.0, "nothing paid");
    }
    let record = exec.record(&job).expect("table").expect("record");
    assert_eq!(record.phase, Phase::Failed);
    // Floats may differ in the last bit after the JSON round trip: compare what matters.
    let stored = record.report.as_ref().expect("report recorded");
    assert_eq!(stored.outcome, report.outcome, "reason recorded");
    assert_eq!(stored.ranks.len(), report.ranks.len());
    assert!(record.cleaned);
    support::assert_no_leftovers(exec, &job).await;
    (report, took)
}

#[tokio::test]
async fn an_image_that_does_not_exist() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let plan = support::plan(
        support::job_id("noimg"),
        "ganglion/does-not-exist:never",
        &["x"],
        2,
    );
    let (report, _) = run_failing(&exec, plan).await;
    match report.failure() {
        Some(FailureReason::ImageUnavailable { detail }) => {
            assert!(detail.contains("ganglion/does-not-exist:never"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    assert!(report.ranks.is_empty(), "no container was created");

    // An archive whose CID the blockstore does not have.
    let mut plan = support::plan(support::job_id("noarchive"), "unused", &["x"], 1);
    let cid = cid::Cid::try_from("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy")
        .expect("cid");
    plan.image = ImageSource::Rootfs { cid };
    let (report, _) = run_failing(&exec, plan).await;
    assert!(
        matches!(report.failure(), Some(FailureReason::ImageUnavailable { detail }) if detail.contains(&cid.to_string())),
        "{:?}",
        report.outcome
    );
}

#[tokio::test]
async fn a_command_that_exits_non_zero_stops_the_other_ranks() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let plan = support::plan(
        support::job_id("exit"),
        &support::probe_image(),
        &["rank-exit", "1", "3", "sleep", "60"],
        2,
    );
    let (report, took) = run_failing(&exec, plan).await;
    assert_eq!(
        report.failure(),
        Some(&FailureReason::NonZeroExit {
            node_rank: 1,
            exit_code: 3
        })
    );
    assert!(
        took < Duration::from_secs(30),
        "rank 0 was killed, not waited for: {took:?}"
    );
    assert_eq!(report.ranks[0].exit_code, Some(137), "rank 0 killed");
    assert!(
        report.ranks.iter().all(|r| r.outputs.is_none()),
        "failed jobs pin no outputs"
    );
    assert!(
        report.ranks.iter().all(|r| r.logs.is_some()),
        "logs are kept for diagnosis"
    );
}

#[tokio::test]
async fn an_out_of_memory_kill() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let mut plan = support::plan(
        support::job_id("oom"),
        &support::probe_image(),
        &["alloc", "512"],
        1,
    );
    plan.per_gpu.mem_gib = 0.0625; // 64 MiB
    let (report, _) = run_failing(&exec, plan).await;
    assert_eq!(
        report.failure(),
        Some(&FailureReason::OutOfMemory { node_rank: 0 })
    );
    assert!(report.ranks[0].oom_killed);
}

#[tokio::test]
async fn a_container_that_never_finishes_is_killed_at_the_wall_clock_limit() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let mut plan = support::plan(
        support::job_id("forever"),
        &support::probe_image(),
        &["sleep", "600"],
        2,
    );
    plan.max_duration_s = 2;
    let (report, took) = run_failing(&exec, plan).await;
    assert_eq!(
        report.failure(),
        Some(&FailureReason::WallClockExceeded { limit_s: 2 })
    );
    assert!(
        report.billable_gpu_seconds() >= 2.0,
        "the GPUs were held up to the limit: owed, not 0: {report:?}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(20),
        "{took:?}"
    );
}

#[tokio::test]
async fn outputs_larger_than_the_spec_allows() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    // Written and exited: caught by the final check. Written and still running: caught while
    // it runs, the job stopped well before its 60 s sleep ends.
    for (prefix, command) in [
        ("bigout", &["write", "big.bin", "10000"][..]),
        (
            "bigout-live",
            &["write", "big.bin", "10000", "sleep", "60"][..],
        ),
    ] {
        let mut plan = support::plan(support::job_id(prefix), &support::probe_image(), command, 1);
        plan.per_gpu.disk_gib = 4096.0 / f64::from(1u32 << 30); // 4 KiB
        let (report, took) = run_failing(&exec, plan).await;
        match report.failure() {
            Some(FailureReason::OutputsTooLarge {
                node_rank: 0,
                bytes,
                limit_bytes: 4096,
            }) => assert!(*bytes > 4096 && *bytes <= 10_000, "{bytes}"),
            other => panic!("{prefix}: {other:?}"),
        }
        assert!(report.ranks[0].outputs.is_none());
        assert!(took < Duration::from_secs(30), "{prefix}: {took:?}");
    }
}

/// A unix-socket proxy in front of the real engine; `kill` drops the listener and every
/// forwarded connection, as when dockerd dies (the engine itself keeps running, so the test
/// can check that a restarted executor cleans up).
struct EngineProxy {
    path: PathBuf,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl EngineProxy {
    fn start(path: &Path, upstream: PathBuf) -> Self {
        let listener = UnixListener::bind(path).expect("bind proxy");
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let conns = Arc::clone(&tasks);
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = UnixStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                conns.lock().expect("lock").push(task);
            }
        });
        Self {
            path: path.to_path_buf(),
            tasks,
            accept,
        }
    }

    fn kill(&self) {
        self.accept.abort();
        for t in self.tasks.lock().expect("lock").drain(..) {
            t.abort();
        }
    }
}

#[tokio::test]
async fn an_engine_that_disappears_mid_job() {
    let node = Node::new();
    let proxy = EngineProxy::start(&node.dir.path().join("proxy.sock"), support::socket());
    let job = support::job_id("gone");
    let plan = support::plan(job.clone(), &support::probe_image(), &["sleep", "60"], 2);
    {
        let engine = DockerEngine::connect(&proxy.path, 30)
            .await
            .expect("engine via proxy");
        let exec =
            Arc::new(DockerExecutor::new(engine, node.pinner(), node.config()).expect("executor"));
        let running = tokio::spawn({
            let exec = Arc::clone(&exec);
            async move { exec.run(plan).await }
        });
        wait_for_phase(&exec, &job, Phase::Running).await;
        proxy.kill();
        let report = tokio::time::timeout(Duration::from_secs(30), running)
            .await
            .expect("run returns once the engine is gone")
            .expect("task")
            .expect("report");
        assert!(
            matches!(
                report.failure(),
                Some(FailureReason::EngineUnavailable { .. })
            ),
            "{:?}",
            report.outcome
        );
        assert_eq!(report.billable_gpu_seconds(), 0.0);
        let record = exec.record(&job).expect("table").expect("record");
        assert_eq!(record.phase, Phase::Failed);
        assert!(!record.cleaned, "cleanup cannot happen without the engine");
    }
    // The engine is back (the node reconnects to it): the leftovers go at recovery.
    let exec = node.executor(node.pinner()).await;
    assert_eq!(
        support::leftovers(&exec, &job).await.len(),
        2,
        "containers survived the outage"
    );
    let reports = exec.recover().await.expect("recover");
    assert!(reports.is_empty(), "a failed job is not reported again");
    let record = exec.record(&job).expect("table").expect("record");
    assert!(record.cleaned);
    assert_eq!(record.phase, Phase::Failed);
    support::assert_no_leftovers(&exec, &job).await;
}

pub(crate) async fn wait_for_phase<S, N>(
    exec: &DockerExecutor<S, N>,
    job: &ganglion_dispatch::executor::RunId,
    phase: Phase,
) where
    S: ganglion_storage::blockstore::Blockstore + 'static,
    N: ganglion_dispatch::executor::network::ClusterNetwork,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if exec
            .record(job)
            .expect("table")
            .is_some_and(|r| r.phase == phase)
        {
            return;
        }
        assert!(Instant::now() < deadline, "job never reached {phase}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
