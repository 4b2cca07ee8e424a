//! What the `storage_*` methods take and return: the node's blockstore as `ipfs add`, `cat`,
//! `pin` and `repo gc` see it, plus the CAR export and Filecoin piece CID of a DAG. CIDs are
//! Kubo-identical for the same options (`storage/README.md`); paths are on the node's host and
//! must be absolute (the CLI resolves them).

use serde::{Deserialize, Serialize};

/// `ipfs add` flags of `storage_add`; every field optional (default: CIDv1, raw leaves,
/// `size-262144`, dot-files left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddOptions {
    /// `--cid-version`: 0 or 1 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cid_version: Option<u8>,
    /// `--raw-leaves` (default: on for CIDv1, off for CIDv0, as Kubo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_leaves: Option<bool>,
    /// `--chunker`, `size-<bytes>` (at most 1 MiB; default `size-262144`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunker: Option<String>,
    /// `--hidden`: take the entries of a directory whose name begins with `.` (default off,
    /// as Kubo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}

/// `storage_add`: what was imported and pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Added {
    /// Root CID (text form): what a spec's `inputs[].cid` names.
    pub cid: String,
    /// Bytes of file content read (for a directory, of all its files).
    pub content_bytes: u64,
    /// The root's cumulative DAG size, bytes (Kubo's `Size`).
    pub cumulative_size: u64,
}

/// `storage_cat` / `storage_exportCar`: bytes written to the file named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wrote {
    /// Bytes.
    pub bytes: u64,
}

/// `storage_pieceCid`: a DAG's CAR v1 and its Filecoin piece.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// Piece CID v1 (`baga6ea4sea…`, CommP).
    pub piece_cid: String,
    /// Padded piece size, bytes (a power of two).
    pub padded_piece_bytes: u64,
    /// Bytes hashed: the CAR's size.
    pub payload_bytes: u64,
    /// The DAG's root CID, the CAR's only root.
    pub payload_cid: String,
}

/// `storage_gc`: what the sweep removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collected {
    /// Blocks removed.
    pub removed_blocks: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}
