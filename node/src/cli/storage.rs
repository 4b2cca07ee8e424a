//! `ganglion storage add|cat|export-car|piece-cid|pin|unpin|pins|gc`: the node's blockstore,
//! which its swarm serves over bitswap (a job's `inputs` and image archive are fetched from the
//! orchestrator's node by its providers: `storage add` a dataset there and name its CID in the
//! spec). CIDs are Kubo-identical for the same flags (`storage/README.md`).
//!
//! With a running node each command is one `storage_*` call (the node reads and writes the
//! paths, given absolute, on its host); with none, the command opens the data dir's blockstore
//! itself (said on stderr). Both run the same `ganglion_storage::cli` command.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ganglion_node::rpc_client::{ClientCallError, NodeClient};
use ganglion_node::settings::Settings;
use ganglion_rpc::api::StorageApiClient;
use ganglion_rpc::storage::AddOptions;
use ganglion_storage::blockstore::SledBlockstore;
use ganglion_storage::cli::{Command as Op, Outcome, execute};
use ganglion_storage::pin::Embedded;

use super::remote::{RemoteArgs, print_json};

/// The node's blockstore (IPFS): add a dataset, read, export, pin.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Storage subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Import a file or, recursively, a directory and pin it (`ipfs add -r`); prints its CID,
    /// what a spec's `inputs[].cid` names.
    Add {
        /// File or directory.
        path: PathBuf,
        /// `--cid-version`: 0 or 1 (default 1, raw leaves).
        #[arg(long, default_value_t = 1)]
        cid_version: u8,
        /// `--raw-leaves` (default: on for CIDv1, off for CIDv0, as Kubo).
        #[arg(long)]
        raw_leaves: Option<bool>,
        /// `--chunker size-<bytes>` (at most 1 MiB; default size-262144).
        #[arg(long)]
        chunker: Option<String>,
        /// `-H`: also take the entries whose name begins with `.` (as Kubo, off by default).
        #[arg(short = 'H', long)]
        hidden: bool,
        /// Print the CID only.
        #[arg(short = 'Q', long)]
        quieter: bool,
    },
    /// Write a file's content to stdout, or to `--out`.
    Cat {
        /// The file's CID.
        cid: String,
        /// Destination file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write the DAG under a CID as a CAR v1 file.
    ExportCar {
        /// Root CID.
        cid: String,
        /// Destination file.
        #[arg(long)]
        out: PathBuf,
    },
    /// The Filecoin piece CID (CommP) of a DAG's CAR, written to `--car-out`; or, with
    /// `--file`, of any file (an existing CAR), computed here.
    PieceCid {
        /// Root CID (with `--car-out`).
        #[arg(required_unless_present = "file", requires = "car_out")]
        cid: Option<String>,
        /// Where the CAR goes (the deal's payload).
        #[arg(long)]
        car_out: Option<PathBuf>,
        /// A file to compute the piece CID of instead.
        #[arg(long, conflicts_with_all = ["cid", "car_out"])]
        file: Option<PathBuf>,
    },
    /// Pin a DAG whose blocks the store holds.
    Pin {
        /// Root CID.
        cid: String,
    },
    /// Remove a pin (the blocks go at the next `gc`).
    Unpin {
        /// Root CID.
        cid: String,
    },
    /// The roots of every pin.
    Pins,
    /// Remove every block no pin keeps.
    Gc,
}

/// An absolute form of `p` (the node resolves paths on its own host, from its own directory).
fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))
}

/// Where the commands go: the running node, or the data dir's blockstore opened here.
enum Target {
    Node(NodeClient),
    Local(Embedded<SledBlockstore>),
}

fn target(config: Option<&Path>) -> anyhow::Result<Target> {
    let settings = Settings::load(config).context("loading the settings")?;
    let dir = settings.data_dir().context("finding the data dir")?;
    match NodeClient::of_data_dir(&dir) {
        Ok(c) => Ok(Target::Node(c)),
        Err(ClientCallError::NotRunning(_) | ClientCallError::Stale { .. }) => {
            let path = ganglion_node::datadir::DataDir::open(&dir)
                .with_context(|| format!("opening the data dir {}", dir.display()))?
                .blockstore_db();
            eprintln!(
                "no node runs on {}: using its blockstore {} directly",
                dir.display(),
                path.display()
            );
            let store = SledBlockstore::open(&path)
                .with_context(|| format!("opening the blockstore {}", path.display()))?;
            Ok(Target::Local(Embedded::new(Arc::new(store))))
        }
        Err(e) => Err(e).with_context(|| format!("finding the node of {}", dir.display())),
    }
}

/// Runs `op` on `target`: one `storage_*` call, or [`execute`] on the local store.
async fn run_op(target: &Target, op: Op, add: Option<AddOptions>) -> anyhow::Result<Outcome> {
    let node = match target {
        Target::Local(pinner) => return Ok(execute(pinner, op).await?),
        Target::Node(c) => c,
    };
    let rpc = node.rpc();
    let path = |p: PathBuf| p.display().to_string();
    let r = match op {
        Op::Add { path: p, .. } => {
            StorageApiClient::add(rpc, path(p), add)
                .await
                .map(|a| Outcome::Added {
                    cid: a.cid,
                    content_bytes: a.content_bytes,
                    cumulative_size: a.cumulative_size,
                })
        }
        Op::Cat { cid, out } => StorageApiClient::cat(rpc, cid, path(out))
            .await
            .map(|w| Outcome::Wrote { bytes: w.bytes }),
        Op::ExportCar { cid, out } => StorageApiClient::export_car(rpc, cid, path(out))
            .await
            .map(|w| Outcome::Wrote { bytes: w.bytes }),
        Op::PieceCidOfDag { cid, car_out } => StorageApiClient::piece_cid(rpc, cid, path(car_out))
            .await
            .map(|p| Outcome::Piece {
                piece_cid: p.piece_cid,
                padded_piece_bytes: p.padded_piece_bytes,
                payload_bytes: p.payload_bytes,
                payload_cid: Some(p.payload_cid),
            }),
        // Reads a local file: computed here, the node is not needed.
        op @ Op::PieceCidOfFile { .. } => {
            let scratch = Embedded::new(Arc::new(
                ganglion_storage::blockstore::MemoryBlockstore::new(),
            ));
            return Ok(execute(&scratch, op).await?);
        }
        Op::Pin { cid } => StorageApiClient::pin(rpc, cid)
            .await
            .map(|()| Outcome::Done),
        Op::Unpin { cid } => StorageApiClient::unpin(rpc, cid)
            .await
            .map(|()| Outcome::Done),
        Op::Pins => StorageApiClient::pins(rpc)
            .await
            .map(|cids| Outcome::Pins { cids }),
        Op::Gc => StorageApiClient::gc(rpc).await.map(|c| Outcome::Collected {
            removed_blocks: c.removed_blocks,
            freed_bytes: c.freed_bytes,
        }),
    };
    r.map_err(ClientCallError::from)
        .with_context(|| format!("asking the node at {}", node.addr))
}

/// Files and bytes under `path` (what `add` will read), for the progress line.
fn size_of(path: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {
                if let Ok(rd) = std::fs::read_dir(&p) {
                    stack.extend(rd.flatten().map(|e| e.path()));
                }
            }
            Ok(m) => {
                files += 1;
                bytes += m.len();
            }
            Err(_) => {}
        }
    }
    (files, bytes)
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let json = args.remote.json;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let config = args.remote.config.as_deref();
    let mut add_options = None;
    let mut quiet = false;
    let mut to_stdout = None;
    let op = match args.command {
        Command::Add {
            path,
            cid_version,
            raw_leaves,
            chunker,
            hidden,
            quieter,
        } => {
            quiet = quieter;
            let rpc_options = AddOptions {
                cid_version: Some(cid_version),
                raw_leaves,
                chunker,
                hidden: Some(hidden),
            };
            let options = ganglion_node::rpc::storage_import_options(&rpc_options)
                .map_err(|e| anyhow::anyhow!("{}", e.message()))?;
            add_options = Some(rpc_options);
            Op::Add {
                path: absolute(&path)?,
                options,
            }
        }
        Command::Cat { cid, out } => {
            let out = match out {
                Some(o) => absolute(&o)?,
                None => {
                    let tmp = tempfile_path();
                    to_stdout = Some(tmp.clone());
                    tmp
                }
            };
            Op::Cat { cid, out }
        }
        Command::ExportCar { cid, out } => Op::ExportCar {
            cid,
            out: absolute(&out)?,
        },
        Command::PieceCid { cid, car_out, file } => match (cid, car_out, file) {
            (_, _, Some(path)) => Op::PieceCidOfFile {
                path: absolute(&path)?,
            },
            (Some(cid), Some(car_out), None) => Op::PieceCidOfDag {
                cid,
                car_out: absolute(&car_out)?,
            },
            _ => anyhow::bail!("give a CID and --car-out, or --file"),
        },
        Command::Pin { cid } => Op::Pin { cid },
        Command::Unpin { cid } => Op::Unpin { cid },
        Command::Pins => Op::Pins,
        Command::Gc => Op::Gc,
    };
    let described = match &op {
        Op::Add { path, .. } => {
            let (files, bytes) = size_of(path);
            Some(format!(
                "adding {} ({files} file{}, {})",
                path.display(),
                if files == 1 { "" } else { "s" },
                indicatif::HumanBytes(bytes)
            ))
        }
        _ => None,
    };
    let name = match &op {
        Op::Add { path, .. } => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let pin_cid = match &op {
        Op::Pin { cid } | Op::Unpin { cid } => cid.clone(),
        _ => String::new(),
    };
    let target = target(config)?;
    let bar = if json || quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    if let Some(d) = described {
        bar.set_message(d);
        bar.enable_steady_tick(Duration::from_millis(120));
    }
    let outcome = rt.block_on(run_op(&target, op, add_options));
    bar.finish_and_clear();
    let outcome = match (outcome, &to_stdout) {
        (Ok(o), Some(tmp)) => {
            let copied = std::fs::File::open(tmp)
                .and_then(|mut f| std::io::copy(&mut f, &mut std::io::stdout().lock()));
            let _ = std::fs::remove_file(tmp);
            copied.with_context(|| format!("reading {}", tmp.display()))?;
            return match o {
                Outcome::Wrote { .. } => Ok(()),
                o => anyhow::bail!("unexpected answer {o:?}"),
            };
        }
        (r, Some(tmp)) => {
            let _ = std::fs::remove_file(tmp);
            r?
        }
        (r, None) => r?,
    };
    if json {
        return print_json(&outcome);
    }
    match outcome {
        Outcome::Added {
            cid,
            content_bytes,
            cumulative_size,
        } => {
            if quiet {
                println!("{cid}");
            } else {
                println!("added {cid} {name}");
                eprintln!(
                    "  {} of content, DAG {} (pinned; name it in a spec's inputs[].cid)",
                    indicatif::HumanBytes(content_bytes),
                    indicatif::HumanBytes(cumulative_size)
                );
            }
        }
        Outcome::Wrote { bytes } => println!("wrote {bytes} bytes"),
        Outcome::Piece {
            piece_cid,
            padded_piece_bytes,
            payload_bytes,
            payload_cid,
        } => {
            println!("piece CID {piece_cid}");
            println!("  padded piece {padded_piece_bytes} bytes, payload {payload_bytes} bytes");
            if let Some(root) = payload_cid {
                println!("  payload: the CAR of {root}");
            }
        }
        Outcome::Done => println!("{pin_cid}"),
        Outcome::Pins { cids } => {
            for c in cids {
                println!("{c}");
            }
        }
        Outcome::Collected {
            removed_blocks,
            freed_bytes,
        } => println!("removed {removed_blocks} blocks, freed {freed_bytes} bytes"),
    }
    Ok(())
}

/// A fresh path in the temp dir for `cat` to stdout (the node writes it, this process reads
/// and removes it).
fn tempfile_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "ganglion-cat-{}-{}",
        std::process::id(),
        ganglion_p2p::now_ms()
    ))
}
