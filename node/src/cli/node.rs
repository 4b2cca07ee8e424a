//! `ganglion node config --print [--config F]`: the effective config, each value with its source.
//!
//! `ganglion node info [--config F] [--wait S] [--bootstrap | --json]`: what the running node
//! serves (its `node.json`).
//!
//! `ganglion node run [--config F] [--log-format text|json | --json]`: the node in the foreground until
//! SIGINT or SIGTERM. Logs go to stderr through `tracing` (filter with `RUST_LOG`, default
//! `info`): human-readable text, or one JSON object per line (`timestamp`, `level`, `fields`
//! with `message`, `target`, `span`) for log shippers.

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_node::daemon;
use ganglion_node::settings::Settings;
use tokio_util::sync::CancellationToken;

/// Run the node.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub command: Command,
}

/// `ganglion node …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Run the node (indexer, p2p, job engine, JSON-RPC; a provider too with `[provider]`)
    /// until SIGINT or SIGTERM.
    Run {
        /// Node config (TOML); `GANGLION_*` variables override it.
        #[arg(long, env = "GANGLION_CONFIG")]
        config: Option<PathBuf>,
        /// Log format on stderr.
        #[arg(long, env = "GANGLION_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
        /// Same as `--log-format json` (every command takes `--json`).
        #[arg(long, conflicts_with = "log_format")]
        json: bool,
    },
    /// What the running node of this config serves (its `node.json`): pid, peer id, p2p
    /// addresses, JSON-RPC address, bond, and the metrics, console, service gateway and index
    /// API addresses it serves. Exits non-zero when no node runs, saying whether
    /// it stopped, failed (with its error) or died.
    Info {
        /// Node config (TOML); `GANGLION_*` variables override it.
        #[arg(long, env = "GANGLION_CONFIG")]
        config: Option<PathBuf>,
        /// Wait up to this many seconds for the node to finish starting (a node just started
        /// in the background); a node whose start failed or whose process died ends the wait
        /// at once, with its error.
        #[arg(long, default_value_t = 0)]
        wait: u64,
        /// Print only the value other nodes' `GANGLION_P2P__BOOTSTRAP` takes to join this one
        /// (a TOML array of its p2p multiaddrs).
        #[arg(long)]
        bootstrap: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The node's effective config: the file, then `GANGLION_*` variables, then defaults,
    /// each value with where it came from.
    Config {
        /// Node config (TOML); `GANGLION_*` variables override it.
        #[arg(long, env = "GANGLION_CONFIG")]
        config: Option<PathBuf>,
        /// Print the effective config as TOML, each key annotated with its source.
        #[arg(long, required = true)]
        print: bool,
    },
}

/// How `node run` writes its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Run {
            config,
            log_format,
            json,
        } => run_node(config, if json { LogFormat::Json } else { log_format }),
        Command::Info {
            config,
            wait,
            bootstrap,
            json,
        } => info(config, wait, bootstrap, json),
        Command::Config { config, print } => {
            let (settings, sources) =
                Settings::load_with_sources(config.as_deref()).context("loading the settings")?;
            if print {
                print!("{}", settings.effective()?.to_annotated_toml(&sources)?);
            }
            Ok(())
        }
    }
}

fn info(config: Option<PathBuf>, wait_s: u64, bootstrap: bool, json: bool) -> anyhow::Result<()> {
    let settings = Settings::load(config.as_deref()).context("loading the settings")?;
    let dir = settings.data_dir().context("finding the data dir")?;
    let info = wait_for(&dir, wait_s)?;
    if bootstrap {
        let addrs: Vec<String> = info.p2p.iter().map(|a| format!("{a:?}")).collect();
        println!("[{}]", addrs.join(", "));
    } else if json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        println!("pid      {}", info.pid);
        println!("peer id  {}", info.peer_id);
        for a in &info.p2p {
            println!("p2p      {a}");
        }
        println!("rpc      {}", info.rpc);
        println!("key hash {}", info.payment_key_hash);
        if let Some(b) = &info.bond {
            println!("bond     {b}");
        }
        for (what, addr) in [
            ("metrics ", info.metrics),
            ("console ", info.console),
            ("gateway ", info.gateway),
            ("indexer ", info.indexer_api),
        ] {
            if let Some(a) = addr {
                println!("{what} {a}");
            }
        }
    }
    Ok(())
}

/// A start older than the `info` command by more than this is not the one it waits for: a
/// failure or death it records is the last word only after [`NEW_START_GRACE`].
const SAME_START_SLACK_MS: u64 = 2_000;
/// How long `--wait` gives a node just launched to write its start record over an old one.
const NEW_START_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The node of `dir` once up, waiting up to `wait_s` seconds while it starts; fails at once
/// when its start failed or its process died, and after [`NEW_START_GRACE`] when what it sees
/// is an older start or none.
fn wait_for(dir: &std::path::Path, wait_s: u64) -> anyhow::Result<daemon::NodeInfo> {
    use daemon::start::Liveness;
    let began = std::time::Instant::now();
    let began_ms = ganglion_p2p::now_ms();
    let until = began + std::time::Duration::from_secs(wait_s);
    loop {
        let now = liveness(dir);
        let out_of_time = std::time::Instant::now() >= until;
        let final_word = out_of_time
            || began.elapsed() >= NEW_START_GRACE
            || now
                .started_at_ms()
                .is_some_and(|at| at + SAME_START_SLACK_MS >= began_ms);
        match now {
            Liveness::Up(info) => return Ok(*info),
            Liveness::Starting { pid } if out_of_time => anyhow::bail!(
                "the node on {} (pid {pid}) is still starting after {wait_s} s: its log says \
                 how far it got (`--wait` waits longer)",
                dir.display()
            ),
            Liveness::Failed { pid, error, .. } if final_word => {
                anyhow::bail!("the node on {} (pid {pid}) failed: {error}", dir.display())
            }
            Liveness::Died { pid, .. } if final_word => anyhow::bail!(
                "the node on {} (pid {pid}) died without a word (killed, or it crashed): see \
                 its log; start it again with `ganglion node run`",
                dir.display()
            ),
            Liveness::Stopped { pid } if final_word => anyhow::bail!(
                "no running node on {}: its node.json names process {pid}, which stopped \
                 (start one with `ganglion node run`)",
                dir.display()
            ),
            Liveness::NeverStarted if final_word => anyhow::bail!(
                "no running node on {}: no node started there (start one with `ganglion node run`)",
                dir.display()
            ),
            _ => std::thread::sleep(std::time::Duration::from_millis(250)),
        }
    }
}

fn liveness(dir: &std::path::Path) -> daemon::start::Liveness {
    daemon::start::liveness(dir, ganglion_node::rpc_client::process_exists)
}

fn run_node(config: Option<PathBuf>, log_format: LogFormat) -> anyhow::Result<()> {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file (the demo's, a service's) gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let settings = Settings::load(config.as_deref()).context("loading the settings")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let shutdown = CancellationToken::new();
        let signals = shutdown.clone();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
                _ = term.recv() => tracing::info!("SIGTERM"),
            }
            signals.cancel();
        });
        daemon::run(settings, shutdown)
            .await
            .context("the node stopped")
    })
}
