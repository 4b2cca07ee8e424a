use std::path::Path;
use std::process::Command;

use ganglion_dispatch::executor::Executor;
use ganglion_dispatch::executor::plan::{ImageSource, InputFile};
use ganglion_dispatch::executor::{ExecError, Phase};
use ganglion_storage::blockstore::MemoryBlockstore;
use ganglion_storage::commp::CommP;
use ganglion_storage::pin::Pinner;
use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};

use crate::support::{self, Node};

/// The probe's `write REL N` content (see scripts/images/probe/probe.c).
fn pattern(rel: &str, n: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + rel.len()) % 251) as u8).collect()
}

#[tokio::test]
async fn inputs_in_outputs_and_logs_out_pinned_with_matching_cids() {
    let node = Node::new();
    let pinner = node.pinner();
    // An input of two chunks and a bit, imported into the node's blockstore.
    let input: Vec<u8> = (0..600_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let src = node.dir.path().join("in.bin");
    std::fs::write(&src, &input).expect("write input");
    let added = pinner
        .add_file(&src, &ImportOptions::cid_v1())
        .await
        .expect("add input");
    // And a directory input.
    let tree = node.dir.path().join("tree");
    std::fs::create_dir_all(tree.join("nested")).expect("mkdir");
    std::fs::write(tree.join("nested/n.txt"), b"nested input\n").expect("write");
    let tree_cid = pinner
        .add_dir(&tree, &ImportOptions::cid_v1())
        .await
        .expect("add dir")
        .root;
    let exec = node.executor(pinner.clone()).await;
    let job = support::job_id("life");
    let mut plan = support::plan(
        job.clone(),
        &support::probe_image(),
        &[
            "copy",
            "/inputs/data/in.bin",
            "/outputs/copy.bin",
            "copy",
            "/inputs/tree/nested/n.txt",
            "/outputs/n.txt",
            "write",
            "sub/a.txt",
            "1000",
            "write",
            "b.bin",
            "300000",
            "echo",
            "done",
            "err",
            "warn",
            "sleep",
            "2",
        ],
        1,
    );
    plan.inputs = vec![
        InputFile {
            cid: added.root,
            path: "data/in.bin".into(),
        },
        InputFile {
            cid: tree_cid,
            path: "tree".into(),
        },
    ];
    let report = exec.run(plan.clone()).await.expect("run");
    assert!(report.failure().is_none(), "{:?}", report.outcome);
    let rank = &report.ranks[0];
    assert_eq!(rank.exit_code, Some(0));

    // Outputs: the CID of an independent import of the same files.
    let expected = tempfile::tempdir().expect("tmp");
    let out = expected.path().join("outputs");
    std::fs::create_dir_all(out.join("sub")).expect("mkdir");
    std::fs::write(out.join("copy.bin"), &input).expect("write");
    std::fs::write(out.join("n.txt"), b"nested input\n").expect("write");
    std::fs::write(out.join("sub/a.txt"), pattern("sub/a.txt", 1000)).expect("write");
    std::fs::write(out.join("b.bin"), pattern("b.bin", 300_000)).expect("write");
    let independent = unixfs::import_dir(&out, &ImportOptions::cid_v1(), &MemoryBlockstore::new())
        .expect("independent import");
    let outputs = rank.outputs.as_ref().expect("outputs pinned");
    assert_eq!(outputs.cid, independent.root.to_string());
    assert_eq!(outputs.bytes, 600_000 + 13 + 1000 + 300_000);
    assert!(
        pinner
            .pins()
            .await
            .expect("pins")
            .contains(&independent.root),
        "outputs pinned in the node's blockstore"
    );

    // The CAR and its piece CID, recomputed from the file.
    let car = outputs.car.as_ref().expect("car");
    let car_bytes = std::fs::read(&car.path).expect("car file");
    assert_eq!(car_bytes.len() as u64, car.deal.car_bytes);
    let mut commp = CommP::new();
    commp.update(&car_bytes);
    assert_eq!(commp.finish().expect("piece").cid_v1(), car.deal.piece_cid);
    assert_eq!(car.deal.payload_cid, independent.root);

    // Logs: stdout and stderr captured, pinned, CID of the same bytes.
    let log = std::fs::read(exec.dirs(&job).log(0)).expect("log file");
    let text = String::from_utf8_lossy(&log);
    assert!(text.contains("done") && text.contains("warn"), "{text}");
    let log_cid = unixfs::import_file(&log[..], &ImportOptions::cid_v1(), HashOnly::default())
        .expect("hash log")
        .root;
    assert_eq!(
        rank.logs.as_ref().expect("logs pinned").cid,
        log_cid.to_string()
    );

    // Accounting: engine times, one declared GPU. The workload sleeps 2 s; Docker's
    // StartedAt/FinishedAt stamps can read a few ms short of it (1.999 s seen in CI).
    assert!(
        rank.run_seconds >= 1.95 && rank.run_seconds < 30.0,
        "{}",
        rank.run_seconds
    );
    assert_eq!(rank.gpus, 1);
    assert!((rank.gpu_seconds - rank.run_seconds).abs() < 1e-9);
    assert!((report.billable_gpu_seconds() - rank.gpu_seconds).abs() < 1e-9);
    assert!(
        rank.usage.samples >= 1,
        "stats sampled while it ran: {:?}",
        rank.usage
    );
    assert!(rank.usage.peak_memory_bytes > 0);
    let t = report.timings;
    assert!(t.created_ms <= t.all_running_ms && t.all_running_ms <= t.exited_ms);
    assert!(t.exited_ms <= t.collected_ms && t.collected_ms <= t.cleaned_ms);

    // Recorded durably; never run twice.
    let record = exec.record(&job).expect("table").expect("record");
    assert_eq!(record.phase, Phase::Succeeded);
    let stored = record.report.as_ref().expect("report recorded");
    assert_eq!(stored.outcome, report.outcome);
    assert_eq!(stored.ranks[0].outputs, rank.outputs);
    assert_eq!(stored.ranks[0].logs, rank.logs);
    assert!(record.cleaned);
    match exec.run(plan).await {
        Err(ExecError::AlreadyKnown { phase, .. }) => assert_eq!(phase, "succeeded"),
        other => panic!("second run must be refused, got {other:?}"),
    }
    support::assert_no_leftovers(&exec, &job).await;
}

fn docker_cli(args: &[&str]) {
    let status = Command::new("docker")
        .args(args)
        .status()
        .expect("docker CLI");
    assert!(status.success(), "docker {args:?}");
}

#[tokio::test]
async fn images_load_from_docker_save_and_rootfs_archives_by_cid() {
    let node = Node::new();
    let pinner = node.pinner();
    let exec = node.executor(pinner.clone()).await;
    let probe = support::probe_image();
    let probe_id = exec
        .engine()
        .docker
        .inspect_image(&probe)
        .await
        .expect("probe image")
        .id
        .expect("id");
    let tmp = tempfile::tempdir().expect("tmp");

    // `docker save` archive -> docker load.
    let saved = tmp.path().join("saved.tar");
    docker_cli(&["save", "-o", saved.to_str().expect("utf8"), &probe]);
    let save_cid = pinner
        .add_file(&saved, &ImportOptions::cid_v1())
        .await
        .expect("add")
        .root;
    // Rootfs archive (`docker export` of a container) -> docker import.
    let rootfs = tmp.path().join("rootfs.tar");
    let helper = format!("ganglion-export-{}", std::process::id());
    docker_cli(&["create", "--name", &helper, &probe, "echo", "x"]);
    docker_cli(&["export", "-o", rootfs.to_str().expect("utf8"), &helper]);
    docker_cli(&["rm", &helper]);
    let rootfs_cid = pinner
        .add_file(&rootfs, &ImportOptions::cid_v1())
        .await
        .expect("add")
        .root;

    for (source, command) in [
        (
            ImageSource::DockerSave { cid: save_cid },
            vec!["echo", "from-save"],
        ),
        (
            ImageSource::Rootfs { cid: rootfs_cid },
            vec!["/probe", "echo", "from-rootfs"],
        ),
    ] {
        let job = support::job_id("archive");
        let mut plan = support::plan(job.clone(), "unused", &command, 1);
        plan.image = source.clone();
        let report = exec.run(plan).await.expect("run");
        assert!(
            report.failure().is_none(),
            "{source:?}: {:?}",
            report.outcome
        );
        let image = report.image.expect("image recorded");
        assert!(image.id.starts_with("sha256:"), "{}", image.id);
        assert_eq!(image.source, source);
        let cid = match &source {
            ImageSource::DockerSave { cid } | ImageSource::Rootfs { cid } => cid,
            ImageSource::Local { .. } => unreachable!(),
        };
        assert_eq!(image.name, format!("ganglion/archive:{cid}"));
        if matches!(source, ImageSource::DockerSave { .. }) {
            assert_eq!(image.id, probe_id, "docker load keeps the image id");
        }
        assert!(support::log(&exec, &job, 0).contains(command.last().expect("word")));
        support::assert_no_leftovers(&exec, &job).await;
        let _ = Command::new("docker")
            .args(["rmi", "-f", &image.name])
            .status();
    }
    assert!(Path::new(&saved).exists());
}

#[tokio::test]
async fn jobs_run_side_by_side_on_one_executor() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let a = support::plan(
        support::job_id("par-a"),
        &support::probe_image(),
        &["sleep", "2"],
        1,
    );
    let b = support::plan(
        support::job_id("par-b"),
        &support::probe_image(),
        &["sleep", "2"],
        1,
    );
    // Both runs start at the same instant (join polls both at once), so their timings share
    // an origin: each was running before the other's 2 s sleep ended.
    let (ra, rb) = tokio::join!(exec.run(a), exec.run(b));
    let (ra, rb) = (ra.expect("a"), rb.expect("b"));
    for r in [&ra, &rb] {
        assert!(r.failure().is_none(), "{:?}", r.outcome);
        support::assert_no_leftovers(&exec, &r.job).await;
    }
    assert!(
        ra.timings.all_running_ms < rb.timings.exited_ms,
        "{:?} {:?}",
        ra.timings,
        rb.timings
    );
    assert!(
        rb.timings.all_running_ms < ra.timings.exited_ms,
        "{:?} {:?}",
        ra.timings,
        rb.timings
    );
}
