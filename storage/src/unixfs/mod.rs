//! UnixFS import that reproduces Kubo's CIDs: fixed-size chunker, balanced layout, dag-pb nodes
//! built by `rust-unixfs` 0.6 (which matches every vector in `shared/fixtures/ipfs`).
//!
//! [`ImportOptions`] mirror `ipfs add` flags (`--cid-version`, `--raw-leaves`, `--chunker`,
//! `--hidden`) and the IPIP-499 profiles. Symlinks are stored as Kubo stores them (a UnixFS
//! `Symlink` node holding the target text, never followed). Import streams: memory stays at one chunk plus the pending links of the
//! tree (at most `max_links` per level), whatever the file size.

mod cat;
mod chunker;
mod dir;
mod file;
mod sink;
mod symlink;

pub use self::cat::{FileChunks, cat};
pub use self::chunker::Chunker;
pub use self::dir::{import_dir, import_path};
pub use self::file::{import_bytes, import_file};
pub use self::sink::{BlockSink, HashOnly};
pub use self::symlink::{import_symlink, symlink_block};

use cid::Cid;

/// CID version of the dag-pb nodes (`ipfs add --cid-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CidVersion {
    /// CIDv0 (`Qm…`, base58btc, implicitly dag-pb + sha2-256): Kubo's default.
    V0,
    /// CIDv1 (`bafy…`/`bafk…`, base32).
    V1,
}

/// How `ipfs add` builds the DAG. The default is [`ImportOptions::cid_v1`], the project's
/// default (DESIGN §7).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImportOptions {
    /// `--cid-version`.
    pub cid_version: CidVersion,
    /// `--raw-leaves`: leaves are bare `raw` blocks (always CIDv1, even with `--cid-version=0`).
    pub raw_leaves: bool,
    /// `--chunker`.
    pub chunker: Chunker,
    /// Links per balanced-layout node (Kubo: 174, `helpers.DefaultLinksPerBlock`; IPIP-499
    /// `unixfs-v1-2025`: 1024).
    pub max_links: usize,
    /// `--hidden` (`-H`): in a directory import, also take the entries whose name begins with
    /// `.` (at any depth; the root given is always taken). Kubo's default is `false`: `ipfs add
    /// -r` leaves dot-files out (go-ipfs-cmds `OptionHidden`; Kubo's sharness
    /// `t0040-add-and-cat.sh`, tree `planets/`). No effect on a single file.
    #[serde(default)]
    pub hidden: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self::cid_v1()
    }
}

impl ImportOptions {
    /// `ipfs add` with no flags (Kubo ≤ 0.38 / IPIP-499 `unixfs-v0-2015`): CIDv0, dag-pb leaves,
    /// 256 KiB chunks, 174 links.
    pub fn kubo_default() -> Self {
        Self {
            cid_version: CidVersion::V0,
            raw_leaves: false,
            chunker: Chunker::default(),
            max_links: 174,
            hidden: false,
        }
    }

    /// `ipfs add --cid-version=1` (raw leaves implied, 256 KiB chunks, 174 links). Not Kubo's
    /// `test-cid-v1` config profile, which also switches to 1 MiB chunks.
    pub fn cid_v1() -> Self {
        Self {
            cid_version: CidVersion::V1,
            raw_leaves: true,
            ..Self::kubo_default()
        }
    }

    /// IPIP-499 profile `unixfs-v1-2025`: CIDv1, raw leaves, 1 MiB chunks, 1024 links.
    pub fn unixfs_v1_2025() -> Self {
        Self {
            cid_version: CidVersion::V1,
            raw_leaves: true,
            chunker: Chunker::Size(1024 * 1024),
            max_links: 1024,
            hidden: false,
        }
    }

    /// Kubo's `add` defaults for the given flags: `--raw-leaves` defaults to on for CIDv1.
    pub fn from_flags(cid_version: CidVersion, raw_leaves: Option<bool>, chunker: Chunker) -> Self {
        Self {
            cid_version,
            raw_leaves: raw_leaves.unwrap_or(cid_version == CidVersion::V1),
            chunker,
            max_links: 174,
            hidden: false,
        }
    }
}

/// The result of an import, as `ipfs add` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Root CID.
    pub root: Cid,
    /// Bytes of file content read (for a directory: of all its files).
    pub content_bytes: u64,
    /// The root's cumulative DAG size (dag-pb `Tsize`), the `Size` Kubo's `add` prints.
    pub cumulative_size: u64,
    /// Blocks handed to the sink (a repeated block counts each time).
    pub blocks: u64,
}

/// Errors of UnixFS import and `cat`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the input failed.
    #[error("reading input: {0}")]
    Read(#[source] std::io::Error),
    /// Reading the directory tree at `path` failed.
    #[error("reading {path}: {source}")]
    ReadPath {
        /// The path.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the output of `cat` failed.
    #[error("writing output: {0}")]
    Write(#[source] std::io::Error),
    /// The sink (blockstore) refused a block.
    #[error(transparent)]
    Store(#[from] crate::blockstore::Error),
    /// The chunker string is not `size-<bytes>` within Kubo's limits.
    #[error("invalid chunker {spec:?}: {reason}")]
    InvalidChunker {
        /// What was given.
        spec: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The options are outside what Kubo accepts (e.g. fewer than 2 links per node).
    #[error("invalid import options: {0}")]
    InvalidOptions(&'static str),
    /// A directory entry is neither a regular file, a directory nor a symlink (a device, FIFO
    /// or socket: Kubo refuses those too).
    #[error("unsupported file type at {0}")]
    UnsupportedFileType(std::path::PathBuf),
    /// A symlink's target is not UTF-8 (UnixFS `Symlink` data is read as a UTF-8 path).
    #[error("symlink target is not UTF-8: {0}")]
    NonUtf8SymlinkTarget(std::path::PathBuf),
    /// A file or directory name is not UTF-8 (UnixFS names are strings).
    #[error("file name is not UTF-8: {0}")]
    NonUtf8Name(std::path::PathBuf),
    /// Building the directory tree failed.
    #[error("directory tree: {0}")]
    Tree(#[from] rust_unixfs::dir::builder::TreeBuildingFailed),
    /// Rendering directory nodes failed.
    #[error("directory nodes: {0}")]
    TreeNodes(#[from] rust_unixfs::dir::builder::TreeConstructionFailed),
    /// `cat` reached a node that is not a UnixFS file.
    #[error("{cid} is not a UnixFS file ({kind})")]
    NotAFile {
        /// The node.
        cid: Cid,
        /// What it is.
        kind: String,
    },
}
