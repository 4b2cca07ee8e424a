//! The method traits. Each namespace is one trait; the node implements them and merges the
//! modules (`into_rpc()`) into one server. Mutating methods take the request's extensions
//! and must call [`crate::auth::require`].

use jsonrpsee::core::RpcResult;
use jsonrpsee::proc_macros::rpc;

use crate::types::{Balance, JobStatus, JobSubmitted, NodeInfo, Sent, Tip};

/// `node_*`: about the node and its chain.
#[rpc(server, namespace = "node")]
pub trait NodeApi {
    /// Version, network, magic and wallet address.
    #[method(name = "info")]
    async fn info(&self) -> RpcResult<NodeInfo>;

    /// The chain tip over N2C; `null` at origin.
    #[method(name = "tip")]
    async fn tip(&self) -> RpcResult<Option<Tip>>;
}

/// `wallet_*`: the node's payment key and funds.
#[rpc(server, namespace = "wallet")]
pub trait WalletApi {
    /// The wallet's address (bech32).
    #[method(name = "address")]
    async fn address(&self) -> RpcResult<String>;

    /// Lovelace and native assets at the wallet's address.
    #[method(name = "balance")]
    async fn balance(&self) -> RpcResult<Balance>;

    /// Pays `lovelace` (and `ntx` NTX base units, default 0) to `to` and submits
    /// (mutating: bearer token required). Params as in [`crate::types::SendRequest`].
    #[method(name = "send", with_extensions)]
    async fn send(&self, to: String, lovelace: u64, ntx: Option<u64>) -> RpcResult<Sent>;
}

/// `job_*`: jobs this node orchestrates or runs (answered by the node's job engine; without
/// one every method answers [`crate::error::JOB`]).
#[rpc(server, namespace = "job")]
pub trait JobApi {
    /// Pins the ensemble spec (a JSON object, `docs/ensemble-spec.md`) and locks its budget
    /// (mutating: bearer token required). Returns the job id.
    #[method(name = "submit", with_extensions)]
    async fn submit(&self, spec: serde_json::Value) -> RpcResult<JobSubmitted>;

    /// The node's records of a job (64 hex digits): one per role it plays in it; empty when
    /// unknown.
    #[method(name = "status")]
    async fn status(&self, job_id: String) -> RpcResult<Vec<JobStatus>>;

    /// Cancels an orchestrated job whose escrow is still open (mutating: bearer token
    /// required). Returns the job's state afterwards.
    #[method(name = "cancel", with_extensions)]
    async fn cancel(&self, job_id: String) -> RpcResult<JobStatus>;
}

/// Methods that change state and need the bearer token.
pub const MUTATING: &[&str] = &["wallet_send", "job_submit", "job_cancel"];
