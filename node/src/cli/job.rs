//! `ganglion job submit|status|cancel`: jobs of a running node, over its JSON-RPC API
//! (`job_submit`, `job_status`, `job_cancel`).

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_node::market::spec::Ensemble;
use ganglion_node::settings::Settings;
use ganglion_rpc::types::{JobStatus, JobSubmitted};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

use super::client;

/// Jobs this node orchestrates or runs.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Node config (TOML); `GANGLION_*` variables override it.
    #[arg(long, env = "GANGLION_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Job subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Pin an ensemble spec (YAML or JSON file) and lock its budget; prints the job id.
    Submit {
        /// The spec file (docs/ensemble-spec.md).
        spec: PathBuf,
    },
    /// The node's records of a job: state, history, transactions.
    Status {
        /// Job id (64 hex digits).
        job_id: String,
    },
    /// Cancel a job whose escrow is still open (budget refunded).
    Cancel {
        /// Job id (64 hex digits).
        job_id: String,
    },
}

fn human(s: &JobStatus) -> String {
    let mut out = format!("{} {}: {}", s.role, s.job_id, s.state);
    let path: Vec<&str> = s.history.iter().map(|t| t.state.as_str()).collect();
    out.push_str(&format!("\n  history: {}", path.join(" → ")));
    for t in &s.txs {
        out.push_str(&format!("\n  {} tx {}", t.kind, t.tx_id));
    }
    if let Some(e) = &s.last_error {
        out.push_str(&format!("\n  last error: {e}"));
    }
    out
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let settings = Settings::load(args.config.as_deref()).context("loading the settings")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let c = client::connect(&settings)?;
    rt.block_on(async {
        match args.command {
            Command::Submit { spec } => {
                let text = std::fs::read_to_string(&spec)
                    .with_context(|| format!("reading {}", spec.display()))?;
                let parsed = Ensemble::parse(&text, ganglion_node::p2p::now_ms())
                    .with_context(|| format!("parsing {}", spec.display()))?;
                let value = serde_json::to_value(&parsed).context("encoding the spec")?;
                let s: JobSubmitted = c
                    .request("job_submit", rpc_params![value])
                    .await
                    .context("job_submit")?;
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&s)?);
                } else {
                    println!("job {} locked", s.job_id);
                }
            }
            Command::Status { job_id } => {
                let s: Vec<JobStatus> = c
                    .request("job_status", rpc_params![job_id.clone()])
                    .await
                    .context("job_status")?;
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&s)?);
                } else if s.is_empty() {
                    println!("this node holds no record of job {job_id}");
                } else {
                    for r in &s {
                        println!("{}", human(r));
                    }
                }
            }
            Command::Cancel { job_id } => {
                let s: JobStatus = c
                    .request("job_cancel", rpc_params![job_id])
                    .await
                    .context("job_cancel")?;
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&s)?);
                } else {
                    println!("cancel submitted\n{}", human(&s));
                }
            }
        }
        Ok(())
    })
}
