//! The Ganglion node: the composition of the other crates into one daemon, and the CLI.
//!
//! The subsystems live in crates of their own (DESIGN §2, `docs/architecture.md` draws the
//! graph): `ganglion-market` (spec, snapshot, matcher, provider limits), `ganglion-dispatch`
//! (GPUs, executor, overlay), `ganglion-p2p` (the swarm), `ganglion-wallet` (payment key,
//! N2C chain client, payments), `ganglion-jobs` (the job lifecycle and the audit), and below
//! them contracts, indexer, storage and rpc. What this crate holds:
//!
//! - [`config`], [`settings`], [`network`], [`datadir`]: the TOML config, the `GANGLION_*`
//!   overrides, network presets, the data dir (0600 secrets, RPC cookie).
//! - [`wallet`]: the wallet service (the key in the data dir on the configured network).
//! - [`job`], [`audit`]: `ganglion-jobs` re-exported: the engine driving lock → match →
//!   accept → assign → dispatch → receipts → each provider's claim (cancel, expire with
//!   slashing), and `audit verify`.
//! - [`rpc`]: the `ganglion-rpc` API implemented by the node, every namespace on one server
//!   (`node_*`, `wallet_*`, `job_*`, `tx_*`, `provider_*`, `audit_*`, `market_*`,
//!   `storage_*`); the read-only audit, market and bond queries are answered by
//!   [`audit::service`].
//! - [`rpc_client`]: a JSON-RPC client of a running node found through its data dir (CLI).
//! - [`daemon`]: `ganglion node run` — the whole node in one process (indexer, swarm, engine,
//!   provider side, overlay set-up and the cluster exchange, JSON-RPC) and devnet helpers
//!   that spawn it.
//! - [`demo`]: `ganglion devnet demo`.
//! - [`console`]: the web console (`[console] listen`): pages for providers, orchestrators
//!   and auditors rendered from the node's own RPC methods, a running job followed live.
//! - [`metrics`]: the Prometheus (OpenMetrics text) endpoint `GET /metrics`: jobs by state,
//!   offers, peers, chain tip lag, dispatch latency, settle duration, transactions submitted.
//! - [`doctor`]: read-only checks that this machine can run a node (Docker, GPU runtime, GPUs,
//!   chain, RPC port, disk), each with the step that fixes it.

pub mod config;
pub mod console;
pub mod daemon;
pub mod datadir;
pub mod demo;
pub mod doctor;
pub mod metrics;
pub mod network;
pub mod rpc;
pub mod rpc_client;
pub mod settings;
pub mod wallet;

pub use ganglion_jobs as job;
pub use ganglion_jobs::audit;
