//! The executor is killed mid-job (its task aborted and its state dropped, as a crash leaves
//! it; the containers keep running in the engine) and restarted on the same work dir and
//! blockstore: the job is adopted and finishes exactly once; a job that never started is not
//! started by the restart.

use std::sync::Arc;

use ganglion_node::executor::{ExecError, Executor, FailureReason, Phase};
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
async fn a_job_created_but_not_started_before_the_crash_is_not_started_by_the_restart() {
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
    let reports = exec.recover().await.expect("recover");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].failure(), Some(&FailureReason::Interrupted));
    assert_eq!(reports[0].billable_gpu_seconds(), 0.0);
    assert!(support::log(&exec, &job, 0).is_empty(), "never ran");
    support::assert_no_leftovers(&exec, &job).await;
}
