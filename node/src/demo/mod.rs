//! `ganglion devnet demo`: the whole marketplace on one machine. An embedded devnet, the
//! validator deployed on it, one orchestrator and three provider nodes as separate
//! `ganglion node run` processes (declared GPUs 2, 2 and 4, bonds posted at start), a 4-GPU
//! ensemble (`min_gpus_per_node` = `max_gpus_per_node` = 2, `max_nodes` = 2) submitted over
//! JSON-RPC, matched to two providers, assigned on-chain, dispatched to Docker, attested and
//! settled; then a summary: the timeline, the transactions, and what each provider was paid.
//!
//! - [`deploy`]: the validator published as a reference script on the devnet.
//! - [`cluster`]: the node processes (configs written by [`crate::daemon::devnet`]).
//!
//! What the demo does not do yet (issue 11): the PyTorch workload across providers (the
//! daemon does not wire the overlay: providers share one Docker host's bridges), the
//! provider-loss scenario, network namespaces with NAT per provider (nodes use loopback),
//! and `audit verify`.

pub mod cluster;
pub mod deploy;
pub mod torch;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ganglion_rpc::types::{JobStatus, JobSubmitted};
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::genesis::Genesis;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;
use serde::Serialize;

use crate::market::spec::Ensemble;

/// Demo failures, each naming what to do.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// No Docker Engine answers.
    #[error(
        "no Docker Engine: {0}\n  install and start it: `apt-get install -y docker.io iptables && dockerd &` \
         (or `bash scripts/ensure-docker.sh` in a checkout)"
    )]
    NoDocker(String),
    /// The workload image could not be built.
    #[error("building the workload image: {0}")]
    Image(String),
    /// The devnet, the deployment or a transaction failed.
    #[error("chain: {0}")]
    Chain(String),
    /// A node process failed to start or died.
    #[error("node {name}: {reason}")]
    Node {
        /// orchestrator, provider-a, …
        name: String,
        /// Why, with the end of its log.
        reason: String,
    },
    /// The JSON-RPC exchange with the orchestrator failed.
    #[error("JSON-RPC: {0}")]
    Rpc(String),
    /// The job ended without settling.
    #[error("the job ended {state} instead of settled: {detail}")]
    NotSettled {
        /// cancelled, expired…
        state: String,
        /// The last error the orchestrator recorded.
        detail: String,
    },
    /// Something did not happen in time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// File-system trouble in the demo's folder.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl DemoError {
    pub(crate) fn chain(e: impl std::fmt::Display) -> Self {
        Self::Chain(e.to_string())
    }
}

/// The workload the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// The tiny static probe image (`scripts/build-probe-image.sh`): writes an output file,
    /// prints a line, sleeps a few seconds. No PyTorch.
    Smoke,
}

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Where the devnet, the nodes' data dirs and logs go.
    pub dir: PathBuf,
    /// The `ganglion` binary to start the nodes with.
    pub ganglion: PathBuf,
    /// The workload.
    pub workload: Workload,
    /// Seconds the workload runs.
    pub run_s: u32,
}

/// One line of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Seconds since the demo started.
    pub at_s: f64,
    /// What happened.
    pub what: String,
}

/// What one provider earned from the job.
#[derive(Debug, Clone, Serialize)]
pub struct Payment {
    /// The provider's name in the demo.
    pub provider: String,
    /// GPUs it declared.
    pub gpus: u32,
    /// NTX base units its payment address gained while the job ran.
    pub paid_ntx: u64,
}

/// One transaction the orchestrator submitted.
#[derive(Debug, Clone, Serialize)]
pub struct Tx {
    /// `lock`, `assign`, `settle`, …
    pub kind: String,
    /// Transaction id, hex.
    pub tx_id: String,
}

/// What the demo reports at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The job id, hex.
    pub job_id: String,
    /// Its final state on the orchestrator (`settled`).
    pub state: String,
    /// The orchestrator's transactions, in order.
    pub txs: Vec<Tx>,
    /// Per provider, what the job paid it.
    pub payments: Vec<Payment>,
    /// The timeline.
    pub timeline: Vec<Step>,
    /// From the lock submitted to the settle seen, seconds.
    pub lock_to_settled_s: f64,
    /// Where the logs and data dirs are.
    pub dir: PathBuf,
}

/// The demo's 4-GPU ensemble: two nodes of two GPUs each, running `image`.
///
/// # Errors
/// Never for the fixed spec; typed for the parser's sake.
pub fn ensemble(image: &str, run_s: u32, now_ms: u64) -> Result<Ensemble, DemoError> {
    let json = serde_json::json!({
        "image": { "local": image },
        "command": ["write", "result.bin", "4096", "echo", "ganglion demo rank done", "sleep", run_s.to_string()],
        "gpus": { "count": 4 },
        "placement": { "min_gpus_per_node": 2, "max_gpus_per_node": 2, "max_nodes": 2 },
        "limits": { "max_duration_s": 300, "max_rate_ntx_per_gpu_hour": cluster::PRICE },
        "budget_ntx": 2_000_000,
        "deadline_ms": now_ms + 600_000,
    });
    Ensemble::from_json_str(&json.to_string()).map_err(|e| DemoError::Chain(e.to_string()))
}

/// Runs the demo to settlement; `on_step` hears each timeline step as it happens. The node
/// processes are returned running in the [`cluster::Cluster`] (drop it to stop them) with
/// the devnet handle, so that `--keep` can leave them up.
///
/// # Errors
/// [`DemoError`].
pub async fn run(
    opts: &DemoOptions,
    mut on_step: impl FnMut(&Step),
) -> Result<(Summary, cluster::Cluster, devnet::DevnetHandle), DemoError> {
    let started = Instant::now();
    let mut timeline = Vec::new();
    let mut step = |what: String, timeline: &mut Vec<Step>| {
        let s = Step {
            at_s: started.elapsed().as_secs_f64(),
            what,
        };
        on_step(&s);
        timeline.push(s);
    };
    crate::executor::engine::Engine::connect(
        std::path::Path::new(crate::executor::engine::DEFAULT_SOCKET),
        30,
    )
    .await
    .map_err(|e| DemoError::NoDocker(e.to_string()))?;
    let image = match opts.workload {
        Workload::Smoke => cluster::probe_image()?,
    };
    step(format!("workload image {image} ready"), &mut timeline);

    std::fs::create_dir_all(&opts.dir)?;
    let genesis = Genesis::devnet().map_err(DemoError::chain)?;
    let handle = devnet::start(DevnetConfig::new(genesis.clone(), opts.dir.join("devnet")))
        .await
        .map_err(DemoError::chain)?;
    step(
        format!(
            "devnet up: N2N {}, magic {}",
            handle.n2n_addr(),
            handle.magic()
        ),
        &mut timeline,
    );
    let deployed = deploy::deploy(&handle, &genesis).await?;
    step(
        format!(
            "validator deployed: reference script at {}#{}",
            hex::encode(deployed.reference.tx_hash),
            deployed.reference.index
        ),
        &mut timeline,
    );
    let mut cluster = cluster::Cluster::new(opts.ganglion.clone(), opts.dir.clone());
    let orch = cluster.start_orchestrator(&handle, &deployed)?;
    step(
        format!(
            "orchestrator node up: RPC {}, peer {}",
            orch.rpc, orch.peer_id
        ),
        &mut timeline,
    );
    for p in cluster::PROVIDERS {
        let info = cluster.start_provider(&handle, &deployed, p, &orch)?;
        step(
            format!(
                "provider {} up with {} declared GPUs; bond posted at {}",
                p.name,
                p.gpus,
                info.bond.as_deref().unwrap_or("?")
            ),
            &mut timeline,
        );
    }
    let before = cluster.provider_ntx(&handle, &deployed)?;
    let rpc = cluster.orchestrator_rpc()?;
    let spec = ensemble(&image, opts.run_s, crate::p2p::now_ms())?;
    let spec = serde_json::to_value(&spec).map_err(|e| DemoError::Rpc(e.to_string()))?;
    let lock_at = Instant::now();
    let sub: JobSubmitted = rpc
        .request("job_submit", rpc_params![spec])
        .await
        .map_err(|e| DemoError::Rpc(e.to_string()))?;
    step(
        format!("job {} submitted over JSON-RPC: lock sent", sub.job_id),
        &mut timeline,
    );
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut seen = String::from("locked");
    let done = loop {
        let records: Vec<JobStatus> = rpc
            .request("job_status", rpc_params![sub.job_id.clone()])
            .await
            .map_err(|e| DemoError::Rpc(e.to_string()))?;
        if let Some(o) = records.into_iter().find(|r| r.role == "orchestrator") {
            if o.state != seen {
                seen = o.state.clone();
                step(format!("orchestrator: {}", o.state), &mut timeline);
            }
            match o.state.as_str() {
                "settled" => break o,
                "cancelled" | "expired" => {
                    return Err(DemoError::NotSettled {
                        state: o.state,
                        detail: o.last_error.unwrap_or_default(),
                    });
                }
                _ => {}
            }
        }
        if Instant::now() > deadline {
            return Err(DemoError::Timeout("the job to settle"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let lock_to_settled_s = lock_at.elapsed().as_secs_f64();
    let after = cluster.provider_ntx(&handle, &deployed)?;
    let payments = cluster::PROVIDERS
        .iter()
        .zip(before.iter().zip(&after))
        .map(|(p, (b, a))| Payment {
            provider: p.name.to_string(),
            gpus: p.gpus,
            paid_ntx: a.saturating_sub(*b),
        })
        .collect();
    let summary = Summary {
        job_id: sub.job_id,
        state: done.state,
        txs: done
            .txs
            .into_iter()
            .map(|t| Tx {
                kind: t.kind,
                tx_id: t.tx_id,
            })
            .collect(),
        payments,
        timeline,
        lock_to_settled_s,
        dir: opts.dir.clone(),
    };
    Ok((summary, cluster, handle))
}
