//! PyTorch DDP across containers, one per simulated provider, on one internal network: every
//! rank must end with the same parameter checksum. Scripts arrive as input CIDs. Needs the
//! torch CPU image (scripts/build-torch-image.sh builds it when absent, ~3-7 minutes once).

use std::collections::BTreeSet;
use std::path::Path;

use ganglion_dispatch::executor::Executor;
use ganglion_dispatch::executor::plan::{GpuAttachment, InputFile, JobPlan};
use ganglion_dispatch::executor::report::JobReport;
use ganglion_market::spec::Framework;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::dagpb;
use ganglion_storage::pin::Pinner;
use ganglion_storage::unixfs::ImportOptions;

use crate::support::{self, Exec, Node};

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A torch job running `script` (imported into the node's blockstore, given as the input
/// `/inputs/job.py`) in `ranks` containers.
async fn torch_plan(exec: &Exec, prefix: &str, script: &Path, ranks: u32) -> JobPlan {
    let added = exec
        .pinner()
        .add_file(script, &ImportOptions::cid_v1())
        .await
        .expect("add script");
    let mut plan = support::plan(
        support::job_id(prefix),
        &support::torch_image(),
        &["python3", "/inputs/job.py"],
        ranks,
    );
    plan.inputs = vec![InputFile {
        cid: added.root,
        path: "job.py".into(),
    }];
    plan.framework = Framework::Torch;
    plan.per_gpu.cpu_cores = 0.5;
    plan.per_gpu.mem_gib = 1.0;
    plan.per_gpu.shm_gib = 0.25;
    plan.env.insert("OUT_DIR".into(), "/outputs".into());
    plan.max_duration_s = 300;
    plan
}

/// The value after `marker` on every line that has it, over all ranks' logs.
fn values(exec: &Exec, report: &JobReport, marker: &str) -> Vec<String> {
    report
        .ranks
        .iter()
        .flat_map(|r| {
            support::log(exec, &report.job, r.node_rank)
                .lines()
                .filter_map(|l| l.split(marker).nth(1))
                .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Runs `script` (a path in the repository) as a `ranks`-rank Torch job named `name`; asserts
/// that it succeeded and that every rank printed the same value after `marker`. Returns the
/// node, the executor, the report and each rank's log.
async fn run_agreeing(
    name: &str,
    script: &str,
    ranks: u32,
    marker: &str,
) -> (Node, Exec, JobReport, Vec<String>) {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let plan = torch_plan(&exec, name, &repo(script), ranks).await;
    let report = exec.run(plan).await.expect("run");
    let logs: Vec<_> = (0..ranks)
        .map(|r| support::log(&exec, &report.job, r))
        .collect();
    assert!(
        report.failure().is_none(),
        "{:?}\n{}",
        report.outcome,
        logs.join("\n---\n")
    );
    let values = values(&exec, &report, marker);
    assert_eq!(
        values.len(),
        ranks as usize,
        "one `{marker}` per rank: {logs:?}"
    );
    assert_eq!(
        values.iter().collect::<BTreeSet<_>>().len(),
        1,
        "ranks differ: {values:?}"
    );
    (node, exec, report, logs)
}

async fn own_trainer(ranks: u32) -> (Node, Exec, JobReport) {
    let (node, exec, report, _) =
        run_agreeing("ddp", "examples/workloads/ddp_train.py", ranks, "checksum=").await;
    assert!(report.ranks.iter().all(|r| r.outputs.is_some()));
    support::assert_no_leftovers(&exec, &report.job).await;
    (node, exec, report)
}

async fn smoke(ranks: u32) {
    let (_node, exec, report, logs) = run_agreeing(
        "smoke",
        "../shared/workloads/ddp_smoke.py",
        ranks,
        "sha256[:16]=",
    )
    .await;
    assert!(logs[0].contains("-> AGREE"), "{}", logs[0]);
    assert!(
        logs[0].contains("single-process reference MATCHES"),
        "{}",
        logs[0]
    );
    support::assert_no_leftovers(&exec, &report.job).await;
}

#[tokio::test]
async fn ddp_2_ranks_own_trainer_then_inference_on_its_checkpoint() {
    let (_node, exec, report) = own_trainer(2).await;
    // The checkpoint from rank 0's outputs, by CID, becomes the inference job's input.
    let pinner = exec.pinner().clone();
    let root = cid::Cid::try_from(
        report.ranks[0]
            .outputs
            .as_ref()
            .expect("outputs")
            .cid
            .as_str(),
    )
    .expect("cid");
    let block = pinner
        .store()
        .get(&root)
        .expect("store")
        .expect("root block");
    let model = dagpb::decode(&block)
        .expect("dag-pb")
        .links
        .into_iter()
        .find(|l| l.name == "model.pt")
        .expect("model.pt in outputs")
        .cid;
    let mut plan = torch_plan(&exec, "infer", &repo("examples/workloads/infer.py"), 2).await;
    plan.framework = Framework::None;
    plan.inputs.push(InputFile {
        cid: model,
        path: "model.pt".into(),
    });
    let infer = exec.run(plan).await.expect("run");
    let logs: Vec<_> = (0..2).map(|r| support::log(&exec, &infer.job, r)).collect();
    assert!(infer.failure().is_none(), "{:?}\n{logs:?}", infer.outcome);
    let accuracies = values(&exec, &infer, "accuracy=");
    assert_eq!(accuracies.len(), 2, "{logs:?}");
    for a in accuracies {
        let a: f64 = a.parse().expect("accuracy");
        assert!(a > 0.5, "a trained model beats chance (0.25): {a}");
    }
}

#[tokio::test]
async fn ddp_4_ranks_own_trainer() {
    own_trainer(4).await;
}

#[tokio::test]
async fn ddp_smoke_2_ranks() {
    smoke(2).await;
}

#[tokio::test]
async fn ddp_smoke_4_ranks() {
    smoke(4).await;
}

/// Latency groups: four single-GPU containers as two groups of two
/// (`examples/workloads/grouped_train.py`). Each rank reads its group from the executor's
/// `GANGLION_GROUP_*` env, builds one process group per latency group and one across them,
/// sums every gradient inside its group then across the groups, and checks the result against
/// one flat all-reduce: every rank must agree on the weights and name its own group.
#[tokio::test]
async fn grouped_trainer_2_groups_of_2() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let mut plan = torch_plan(
        &exec,
        "grouped",
        &repo("examples/workloads/grouped_train.py"),
        4,
    )
    .await;
    plan.gpus_per_group = Some(2);
    let report = exec.run(plan).await.expect("run");
    let logs: Vec<_> = (0..4)
        .map(|r| support::log(&exec, &report.job, r))
        .collect();
    assert!(
        report.failure().is_none(),
        "{:?}\n{}",
        report.outcome,
        logs.join("\n---\n")
    );
    let checksums = values(&exec, &report, "checksum=");
    assert_eq!(checksums.len(), 4, "{logs:?}");
    assert_eq!(
        checksums.iter().collect::<BTreeSet<_>>().len(),
        1,
        "ranks differ: {checksums:?}"
    );
    for (rank, log) in logs.iter().enumerate() {
        let want = format!("group={}/2 group_rank={}/2", rank / 2, rank % 2);
        assert!(log.contains(&want), "rank {rank}: {log}");
        assert!(log.contains("agree=True"), "rank {rank}: {log}");
    }
    support::assert_no_leftovers(&exec, &report.job).await;
}

/// Two containers holding two (declared) GPUs each: torchrun's static rendezvous from the
/// `PET_*` env starts two workers per container, four ranks in all.
#[tokio::test]
async fn torchrun_static_two_containers_of_two() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let mut plan = torch_plan(
        &exec,
        "torchrun",
        &repo("../shared/workloads/ddp_smoke.py"),
        2,
    )
    .await;
    for slot in &mut plan.world {
        slot.gpus.push(GpuAttachment::Declared {
            id: format!("declared-{}b", slot.node_rank),
        });
    }
    plan.per_gpu.cpu_cores = 0.5;
    plan.per_gpu.mem_gib = 0.75;
    plan.command = [
        "python3",
        "-m",
        "torch.distributed.run",
        "--redirects=1",
        "--tee=1",
        "/inputs/job.py",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let report = exec.run(plan).await.expect("run");
    let logs: Vec<_> = (0..2)
        .map(|r| support::log(&exec, &report.job, r))
        .collect();
    assert!(
        report.failure().is_none(),
        "{:?}\n{}",
        report.outcome,
        logs.join("\n---\n")
    );
    let sums = values(&exec, &report, "sha256[:16]=");
    assert_eq!(sums.len(), 4, "four ranks: {logs:?}");
    assert_eq!(
        sums.iter().collect::<BTreeSet<_>>().len(),
        1,
        "ranks differ: {sums:?}"
    );
    assert!(
        logs.iter().any(|l| l.contains("/4] host=")),
        "world size 4: {logs:?}"
    );
    assert_eq!(report.ranks.iter().map(|r| r.gpus).sum::<u32>(), 4);
    support::assert_no_leftovers(&exec, &report.job).await;
}
