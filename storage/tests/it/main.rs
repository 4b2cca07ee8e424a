//! Integration tests of `ganglion-storage`, one binary (STYLE §3).
//!
//! Vectors come from `shared/fixtures/{ipfs,filecoin}` (provenance in their READMEs); inputs are
//! generated here, never stored.

mod bad_input;
mod blockstore;
mod car;
mod commp;
mod daemon;
mod dir;
mod pinner;
mod unixfs;
