//! `ganglion job submit|quote|status|list|cancel|stop|logs|outputs`: jobs of a running node,
//! over its JSON-RPC API (`job_submit`, `job_quote`, `job_status`, `job_list`, `job_cancel`,
//! `job_stop`, `job_logs`, `job_outputs`), found through the config's data dir
//! ([`super::remote::call`]); and, local: `ganglion job validate` (a spec
//! checked as `job submit` would, before anything is paid) and `ganglion job import-sdl` (an
//! Akash SDL GPU block to ensemble-spec fields, [`ganglion_market::sdl`]).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use ganglion_market::spec::Ensemble;
use ganglion_rpc::amount::ntx_text;
use ganglion_rpc::audit::{JobLog, JobOutput};
use ganglion_rpc::types::{JobStatus, JobSubmitted};

use super::remote::{RemoteArgs, call, print_json};
use ganglion_rpc::api::JobApiClient;

/// How often `job submit --wait` asks for the job's state.
const POLL: Duration = Duration::from_secs(1);

/// Jobs this node orchestrates or runs.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Job subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Pin an ensemble spec (YAML or JSON file) and lock its budget; prints the job id.
    Submit {
        /// The spec file (docs/ensemble-spec.md).
        spec: PathBuf,
        /// Follow the job until it ends (settled, cancelled or expired), showing each state
        /// change; exits non-zero unless it settles with every node's share succeeding (the
        /// failed nodes' exit codes and reasons printed).
        #[arg(long)]
        wait: bool,
        /// Lock the budget even when today's market cannot place the spec (`job quote` says
        /// why): the job then waits in `matching` until providers come or it is cancelled.
        #[arg(long)]
        force: bool,
    },
    /// The node's records of a job: state, history, transactions. Exits non-zero when the node
    /// holds no record of it.
    Status {
        /// Job id (64 hex digits).
        job_id: String,
    },
    /// Could today's market place a spec, on whom, at what cost at worst? Asks the running
    /// node (its market view); nothing is pinned or locked. Exits non-zero when the spec's
    /// terms cannot be met or nothing in the market fits it (the reason printed).
    Quote {
        /// The spec file (YAML or JSON).
        spec: PathBuf,
    },
    /// Every job the node holds a record of (one line per role it plays), the most recently
    /// changed first.
    List {
        /// Only the records in this state (snake_case, e.g. `running`, `settled`, `expired`).
        #[arg(long)]
        state: Option<String>,
    },
    /// Cancel a job whose escrow is still open (budget refunded).
    Cancel {
        /// Job id (64 hex digits).
        job_id: String,
    },
    /// Stop a job: cancelled while still open; once running, its providers stop their
    /// containers at their next heartbeat and claim what ran, and the rest of the budget is
    /// refunded by the last claim.
    Stop {
        /// Job id (64 hex digits).
        job_id: String,
    },
    /// The logs the job's providers attested (one per rank), fetched over IPFS.
    Logs {
        /// Job id (64 hex digits).
        job_id: String,
    },
    /// The outputs the job's providers attested: listed, and with `--out` unpacked to
    /// `DIR/rank-<n>` by the node (on this machine).
    Outputs {
        /// Job id (64 hex digits).
        job_id: String,
        /// Directory to write the outputs to (created if missing).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a spec before paying for it, offline: it parses, every field obeys
    /// docs/ensemble-spec.md (an error names the field), and its terms can be met (the budget
    /// pays every GPU at the highest rate for `max_duration_s`; the run ends before the
    /// deadline). Prints the terms and what the window costs at most; exits non-zero, naming
    /// the first rule broken, when the spec cannot be submitted. No node needed.
    Validate {
        /// The spec file (YAML or JSON).
        spec: PathBuf,
    },
    /// Translate an Akash SDL (a whole v2 document, or one GPU block `{count, gpu}`) into
    /// ensemble-spec fields (YAML, or JSON with --json) on stdout; what cannot be carried is
    /// refused naming the SDL field, and what is left to write (limits, budget) is listed on
    /// stderr. Runs locally, no node needed.
    ImportSdl {
        /// The SDL file.
        file: PathBuf,
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
    for n in &s.nodes {
        out.push_str(&format!(
            "\n  node {} (provider {}…, {} GPU{}): {}",
            n.index,
            n.provider.get(..12).unwrap_or(&n.provider),
            n.gpus,
            if n.gpus == 1 { "" } else { "s" },
            n.state
        ));
        if let Some(code) = n.exit_code {
            out.push_str(&format!(", exit code {code}"));
        }
        if let Some(ms) = n.gpu_ms {
            out.push_str(&format!(", {:.1} GPU-s", ms as f64 / 1000.0));
        }
        if let Some(paid) = &n.paid {
            out.push_str(&format!(", paid {}", ntx_text(paid.get())));
        }
        if let Some(why) = &n.reason {
            out.push_str(&format!("\n    why: {why}"));
        }
    }
    if let Some(o) = &s.outcome {
        out.push_str(&format!("\n  outcome: {o}"));
    }
    out
}

/// Why a job that ended is not a success, if it is not: ended other than settled, or some
/// node's share failed (its exit code and reason). `None` for a settled job whose every share
/// succeeded.
fn failure(s: &JobStatus) -> Option<String> {
    if s.state != "settled" {
        return Some(format!(
            "ended {}{}",
            s.state,
            s.last_error
                .as_deref()
                .map_or(String::new(), |e| format!(": {e}"))
        ));
    }
    if s.outcome.as_deref() == Some("stopped") {
        return Some("settled after `job stop`: its providers stopped and claimed what ran".into());
    }
    (s.outcome.as_deref() == Some("failed")).then(|| {
        let why: Vec<String> = s
            .nodes
            .iter()
            .filter(|n| n.state != "claimed" || n.exit_code != Some(0))
            .map(|n| {
                format!(
                    "node {} {}{}",
                    n.index,
                    n.exit_code
                        .map_or_else(|| n.state.clone(), |c| format!("exit code {c}")),
                    n.reason
                        .as_deref()
                        .map_or(String::new(), |r| format!(" ({r})"))
                )
            })
            .collect();
        format!("settled but failed: {}", why.join("; "))
    })
}

/// The orchestrator's state, and once assigned how its nodes are doing
/// (`assigned: running on 2/2`, `assigned: 1/2 claimed, running on 1/2`).
fn progress(s: &JobStatus) -> String {
    let total = s.nodes.len();
    if s.state != "assigned" || total == 0 {
        return s.state.clone();
    }
    let count = |state: &str| s.nodes.iter().filter(|n| n.state == state).count();
    let (running, claimed) = (count("running"), count("claimed"));
    match (running, claimed) {
        (0, 0) => format!("assigned: starting on {total} node(s)"),
        (r, 0) => format!("assigned: running on {r}/{total}"),
        (r, c) => format!("assigned: {c}/{total} claimed, running on {r}/{total}"),
    }
}

/// Whether an orchestrator state (snake_case) is final.
fn terminal(state: &str) -> bool {
    matches!(state, "settled" | "cancelled" | "expired")
}

/// Polls `job_status` until the orchestrator record is terminal; the state changes show as a
/// spinner on stderr (hidden with `--json` or when stderr is not a terminal).
fn wait(config: Option<&std::path::Path>, job_id: &str, json: bool) -> anyhow::Result<JobStatus> {
    let bar = if json || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    bar.enable_steady_tick(Duration::from_millis(120));
    let mut seen = String::new();
    loop {
        let s: Vec<JobStatus> = call(config, |rpc| async move {
            JobApiClient::status(&rpc, job_id.to_string()).await
        })?;
        let o = s
            .into_iter()
            .find(|r| r.role == "orchestrator")
            .with_context(|| format!("the node holds no orchestrator record of job {job_id}"))?;
        let now = progress(&o);
        if now != seen {
            if !seen.is_empty() {
                bar.println(format!("job {job_id}: {seen} → {now}"));
            }
            seen = now;
            bar.set_message(format!("job {job_id}: {seen}"));
        }
        if terminal(&o.state) {
            bar.finish_and_clear();
            return Ok(o);
        }
        std::thread::sleep(POLL);
    }
}

/// What `job validate` reports of a spec that can be submitted.
#[derive(Debug, serde::Serialize)]
struct Validated {
    /// The file checked.
    spec: String,
    /// GPUs in total.
    gpus: u64,
    /// NTX base units per GPU-hour, at most.
    max_rate: u64,
    /// Longest run, seconds.
    max_duration_s: u64,
    /// NTX base units the lock takes.
    budget: u64,
    /// The most the window can cost: every GPU at `max_rate` for `max_duration_s`, NTX base
    /// units (never above `budget`).
    window_cost: u64,
    /// POSIX ms.
    deadline_ms: u64,
    /// Seconds from now to the deadline.
    deadline_in_s: u64,
}

/// `job validate`: the spec parsed and checked as `job submit` and the engine check it
/// (`Ensemble::parse`, then `ganglion_jobs::terms::check`).
fn validate(spec: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(spec).with_context(|| format!("reading {}", spec.display()))?;
    let now = ganglion_p2p::now_ms();
    let parsed = Ensemble::parse(&text, now).with_context(|| format!("{}", spec.display()))?;
    ganglion_node::job::terms::check(&parsed, now)
        .with_context(|| format!("{}: terms that cannot be met", spec.display()))?;
    let t = parsed.escrow_terms();
    let v = Validated {
        spec: spec.display().to_string(),
        gpus: t.gpus,
        max_rate: t.max_rate,
        max_duration_s: parsed.limits.max_duration_s,
        budget: t.budget,
        window_cost: ganglion_node::job::terms::window_cost(
            t.gpus,
            t.max_rate,
            parsed.limits.max_duration_s,
        ),
        deadline_ms: t.deadline_ms,
        deadline_in_s: t.deadline_ms.saturating_sub(now) / 1000,
    };
    if json {
        return print_json(&v);
    }
    println!(
        "{}: valid. {} GPU{} at most {} per GPU-hour for {} s: the window costs at most {} of \
         the budget of {}; deadline in {} s.",
        v.spec,
        v.gpus,
        if v.gpus == 1 { "" } else { "s" },
        ntx_text(v.max_rate),
        v.max_duration_s,
        ntx_text(v.window_cost),
        ntx_text(v.budget),
        v.deadline_in_s
    );
    Ok(())
}

fn print_logs(logs: &[JobLog]) {
    if logs.is_empty() {
        println!("no provider attested logs");
    }
    for l in logs {
        let head = format!("== node rank {} (provider {}) ==", l.index, l.provider);
        match (&l.error, l.cid.is_empty()) {
            (Some(e), _) => println!("{head}\nlog {} unavailable: {e}", l.cid),
            (None, true) => println!("{head}\n(its claim attested no log)"),
            (None, false) => {
                println!("{head} log {} ({} bytes)", l.cid, l.bytes);
                print!("{}", l.text);
                if !l.text.ends_with('\n') {
                    println!();
                }
            }
        }
    }
}

fn print_outputs(outputs: &[JobOutput]) {
    if outputs.is_empty() {
        println!("no provider attested outputs");
    }
    for o in outputs {
        let cid = if o.cid.is_empty() { "-" } else { &o.cid };
        print!(
            "node rank {} (provider {}): outputs {cid}",
            o.index, o.provider
        );
        match (&o.error, &o.written_to) {
            (Some(e), _) => println!(" unavailable: {e}"),
            (None, Some(w)) => println!(" written to {w}"),
            (None, None) => println!(),
        }
        for f in &o.files {
            println!("  {:<40} {:>12} bytes  {}", f.path, f.bytes, f.cid);
        }
    }
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let config = args.remote.config.as_deref();
    match args.command {
        Command::Validate { spec } => validate(&spec, args.remote.json)?,
        Command::ImportSdl { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let imported = ganglion_market::sdl::import(&text)
                .with_context(|| format!("importing {}", file.display()))?;
            for note in &imported.to_complete {
                eprintln!("to complete: {note}");
            }
            if args.remote.json {
                print_json(&imported)?;
            } else {
                print!(
                    "{}",
                    serde_norway::to_string(&imported).context("encoding the spec fields")?
                );
            }
        }
        Command::Submit {
            spec,
            wait: follow,
            force,
        } => {
            let text = std::fs::read_to_string(&spec)
                .with_context(|| format!("reading {}", spec.display()))?;
            let parsed = Ensemble::parse(&text, ganglion_p2p::now_ms())
                .with_context(|| format!("parsing {}", spec.display()))?;
            let value = serde_json::to_value(&parsed).context("encoding the spec")?;
            if !force {
                // Check before paying: nothing is locked for a spec no provider can take now.
                let quoted = value.clone();
                let q: ganglion_rpc::types::JobQuote = call(config, |rpc| async move {
                    JobApiClient::quote(&rpc, quoted).await
                })?;
                anyhow::ensure!(
                    q.placeable,
                    "{}: not submitted, nothing was locked: today's market cannot place it: {}                      (`ganglion job quote` shows the market's answer; --force locks the budget                      anyway and the job waits in matching)",
                    spec.display(),
                    q.reason.as_deref().unwrap_or("no reason given")
                );
            }
            let s: JobSubmitted = call(config, |rpc| async move {
                JobApiClient::submit(&rpc, value).await
            })?;
            if !follow {
                return if args.remote.json {
                    print_json(&s)
                } else {
                    println!("job {} locked", s.job_id);
                    Ok(())
                };
            }
            if !args.remote.json {
                println!("job {} locked", s.job_id);
            }
            let end = wait(config, &s.job_id, args.remote.json)?;
            if args.remote.json {
                print_json(&end)?;
            } else {
                println!("{}", human(&end));
            }
            if let Some(why) = failure(&end) {
                anyhow::bail!("job {} {why}", s.job_id);
            }
        }
        Command::Quote { spec } => {
            let text = std::fs::read_to_string(&spec)
                .with_context(|| format!("reading {}", spec.display()))?;
            let parsed = Ensemble::parse(&text, ganglion_p2p::now_ms())
                .with_context(|| format!("{}", spec.display()))?;
            let value = serde_json::to_value(&parsed).context("encoding the spec")?;
            let q: ganglion_rpc::types::JobQuote = call(config, |rpc| async move {
                JobApiClient::quote(&rpc, value).await
            })?;
            if args.remote.json {
                print_json(&q)?;
            } else if q.placeable {
                println!(
                    "placeable now on {} provider(s); at worst {} of the budget of {}:",
                    q.nodes.len(),
                    ntx_text(q.worst_case_ntx.get()),
                    ntx_text(q.budget_ntx.get())
                );
                for n in &q.nodes {
                    println!(
                        "  {} {} GPU(s) at {} per GPU-hour",
                        n.provider,
                        n.gpus,
                        ntx_text(n.rate.get())
                    );
                }
            }
            anyhow::ensure!(
                q.placeable,
                "{}: nothing in today's market can place it: {}",
                spec.display(),
                q.reason.as_deref().unwrap_or("no reason given")
            );
        }
        Command::List { state } => {
            let all: Vec<JobStatus> = call(config, |rpc| async move {
                JobApiClient::list(&rpc, state).await
            })?;
            if args.remote.json {
                print_json(&all)?;
            } else if all.is_empty() {
                println!("no job");
            } else {
                for s in &all {
                    let error = s
                        .last_error
                        .as_deref()
                        .map_or(String::new(), |e| format!("  ({e})"));
                    println!("{} {:<12} {}{error}", s.job_id, s.role, s.state);
                }
            }
        }
        Command::Status { job_id } => {
            let s: Vec<JobStatus> = call(config, |rpc| {
                let id = job_id.clone();
                async move { JobApiClient::status(&rpc, id).await }
            })?;
            if args.remote.json {
                print_json(&s)?;
            } else {
                for r in &s {
                    println!("{}", human(r));
                }
            }
            // An unknown job is an answer a script must be able to tell apart.
            anyhow::ensure!(!s.is_empty(), "this node holds no record of job {job_id}");
        }
        Command::Cancel { job_id } => {
            let s: JobStatus = call(config, |rpc| async move {
                JobApiClient::cancel(&rpc, job_id).await
            })?;
            if args.remote.json {
                print_json(&s)?;
            } else {
                println!("cancel submitted\n{}", human(&s));
            }
        }
        Command::Stop { job_id } => {
            let s: JobStatus = call(config, |rpc| async move {
                JobApiClient::stop(&rpc, job_id).await
            })?;
            if args.remote.json {
                print_json(&s)?;
            } else {
                println!("stop requested\n{}", human(&s));
            }
        }
        Command::Logs { job_id } => {
            let logs: Vec<JobLog> = call(config, |rpc| {
                let id = job_id.clone();
                async move { JobApiClient::logs(&rpc, id).await }
            })?;
            if args.remote.json {
                print_json(&logs)?;
            } else {
                print_logs(&logs);
            }
            let missing = logs.iter().filter(|l| l.error.is_some()).count();
            anyhow::ensure!(missing == 0, "{missing} log(s) of job {job_id} unavailable");
        }
        Command::Outputs { job_id, out } => {
            let dir = match out {
                Some(d) => {
                    std::fs::create_dir_all(&d)
                        .with_context(|| format!("creating {}", d.display()))?;
                    let abs = std::path::absolute(&d)
                        .with_context(|| format!("resolving {}", d.display()))?;
                    Some(abs.display().to_string())
                }
                None => None,
            };
            let outputs: Vec<JobOutput> = call(config, |rpc| {
                let id = job_id.clone();
                async move { JobApiClient::outputs(&rpc, id, dir).await }
            })?;
            if args.remote.json {
                print_json(&outputs)?;
            } else {
                print_outputs(&outputs);
            }
            let missing = outputs.iter().filter(|o| o.error.is_some()).count();
            anyhow::ensure!(
                missing == 0,
                "{missing} output(s) of job {job_id} unavailable"
            );
        }
    }
    Ok(())
}
