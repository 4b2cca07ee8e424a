//! Subcommands of the `ganglion` binary, one file each. The only place (with `main.rs`) where
//! `anyhow` context strings are used.

pub(crate) mod audit;
pub(crate) mod devnet;
pub(crate) mod doctor;
pub(crate) mod gateway;
pub(crate) mod gpus;
pub(crate) mod job;
pub(crate) mod market;
pub(crate) mod node;
pub(crate) mod provider;
pub(crate) mod remote;
pub(crate) mod rendezvous;
pub(crate) mod storage;
pub(crate) mod wallet;
