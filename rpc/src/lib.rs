//! # ganglion-rpc
//!
//! The node's JSON-RPC API (`DESIGN.md` §8): the `jsonrpsee` traits the node implements, the
//! request and response types, the error codes, bearer-token auth from the cookie file, and
//! the server (HTTP and WebSocket on one port, localhost by default).
//!
//! Modules:
//! - [`api`]: one method trait per namespace, `node_*`, `wallet_*`, `job_*`, `tx_*`,
//!   `provider_*`, `audit_*`, `market_*` and `storage_*` (`#[rpc(server, client)]`: the node implements the
//!   servers, the CLI and the demo call the generated `*Client` traits on any jsonrpsee client).
//! - [`types`]: what the methods take and return (JSON shapes, units).
//! - [`amount`]: [`amount::Amount`], every lovelace and NTX amount: a decimal string in
//!   responses, a string or an exact integer in requests, typed "invalid amount" errors.
//! - [`error`]: JSON-RPC error codes and readable messages.
//! - [`auth`]: the `Authorization: Bearer <cookie>` check for mutating calls.
//! - [`server`]: start a server for a set of methods.
//! - [`storage`]: what the `storage_*` methods (the node's blockstore: add, cat, CAR, piece
//!   CID, pins, GC) take and return.
//! - [`audit`]: what the read-only `audit_*`, `market_*`, `provider_bond` / `provider_offers`
//!   and the artifact (`job_logs` / `job_outputs`, `job_liveLogs`) methods return.
//!
//! The published API is `docs/openrpc.json`; the node's tests check it against the method
//! list of the running server.

pub mod amount;
pub mod api;
pub mod audit;
pub mod auth;
pub mod error;
pub mod server;
pub mod storage;
pub mod types;

pub use jsonrpsee;
