//! The executor is killed mid-job (its task aborted and its state dropped, as a crash leaves
//! it; the containers keep running in the engine) and restarted on the same work dir and
//! blockstore: the job is adopted and finishes exactly once; a job whose containers were
//! created but never started has its set-up undone by the restart and runs once when dispatched
//! again (its first start).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ganglion_dispatch::executor::docker::DockerExecutor;
use ganglion_dispatch::executor::plan::JobPlan;

use ganglion_dispatch::executor::{ExecError, Executor, Phase};
use ganglion_storage::blockstore::MemoryBlockstore;
use ganglion_storage::unixfs::{self, ImportOptions};

use crate::bad_input::wait_for_phase;
use crate::support::{self, Node};

#[tokio::test]
async fn a_job_running_when_the_executor_dies_finishes_exactly_once_after_restart() {
    let node = Node::new();
    let job = support::job_id("crash");
    let plan = support::plan(
        job.clone(),
        &support::probe_image(),
        &["sleep", "3", "write", "out.txt", "5000", "echo", "finished"],
        2,
    );
    let first_containers = {
        let exec = Arc::new(node.executor(node.pinner()).await);
        let task = tokio::spawn({
            let exec = Arc::clone(&exec);
            let plan = plan.clone();
            async move { exec.run(plan).await }
        });
        wait_for_phase(&exec, &job, Phase::Running).await;
        task.abort();
        assert!(task.await.expect_err("killed").is_cancelled());
        let record = exec.record(&job).expect("table").expect("record");
        assert_eq!(record.phase, Phase::Running);
        record.containers
    };
    // Restart: a new executor over the same dirs.
    let pinner = node.pinner();
    let exec = node.executor(pinner.clone()).await;
    let reports = exec.recover().await.expect("recover");
    assert_eq!(reports.len(), 1);
    let report = &reports[0];
    assert!(report.adopted);
    assert!(
        report.image.is_some(),
        "the image record survives the restart"
    );
    assert!(report.failure().is_none(), "{:?}", report.outcome);
    let ids: Vec<_> = report
        .ranks
        .iter()
        .map(|r| (r.node_rank, r.container_id.clone()))
        .collect();
    assert_eq!(
        ids, first_containers,
        "the same containers, none created again"
    );

    let mut expected = tempfile::tempdir().expect("tmp").keep();
    expected.push("outputs");
    std::fs::create_dir_all(&expected).expect("mkdir");
    let content: Vec<u8> = (0..5000usize)
        .map(|i| ((i * 31 + "out.txt".len()) % 251) as u8)
        .collect();
    std::fs::write(expected.join("out.txt"), content).expect("write");
    let independent = unixfs::import_dir(
        &expected,
        &ImportOptions::cid_v1(),
        &MemoryBlockstore::new(),
    )
    .expect("import");
    for rank in &report.ranks {
        assert_eq!(rank.exit_code, Some(0));
        assert_eq!(
            rank.outputs.as_ref().expect("outputs").cid,
            independent.root.to_string()
        );
        let log = support::log(&exec, &job, rank.node_rank);
        assert_eq!(log.matches("finished").count(), 1, "ran once: {log}");
    }
    let _ = std::fs::remove_dir_all(expected.parent().expect("parent"));
    assert_eq!(
        exec.record(&job).expect("table").expect("record").phase,
        Phase::Succeeded
    );
    assert!(
        exec.recover().await.expect("again").is_empty(),
        "nothing left to adopt"
    );
    assert!(matches!(
        exec.run(plan).await,
        Err(ExecError::AlreadyKnown { .. })
    ));
    support::assert_no_leftovers(&exec, &job).await;
}

#[tokio::test]
async fn a_job_created_but_not_started_before_the_crash_is_undone_and_runs_once_when_dispatched_again()
 {
    let node = Node::new();
    let job = support::job_id("notstarted");
    let plan = support::plan(job.clone(), &support::probe_image(), &["echo", "x"], 2);
    {
        let exec = node.executor(node.pinner()).await;
        let (record, _, _) = exec
            .create(&plan)
            .await
            .expect("accepted")
            .expect("created");
        assert_eq!(record.phase, Phase::Preparing);
        assert_eq!(support::leftovers(&exec, &job).await.len(), 2);
    }
    let exec = node.executor(node.pinner()).await;
    assert!(
        exec.recover().await.expect("recover").is_empty(),
        "nothing ran, so nothing to report"
    );
    assert!(
        exec.record(&job).expect("table").is_none(),
        "the set-up is undone and the job forgotten"
    );
    assert!(support::leftovers(&exec, &job).await.is_empty());
    // The dispatcher runs it again: its first start.
    let report = exec.run(plan).await.expect("runs");
    assert_eq!(report.failure(), None, "{report:?}");
    for rank in 0..2 {
        assert_eq!(
            support::log(&exec, &job, rank).matches('x').count(),
            1,
            "rank {rank} ran exactly once"
        );
    }
    assert!(exec.recover().await.expect("again").is_empty());
    support::assert_no_leftovers(&exec, &job).await;
}

/// Set in the child process of the SIGKILL test: `<state dir>\n<plan JSON>`.
const CHILD_ENV: &str = "GANGLION_EXECUTOR_CRASH_CHILD";
const SIGKILL_TEST: &str =
    "recovery::an_executor_process_killed_with_sigkill_mid_job_is_adopted_on_restart";

/// The child: runs the job in a fresh executor, touches `running` once the job table says
/// Running, then waits to be killed.
async fn crash_child(arg: &str) {
    let (dir, plan) = arg.split_once('\n').expect("dir and plan");
    let dir = PathBuf::from(dir);
    let plan: JobPlan = serde_json::from_str(plan).expect("plan");
    let exec = Arc::new(
        DockerExecutor::new(
            support::engine().await,
            support::pinner_at(&dir),
            support::config_at(&dir),
        )
        .expect("executor"),
    );
    let job = plan.job.clone();
    let run = tokio::spawn({
        let exec = Arc::clone(&exec);
        async move { exec.run(plan).await }
    });
    wait_for_phase(&exec, &job, Phase::Running).await;
    std::fs::write(dir.join("running"), b"").expect("marker");
    let _ = run.await;
    panic!("the child must be killed before the job ends");
}

/// A real `kill -9` of the process running the executor (this test binary, re-executed as a
/// child), then a restart over the same state dir: the job table (sled) survived, the job is
/// adopted and finishes exactly once.
#[tokio::test]
async fn an_executor_process_killed_with_sigkill_mid_job_is_adopted_on_restart() {
    if let Ok(arg) = std::env::var(CHILD_ENV) {
        crash_child(&arg).await;
        return;
    }
    let node = Node::new();
    let job = support::job_id("sigkill");
    let plan = support::plan(
        job.clone(),
        &support::probe_image(),
        &["sleep", "3", "echo", "finished"],
        2,
    );
    let arg = format!(
        "{}\n{}",
        node.dir.path().display(),
        serde_json::to_string(&plan).expect("json")
    );
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([SIGKILL_TEST, "--exact", "--nocapture"])
        .env(CHILD_ENV, arg)
        .spawn()
        .expect("spawn child");
    let marker = node.dir.path().join("running");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("child exited before the job ran: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "child never reported the job running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reap");
    assert!(!status.success(), "killed, not finished: {status}");

    let exec = node.executor(node.pinner()).await;
    let record = exec
        .record(&job)
        .expect("table")
        .expect("record survived kill -9");
    assert_eq!(record.phase, Phase::Running);
    assert_eq!(record.containers.len(), 2);
    let reports = exec.recover().await.expect("recover");
    assert_eq!(reports.len(), 1);
    assert!(reports[0].adopted);
    assert!(reports[0].failure().is_none(), "{:?}", reports[0].outcome);
    for rank in 0..2 {
        let log = support::log(&exec, &job, rank);
        assert_eq!(log.matches("finished").count(), 1, "ran once: {log}");
    }
    assert!(matches!(
        exec.run(plan).await,
        Err(ExecError::AlreadyKnown { .. })
    ));
    support::assert_no_leftovers(&exec, &job).await;
}
