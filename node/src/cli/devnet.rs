//! `ganglion devnet demo`: the whole marketplace on this machine, from lock to payment (see
//! `ganglion_node::demo`). Progress goes to stderr as it happens; the summary to stdout
//! (`--json`: one JSON document).

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_node::demo::{self, DemoOptions, Summary, Workload};

/// The embedded devnet and what runs on it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

/// Devnet subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run a multi-provider job from lock to payment: devnet, validator, an orchestrator and
    /// three provider nodes (2, 2 and 4 declared GPUs) as processes, a 4-GPU job on two of them.
    Demo {
        /// The workload the job runs.
        #[arg(long, value_enum, default_value = "smoke")]
        workload: Workload,
        /// Seconds each container runs.
        #[arg(long, default_value_t = 3)]
        run_s: u32,
        /// Folder for the devnet, the nodes' data dirs and logs (default: a new folder under
        /// /var/tmp, kept afterwards for inspection).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Leave the devnet and the nodes running after the summary (Ctrl-C stops them).
        #[arg(long)]
        keep: bool,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Command::Demo {
        workload,
        run_s,
        dir,
        keep,
        json,
    } = args.command;
    let dir = match dir {
        Some(d) => d,
        None => PathBuf::from(format!(
            "/var/tmp/ganglion-demo-{}",
            ganglion_node::p2p::now_ms()
        )),
    };
    let opts = DemoOptions {
        dir,
        ganglion: std::env::current_exe().context("locating the ganglion binary")?,
        workload,
        run_s,
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
    let mut out = String::new();
    let _ = writeln!(out, "\njob {}: {}", s.job_id, s.state);
    let _ = writeln!(out, "timeline:");
    for step in &s.timeline {
        let _ = writeln!(out, "  {:>6.1} s  {}", step.at_s, step.what);
    }
    let _ = writeln!(out, "transactions:");
    for t in &s.txs {
        let _ = writeln!(out, "  {:<7} {}", t.kind, t.tx_id);
    }
    let _ = writeln!(out, "payments (NTX base units):");
    for p in &s.payments {
        let _ = writeln!(out, "  {:<11} {} GPUs  +{}", p.provider, p.gpus, p.paid_ntx);
    }
    let _ = writeln!(out, "lock → settled: {:.1} s", s.lock_to_settled_s);
    let _ = writeln!(out, "data and logs: {}", s.dir.display());
    let _ = writeln!(out, "settled");
    out
}
