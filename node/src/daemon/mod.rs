//! `ganglion node run`: one node process composed from [`crate::settings::Settings`].
//!
//! - [`config`]: the sections only the daemon reads (`[p2p]`, `[bond]`, `[validator]`,
//!   `[engine]`), with units.
//! - [`keys`]: the attest and libp2p keys in the data dir (created at first start).
//! - [`chain`]: build environment, deployment and reference script; indexer catch-up; the
//!   provider's bond (found, or posted at start).
//! - [`node`]: [`run`], the composition, and [`NodeInfo`] (`<data dir>/node.json`: RPC address,
//!   p2p multiaddrs, peer id, bond, metrics address) written once the node is up.
//! - [`start`]: `<data dir>/node.start.json`, the start record (pid, and the error when the
//!   start failed) that tells a node still starting from one that died.
//! - [`devnet`]: for tests and `ganglion devnet demo` — write a node's config for a running
//!   devnet and spawn `ganglion node run` as a child process.
//!
//! A node is an orchestrator always (JSON-RPC `job_submit`), and a provider too when the
//! config has `[provider]` (price and limits): it offers the GPUs it detects (NVML, AMD sysfs)
//! and, on the devnet, `[[gpus.declared]]` ones, as `[provider] pool` selects them, each
//! given to containers as [`gpus`] says. Restarting
//! with the same data dir continues every job (the engine's store and the executor's table
//! are durable; see [`crate::job`]).
//!
//! - [`overlay`]: the per-job overlay of a provider (one UDP socket, pods, the `cluster`
//!   exchange with the job's other assigned providers before dispatch, the orphan sweep at
//!   start); the single-host bridge when not root or without the sandbox image.
//! - [`exchange`]: the overlay's side of that `cluster` exchange (keys, addresses, endpoint
//!   candidates).
//! - [`supervisor`]: the node's critical tasks (indexer sync, swarm, engine, RPC, metrics,
//!   overlay relay):
//!   the first one that stops stops the node, named, with a non-zero exit.
//!
//! Metrics: `[metrics] listen` serves `GET /metrics` ([`crate::metrics`]).

pub mod chain;
pub mod config;
pub mod devnet;
mod error;
pub mod exchange;
pub mod gpus;
pub mod keys;
pub mod node;
pub mod overlay;
pub mod services;
pub mod start;
pub mod supervisor;

pub use error::DaemonError;
pub use node::{NodeInfo, run};
