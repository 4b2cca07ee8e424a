//! `ganglion node config --print [--config F]`: the effective config, each value with its source.
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
