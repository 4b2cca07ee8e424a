//! `ganglion-indexer`: follow a chain into a sled database until stopped.
//!
//! ```text
//! ganglion-indexer --db ./ix --watch watch.json --n2n relay.example:3001 --magic 1
//! ganglion-indexer --db ./ix --watch watch.json --socket /run/cardano/node.socket --magic 764824073
//! ```
//!
//! `watch.json` names the deployment: `{"script_hash": "<hex>", "params": {"ntx": {"policy":
//! "<hex>", "name": "<hex>"}, "min_bond_per_gpu": 100000000, "unbonding_delay_ms": 604800000,
//! "claim_window_ms": 3600000}}` (a `ganglion_v2` deployment). Each applied block prints
//! `applied <height> <slot> <events>`, each rollback `rolled-back <height>` and each
//! (re)connection `following-from <slot>` on stdout.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use ganglion_indexer::follow::Source;
use ganglion_indexer::store::SledKv;
use ganglion_indexer::sync::{Start, SyncConfig, run};
use ganglion_indexer::{Indexer, Notification, Watch};
use tokio_util::sync::CancellationToken;

/// Follow a Cardano chain and index Ganglion's escrow and bond events.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Database folder (created if missing).
    #[arg(long)]
    db: PathBuf,
    /// JSON file naming the deployment (script hash and parameters).
    #[arg(long)]
    watch: PathBuf,
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
    /// Where an empty database starts: `origin`, `tip`, or `SLOT.HASH` (hex header hash).
    #[arg(long, default_value = "origin", value_parser = parse_start)]
    start: Start,
    /// Undo window in blocks (the chain's security parameter k).
    #[arg(long, default_value_t = 2160)]
    k: u64,
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
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
    let watch: Watch = serde_json::from_str(
        &std::fs::read_to_string(&args.watch)
            .with_context(|| format!("reading {}", args.watch.display()))?,
    )
    .with_context(|| format!("{} is not a watch document", args.watch.display()))?;
    let store = SledKv::open(&args.db)
        .with_context(|| format!("opening the database in {}", args.db.display()))?;
    let indexer = Arc::new(Indexer::new(store, watch, args.k));
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
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    let mut config = SyncConfig::new(source);
    config.start = args.start;
    run(indexer.clone(), config, cancel).await?;
    indexer.flush()?;
    Ok(())
}
