//! The storage subcommands of the node's CLI (`ganglion storage add|cat|export-car|piece-cid|pin|
//! unpin|pins|gc`), as typed commands and results. The node's clap layer parses arguments into a
//! [`Command`], calls [`execute`], and prints the [`Outcome`] (JSON with `--json`).

use std::path::PathBuf;

use cid::Cid;
use serde::Serialize;

use crate::block::{InvalidCid, parse_cid};
use crate::blockstore::{Blockstore, GcStats};
use crate::commp::CommP;
use crate::pin::{Embedded, Pinner};
use crate::unixfs::ImportOptions;

/// One storage subcommand.
#[derive(Debug, Clone)]
pub enum Command {
    /// `add PATH [--cid-version N] [--raw-leaves] [--chunker size-N] [--hidden]`: import and
    /// pin a file, a symlink (the link itself) or, recursively, a directory; prints the root CID.
    Add {
        /// File or directory.
        path: PathBuf,
        /// Kubo-style options.
        options: ImportOptions,
    },
    /// `cat CID --out PATH`: write a UnixFS file's content.
    Cat {
        /// The file's CID (string as typed).
        cid: String,
        /// Destination file.
        out: PathBuf,
    },
    /// `export-car CID --out PATH`: write the DAG as CAR v1.
    ExportCar {
        /// Root CID.
        cid: String,
        /// Destination file.
        out: PathBuf,
    },
    /// `piece-cid CID --car-out PATH`: export the CAR and print its deal-ready record.
    PieceCidOfDag {
        /// Root CID.
        cid: String,
        /// Where the CAR goes (the deal's payload).
        car_out: PathBuf,
    },
    /// `piece-cid --file PATH`: piece CID of any byte stream (e.g. an existing CAR).
    PieceCidOfFile {
        /// The payload.
        path: PathBuf,
    },
    /// `pin CID`.
    Pin {
        /// CID.
        cid: String,
    },
    /// `unpin CID`.
    Unpin {
        /// CID.
        cid: String,
    },
    /// `pins`: list recursive pins.
    Pins,
    /// `gc`: remove unpinned blocks.
    Gc,
}

/// What a command printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// `add`.
    Added {
        /// Root CID.
        cid: String,
        /// Content bytes read.
        content_bytes: u64,
        /// Cumulative DAG size (Kubo's `Size`).
        cumulative_size: u64,
    },
    /// `cat`, `export-car`: bytes written.
    Wrote {
        /// Bytes.
        bytes: u64,
    },
    /// `piece-cid`.
    Piece {
        /// Piece CID v1.
        piece_cid: String,
        /// Padded piece size in bytes.
        padded_piece_bytes: u64,
        /// Payload bytes hashed (the CAR size for a DAG).
        payload_bytes: u64,
        /// The DAG root, when a DAG was exported.
        payload_cid: Option<String>,
    },
    /// `pin`, `unpin`.
    Done,
    /// `pins`.
    Pins {
        /// Recursive pin roots.
        cids: Vec<String>,
    },
    /// `gc`.
    Collected {
        /// Blocks removed.
        removed_blocks: u64,
        /// Bytes freed.
        freed_bytes: u64,
    },
}

/// Errors of a storage subcommand.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is not a CID.
    #[error(transparent)]
    InvalidCid(#[from] InvalidCid),
    /// The pinner failed.
    #[error(transparent)]
    Pin(#[from] crate::pin::Error),
    /// Import of a directory failed.
    #[error(transparent)]
    Import(#[from] crate::unixfs::Error),
    /// Computing the piece failed.
    #[error(transparent)]
    Deal(#[from] crate::deal::Error),
    /// Opening or creating a file failed.
    #[error("{path}: {source}")]
    File {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The payload is below Filecoin's minimum.
    #[error(transparent)]
    TooSmall(#[from] crate::commp::PayloadTooSmall),
}

fn cid(s: &str) -> Result<Cid, Error> {
    Ok(parse_cid(s)?)
}

async fn create(path: &PathBuf) -> Result<tokio::fs::File, Error> {
    tokio::fs::File::create(path)
        .await
        .map_err(|source| Error::File {
            path: path.clone(),
            source,
        })
}

/// Runs one command against the node's embedded pinner.
///
/// # Errors
/// [`Error`]: a bad CID argument, or whatever the operation returns.
pub async fn execute<S: Blockstore + 'static>(
    pinner: &Embedded<S>,
    command: Command,
) -> Result<Outcome, Error> {
    Ok(match command {
        Command::Add { path, options } => {
            let added = pinner.add_path(&path, &options).await?;
            Outcome::Added {
                cid: added.root.to_string(),
                content_bytes: added.content_bytes,
                cumulative_size: added.cumulative_size,
            }
        }
        Command::Cat { cid: c, out } => Outcome::Wrote {
            bytes: pinner.cat(&cid(&c)?, create(&out).await?).await?,
        },
        Command::ExportCar { cid: c, out } => Outcome::Wrote {
            bytes: pinner.export_car(&cid(&c)?, create(&out).await?).await?,
        },
        Command::PieceCidOfDag { cid: c, car_out } => {
            let root = cid(&c)?;
            let ready =
                crate::deal::prepare(&**pinner.store(), &root, create(&car_out).await?).await?;
            Outcome::Piece {
                piece_cid: ready.piece_cid.to_string(),
                padded_piece_bytes: ready.padded_piece_bytes,
                payload_bytes: ready.car_bytes,
                payload_cid: Some(root.to_string()),
            }
        }
        Command::PieceCidOfFile { path } => {
            let piece = tokio::task::spawn_blocking({
                let path = path.clone();
                move || {
                    let mut file = std::fs::File::open(&path)?;
                    let mut hasher = CommP::new();
                    std::io::copy(&mut file, &mut hasher)?;
                    Ok::<_, std::io::Error>(hasher.finish())
                }
            })
            .await
            .map_err(crate::pin::Error::from)?
            .map_err(|source| Error::File { path, source })??;
            Outcome::Piece {
                piece_cid: piece.cid_v1().to_string(),
                padded_piece_bytes: piece.padded_bytes,
                payload_bytes: piece.payload_bytes,
                payload_cid: None,
            }
        }
        Command::Pin { cid: c } => {
            pinner.pin(&cid(&c)?).await?;
            Outcome::Done
        }
        Command::Unpin { cid: c } => {
            pinner.unpin(&cid(&c)?).await?;
            Outcome::Done
        }
        Command::Pins => Outcome::Pins {
            cids: pinner.pins().await?.iter().map(Cid::to_string).collect(),
        },
        Command::Gc => {
            let GcStats {
                removed_blocks,
                freed_bytes,
            } = pinner.gc().await?;
            Outcome::Collected {
                removed_blocks,
                freed_bytes,
            }
        }
    })
}
