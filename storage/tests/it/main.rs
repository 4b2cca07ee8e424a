//! Integration tests of `ganglion-storage`, one binary (STYLE §3).
//!
//! Vectors come from `shared/fixtures/{ipfs,filecoin}` (provenance in their READMEs); inputs are
//! generated here, never stored.

#![allow(clippy::result_large_err)] // see src/lib.rs

mod bad_input;
mod blockstore;
mod car;
mod cli;
mod commp;
mod daemon;
mod dir;
mod kubo_core;
mod kubo_links;
mod pinner;
mod unixfs;
