//! Subcommands of the `ganglion` binary, one file each. The only place (with `main.rs`) where
//! `anyhow` context strings are used.

pub mod audit;
pub mod devnet;
pub mod doctor;
pub mod gpus;
pub mod job;
pub mod market;
pub mod node;
pub mod provider;
pub mod remote;
pub mod wallet;
