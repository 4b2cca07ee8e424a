//! [`Source`]: the RPC methods the pages read, called in-process on the node's own
//! [`RpcModule`] — the same code path and the same JSON as over HTTP, without the token
//! (the console checks it itself for actions, [`super::serve`]).

use std::sync::Arc;

use ganglion_rpc::audit::{
    AuditCidUse, AuditJob, AuditProvider, AuditReport, BondInfo, JobLog, JobOutput, MarketMatrix,
    MarketOffer,
};
use ganglion_rpc::jsonrpsee::RpcModule;
use ganglion_rpc::jsonrpsee::core::params::ArrayParams;
use ganglion_rpc::jsonrpsee::core::server::{MethodsError, Subscription};
use ganglion_rpc::types::{JobStatus, NodeInfo};
use serde::de::DeserializeOwned;

/// Why a method gave no answer, in the words a page shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method}: {message}")]
pub struct SourceError {
    /// The RPC method.
    pub method: &'static str,
    /// Its JSON-RPC error code (`ganglion_rpc::error`), or −32603 when the answer did not
    /// parse.
    pub code: i32,
    /// Its message.
    pub message: String,
}

impl SourceError {
    fn of(method: &'static str, e: MethodsError) -> Self {
        match e {
            MethodsError::JsonRpc(o) => Self {
                method,
                code: o.code(),
                message: o.message().to_string(),
            },
            other => Self {
                method,
                code: -32603,
                message: other.to_string(),
            },
        }
    }

    /// Whether the method said the thing asked for is unknown or malformed (a 404 for a
    /// page), as opposed to the node being unable to answer.
    pub fn is_not_found(&self) -> bool {
        self.code == ganglion_rpc::error::JOB || self.code == ganglion_rpc::error::INVALID_PARAMS
    }
}

/// The node's RPC methods, called in-process. Cheap to clone.
#[derive(Clone)]
pub struct Source {
    module: Arc<RpcModule<()>>,
}

fn params(values: &[serde_json::Value]) -> ArrayParams {
    let mut p = ArrayParams::new();
    for v in values {
        // A `serde_json::Value` always serializes.
        let _ = p.insert(v);
    }
    p
}

impl Source {
    /// Over `module` (the one the node's RPC server serves).
    pub fn new(module: RpcModule<()>) -> Self {
        Self {
            module: Arc::new(module),
        }
    }

    async fn call<T: DeserializeOwned + Clone>(
        &self,
        method: &'static str,
        args: &[serde_json::Value],
    ) -> Result<T, SourceError> {
        self.module
            .call(method, params(args))
            .await
            .map_err(|e| SourceError::of(method, e))
    }

    /// `node_info`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn node(&self) -> Result<NodeInfo, SourceError> {
        self.call("node_info", &[]).await
    }

    /// `job_list` (every record, the most recently changed first).
    ///
    /// # Errors
    /// The method's error.
    pub async fn jobs(&self) -> Result<Vec<JobStatus>, SourceError> {
        self.call("job_list", &[serde_json::Value::Null]).await
    }

    /// `job_status`: the node's records of `job` (one per role).
    ///
    /// # Errors
    /// The method's error.
    pub async fn job(&self, job: &str) -> Result<Vec<JobStatus>, SourceError> {
        self.call("job_status", &[job.into()]).await
    }

    /// `audit_job`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn audit_job(&self, job: &str) -> Result<AuditJob, SourceError> {
        self.call("audit_job", &[job.into()]).await
    }

    /// `audit_verify`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn verify(&self, job: &str) -> Result<AuditReport, SourceError> {
        self.call("audit_verify", &[job.into()]).await
    }

    /// `audit_provider` (payment key hash or peer id).
    ///
    /// # Errors
    /// The method's error.
    pub async fn provider(&self, key: &str) -> Result<AuditProvider, SourceError> {
        self.call("audit_provider", &[key.into()]).await
    }

    /// `audit_cid`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn cid(&self, cid: &str) -> Result<Vec<AuditCidUse>, SourceError> {
        self.call("audit_cid", &[cid.into()]).await
    }

    /// `market_offers`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn offers(&self) -> Result<Vec<MarketOffer>, SourceError> {
        self.call("market_offers", &[]).await
    }

    /// `market_matrix`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn matrix(&self) -> Result<MarketMatrix, SourceError> {
        self.call("market_matrix", &[]).await
    }

    /// `provider_bond`: this node's bonds.
    ///
    /// # Errors
    /// The method's error.
    pub async fn own_bonds(&self) -> Result<Vec<BondInfo>, SourceError> {
        self.call("provider_bond", &[]).await
    }

    /// `job_logs`.
    ///
    /// # Errors
    /// The method's error.
    pub async fn logs(&self, job: &str) -> Result<Vec<JobLog>, SourceError> {
        self.call("job_logs", &[job.into()]).await
    }

    /// `job_outputs` without a directory: the attested output trees, fetched into the
    /// node's blockstore when missing.
    ///
    /// # Errors
    /// The method's error.
    pub async fn outputs(&self, job: &str) -> Result<Vec<JobOutput>, SourceError> {
        self.call("job_outputs", &[job.into(), serde_json::Value::Null])
            .await
    }

    /// `job_stop` (an action: the caller checked the token).
    ///
    /// # Errors
    /// The method's error.
    pub async fn stop(&self, job: &str) -> Result<JobStatus, SourceError> {
        self.call("job_stop", &[job.into()]).await
    }

    /// `job_subscribe`: the job's transitions so far, then each new one.
    ///
    /// # Errors
    /// The method's error (unknown job, no engine).
    pub async fn events(&self, job: &str) -> Result<Subscription, SourceError> {
        self.module
            .subscribe_unbounded("job_subscribe", params(&[job.into()]))
            .await
            .map_err(|e| SourceError::of("job_subscribe", e))
    }
}
