//! Dispatch numbers: time from "assignment seen" (the executor's `run` call) to "all
//! containers running" for a warm image, 2 and 4 ranks (one container per simulated
//! provider), and the executor's own overhead per job: image + network + dirs + create, start,
//! collect (logs and outputs pinned, CAR, piece CID) and clean. Target: all running within 3 s.
//!
//! `cargo run --release -p ganglion-dispatch --example executor_bench [-- --rounds N]`
//! Needs a Docker Engine (scripts/ensure-docker.sh) and the probe image (built if absent); the
//! PyTorch image row runs when `ganglion/torch-cpu:bookworm-1` is present (say which).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ganglion_dispatch::executor::Executor;
use ganglion_dispatch::executor::docker::{DockerExecutor, ExecutorConfig};
use ganglion_dispatch::executor::engine::{DEFAULT_SOCKET, DockerEngine};
use ganglion_dispatch::executor::plan::{JobPlan, RunId};
use ganglion_dispatch::executor::report::Timings;
use ganglion_dispatch::test_utils;
use ganglion_storage::blockstore::SledBlockstore;
use ganglion_storage::pin::Embedded;

const TORCH_IMAGE: &str = "ganglion/torch-cpu:bookworm-1";

/// The shared test plan, with 0.5 GiB of memory per GPU and two minutes at most.
fn plan(job: RunId, image: &str, command: &[&str], ranks: u32) -> JobPlan {
    let mut plan = test_utils::plan(job, image, command, ranks);
    plan.per_gpu.mem_gib = 0.5;
    plan.max_duration_s = 120;
    plan
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(5);
    let engine = DockerEngine::connect(Path::new(DEFAULT_SOCKET), 120)
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n(start one with `bash scripts/ensure-docker.sh`)"))?;
    println!(
        "engine {} (API {}), {} CPUs, {rounds} rounds per row",
        engine.server_version,
        engine.api_version,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-probe-image.sh");
    let out = Command::new("bash").arg(&script).output()?;
    anyhow::ensure!(out.status.success(), "build-probe-image.sh failed");
    let probe = String::from_utf8(out.stdout)?
        .trim()
        .lines()
        .last()
        .unwrap_or("")
        .to_string();

    let dir = tempfile::Builder::new()
        .prefix("ganglion-bench-")
        .tempdir_in("/var/tmp")?;
    let store = Arc::new(SledBlockstore::open(dir.path().join("blocks"))?);
    let exec = DockerExecutor::new(
        engine.clone(),
        Embedded::new(store),
        ExecutorConfig::new(dir.path().join("work")),
    )?;

    let mut rows: Vec<(&str, String, &[&str])> = vec![(
        "probe (FROM scratch, 0.8 MB)",
        probe,
        &["write", "out.bin", "100000"],
    )];
    if engine.docker.inspect_image(TORCH_IMAGE).await.is_ok() {
        rows.push((
            "torch CPU (Debian, 1.2 GB)",
            TORCH_IMAGE.to_string(),
            &["python3", "-c", "open('/outputs/x','w').write('x')"],
        ));
    } else {
        println!(
            "(no {TORCH_IMAGE}: torch rows skipped; build it with scripts/build-torch-image.sh)"
        );
    }
    println!(
        "{:<28} {:>5} {:>13} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "image", "ranks", "all running", "≤3 s?", "create", "start", "collect", "clean"
    );
    for (label, image, command) in &rows {
        for ranks in [2u32, 4] {
            let mut samples: Vec<Timings> = vec![];
            for round in 0..rounds {
                let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
                let job = RunId::new(format!("bench-{ranks}-{round}-{nanos:x}"))?;
                let report = exec.run(plan(job, image, command, ranks)).await?;
                anyhow::ensure!(report.failure().is_none(), "{:?}", report.outcome);
                samples.push(report.timings);
            }
            let m = |f: fn(&Timings) -> u64| median(samples.iter().map(f).collect());
            let running = m(|t| t.all_running_ms);
            println!(
                "{:<28} {:>5} {:>10} ms {:>9} {:>6} ms {:>6} ms {:>6} ms {:>6} ms",
                label,
                ranks,
                running,
                format!("{:.2}x", running as f64 / 3000.0),
                m(|t| t.created_ms),
                m(|t| t.all_running_ms - t.created_ms),
                m(|t| t.collected_ms - t.exited_ms),
                m(|t| t.cleaned_ms - t.collected_ms),
            );
        }
    }
    println!("medians; \"≤3 s?\" is all-running time / 3 s target (below 1.00x meets it).");
    println!(
        "create = image check + job network + dirs/inputs + container create (+ sandbox self-check)"
    );
    Ok(())
}
