//! `ganglion job submit|quote|status|list|cancel|stop|logs|outputs`: jobs of a running node,
//! over its JSON-RPC API (`job_submit`, `job_quote`, `job_status`, `job_list`, `job_cancel`,
//! `job_stop`, `job_logs`, `job_liveLogs`, `job_outputs`), found through the config's data dir
//! ([`super::remote::call`]); and, local: `ganglion job validate` (a spec
//! checked as `job submit` would, before anything is paid) and `ganglion job import-sdl` (an
//! Akash SDL GPU block to ensemble-spec fields, [`ganglion_market::sdl`]).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use ganglion_market::spec::Ensemble;
use ganglion_rpc::amount::ntx_text;
use ganglion_rpc::audit::{JobLog, JobOutput, LiveJobLog};
use ganglion_rpc::types::{JobStatus, JobSubmitted};

use super::remote::{RemoteArgs, call, print_json};
use ganglion_rpc::api::JobApiClient;

/// How often `job submit --wait` asks for the job's state.
const POLL: Duration = Duration::from_secs(1);
/// How often `job logs --follow` asks for the live logs and the job's state.
const FOLLOW_POLL: Duration = Duration::from_secs(2);

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
    /// The node's records of a job: state, history, transactions, each provider's share; for a
    /// service its replicas, the gateway's load, each replica's signed usage and the cost so
    /// far. Exits non-zero when the node holds no record of it.
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
    /// The logs the job's providers attested (one per rank), fetched over IPFS; with
    /// `--follow`, each rank's live log while the job runs, then the attested rest.
    Logs {
        /// Job id (64 hex digits).
        job_id: String,
        /// Follow a running job this node orchestrates: every 2 s print what each rank's log
        /// gained (its live log: the last 64 KiB its provider sends with each heartbeat,
        /// unattested; lines prefixed `node N | ` when the job has several nodes, and a
        /// `… (N bytes skipped)` line where the output outran the tail), until the job has an
        /// outcome; then what the attested logs hold past that. Exits as `job submit --wait`:
        /// non-zero unless the job succeeded. With --json: one JSON object per new piece
        /// (`index`, `offset`, `skipped`, `text`).
        #[arg(long)]
        follow: bool,
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

/// A replica's signed usage in words: `721 requests (0 failed), 28.1 KiB in, 1.4 MiB out`.
fn usage_text(u: &ganglion_rpc::types::ReplicaUsage) -> String {
    let size = |b: u64| match b {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    };
    format!(
        "{} requests ({} failed), {} in, {} out",
        u.requests,
        u.failed,
        size(u.bytes_in),
        size(u.bytes_out)
    )
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
            "\n  node {} (provider {}…, {} GPU{}{}): {}",
            n.index,
            n.provider.get(..12).unwrap_or(&n.provider),
            n.gpus,
            if n.gpus == 1 { "" } else { "s" },
            group_text(n.group),
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
        if let Some(until) = n.released_until_ms {
            out.push_str(&format!(", released (paid until {until} ms)"));
        }
        if let Some(u) = &n.usage {
            out.push_str(&format!(", served {}", usage_text(u)));
        }
        if let Some(why) = &n.reason {
            out.push_str(&format!("\n    why: {why}"));
        }
    }
    if let Some(svc) = &s.service {
        out.push_str(&format!(
            "\n  service /{}/: {} replica{} running ({} wanted), cost so far {}",
            svc.name,
            svc.running.len(),
            if svc.running.len() == 1 { "" } else { "s" },
            svc.wanted,
            ntx_text(svc.cost_so_far.get())
        ));
        if let Some(per_1k) = &svc.cost_per_1k_requests {
            out.push_str(&format!(
                "\n    {} requests answered (signed with the receipts): {} per 1 000 requests",
                svc.requests,
                ntx_text(per_1k.get())
            ));
        }
        if let Some(l) = &svc.load {
            let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} ms"));
            out.push_str(&format!(
                "\n    gateway (last 10 s): {} healthy, {} in flight, {:.1} requests/s, p50 {}, p90 {}",
                l.healthy,
                l.in_flight,
                l.requests_per_s,
                ms(l.p50_ms),
                ms(l.p90_ms)
            ));
        }
    }
    if !s.links.is_empty() {
        out.push_str("\n  measured links of the plan (at the match):");
        for p in &s.links {
            out.push_str(&format!("\n    {}", super::market::pair_line(p)));
        }
    }
    if let Some(o) = &s.outcome {
        out.push_str(&format!("\n  outcome: {o}"));
    }
    if let Some(j) = &s.predecessor {
        out.push_str(&format!(
            "\n  matches again job {j} (its network did not form)"
        ));
    }
    if let Some(j) = &s.successor {
        out.push_str(&format!(
            "\n  matched again as job {j} (ganglion job status {j})"
        ));
    }
    if let Some(u) = &s.usage {
        let until = u
            .until_ms
            .map_or(String::new(), |t| format!(" up to {t} ms"));
        out.push_str(&format!(
            "\n  served {}{until} (signed by the orchestrator with the receipt)",
            usage_text(u)
        ));
    }
    out
}

/// `, group N` for a node of a grouped plan (`placement.groups`), else nothing.
fn group_text(group: Option<u32>) -> String {
    group.map_or(String::new(), |g| format!(", group {g}"))
}

/// A placeable quote as text: the providers in assignment order, each with its group when the
/// spec asks for `placement.groups`.
fn quote_text(q: &ganglion_rpc::types::JobQuote) -> String {
    let mut out = format!(
        "placeable now on {} provider(s); at worst {} of the budget of {}:",
        q.nodes.len(),
        ntx_text(q.worst_case_ntx.get()),
        ntx_text(q.budget_ntx.get())
    );
    for n in &q.nodes {
        out.push_str(&format!(
            "\n  {} {} GPU(s) at {} per GPU-hour{}",
            n.provider,
            n.gpus,
            ntx_text(n.rate.get()),
            group_text(n.group)
        ));
    }
    out
}

/// Why a job that ended is not a success, if it is not: ended other than settled, or some
/// node's share failed (its exit code and reason). `None` for a settled job whose every share
/// succeeded.
fn failure(s: &JobStatus) -> Option<String> {
    // An outcome on chain before the record's state caught up (`job logs --follow` stops at
    // the outcome) is judged by the outcome.
    let ended_on_chain = s.outcome.is_some() && !terminal(&s.state);
    if s.state != "settled" && !ended_on_chain {
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
    /// A `kind: service` spec's replicas; absent for a batch job.
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<ValidatedService>,
}

/// The replicas of a service spec, as `job validate` reports them.
#[derive(Debug, serde::Serialize)]
struct ValidatedService {
    /// `gpus.count`: GPUs of each replica.
    gpus_per_replica: u32,
    /// `replicas.min`.
    min_replicas: u32,
    /// `replicas.max`.
    max_replicas: u32,
    /// `serve.gateways`: the nodes besides the orchestrator's that route it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    gateways: Vec<String>,
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
        service: parsed.replicas.map(|r| ValidatedService {
            gpus_per_replica: parsed.gpus.count,
            min_replicas: r.min,
            max_replicas: r.max,
            gateways: parsed
                .serve
                .as_ref()
                .map(|s| s.gateways.clone())
                .unwrap_or_default(),
        }),
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
    if let Some(s) = &v.service {
        println!(
            "  kind: service, {}–{} replicas of {} GPU{} each (the escrow covers the most), \
             routed by the orchestrator's node at `[gateway] listen`{}.",
            s.min_replicas,
            s.max_replicas,
            s.gpus_per_replica,
            if s.gpus_per_replica == 1 { "" } else { "s" },
            match s.gateways.len() {
                0 => String::new(),
                n => format!(
                    " and by {n} more node{} (serve.gateways)",
                    if n == 1 { "" } else { "s" }
                ),
            },
        );
    }
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

/// One node's log as `job logs --follow` printed it so far.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Followed {
    /// Bytes of the log printed or skipped so far: where the next byte to print is.
    printed: u64,
    /// Whether what was printed ends a line (or nothing was printed yet).
    at_line_start: bool,
    /// The last error shown for the node (shown again only when it changes).
    error: Option<String>,
}

impl Default for Followed {
    fn default() -> Self {
        Self {
            printed: 0,
            at_line_start: true,
            error: None,
        }
    }
}

/// What a piece of a node's log adds to what was printed of it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step<'a> {
    /// Bytes between what was printed and where the piece starts: gone from the tail.
    skipped: u64,
    /// Where `text` starts in the log, bytes.
    offset: u64,
    /// The new text.
    text: &'a str,
}

/// The part of `text` (bytes `offset .. offset + text.len()` of a node's log) past what `f`
/// printed, and the bytes skipped before it when the piece starts past that; advances
/// `f.printed` over both. With `whole_lines`, the new text ends at its last newline: the rest
/// waits for its newline (so lines of several nodes do not mix).
fn advance<'a>(f: &mut Followed, offset: u64, text: &'a str, whole_lines: bool) -> Step<'a> {
    let end = offset.saturating_add(text.len() as u64);
    if end <= f.printed {
        return Step {
            skipped: 0,
            offset: f.printed,
            text: "",
        };
    }
    let (skipped, mut start) = match f.printed.checked_sub(offset) {
        Some(past) => (0, usize::try_from(past).unwrap_or(text.len())),
        None => (offset - f.printed, 0),
    };
    while start < text.len() && !text.is_char_boundary(start) {
        start += 1;
    }
    let mut new = &text[start..];
    if whole_lines {
        new = new.rfind('\n').map_or("", |i| &new[..=i]);
    }
    let at = offset + start as u64;
    if skipped > 0 || !new.is_empty() {
        f.printed = at + new.len() as u64;
    }
    Step {
        skipped,
        offset: at,
        text: new,
    }
}

/// `step` as printed: a `… (N bytes skipped)` line first when bytes were skipped, and every
/// line that starts here prefixed with `prefix`.
fn render(f: &mut Followed, step: &Step<'_>, prefix: &str) -> String {
    let mut out = String::new();
    if step.skipped > 0 {
        if !f.at_line_start {
            out.push('\n');
        }
        out.push_str(&format!("{prefix}… ({} bytes skipped)\n", step.skipped));
        f.at_line_start = true;
    }
    for line in step.text.split_inclusive('\n') {
        if f.at_line_start {
            out.push_str(prefix);
        }
        out.push_str(line);
        f.at_line_start = line.ends_with('\n');
    }
    out
}

/// The line prefix of node `index`'s log: `node N | ` when the job has several nodes.
fn node_prefix(index: u64, several: bool) -> String {
    if several {
        format!("node {index} | ")
    } else {
        String::new()
    }
}

/// Prints `step` of node `index` (text, or with `json` one JSON object); nothing when empty.
fn show(f: &mut Followed, index: u64, step: &Step<'_>, several: bool, json: bool) {
    use std::io::Write as _;
    if step.skipped == 0 && step.text.is_empty() {
        return;
    }
    if json {
        println!(
            "{}",
            serde_json::json!({
                "index": index,
                "offset": step.offset,
                "skipped": step.skipped,
                "text": step.text,
            })
        );
    } else {
        print!("{}", render(f, step, &node_prefix(index, several)));
    }
    let _ = std::io::stdout().flush();
}

/// The orchestrator record of `job_id` in `job_status`.
fn orchestrator_status(
    config: Option<&std::path::Path>,
    job_id: &str,
) -> anyhow::Result<JobStatus> {
    let s: Vec<JobStatus> = call(config, |rpc| {
        let id = job_id.to_string();
        async move { JobApiClient::status(&rpc, id).await }
    })?;
    s.into_iter()
        .find(|r| r.role == "orchestrator")
        .with_context(|| {
            format!(
                "the node holds no orchestrator record of job {job_id}: live logs come to the \
                 node that orchestrates the job"
            )
        })
}

/// `job logs --follow`: polls the live logs and the job's state every [`FOLLOW_POLL`], prints
/// what each node's log gained, and once the job has an outcome (or ended without one) what
/// the attested logs hold past that; fails as `job submit --wait` does.
fn follow_logs(config: Option<&std::path::Path>, job_id: &str, json: bool) -> anyhow::Result<()> {
    let mut nodes: std::collections::BTreeMap<u64, Followed> = Default::default();
    let end = loop {
        let o = orchestrator_status(config, job_id)?;
        let ended = o.outcome.is_some() || terminal(&o.state);
        let live: Vec<LiveJobLog> = call(config, |rpc| {
            let id = job_id.to_string();
            async move { JobApiClient::live_logs(&rpc, id).await }
        })?;
        let several = o.nodes.len() > 1 || live.len() > 1;
        for l in &live {
            let f = nodes.entry(l.index).or_default();
            if let Some(e) = &l.error {
                if f.error.as_ref() != Some(e) {
                    eprintln!("node {}: live log unavailable: {e}", l.index);
                    f.error = Some(e.clone());
                }
                continue;
            }
            f.error = None;
            let step = advance(f, l.offset, &l.text, several);
            show(f, l.index, &step, several, json);
        }
        if ended {
            break o;
        }
        std::thread::sleep(FOLLOW_POLL);
    };
    if end.outcome.is_some() {
        let several = end.nodes.len() > 1;
        match call(config, |rpc| {
            let id = job_id.to_string();
            async move { JobApiClient::logs(&rpc, id).await }
        }) {
            Ok(logs) => {
                // The attested text is lossy UTF-8 (U+FFFD): byte positions match the live
                // log's as long as the log is valid UTF-8.
                for l in &logs {
                    if let Some(e) = &l.error {
                        eprintln!("node {}: attested log unavailable: {e}", l.index);
                        continue;
                    }
                    let f = nodes.entry(l.index).or_default();
                    let step = advance(f, 0, &l.text, false);
                    show(f, l.index, &step, several, json);
                    if !json && !f.at_line_start {
                        println!();
                        f.at_line_start = true;
                    }
                }
            }
            Err(e) => eprintln!("the attested logs of job {job_id} could not be read: {e:#}"),
        }
    }
    eprintln!(
        "job {job_id}: {}{}",
        end.state,
        end.outcome
            .as_deref()
            .map_or(String::new(), |o| format!(", outcome {o}"))
    );
    if let Some(why) = failure(&end) {
        anyhow::bail!("job {job_id} {why}");
    }
    Ok(())
}

/// When `job logs` found nothing attested for a job that is running (this node orchestrates
/// it, assigned, no node claimed yet): the error to give instead, suggesting `--follow`.
fn running_hint(config: Option<&std::path::Path>, job_id: &str) -> Option<anyhow::Error> {
    let o = orchestrator_status(config, job_id).ok()?;
    let running = o.state == "assigned" && o.nodes.iter().all(|n| n.state != "claimed");
    running.then(|| {
        anyhow::anyhow!(
            "job {job_id} is running ({}): no provider has attested its log yet (each does \
             when its share ends); `ganglion job logs {job_id} --follow` shows the live logs \
             while it runs",
            progress(&o)
        )
    })
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
                    "{}: not submitted, nothing was locked: today's market cannot place it: {} (`ganglion job quote` shows the market's answer; --force locks the budget anyway and the job waits in matching)",
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
                println!("{}", quote_text(&q));
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
        Command::Logs {
            job_id,
            follow: true,
        } => follow_logs(config, &job_id, args.remote.json)?,
        Command::Logs {
            job_id,
            follow: false,
        } => {
            let logs: Vec<JobLog> = match call(config, |rpc| {
                let id = job_id.clone();
                async move { JobApiClient::logs(&rpc, id).await }
            }) {
                Ok(logs) => logs,
                Err(e) => return Err(running_hint(config, &job_id).unwrap_or(e)),
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `job quote` and `job status` name each node's latency group of a grouped plan, and
    /// nothing more without groups.
    #[test]
    fn quote_and_status_text_name_each_nodes_group() {
        use ganglion_rpc::types::{JobNode, JobQuote, QuotedNode};
        let quoted = |provider: &str, group| QuotedNode {
            provider: provider.repeat(28),
            gpus: 1,
            rate: 10.into(),
            group,
        };
        let q = JobQuote {
            placeable: true,
            nodes: vec![quoted("01", Some(0)), quoted("03", Some(1))],
            worst_case_ntx: 20.into(),
            budget_ntx: 100.into(),
            reason: None,
            pair: None,
        };
        let text = quote_text(&q);
        assert!(
            text.contains(&format!("{} 1 GPU(s) at ", "01".repeat(28))),
            "{text}"
        );
        assert!(text.contains("per GPU-hour, group 0"), "{text}");
        assert!(text.ends_with("per GPU-hour, group 1"), "{text}");
        let flat = JobQuote {
            nodes: vec![quoted("01", None)],
            ..q
        };
        assert!(!quote_text(&flat).contains("group"));
        let json = serde_json::to_value(&flat.nodes[0]).expect("json");
        assert!(json.get("group").is_none(), "{json}");

        let node = |index, group| JobNode {
            index,
            provider: "ab".repeat(28),
            gpus: 2,
            state: "running".into(),
            exit_code: None,
            gpu_ms: None,
            paid: None,
            logs: None,
            reason: None,
            group,
            rate: None,
            released_until_ms: None,
            usage: None,
        };
        let status = JobStatus {
            job_id: "00".repeat(32),
            role: "orchestrator".into(),
            state: "running".into(),
            history: vec![],
            txs: vec![],
            last_error: None,
            nodes: vec![node(0, Some(0)), node(1, Some(1))],
            outcome: None,
            links: vec![],
            successor: None,
            predecessor: None,
            service: None,
            usage: None,
        };
        let text = human(&status);
        assert!(
            text.contains("node 1 (provider abababababab…, 2 GPUs, group 1): running"),
            "{text}"
        );

        // A service: each replica's signed usage, the price per 1 000 requests, and the
        // provider's own view of what its receipt carries.
        let usage = ganglion_rpc::types::ReplicaUsage {
            requests: 721,
            failed: 1,
            bytes_in: 28_840,
            bytes_out: 1_500_000,
            until_ms: Some(1_700_000_060_000),
        };
        let served = JobStatus {
            nodes: vec![JobNode {
                usage: Some(usage),
                ..node(0, None)
            }],
            service: Some(ganglion_rpc::types::JobService {
                name: "ab".repeat(8),
                wanted: 1,
                running: vec![0],
                load: None,
                cost_so_far: 721_000.into(),
                requests: 721,
                cost_per_1k_requests: Some(1_000_000.into()),
            }),
            ..status.clone()
        };
        let text = human(&served);
        assert!(
            text.contains("served 721 requests (1 failed), 28.2 KiB in, 1.4 MiB out"),
            "{text}"
        );
        assert!(text.contains("721 requests answered"), "{text}");
        let provider = JobStatus {
            role: "provider".into(),
            nodes: vec![],
            usage: Some(usage),
            ..status
        };
        let text = human(&provider);
        assert!(
            text.contains("up to 1700000060000 ms (signed by the orchestrator"),
            "{text}"
        );
    }

    /// Feeds `pieces` (offset, text) of one node's log through `advance` and `render`.
    fn follow(f: &mut Followed, pieces: &[(u64, &str)], prefix: &str, whole_lines: bool) -> String {
        let mut out = String::new();
        for (offset, text) in pieces {
            let step = advance(f, *offset, text, whole_lines);
            out.push_str(&render(f, &step, prefix));
        }
        out
    }

    #[test]
    fn only_bytes_past_what_was_printed_are_printed_and_a_gap_is_marked() {
        let mut f = Followed::default();
        // The tail grows: each poll prints only what is new, a partial line included.
        assert_eq!(follow(&mut f, &[(0, "a\nb")], "", false), "a\nb");
        assert_eq!(f.printed, 3);
        assert_eq!(follow(&mut f, &[(0, "a\nbc\n")], "", false), "c\n");
        // The same tail again, or an older one: nothing.
        assert_eq!(follow(&mut f, &[(0, "a\nbc\n"), (0, "a\n")], "", false), "");
        assert_eq!(f.printed, 5);
        // The tail moved on past what was printed: the gap is said, then the new bytes.
        assert_eq!(
            follow(&mut f, &[(10, "xyz\n")], "", false),
            "… (5 bytes skipped)\nxyz\n"
        );
        assert_eq!(f.printed, 14);
        // A tail overlapping what was printed: only its new end.
        assert_eq!(follow(&mut f, &[(12, "z\nnext\n")], "", false), "next\n");
        assert_eq!(f.printed, 19);
        // A gap after a partial line: the marker starts a line of its own.
        let mut g = Followed::default();
        assert_eq!(
            follow(&mut g, &[(0, "ab"), (10, "z\n")], "", false),
            "ab\n… (8 bytes skipped)\nz\n"
        );
    }

    #[test]
    fn several_nodes_print_whole_lines_with_their_prefix() {
        let mut f = Followed::default();
        let p = node_prefix(1, true);
        assert_eq!(p, "node 1 | ");
        // A partial line waits for its newline.
        assert_eq!(
            follow(&mut f, &[(0, "one\ntw")], &p, true),
            "node 1 | one\n"
        );
        assert_eq!(f.printed, 4);
        assert_eq!(follow(&mut f, &[(0, "one\ntwo")], &p, true), "");
        assert_eq!(
            follow(&mut f, &[(0, "one\ntwo\nthree\n")], &p, true),
            "node 1 | two\nnode 1 | three\n"
        );
        assert_eq!(
            follow(&mut f, &[(20, "x\n")], &p, true),
            "node 1 | … (6 bytes skipped)\nnode 1 | x\n"
        );
        // At the end the attested log (from byte 0) gives only the rest, partial line
        // included.
        let attested = format!("{}x\n[ganglion] node rank 1: stopped", "-".repeat(20));
        assert_eq!(
            follow(&mut f, &[(0, &attested)], &p, false),
            "node 1 | [ganglion] node rank 1: stopped"
        );
        assert!(!f.at_line_start);
        assert_eq!(node_prefix(0, false), "");
    }

    fn status(state: &str, outcome: Option<&str>) -> JobStatus {
        JobStatus {
            job_id: "ab".repeat(32),
            role: "orchestrator".into(),
            state: state.into(),
            history: vec![],
            txs: vec![],
            last_error: None,
            nodes: vec![],
            outcome: outcome.map(String::from),
            links: vec![],
            successor: None,
            predecessor: None,
            service: None,
            usage: None,
        }
    }

    /// `job logs --follow` stops at the outcome, which the chain may show before the record is
    /// settled: it is judged by the outcome, as `job submit --wait` judges a settled job.
    #[test]
    fn an_outcome_decides_the_exit_before_the_record_settles() {
        assert_eq!(failure(&status("assigned", Some("succeeded"))), None);
        assert_eq!(failure(&status("settled", Some("succeeded"))), None);
        for state in ["assigned", "settled"] {
            assert!(
                failure(&status(state, Some("stopped"))).is_some_and(|w| w.contains("job stop")),
                "{state}"
            );
            assert!(
                failure(&status(state, Some("failed"))).is_some_and(|w| w.contains("failed")),
                "{state}"
            );
        }
        assert_eq!(
            failure(&status("cancelled", None)).as_deref(),
            Some("ended cancelled")
        );
        assert!(failure(&status("expired", Some("succeeded"))).is_some());
    }
}
