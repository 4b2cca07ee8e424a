//! `ganglion-indexer`: follow a chain into a store until stopped, or serve the store's read
//! API over HTTP.
//!
//! ```text
//! ganglion-indexer follow --store ./ix --watch watch.json --n2n relay.example:3001 --magic 1
//! ganglion-indexer follow --store postgres://ix@db/ix --watch watch.json --socket /run/cardano/node.socket --magic 764824073
//! ganglion-indexer serve --store postgres://ix@db/ix --watch watch.json --listen 127.0.0.1:3000
//! ```
//!
//! `--store` is a folder (sled, one process) or a `postgres://` URL (one follower, any number
//! of `serve` processes beside it). `watch.json` names the deployment: `{"script_hash":
//! "<hex>", "params": {"ntx": {"policy": "<hex>", "name": "<hex>"}, "min_bond_per_gpu":
//! 100000000, "unbonding_delay_ms": 604800000, "claim_window_ms": 3600000}}` (a `ganglion_v2`
//! deployment). While following, each applied block prints `applied <height> <slot>
//! <events>`, each rollback `rolled-back <height>` and each (re)connection `following-from
//! <slot>` on stdout; `serve` prints `serving <address>` once it listens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use ganglion_indexer::follow::Source;
use ganglion_indexer::store::{Store, StoreSpec};
use ganglion_indexer::sync::{Start, SyncConfig, run};
use ganglion_indexer::{Indexer, Notification, Watch};
use tokio_util::sync::CancellationToken;

/// Follow a Cardano chain and index Ganglion's escrow and bond events; serve them.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Follow a node or relay into the store until stopped (Ctrl-C).
    Follow(FollowArgs),
    /// Serve the store's read API over HTTP (read-only beside a follower on PostgreSQL).
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct StoreArgs {
    /// The store: a folder (sled) or a postgres:// URL (created or migrated if needed).
    #[arg(long, alias = "db")]
    store: StoreSpec,
    /// JSON file naming the deployment (script hash and parameters).
    #[arg(long)]
    watch: PathBuf,
    /// Undo window in blocks (the chain's security parameter k).
    #[arg(long, default_value_t = 2160)]
    k: u64,
}

#[derive(Debug, Args)]
struct FollowArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Follow a relay over N2N (`host:port`).
    #[arg(long, conflicts_with_all = ["socket", "n2c_tcp"])]
    n2n: Option<String>,
    /// Follow a node over N2C on its Unix socket.
    #[arg(long, conflicts_with = "n2c_tcp")]
    socket: Option<PathBuf>,
    /// Follow a node over N2C on TCP (`host:port`; the devnet offers it).
    #[arg(long)]
    n2c_tcp: Option<String>,
    /// Network magic (mainnet 764824073, preprod 1, preview 2, devnet 42).
    #[arg(long)]
    magic: u64,
    /// Where an empty store starts: `origin`, `tip`, or `SLOT.HASH` (hex header hash).
    #[arg(long, default_value = "origin", value_parser = parse_start)]
    start: Start,
    /// Most blocks written in one commit while catching up (the peer's tip is ahead); at the
    /// tip every block is its own commit.
    #[arg(long, default_value_t = ganglion_indexer::sync::CATCH_UP_RUN, value_parser = parse_run)]
    catch_up_run: usize,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
}

/// A run length: 1 to 10 000 blocks.
fn parse_run(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=10_000) => Ok(n),
        _ => Err(format!(
            "{s:?}: expected a number of blocks from 1 to 10000"
        )),
    }
}

fn parse_start(s: &str) -> Result<Start, String> {
    match s {
        "origin" => Ok(Start::Origin),
        "tip" => Ok(Start::Tip),
        point => {
            let (slot, hash) = point
                .split_once('.')
                .ok_or("expected origin, tip or SLOT.HASH")?;
            let slot = slot.parse().map_err(|e| format!("slot: {e}"))?;
            let hash: [u8; 32] = hex::decode(hash)
                .map_err(|e| format!("hash: {e}"))?
                .try_into()
                .map_err(|_| "hash: expected 32 bytes")?;
            Ok(Start::Point(slot, hash))
        }
    }
}

fn read_watch(path: &PathBuf) -> anyhow::Result<Watch> {
    serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("{} is not a watch document", path.display()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    match Cli::parse().command {
        Command::Follow(args) => follow(args, cancel).await,
        Command::Serve(args) => serve(args, cancel).await,
    }
}

async fn follow(args: FollowArgs, cancel: CancellationToken) -> anyhow::Result<()> {
    let source = match (&args.n2n, &args.socket, &args.n2c_tcp) {
        (Some(addr), None, None) => Source::N2n {
            addr: addr.clone(),
            magic: args.magic,
        },
        (None, Some(socket), None) => Source::N2cUnix {
            socket: socket.clone(),
            magic: args.magic,
        },
        (None, None, Some(addr)) => Source::N2cTcp {
            addr: addr.clone(),
            magic: args.magic,
        },
        _ => anyhow::bail!("give exactly one of --n2n, --socket or --n2c-tcp"),
    };
    let watch = read_watch(&args.store.watch)?;
    let spec = args.store.store.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(&spec))
        .await?
        .with_context(|| format!("opening the store {}", args.store.store))?;
    let indexer = Arc::new(Indexer::new(store, watch, args.store.k));
    let rx = indexer.subscribe();
    std::thread::spawn(move || {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for n in rx {
            let line = match n {
                Notification::Applied { point, records } => {
                    format!("applied {} {} {}", point.height, point.slot, records.len())
                }
                Notification::RolledBack { to } => {
                    format!("rolled-back {}", to.map_or(0, |p| p.height))
                }
                Notification::Intersected { at } => {
                    format!("following-from {}", at.map_or(0, |p| p.0))
                }
            };
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                break;
            }
        }
    });
    let mut config = SyncConfig::new(source);
    config.start = args.start;
    config.catch_up_run = args.catch_up_run;
    run(indexer.clone(), config, cancel).await?;
    tokio::task::spawn_blocking(move || indexer.flush()).await??;
    Ok(())
}

async fn serve(args: ServeArgs, cancel: CancellationToken) -> anyhow::Result<()> {
    let watch = read_watch(&args.store.watch)?;
    let spec = args.store.store.clone();
    let store = tokio::task::spawn_blocking(move || Store::open_reader(&spec))
        .await?
        .with_context(|| format!("opening the store {}", args.store.store))?;
    let indexer = Arc::new(Indexer::reader(store, watch, args.store.k));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    println!("serving {}", listener.local_addr()?);
    ganglion_indexer::http::serve(listener, indexer, cancel).await?;
    Ok(())
}
