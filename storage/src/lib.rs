//! `ganglion-storage`: the artifacts of a job (spec, inputs, image archive, logs, outputs) as IPFS
//! content with Kubo-identical CIDs, kept in a local blockstore, exported as CAR v1 and committed
//! to as Filecoin pieces (DESIGN §7).
//!
//! Usage, in the order the node calls it:
//! 1. [`unixfs::import_file`] / [`unixfs::import_dir`] with [`unixfs::ImportOptions`] (CIDv1 raw
//!    leaves by default; [`unixfs::ImportOptions::kubo_default`] for `Qm…` CIDs) into a
//!    [`blockstore::SledBlockstore`]; or, all in one, a [`pin::Pinner`]: [`pin::Embedded`]
//!    (default) or [`pin::Kubo`] (a Kubo daemon's HTTP RPC).
//! 2. [`car::export`] the DAG; [`deal::prepare`] computes the deal-ready record (piece CID,
//!    padded size, payload CID, CAR size) with [`commp`].
//! 3. [`blockstore::gc`] drops what no pin keeps.
//!
//! Modules:
//! - [`block`]: CID parsing, codecs, block verification.
//! - [`dagpb`]: minimal dag-pb / UnixFS decoding (links, file data).
//! - [`dag`]: depth-first pre-order DAG walk (CAR order).
//! - [`unixfs`]: streaming UnixFS importer (chunker, balanced layout, directories) and `cat`.
//! - [`blockstore`]: the `Blockstore` trait, memory and sled stores, recursive pins, GC.
//! - [`car`]: CAR v1 export and verified import.
//! - [`commp`]: Filecoin piece commitment and piece CIDs (v1 and FRC-0069 v2).
//! - [`deal`]: deal-ready record and the interface a deal client plugs into.
//! - [`pin`]: the `Pinner` trait, embedded and Kubo RPC implementations.
//! - [`cli`]: the storage subcommands (`add`, `cat`, `export-car`, `piece-cid`, `pin`, `gc`) as
//!   typed commands and outcomes for the node's CLI.
//!
//! - [`bitswap`]: the blockstore as `beetswap` sees it (the node's swarm serves and fetches
//!   blocks over bitswap through it; every block written is checked against its CID).
//!
//! Feature `test-utils`: input generators and fixture paths for tests and benches.

// Errors carry the CIDs they are about by value (a `Cid` is 96 bytes) so callers can match on
// them; errors are the cold path, so their size does not matter for speed.
#![allow(clippy::result_large_err)]

pub mod bitswap;
pub mod block;
pub mod blockstore;
pub mod car;
pub mod cli;
pub mod commp;
pub mod dag;
pub mod dagpb;
pub mod deal;
pub mod pin;
pub mod unixfs;

#[cfg(feature = "test-utils")]
pub mod test_utils;
