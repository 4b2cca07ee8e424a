//! `ganglion devnet demo`: the whole marketplace on this machine, from lock to payment (see
//! `ganglion_node::demo`). Progress goes to stderr as it happens; the summary to stdout
//! (`--json`: one JSON document).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::ValueEnum as _;
use ganglion_node::demo::{self, DemoNetwork, DemoOptions, Scenario, Summary, Workload};

/// The embedded devnet and what runs on it.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub command: Command,
}

/// Devnet subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Run a multi-provider job from lock to payment: devnet, validator, an orchestrator and
    /// three provider nodes (2, 2 and 4 declared GPUs) as processes, a 4-GPU job on two of them
    /// (`--workload service`: a fourth provider, and an inference service of 2–3 replicas).
    Demo {
        /// The workload the job runs: `torch` (PyTorch DDP, 4 ranks over the overlay; the image
        /// is built on first use, about 3 minutes), `smoke` (the tiny probe image) or
        /// `service` (an embedding service scaled with load and failed over; runs its own
        /// sequence, `--scenario` is not used).
        #[arg(long, value_enum, default_value = "torch")]
        workload: Workload,
        /// What happens to the job: each possible value is described below.
        #[arg(long, value_enum, default_value = "settle")]
        scenario: Scenario,
        /// Seconds each smoke container runs.
        #[arg(long, default_value_t = 3)]
        run_s: u32,
        /// `auto`: each provider in its own network namespace behind its own NAT where this
        /// machine allows it (root, `ip`, `iptables`), else loopback (said in the summary);
        /// `nat`: NAT or fail; `loopback`: every node on this host's loopback.
        #[arg(long, value_enum, default_value = "auto")]
        network: DemoNetwork,
        /// Folder for the devnet, the nodes' data dirs and logs (default: a new folder under
        /// /var/tmp, kept afterwards for inspection).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Leave the devnet and the nodes running after the summary (Ctrl-C stops them).
        #[arg(long)]
        keep: bool,
        /// Serve the orchestrator's web console (`[console] listen`) and print its address;
        /// with `--keep` it stays open after the summary.
        #[arg(long)]
        console: bool,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a devnet until Ctrl-C, as `ganglion-devnet up` does (its addresses printed as one
    /// JSON line; the data dir keeps the chain), forging an empty block after `--idle-block-s`
    /// idle seconds; with `--deploy` the validator is deployed on it first (as `devnet deploy`).
    Up {
        /// Data directory (chain store, genesis, `node.socket`).
        #[arg(long)]
        data_dir: PathBuf,
        /// N2N TCP address.
        #[arg(long, default_value = "127.0.0.1:3001")]
        n2n: std::net::SocketAddr,
        /// N2C TCP address (the Unix socket is `<data dir>/node.socket`).
        #[arg(long, default_value = "127.0.0.1:3002")]
        n2c_tcp: std::net::SocketAddr,
        /// The HTTP API in Blockfrost's and Kupo's conventions (what a dApp library's
        /// Blockfrost provider is pointed at); `off` serves none.
        #[arg(long, default_value = "127.0.0.1:3003")]
        http: ganglion_testnet::devnet::HttpListen,
        /// Forge an empty block when none was forged for this many seconds; 0 = only blocks
        /// with transactions.
        #[arg(long, default_value_t = 5)]
        idle_block_s: u64,
        /// Deploy the validator once the devnet runs.
        #[arg(long)]
        deploy: bool,
    },
    /// Deploy the Ganglion validator (its reference script, with the devnet preset's
    /// parameters) on a running devnet (`ganglion-devnet up`), paid by devnet key 0. Once it
    /// is there, nodes on that devnet find it themselves: their config needs no `[validator]`.
    /// Does nothing when the validator is already deployed. The chain endpoint is the
    /// config's `[chain] n2c` (or `GANGLION_N2C`).
    Deploy {
        /// Node config (TOML) naming the devnet's N2C endpoint.
        #[arg(long, env = "GANGLION_CONFIG")]
        config: Option<PathBuf>,
        /// The funded devnet key that pays.
        #[arg(long, default_value_t = demo::deploy::DEPLOYER_SEED)]
        seed: u32,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `devnet deploy`'s answer.
#[derive(Debug, serde::Serialize)]
struct Deployed {
    /// `<tx hash hex>#<index>`.
    reference: String,
    /// The validator's script hash, hex.
    script_hash: String,
    /// Whether this command deployed it (else it was there).
    deployed_now: bool,
}

/// Deploys the validator with the devnet preset's parameters (`configured` when set) on the
/// devnet at `endpoint`, paid by devnet key `seed`, unless it is there already.
async fn deploy_on(
    endpoint: &ganglion_node::settings::N2cEndpoint,
    configured: Option<&ganglion_contracts::v2::params::Params>,
    seed: u32,
) -> anyhow::Result<Deployed> {
    use ganglion_node::daemon::devnet::{deploy_validator_at, deployed_reference};
    let preset = ganglion_node::network::NetworkPreset::of(ganglion_node::config::Network::Devnet);
    let params = preset.require_deployment(configured)?;
    let script = ganglion_contracts::v2::blueprint()
        .and_then(|b| b.apply_data(params.to_plutus_data()))
        .context("applying the validator's parameters")?;
    let (reference, deployed_now) = match deployed_reference(endpoint, &params).await? {
        Some(r) => (r, false),
        None => {
            let key = ganglion_node::wallet::PaymentKey::devnet(seed);
            (
                deploy_validator_at(endpoint, &params, key.signing_key()).await?,
                true,
            )
        }
    };
    Ok(Deployed {
        reference: format!("{}#{}", hex::encode(reference.tx_hash), reference.index),
        script_hash: hex::encode(script.hash),
        deployed_now,
    })
}

fn print_deployed(out: &Deployed, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(out)?);
        return Ok(());
    }
    let (tx_hash, index) = out
        .reference
        .split_once('#')
        .unwrap_or((&out.reference, "0"));
    println!(
        "validator {} at {}: reference script {}",
        if out.deployed_now {
            "deployed"
        } else {
            "already deployed"
        },
        out.script_hash,
        out.reference
    );
    println!(
        "nodes on this devnet find it themselves; to pin it in a config:\n[validator]\n\
         reference = {{ tx_hash = \"{tx_hash}\", index = {index} }}"
    );
    Ok(())
}

fn deploy(config: Option<&std::path::Path>, seed: u32, json: bool) -> anyhow::Result<()> {
    let settings =
        ganglion_node::settings::Settings::load(config).context("loading the settings")?;
    anyhow::ensure!(
        settings.network() == ganglion_node::config::Network::Devnet,
        "`ganglion devnet deploy` deploys on the devnet only (the config says {})",
        settings.network()
    );
    let endpoint = settings
        .n2c()
        .context("the devnet's N2C endpoint ([chain] n2c or GANGLION_N2C)")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let out = rt.block_on(deploy_on(&endpoint, settings.deployment.as_ref(), seed))?;
    print_deployed(&out, json)
}

/// `devnet up`'s options.
struct UpOptions {
    data_dir: PathBuf,
    n2n: std::net::SocketAddr,
    n2c_tcp: std::net::SocketAddr,
    http: ganglion_testnet::devnet::HttpListen,
    idle_block_s: u64,
    deploy: bool,
}

/// Runs a devnet until Ctrl-C (as `ganglion-devnet up`), deploying the validator first with
/// `deploy`.
fn up(o: UpOptions) -> anyhow::Result<()> {
    use ganglion_testnet::devnet::{self as testnet_devnet, DevnetConfig};
    let (config, genesis_path) = DevnetConfig::kept_in(
        &o.data_dir,
        None,
        o.n2n,
        o.n2c_tcp,
        o.http.0,
        o.idle_block_s,
    )
    .context("preparing the devnet")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let handle = testnet_devnet::start(config)
            .await
            .context("starting the devnet")?;
        println!("{}", handle.addresses_json(&genesis_path));
        if o.deploy {
            let endpoint = ganglion_node::settings::N2cEndpoint::Tcp(o.n2c_tcp);
            match deploy_on(&endpoint, None, demo::deploy::DEPLOYER_SEED).await {
                Ok(d) => print_deployed(&d, false)?,
                Err(e) => {
                    handle.shutdown().await;
                    return Err(e.context("deploying the validator"));
                }
            }
        }
        eprintln!("devnet up; Ctrl-C stops it");
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        handle.shutdown().await;
        anyhow::Ok(())
    })
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let (workload, scenario, run_s, network, dir, keep, console, json) = match args.command {
        Command::Deploy { config, seed, json } => return deploy(config.as_deref(), seed, json),
        Command::Up {
            data_dir,
            n2n,
            n2c_tcp,
            http,
            idle_block_s,
            deploy,
        } => {
            return up(UpOptions {
                data_dir,
                n2n,
                n2c_tcp,
                http,
                idle_block_s,
                deploy,
            });
        }
        Command::Demo {
            workload,
            scenario,
            run_s,
            network,
            dir,
            keep,
            console,
            json,
        } => (workload, scenario, run_s, network, dir, keep, console, json),
    };
    let dir = match dir {
        Some(d) => d,
        None => PathBuf::from(format!("/var/tmp/ganglion-demo-{}", ganglion_p2p::now_ms())),
    };
    let opts = DemoOptions {
        dir,
        ganglion: std::env::current_exe().context("locating the ganglion binary")?,
        workload,
        scenario,
        run_s,
        network,
        console,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let (summary, cluster, handle) = demo::run(&opts, |s| {
            eprintln!("[{:>6.1} s] {}", s.at_s, s.what);
        })
        .await
        .context("the demo failed")?;
        if json {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        } else {
            print!("{}", render(&summary));
        }
        if let Some(addr) = cluster.console() {
            eprintln!("web console: http://{addr}/");
        }
        if keep {
            eprintln!(
                "--keep: devnet (N2N {}) and nodes {:?} stay up; data and logs in {}; Ctrl-C stops them",
                handle.n2n_addr(),
                cluster.names(),
                opts.dir.display()
            );
            tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
        }
        drop(cluster);
        handle.shutdown().await;
        anyhow::Ok(())
    })
}

fn render(s: &Summary) -> String {
    use std::fmt::Write as _;
    let opt = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1} s"));
    let mut out = String::new();
    // The option values as typed on the command line (`torch`, `provider-loss`).
    let name = |v: Option<clap::builder::PossibleValue>| v.map(|p| p.get_name().to_string());
    // A service runs its own sequence: no scenario.
    let scenario = match s.workload {
        Workload::Service => String::new(),
        _ => format!(
            ", scenario {}",
            name(s.scenario.to_possible_value()).unwrap_or_default()
        ),
    };
    let _ = writeln!(
        out,
        "\njob {} (workload {}{scenario}): {}",
        s.job_id,
        name(s.workload.to_possible_value()).unwrap_or_default(),
        s.state
    );
    let _ = writeln!(out, "network: {}", s.network);
    let _ = writeln!(out, "timeline:");
    for step in &s.timeline {
        let at = match (step.block, step.slot) {
            (Some(b), Some(sl)) => format!("  [block {b}, slot {sl}]"),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {:>6.1} s  {}{at}", step.at_s, step.what);
    }
    let _ = writeln!(out, "transactions:");
    for t in &s.txs {
        let _ = writeln!(
            out,
            "  {:<7} {}  block {}  fee {} ADA",
            t.kind,
            t.tx_id,
            t.block.map_or("?".into(), |b| b.to_string()),
            t.fee_lovelace
                .map_or("?".into(), |f| format!("{:.6}", f as f64 / 1e6)),
        );
    }
    let _ = writeln!(
        out,
        "providers (declared GPUs) and payments (NTX base units):"
    );
    for p in &s.payments {
        let killed = if p.killed { "  (killed)" } else { "" };
        let _ = writeln!(
            out,
            "  {:<11} {} GPUs  +{}{killed}",
            p.provider, p.gpus, p.paid_ntx
        );
    }
    if let Some(slashed) = s.slashed_ntx {
        let _ = writeln!(
            out,
            "recovered by the orchestrator from the defaulter's slash: {slashed} NTX base units \
             (at most what it paid, DESIGN §3.1 G4; the rest of the slash is burnt)"
        );
    }
    if !s.ranks.is_empty() {
        let _ = writeln!(out, "rank checksums:");
        for r in &s.ranks {
            let _ = writeln!(
                out,
                "  rank {} on {:<11} {}",
                r.rank, r.provider, r.checksum
            );
        }
    }
    if let Some(agree) = s.checksums_agree {
        let _ = writeln!(out, "all ranks agree: {agree}");
    }
    if !s.artifacts.is_empty() {
        let _ = writeln!(out, "pinned artifacts:");
        for a in &s.artifacts {
            let _ = writeln!(
                out,
                "  node rank {} on {}: exit {}\n    outputs {}\n    logs    {}\n    piece   {}",
                a.node_rank,
                a.provider,
                a.exit_code.map_or("?".into(), |c| c.to_string()),
                a.outputs_cid.as_deref().unwrap_or("-"),
                a.logs_cid.as_deref().unwrap_or("-"),
                a.piece_cid.as_deref().unwrap_or("-"),
            );
        }
    }
    let n = &s.numbers;
    let _ = writeln!(out, "numbers:");
    // A batch job's start and run; a service's replicas start and stop along its sequence
    // (its own numbers follow).
    if s.service.is_none() {
        let _ = writeln!(
            out,
            "  lock's block -> all containers running: {}",
            opt(n.lock_block_to_running_s)
        );
        let _ = writeln!(
            out,
            "  job wall time:                          {}",
            opt(n.job_wall_s)
        );
    }
    let _ = writeln!(
        out,
        "  total fees:                             {:.6} ADA",
        n.fees_ada
    );
    let _ = writeln!(
        out,
        "  last claim -> end's block:              {}",
        opt(n.last_attestation_to_end_block_s)
    );
    if let Some(v) = &s.service {
        let _ = writeln!(out, "service:");
        let _ = writeln!(
            out,
            "  load -> third replica answering:        {}",
            opt(v.scale_up_s)
        );
        let _ = writeln!(
            out,
            "  idle -> back to two replicas:           {}",
            opt(v.scale_down_s)
        );
        let _ = writeln!(
            out,
            "  provider killed -> replacement answers: {}",
            opt(v.failover_s)
        );
        let _ = writeln!(
            out,
            "  requests: {} answered 200, {} not",
            v.requests_ok, v.requests_failed
        );
        let per_1k = v
            .cost_per_1k_requests
            .map_or(String::new(), |c| format!(", {c} NTX base units per 1 000"));
        let _ = writeln!(
            out,
            "  requests signed with the receipts:      {}{per_1k}",
            v.requests_signed
        );
        let replicas: Vec<String> = v.replicas.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            out,
            "  replicas at each step:                  {}",
            replicas.join(" -> ")
        );
        let _ = writeln!(
            out,
            "  providers before the kill:              {}; killed {}, replaced by {}",
            v.providers_before_kill.join(", "),
            v.killed.as_deref().unwrap_or("-"),
            v.replacement.as_deref().unwrap_or("-")
        );
    }
    let _ = writeln!(out, "lock -> {}: {:.1} s", s.state, s.lock_to_end_s);
    let failed: Vec<_> = s.audit.checks.iter().filter(|c| !c.pass).collect();
    let _ = writeln!(
        out,
        "audit verify: {} ({} of {} checks pass: spec CID, assignment, budget, acceptances, \
         attestations, receipts, claim bounds, result and log CIDs, payments, a service's \
         usage, defaults and slashes, refund)",
        if s.audit.pass { "pass" } else { "FAIL" },
        s.audit.checks.len() - failed.len(),
        s.audit.checks.len()
    );
    for c in failed {
        let _ = writeln!(out, "  FAIL {}: {}", c.name, c.detail);
    }
    let _ = writeln!(out, "data and logs: {}", s.dir.display());
    let _ = writeln!(out, "{}", s.state);
    out
}
