//! `ganglion devnet demo`: the whole marketplace on one machine. An embedded devnet, the
//! validator deployed on it, one orchestrator and three provider nodes as separate
//! `ganglion node run` processes (declared GPUs 2, 2 and 4, bonds posted at start; the
//! service workload starts a fourth, [`cluster::providers`]), a 4-GPU
//! ensemble (`min_gpus_per_node` = `max_gpus_per_node` = 2, `max_nodes` = 2) submitted over
//! JSON-RPC, matched to two providers, assigned on-chain, dispatched into per-job pods on the
//! WireGuard overlay (each provider's `node run`, see [`crate::daemon::overlay`]), attested
//! and settled; then a summary: the timeline with block and slot per transaction, fees, rank
//! checksums, pinned CIDs, payments, the numbers and `audit verify` of the job
//! ([`audit_step`]).
//!
//! - [`deploy`]: the validator published as a reference script on the devnet.
//! - [`cluster`]: the node processes (configs written by [`crate::daemon::devnet`]).
//! - [`torch`]: the PyTorch DDP workload (`--workload torch`, the default) and its checksums.
//! - [`service`]: the inference service workload (`--workload service`): scaled with load,
//!   failed over, stopped, its killed provider slashed at the expiry.
//! - [`chainlog`]: the blocks as forged (block, slot, time, fees of the job's transactions).
//!
//! Scenarios: `settle`, and `provider-loss` (one assigned provider SIGKILLed while its
//! container runs; the job expires at its deadline, [`LOSS_DEADLINE_MS`] after the lock).
//! The service workload runs its own sequence ([`service`]) on four providers.
//!
//! Networking ([`DemoNetwork`]): where the machine allows it (root, `ip`, `iptables`) each
//! provider runs in its own network namespace behind its own NAT ([`natnet`]): the
//! orchestrator is their circuit relay, and the job's containers meet only through the
//! hole-punched (or relayed) WireGuard overlay. Elsewhere every node shares this host's
//! loopback, and the summary's `network` says so ([`LOOPBACK`]).

pub mod chainlog;
pub mod cluster;
pub mod deploy;
pub mod natnet;
pub mod service;
pub mod torch;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ganglion_rpc::api::AuditApiClient;
use ganglion_rpc::api::JobApiClient;
use ganglion_rpc::audit::AuditReport;
use ganglion_rpc::types::{JobStatus, JobSubmitted};
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::genesis::{DEVNET_FUNDED_KEYS, Fund, Genesis};
use ganglion_testnet::keys::DevKey;
use jsonrpsee::http_client::HttpClient;
use serde::Serialize;

use ganglion_market::spec::Ensemble;

/// Demo failures, each naming what to do.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// No Docker Engine answers.
    #[error(
        "no Docker Engine: {0}\n  install and start it: `apt-get install -y docker.io iptables && dockerd &` \
         (or `bash scripts/ensure-docker.sh` in a checkout)"
    )]
    NoDocker(#[source] ganglion_dispatch::executor::ExecError),
    /// The workload image could not be built (the build script's error or its last lines).
    #[error("building the workload image: {0}")]
    Image(#[source] Source),
    /// The devnet, the deployment or a transaction failed.
    #[error("chain: {0}")]
    Chain(#[source] Source),
    /// The per-provider NAT namespaces could not be built (`--network nat`): why not here.
    #[error("network: cannot build the NAT topology: {0}")]
    NatUnavailable(String),
    /// Building the per-provider NAT namespaces failed.
    #[error("network: {0}")]
    Network(#[source] natnet::NatNetError),
    /// A node process failed to start or died.
    #[error("node {name}: {reason}")]
    Node {
        /// orchestrator, provider-a, …
        name: String,
        /// Why, with the end of its log.
        reason: String,
    },
    /// The JSON-RPC exchange with a node failed (the client's error, or what is missing to
    /// make the call).
    #[error("JSON-RPC: {0}")]
    Rpc(#[source] Source),
    /// The job ended otherwise than the scenario wants.
    #[error("the job ended {state} instead of {want}: {detail}")]
    NotSettled {
        /// cancelled, expired…
        state: String,
        /// What the scenario wanted (settled, expired).
        want: &'static str,
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

/// The error a demo step wraps: a library's typed error, or a message for what no library
/// reported.
pub type Source = Box<dyn std::error::Error + Send + Sync>;

impl DemoError {
    pub(crate) fn chain(e: impl Into<Source>) -> Self {
        Self::Chain(e.into())
    }
}

/// The workload the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// PyTorch DDP: `examples/workloads/ddp_train.py` (gloo on CPU), 4 ranks, 2 per provider,
    /// across the per-job overlay. The torch image is built on first use (about 3 minutes,
    /// `scripts/build-torch-image.sh`) and cached by tag.
    Torch,
    /// The tiny static probe image (`scripts/build-probe-image.sh`): writes an output file,
    /// prints a line, sleeps a few seconds. No PyTorch.
    Smoke,
    /// An inference service (`kind: service`): the embedding model of
    /// `examples/workloads/service/` (image built on first use, about 30 s after the torch
    /// image) as 2–3 replicas behind the orchestrator's gateway, on four providers (a fourth,
    /// `provider-d`, is started for it); load adds a third replica, idle releases it, the
    /// provider of one of the two left is killed and replaced by the provider never used yet,
    /// `job stop` ends it and the killed provider is slashed at the expiry. Runs its own
    /// sequence: `--scenario` is not used.
    Service,
}

/// What happens to the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Both providers run (the orchestrator acknowledging their work with receipts) and each
    /// claims its own pay; the last claim refunds the rest.
    Settle,
    /// One assigned provider is killed (SIGKILL) while its container runs; the other claims
    /// its pay; after the job's deadline (40 s after the lock, `LOSS_DEADLINE_MS`) and the
    /// claim window the job expires: the defaulter's bond is slashed by at most its
    /// assignment's value, the orchestrator recovers at most what it paid (the rest of the
    /// slash is burnt), the unpaid budget is refunded.
    ProviderLoss,
    /// The orchestrator's node is killed (SIGKILL) once both providers run: no receipt comes
    /// any more; each provider stops its containers after `[engine] missed_receipts`
    /// intervals and claims what the orchestrator acknowledged plus at most one interval
    /// (DESIGN §3.1 G2); nobody is slashed, the last claim refunds the rest.
    SilentOrchestrator,
    /// `provider-b` cheats: it claims double the GPU-ms it measured (`[engine]
    /// overclaim_factor = 2`). Its claim is above what the orchestrator's receipts allow, so
    /// the validator refuses it (DESIGN §3.1 G1); the honest `provider-a` is paid; after the
    /// deadline (40 s after the lock) and the claim window the job expires and the cheater,
    /// with no valid claim, is slashed as a defaulter. (`provider-c` asks more than the job's
    /// maximum rate here, so the job goes to the two others.)
    CheatingProvider,
}

/// The cheating provider of the cheating-provider scenario.
pub const CHEATER: &str = "provider-b";
/// Seconds the smoke containers run at least in the cheating-provider scenario: double is
/// then well past one receipt interval over the work.
pub const CHEAT_MIN_RUN_S: u32 = 20;

/// The job's deadline in the provider-loss scenario, ms after the submission.
pub const LOSS_DEADLINE_MS: u64 = 40_000;
/// Seconds the smoke containers run at least in the provider-loss scenario (the kill must
/// land while they run).
pub const LOSS_MIN_RUN_S: u32 = 10;
/// Seconds the smoke containers would run at least in the silent-orchestrator scenario: far
/// longer than the providers keep working without receipts.
pub const SILENT_MIN_RUN_S: u32 = 300;

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Where the devnet, the nodes' data dirs and logs go.
    pub dir: PathBuf,
    /// The `ganglion` binary to start the nodes with.
    pub ganglion: PathBuf,
    /// The workload.
    pub workload: Workload,
    /// What happens to the job.
    pub scenario: Scenario,
    /// Seconds the smoke workload runs.
    pub run_s: u32,
    /// How the nodes are networked.
    pub network: DemoNetwork,
    /// Serve the orchestrator's web console (`--console`; its address is printed as a step).
    pub console: bool,
}

/// How the demo's nodes are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemoNetwork {
    /// Each provider behind its own NAT where the machine allows it, else loopback (the
    /// summary says which, and why).
    Auto,
    /// Each provider behind its own NAT; fails where the machine cannot (not root, no `ip` or
    /// `iptables`).
    Nat,
    /// Every node on this host's loopback.
    Loopback,
}

/// One line of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Seconds since the demo started.
    pub at_s: f64,
    /// What happened.
    pub what: String,
    /// The block it is about, if any.
    pub block: Option<u64>,
    /// That block's slot.
    pub slot: Option<u64>,
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
    /// Whether the demo killed it (provider-loss).
    pub killed: bool,
}

/// One transaction the orchestrator submitted.
#[derive(Debug, Clone, Serialize)]
pub struct Tx {
    /// `lock`, `assign`, `settle`, `expire`, …
    pub kind: String,
    /// Transaction id, hex.
    pub tx_id: String,
    /// The block holding it, as the demo saw it forged.
    pub block: Option<u64>,
    /// That block's slot.
    pub slot: Option<u64>,
    /// Its fee, lovelace.
    pub fee_lovelace: Option<u64>,
}

/// One rank's result from its provider's log.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RankChecksum {
    /// The provider that ran it.
    pub provider: String,
    /// Global rank.
    pub rank: u32,
    /// The rank's weights checksum (`ddp_train.py`).
    pub checksum: String,
}

/// One provider's pinned artifacts (its executor's `report.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Artifacts {
    /// The provider.
    pub provider: String,
    /// Its node rank (a service's replica: its assignment's index).
    pub node_rank: u32,
    /// The container's exit code.
    pub exit_code: Option<i64>,
    /// CID of the pinned `/outputs`.
    pub outputs_cid: Option<String>,
    /// CID of the pinned log.
    pub logs_cid: Option<String>,
    /// Piece CID of the outputs' CAR.
    pub piece_cid: Option<String>,
}

/// The numbers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Numbers {
    /// The lock's block forged → every assigned provider's container running, seconds.
    pub lock_block_to_running_s: Option<f64>,
    /// First container running → last container finished, seconds.
    pub job_wall_s: Option<f64>,
    /// Fees of the job's transactions (lock, assign, settle/expire), lovelace.
    pub fees_lovelace: u64,
    /// The same in ADA.
    pub fees_ada: f64,
    /// The last claim submitted → the last claim's (or the expire's) block seen, seconds.
    pub last_attestation_to_end_block_s: Option<f64>,
}

/// What the demo reports at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The job id, hex.
    pub job_id: String,
    /// The workload.
    pub workload: Workload,
    /// The scenario.
    pub scenario: Scenario,
    /// How the nodes are networked.
    pub network: String,
    /// Its final state on the orchestrator (`settled`, or `expired` for provider-loss).
    pub state: String,
    /// The job's transactions, in order: the orchestrator's and the providers' claims.
    pub txs: Vec<Tx>,
    /// Per provider, what the job paid it.
    pub payments: Vec<Payment>,
    /// NTX base units of the defaulter's slash the orchestrator recovered (provider-loss),
    /// from the ledger: the orchestrator's NTX change plus what the providers were paid (at
    /// most that pay, DESIGN §3.1 G4; the rest of the slash is burnt).
    pub slashed_ntx: Option<u64>,
    /// Every rank's checksum (torch).
    pub ranks: Vec<RankChecksum>,
    /// Whether every rank ended with the same weights (torch; `None` for smoke).
    pub checksums_agree: Option<bool>,
    /// Per provider that ran, its pinned artifacts.
    pub artifacts: Vec<Artifacts>,
    /// The numbers.
    pub numbers: Numbers,
    /// The service workload's numbers (scale-up, scale-down, failover, requests) and the
    /// sequence it saw (replicas at each step, the providers used, killed and replacing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<service::ServiceNumbers>,
    /// `audit verify` of the job, asked from the orchestrator (JSON-RPC `audit_verify`): each
    /// check re-derived from the chain and IPFS only.
    pub audit: AuditReport,
    /// The timeline.
    pub timeline: Vec<Step>,
    /// From the lock submitted to the job's end (settled or expired) seen, seconds.
    pub lock_to_end_s: f64,
    /// Where the logs and data dirs are.
    pub dir: PathBuf,
}

/// The summary's `network` on loopback.
pub const LOOPBACK: &str = "loopback: every node process shares this host's network (no \
    per-provider namespace behind NAT); the providers' containers share no Docker network \
    and reach each other only through the job's WireGuard overlay";

/// `max_s`, or less so that the run ends before `deadline_ms` with the engine's settle margin
/// (a second to spare for the lock's own delay): the engine refuses a run that cannot
/// (`crate::job::terms`).
fn max_duration_s(max_s: u64, deadline_ms: u64) -> u64 {
    crate::job::terms::run_limit_s(
        max_s,
        deadline_ms.saturating_sub(1_000),
        ganglion_p2p::now_ms(),
    )
}

/// The demo's 4-GPU smoke ensemble: two nodes of two GPUs each, running `image`.
///
/// # Errors
/// Never for the fixed spec; typed for the parser's sake.
pub fn ensemble(image: &str, run_s: u32, deadline_ms: u64) -> Result<Ensemble, DemoError> {
    let json = serde_json::json!({
        "image": { "local": image },
        "command": ["write", "result.bin", "4096", "echo", "ganglion demo rank done", "sleep", run_s.to_string()],
        "gpus": { "count": 4 },
        "placement": { "min_gpus_per_node": 2, "max_gpus_per_node": 2, "max_nodes": 2 },
        "limits": { "max_duration_s": max_duration_s(300, deadline_ms), "max_rate_ntx_per_gpu_hour": cluster::PRICE },
        "budget_ntx": BUDGET_NTX,
        "deadline_ms": deadline_ms,
    });
    Ensemble::from_json_str(&json.to_string()).map_err(DemoError::chain)
}

/// NTX base units the demo's job locks.
pub const BUDGET_NTX: u64 = 2_500_000;

/// The audit step: `audit verify` of `job_id` on the orchestrator node (JSON-RPC
/// `audit_verify`, the same as `ganglion audit verify`), which fetches missing result and log
/// blocks from the providers over bitswap.
///
/// # Errors
/// [`DemoError::Rpc`] when the call fails (a failing check is in the report, not an error).
pub async fn audit_step(node: &HttpClient, job_id: &str) -> Result<AuditReport, DemoError> {
    AuditApiClient::verify(node, job_id.to_string())
        .await
        .map_err(rpc_err)
}

fn rpc_err(e: impl Into<Source>) -> DemoError {
    DemoError::Rpc(e.into())
}

/// The first time `record` entered `state`, POSIX ms.
fn entered(record: &JobStatus, state: &str) -> Option<u64> {
    record
        .history
        .iter()
        .find(|t| t.state == state)
        .map(|t| t.at_ms)
}

/// Runs the demo to the job's end; `on_step` hears each timeline step as it happens. The node
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
    let started_ms = ganglion_p2p::now_ms();
    let mut timeline = Vec::new();
    let mut step = |what: String, at: Option<chainlog::Landed>, timeline: &mut Vec<Step>| {
        let s = Step {
            at_s: at.map_or(started.elapsed().as_secs_f64(), |l| {
                l.seen_ms.saturating_sub(started_ms) as f64 / 1000.0
            }),
            what,
            block: at.map(|l| l.block),
            slot: at.map(|l| l.slot),
        };
        on_step(&s);
        timeline.push(s);
    };
    ganglion_dispatch::executor::engine::DockerEngine::connect(
        std::path::Path::new(ganglion_dispatch::executor::engine::DEFAULT_SOCKET),
        30,
    )
    .await
    .map_err(DemoError::NoDocker)?;
    // The probe image is every pod's sandbox, whatever the workload.
    let probe = cluster::probe_image()?;
    if opts.workload == Workload::Torch {
        step(
            "workload image: looking for the torch image (built on first use, about 3 minutes)"
                .into(),
            None,
            &mut timeline,
        );
    }
    let image = match opts.workload {
        Workload::Smoke => probe,
        Workload::Service => tokio::task::block_in_place(service::image)?,
        Workload::Torch => tokio::task::block_in_place(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar.set_message("torch image: looking for it (built on first use, about 3 min)");
            let built = torch::image(|line| bar.set_message(line.to_string()));
            bar.finish_and_clear();
            built
        })?,
    };
    step(format!("workload image {image} ready"), None, &mut timeline);

    std::fs::create_dir_all(&opts.dir)?;
    let serving = opts.workload == Workload::Service;
    let providers = cluster::providers(serving);
    let (nat, network) = match (opts.network, natnet::unavailable()) {
        (DemoNetwork::Loopback, _) => (None, format!("{LOOPBACK} (--network loopback)")),
        (DemoNetwork::Auto, Some(why)) => (None, format!("{LOOPBACK}; no NAT here: {why}")),
        (DemoNetwork::Nat, Some(why)) => {
            return Err(DemoError::NatUnavailable(why.to_string()));
        }
        (_, None) => {
            let n = natnet::NatNet::create(providers.len()).map_err(DemoError::Network)?;
            let line = n.describe();
            (Some(n), line)
        }
    };
    step(format!("network: {network}"), None, &mut timeline);
    let mut genesis = Genesis::devnet().map_err(DemoError::chain)?;
    // A provider beyond the devnet's funded keys (the service's fourth) is funded as they are.
    for p in providers.iter().filter(|p| p.seed >= DEVNET_FUNDED_KEYS) {
        let address = DevKey::from_seed(p.seed).address(pallas_addresses::Network::Testnet);
        let fund = genesis.funds[0].clone();
        genesis.funds.push(Fund {
            address: address.to_bech32().unwrap_or_else(|_| address.to_hex()),
            ..fund
        });
    }
    let mut devnet_config = DevnetConfig::new(genesis.clone(), opts.dir.join("devnet"));
    if let Some(n) = &nat {
        devnet_config.n2c_tcp_addr = Some(std::net::SocketAddr::from((n.host_ip(), 0)));
    }
    let handle = devnet::start(devnet_config)
        .await
        .map_err(DemoError::chain)?;
    step(
        format!(
            "devnet up: N2N {}, magic {}",
            handle.n2n_addr(),
            handle.magic()
        ),
        None,
        &mut timeline,
    );
    let deployed = deploy::deploy(&handle, &genesis).await?;
    step(
        format!(
            "validator deployed: reference script at {}#{}",
            hex::encode(deployed.reference.tx_hash),
            deployed.reference.index
        ),
        None,
        &mut timeline,
    );
    let mut cluster = cluster::Cluster::new(opts.ganglion.clone(), opts.dir.clone(), nat);
    let orch = cluster.start_orchestrator(&handle, &deployed, opts.console)?;
    step(
        format!(
            "orchestrator node up: RPC {}, peer {}",
            orch.rpc, orch.peer_id
        ),
        None,
        &mut timeline,
    );
    if let Some(addr) = orch.console {
        step(
            format!("web console at http://{addr}/ (the job appears under Jobs once locked)"),
            None,
            &mut timeline,
        );
    }
    let cheating = opts.scenario == Scenario::CheatingProvider;
    for &p in providers {
        let behaviour = match p.name {
            CHEATER if cheating => cluster::Behaviour {
                overclaim_factor: Some(2),
                ..cluster::Behaviour::HONEST
            },
            // Priced out of the job: it goes to provider-a and the cheater.
            "provider-c" if cheating => cluster::Behaviour {
                price: 10 * cluster::PRICE,
                ..cluster::Behaviour::HONEST
            },
            _ => cluster::Behaviour::HONEST,
        };
        let info = cluster.start_provider(&handle, &deployed, p, &orch, behaviour)?;
        step(
            format!(
                "provider {} up with {} declared GPUs; bond posted at {}",
                p.name,
                p.gpus,
                info.bond.as_deref().unwrap_or("?")
            ),
            None,
            &mut timeline,
        );
    }
    let before = cluster.provider_ntx(&handle, &deployed, providers)?;
    let orch_before = cluster::ntx_of(&handle, &deployed, cluster::ORCHESTRATOR_SEED)?;
    let rpc = cluster.orchestrator_rpc()?;
    let provider_rpcs = providers
        .iter()
        .map(|p| cluster.provider_rpc(p.name))
        .collect::<Result<Vec<_>, _>>()?;
    let loss = opts.scenario == Scenario::ProviderLoss;
    let silent = opts.scenario == Scenario::SilentOrchestrator;
    // Each ends in an expire (a defaulter), soon after a short deadline.
    let expires = loss || cheating || serving;
    let deadline_ms = ganglion_p2p::now_ms()
        + if serving {
            service::SERVICE_DEADLINE_MS
        } else if expires {
            LOSS_DEADLINE_MS
        } else {
            600_000
        };
    let spec = match opts.workload {
        Workload::Smoke => {
            let run_s = if loss {
                opts.run_s.max(LOSS_MIN_RUN_S)
            } else if silent {
                opts.run_s.max(SILENT_MIN_RUN_S)
            } else if cheating {
                opts.run_s.max(CHEAT_MIN_RUN_S)
            } else {
                opts.run_s
            };
            ensemble(&image, run_s, deadline_ms)?
        }
        Workload::Service => service::ensemble(&image, cluster::PRICE, deadline_ms)?,
        Workload::Torch => torch::ensemble(
            &image,
            2,
            2,
            3,
            cluster::PRICE,
            BUDGET_NTX,
            max_duration_s(300, deadline_ms),
            deadline_ms,
        )?,
    };
    let spec = serde_json::to_value(&spec).map_err(rpc_err)?;
    let chain_log = chainlog::ChainLog::start(&handle);
    let lock_at = Instant::now();
    let sub: JobSubmitted = JobApiClient::submit(&rpc, spec).await.map_err(rpc_err)?;
    step(
        format!("job {} submitted over JSON-RPC: lock sent", sub.job_id),
        None,
        &mut timeline,
    );
    let until = Instant::now() + Duration::from_secs(if expires && !serving { 240 } else { 300 });
    let mut driver = match (serving, orch.gateway) {
        (true, Some(gateway)) => Some(service::Driver::new(
            gateway,
            &sub.job_id,
            cluster.provider_key_hashes(),
        )),
        (true, None) => return Err(DemoError::Timeout("the orchestrator's gateway address")),
        (false, _) => None,
    };
    let mut seen = String::from("locked");
    let mut landed_seen: Vec<String> = Vec::new();
    let mut last: Vec<Option<JobStatus>> = vec![None; providers.len()];
    let mut provider_seen: Vec<String> = vec![String::new(); providers.len()];
    let mut killed: Option<usize> = None;
    let mut killed_peer: Option<String> = None;
    let want = if expires { "expired" } else { "settled" };
    let mut provider_error: Vec<Option<String>> = vec![None; providers.len()];
    let mut orch_killed = false;
    let mut orch_seen: Option<JobStatus> = None;
    let done = loop {
        let records: Vec<JobStatus> = if orch_killed {
            Vec::new()
        } else {
            JobApiClient::status(&rpc, sub.job_id.clone())
                .await
                .map_err(rpc_err)?
        };
        for (i, (p, client)) in providers.iter().zip(&provider_rpcs).enumerate() {
            if killed == Some(i) {
                continue;
            }
            let got = JobApiClient::status(client, sub.job_id.clone()).await;
            if let Some(r) = got
                .ok()
                .and_then(|v| v.into_iter().find(|r| r.role == "provider"))
            {
                if r.state != provider_seen[i] {
                    provider_seen[i] = r.state.clone();
                    step(format!("{}: {}", p.name, r.state), None, &mut timeline);
                }
                if r.last_error.is_some() && r.last_error != provider_error[i] {
                    provider_error[i] = r.last_error.clone();
                    step(
                        format!(
                            "{}: {}",
                            p.name,
                            r.last_error.as_deref().unwrap_or_default()
                        ),
                        None,
                        &mut timeline,
                    );
                }
                if loss && killed.is_none() && r.state == "running" {
                    killed_peer = cluster.kill(p.name)?;
                    killed = Some(i);
                    step(
                        format!("{} killed (SIGKILL) while its container runs", p.name),
                        None,
                        &mut timeline,
                    );
                }
                last[i] = Some(r);
            }
        }
        let running = last
            .iter()
            .flatten()
            .filter(|r| r.state == "running")
            .count();
        if silent && !orch_killed && running >= 2 {
            cluster.kill("orchestrator")?;
            orch_killed = true;
            step(
                "orchestrator killed (SIGKILL) while the job runs: no more receipts; the \
                 providers stop after the agreed intervals and claim what was acknowledged"
                    .to_string(),
                None,
                &mut timeline,
            );
        }
        // The orchestrator's record; while it is down (silent-orchestrator), the last one
        // seen, and the job ends when every provider that ran has its claim on chain.
        let current = records.into_iter().find(|r| r.role == "orchestrator");
        if let Some(d) = driver.as_mut().filter(|d| !d.stopped()) {
            match d.tick(current.as_ref()).await {
                Some(service::Action::Say(what)) => step(what, None, &mut timeline),
                Some(service::Action::Kill(provider, what)) => {
                    step(what, None, &mut timeline);
                    let i = cluster
                        .provider_index_of(&provider)
                        .ok_or_else(|| DemoError::chain("the replica's provider is not ours"))?;
                    killed_peer = cluster.kill(providers[i].name)?;
                    killed = Some(i);
                    step(
                        format!(
                            "{} killed (SIGKILL) while its replica serves",
                            providers[i].name
                        ),
                        None,
                        &mut timeline,
                    );
                }
                Some(service::Action::Stop(what)) => {
                    step(what, None, &mut timeline);
                    JobApiClient::stop(&rpc, sub.job_id.clone())
                        .await
                        .map_err(rpc_err)?;
                }
                None => {}
            }
        }
        if let Some(o) = &current {
            orch_seen = Some(o.clone());
        }
        let all_paid = last
            .iter()
            .flatten()
            .filter(|r| entered(r, "running").is_some() || entered(r, "finished").is_some())
            .all(|r| r.state == "paid")
            && last.iter().flatten().any(|r| r.state == "paid");
        let record = match current {
            Some(o) => Some(o),
            None if orch_killed && all_paid => orch_seen.clone().map(|mut o| {
                o.state = "settled".into();
                o
            }),
            None => None,
        };
        if let Some(o) = record {
            if o.state != seen {
                seen = o.state.clone();
                step(format!("orchestrator: {}", o.state), None, &mut timeline);
            }
            // The providers' own claims belong to the job's trail too.
            let mut o = o;
            for r in last.iter().flatten() {
                for t in r.txs.iter().filter(|t| t.kind == "claim") {
                    if !o.txs.iter().any(|x| x.tx_id == t.tx_id) {
                        o.txs.push(t.clone());
                    }
                }
            }
            for t in &o.txs {
                if !landed_seen.contains(&t.tx_id)
                    && let Some(l) = chain_log.landed(&t.tx_id)
                {
                    landed_seen.push(t.tx_id.clone());
                    step(
                        format!("{} transaction {} in block {}", t.kind, t.tx_id, l.block),
                        Some(l),
                        &mut timeline,
                    );
                }
            }
            let all_landed = o.txs.iter().all(|t| landed_seen.contains(&t.tx_id));
            if o.state == want && all_landed {
                break o;
            }
            if o.state != want && matches!(o.state.as_str(), "settled" | "cancelled" | "expired") {
                return Err(DemoError::NotSettled {
                    state: o.state,
                    want,
                    detail: o.last_error.unwrap_or_default(),
                });
            }
        }
        if Instant::now() > until {
            return Err(DemoError::Timeout(if expires {
                "the job to expire"
            } else {
                "the job to settle"
            }));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let lock_to_end_s = lock_at.elapsed().as_secs_f64();
    if let Some(owner) = &killed_peer {
        // What the killed provider's restart would do: remove its orphaned pod (the sandbox
        // and the workload joined to it).
        let docker = bollard::Docker::connect_with_local_defaults().map_err(DemoError::chain)?;
        let swept = ganglion_dispatch::overlay::sweep::sweep(&docker, owner, &Default::default())
            .await
            .map_err(DemoError::chain)?;
        step(
            format!(
                "the killed provider's orphaned pod removed ({} sandbox, {} workload)",
                swept.sandboxes.len(),
                swept.workloads.len()
            ),
            None,
            &mut timeline,
        );
    }
    let after = cluster.provider_ntx(&handle, &deployed, providers)?;
    let orch_after = cluster::ntx_of(&handle, &deployed, cluster::ORCHESTRATOR_SEED)?;
    let payments: Vec<Payment> = providers
        .iter()
        .enumerate()
        .zip(before.iter().zip(&after))
        .map(|((i, p), (b, a))| Payment {
            provider: p.name.to_string(),
            gpus: p.gpus,
            paid_ntx: a.saturating_sub(*b),
            killed: killed == Some(i),
        })
        .collect();
    let paid: u64 = payments.iter().map(|p| p.paid_ntx).sum();
    let slashed_ntx = expires.then(|| {
        let delta = i128::from(orch_after) - i128::from(orch_before);
        u64::try_from(delta + i128::from(paid)).unwrap_or(0)
    });
    let mut txs: Vec<Tx> = done
        .txs
        .iter()
        .map(|t| {
            let l = chain_log.landed(&t.tx_id);
            Tx {
                kind: t.kind.clone(),
                tx_id: t.tx_id.clone(),
                block: l.map(|l| l.block),
                slot: l.map(|l| l.slot),
                fee_lovelace: l.and_then(|l| chainlog::fee_of(&handle, l.block, &t.tx_id)),
            }
        })
        .collect();
    // In chain order: the providers' claims land between the assign and an expire.
    txs.sort_by_key(|t| t.block.unwrap_or(u64::MAX));
    let numbers = numbers(&txs, &last, &chain_log);
    // A service's replica runs as node rank 0 of a world of its own: its rank in the job is
    // its assignment's index, from the orchestrator's record.
    let assigned: Vec<(String, u32)> = if serving {
        let names = cluster.provider_key_hashes();
        done.nodes
            .iter()
            .filter_map(|n| {
                let (_, name) = names.iter().find(|(k, _)| *k == n.provider)?;
                Some((name.clone(), u32::try_from(n.index).ok()?))
            })
            .collect()
    } else {
        Vec::new()
    };
    let (ranks, artifacts) = results(&cluster, providers, &sub.job_id, &assigned);
    let checksums_agree = (opts.workload == Workload::Torch)
        .then(|| !ranks.is_empty() && ranks.iter().all(|r| r.checksum == ranks[0].checksum));
    // Block steps carry the block's own time, which may precede a step printed before it.
    timeline.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    // With the orchestrator down, a provider's node audits (its indexer and blockstore, the
    // other provider's blocks over bitswap).
    let auditor = if orch_killed {
        cluster.provider_rpc(providers[0].name)?
    } else {
        cluster.orchestrator_rpc()?
    };
    let audit = audit_step(&auditor, &sub.job_id).await?;
    let summary = Summary {
        job_id: sub.job_id,
        workload: opts.workload,
        scenario: opts.scenario,
        network: network.clone(),
        state: done.state,
        txs,
        payments,
        slashed_ntx,
        ranks,
        checksums_agree,
        artifacts,
        numbers,
        service: driver.map(|d| {
            // The usage signed with the receipts, as the orchestrator's record ends.
            let mut n = d.numbers;
            if let Some(svc) = &done.service {
                n.requests_signed = svc.requests;
                n.cost_per_1k_requests = svc.cost_per_1k_requests.map(|a| a.get());
            }
            n
        }),
        audit,
        timeline,
        lock_to_end_s,
        dir: opts.dir.clone(),
    };
    Ok((summary, cluster, handle))
}

/// The numbers from the transactions' blocks and the nodes' records. The last
/// attestation is the last provider's `claiming` (its attestation signed and claimed); the
/// end is the last claim's block, or the expire's.
fn numbers(txs: &[Tx], providers: &[Option<JobStatus>], log: &chainlog::ChainLog) -> Numbers {
    let seen = |kind: &str| {
        txs.iter()
            .find(|t| t.kind == kind)
            .and_then(|t| log.landed(&t.tx_id))
            .map(|l| l.seen_ms)
    };
    let ran: Vec<&JobStatus> = providers
        .iter()
        .flatten()
        .filter(|r| entered(r, "running").is_some() || entered(r, "finished").is_some())
        .collect();
    let running: Vec<u64> = ran
        .iter()
        .filter_map(|r| entered(r, "running").or_else(|| entered(r, "finished")))
        .collect();
    let finished: Vec<u64> = ran.iter().filter_map(|r| entered(r, "finished")).collect();
    let attested: Vec<u64> = ran.iter().filter_map(|r| entered(r, "claiming")).collect();
    let secs = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1000.0;
    let fees_lovelace: u64 = txs.iter().filter_map(|t| t.fee_lovelace).sum();
    let last_claim = txs
        .iter()
        .filter(|t| t.kind == "claim")
        .filter_map(|t| log.landed(&t.tx_id))
        .map(|l| l.seen_ms)
        .max();
    let end = seen("expire").or(last_claim);
    Numbers {
        lock_block_to_running_s: seen("lock")
            .zip(running.iter().max())
            .map(|(l, r)| secs(l, *r)),
        job_wall_s: running
            .iter()
            .min()
            .zip(finished.iter().max())
            .map(|(a, b)| secs(*a, *b)),
        fees_lovelace,
        fees_ada: fees_lovelace as f64 / 1_000_000.0,
        last_attestation_to_end_block_s: attested
            .iter()
            .max()
            .copied()
            .zip(end)
            .map(|(a, e)| secs(a, e)),
    }
}

/// Rank checksums and pinned artifacts from each provider's kept executor artifacts.
fn results(
    cluster: &cluster::Cluster,
    providers: &[cluster::ProviderSpec],
    job_hex: &str,
    assigned: &[(String, u32)],
) -> (Vec<RankChecksum>, Vec<Artifacts>) {
    let mut ranks = Vec::new();
    let mut artifacts = Vec::new();
    for p in providers {
        let Some(dir) = cluster.provider_dir(p.name) else {
            continue;
        };
        for job_dir in torch::artifact_dirs(dir, job_hex) {
            for log in torch::logs_in(&job_dir) {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                ranks.extend(torch::checksums(&text).into_iter().map(|(rank, checksum)| {
                    RankChecksum {
                        provider: p.name.to_string(),
                        rank,
                        checksum,
                    }
                }));
            }
            let report = std::fs::read(job_dir.join("report.json"))
                .ok()
                .and_then(|b| {
                    serde_json::from_slice::<ganglion_dispatch::executor::JobReport>(&b).ok()
                });
            for r in report.iter().flat_map(|r| &r.ranks) {
                artifacts.push(Artifacts {
                    provider: p.name.to_string(),
                    node_rank: assigned
                        .iter()
                        .find(|(name, _)| name == p.name)
                        .map_or(r.node_rank, |(_, index)| *index),
                    exit_code: r.exit_code,
                    outputs_cid: r.outputs.as_ref().map(|a| a.cid.clone()),
                    logs_cid: r.logs.as_ref().map(|a| a.cid.clone()),
                    piece_cid: r
                        .outputs
                        .as_ref()
                        .and_then(|a| a.car.as_ref())
                        .map(|c| c.deal.piece_cid.to_string()),
                });
            }
        }
    }
    ranks.sort_by_key(|r| r.rank);
    artifacts.sort_by_key(|a| a.node_rank);
    (ranks, artifacts)
}
