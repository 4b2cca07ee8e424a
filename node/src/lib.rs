//! The Ganglion node: daemon and CLI.
//!
//! This crate grows issue by issue (DESIGN §2, STYLE §2). What exists now:
//!
//! - [`market`]: the ensemble spec (strict YAML/JSON, `docs/ensemble-spec.md`), the market
//!   snapshot and the pure, deterministic gang matcher.
//! - [`gpu`]: GPU inventory (NVIDIA via NVML, AMD via sysfs/KFD, declared from config), the CPU
//!   benchmark and unified score, and the Docker GPU-support probe.
//! - [`executor`]: dispatch — a job's containers through the Docker Engine (sandbox, GPUs,
//!   rendezvous env, outputs pinned, crash recovery).
//! - [`config`]: the node's TOML configuration (only the sections above exist so far).
//! - [`p2p`]: one libp2p swarm (0.56, so beetswap can join it), signed offers over gossipsub,
//!   the accept/cluster/attest protocols, RTT matrix, relay and DCUtR.
//! - [`overlay`]: the per-job private layer-3 overlay: addressing, userspace WireGuard
//!   (boringtun), TUN and the pod model (first slice of issue 9).
//! - [`network`], [`datadir`], [`settings`]: network presets, the data dir (0600 secrets, RPC
//!   cookie), config file plus `GANGLION_*` overrides.
//! - [`wallet`]: payment key, balance over N2C, payments via the contracts crate.
//! - [`rpc`]: the `ganglion-rpc` API implemented by the node (`node_*`, `wallet_*`, `job_*`;
//!   `audit_*`, `market_*`, `provider_*` from [`audit::rpc`]).
//! - [`rpc_client`]: a JSON-RPC client of a running node found through its data dir (CLI).
//! - [`job`]: the job lifecycle: persisted orchestrator/provider state machines, the intent
//!   log, and the engine driving lock → match → accept → assign → dispatch → attest → settle
//!   (cancel, expire with slashing) over the chain, p2p and the executor.
//! - [`daemon`]: `ganglion node run` — the whole node in one process (indexer, swarm, engine,
//!   provider side, JSON-RPC) and devnet helpers that spawn it.
//! - [`audit`]: `audit verify` — a job re-derived from chain and IPFS only, one named check
//!   per item — and the read-only `audit_*`, `market_*`, `provider_*` JSON-RPC methods.
//! - [`metrics`]: the Prometheus (OpenMetrics text) endpoint `GET /metrics`: jobs by state,
//!   offers, peers, chain tip lag, dispatch latency.
//! - [`doctor`]: read-only checks that this machine can run a node (Docker, GPU runtime, GPUs,
//!   chain, RPC port, disk), each with the step that fixes it.
//!
//! Overlay wiring into the daemon (NAT traversal, relay fallback), detected GPUs in
//! `ganglion node run`, and the other RPC namespaces arrive with issues 9–11.

pub mod audit;
pub mod config;
pub mod daemon;
pub mod datadir;
pub mod demo;
pub mod doctor;
pub mod job;
pub mod metrics;
pub mod network;
/// Peer to peer: one libp2p swarm, signed offers, accept/cluster/attest exchange, RTT matrix.
pub mod p2p;
pub mod rpc;
pub mod rpc_client;
pub mod settings;
pub mod wallet;
