//! [`AuditRpc`]: the `audit_*`, `market_*` and `provider_*` methods over a node's indexer,
//! blockstore and swarm. Read-only: no bearer token needed. Merged into the node's API by
//! `ganglion_node::rpc::Api::with_audit`.

use std::sync::Arc;

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_rpc::audit::{
    AuditApiServer, AuditJob, AuditProvider, AuditReport, BondInfo, JobArtifactsApiServer, JobLog,
    JobOutput, MarketApiServer, MarketOffer, ProviderApiServer,
};
use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::RpcModule;
use ganglion_rpc::jsonrpsee::core::{RpcResult, async_trait};
use ganglion_rpc::jsonrpsee::types::ErrorObjectOwned;
use ganglion_storage::blockstore::Blockstore;

use super::error::AuditError;
use super::record;
use ganglion_p2p as p2p;

/// What the read-only namespaces answer from. Cheap to clone.
pub struct AuditRpc<S: Kv> {
    indexer: Arc<Indexer<S>>,
    blocks: Arc<dyn Blockstore>,
    p2p: Option<p2p::Client>,
    me: Option<KeyHash>,
}

impl<S: Kv> Clone for AuditRpc<S> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            blocks: self.blocks.clone(),
            p2p: self.p2p.clone(),
            me: self.me,
        }
    }
}

impl<S: Kv + Send + Sync + 'static> AuditRpc<S> {
    /// Over a following `indexer` and the node's `blocks` (the one bitswap serves).
    pub fn new(indexer: Arc<Indexer<S>>, blocks: Arc<dyn Blockstore>) -> Self {
        Self {
            indexer,
            blocks,
            p2p: None,
            me: None,
        }
    }

    /// With the node's swarm: `audit_verify` fetches missing blocks over bitswap and
    /// `market_offers` / `provider_offers` answer (without it they answer
    /// [`error::INTERNAL`]).
    pub fn with_p2p(mut self, client: p2p::Client) -> Self {
        self.p2p = Some(client);
        self
    }

    /// With this node's payment key hash, for `provider_bond` and `provider_offers` (without
    /// it they answer [`error::WALLET`]).
    pub fn with_provider(mut self, key_hash: KeyHash) -> Self {
        self.me = Some(key_hash);
        self
    }

    /// The three namespaces, and `job_logs` / `job_outputs`, in one module.
    ///
    /// # Errors
    /// When two of them register the same method name.
    pub fn into_module(
        self,
    ) -> Result<RpcModule<()>, ganglion_rpc::jsonrpsee::core::RegisterMethodError> {
        let mut m = RpcModule::new(());
        m.merge(AuditApiServer::into_rpc(self.clone()))?;
        m.merge(MarketApiServer::into_rpc(self.clone()))?;
        m.merge(ProviderApiServer::into_rpc(self.clone()))?;
        m.merge(JobArtifactsApiServer::into_rpc(self))?;
        Ok(m)
    }

    fn me(&self) -> RpcResult<KeyHash> {
        self.me.ok_or_else(|| {
            error(
                error::WALLET,
                "this node has no payment key: run `ganglion wallet new`",
            )
        })
    }

    async fn market(&self) -> RpcResult<Vec<MarketOffer>> {
        let client = self
            .p2p
            .as_ref()
            .ok_or_else(|| error(error::INTERNAL, "this node runs no p2p swarm"))?;
        let offers = client
            .market()
            .await
            .map_err(|e| error(error::INTERNAL, format!("p2p: {e}")))?;
        Ok(offers.iter().map(record::offer).collect())
    }
}

fn parse_job_id(s: &str) -> RpcResult<JobId> {
    hex::decode(s)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .map(JobId)
        .ok_or_else(|| {
            error(
                error::INVALID_PARAMS,
                format!("job id {s:?} is not 64 hex digits"),
            )
        })
}

fn to_rpc(e: &AuditError) -> ErrorObjectOwned {
    let code = match e {
        AuditError::UnknownJob(_) => error::JOB,
        AuditError::UnknownProvider(_) => error::INVALID_PARAMS,
        _ => error::INTERNAL,
    };
    error(code, e.to_string())
}

#[async_trait]
impl<S: Kv + Send + Sync + 'static> AuditApiServer for AuditRpc<S> {
    async fn job(&self, job_id: String) -> RpcResult<AuditJob> {
        let id = parse_job_id(&job_id)?;
        let view = self
            .indexer
            .job(&id, 0)
            .map_err(|e| to_rpc(&e.into()))?
            .ok_or_else(|| to_rpc(&AuditError::UnknownJob(id)))?;
        Ok(record::job(&view))
    }

    async fn provider(&self, key: String) -> RpcResult<AuditProvider> {
        let k = record::provider_key(&self.indexer, &key).map_err(|e| to_rpc(&e))?;
        record::provider(&self.indexer, &k).map_err(|e| to_rpc(&e))
    }

    async fn verify(&self, job_id: String) -> RpcResult<AuditReport> {
        let id = parse_job_id(&job_id)?;
        super::verify(&self.indexer, self.blocks.as_ref(), self.p2p.as_ref(), &id)
            .await
            .map_err(|e| to_rpc(&e))
    }
}

fn artifacts_rpc(e: &super::artifacts::ArtifactsError) -> ErrorObjectOwned {
    use super::artifacts::ArtifactsError as A;
    match e {
        A::Audit(a) => to_rpc(a),
        A::NotAttested { .. } => error(error::JOB, e.to_string()),
        _ => error(error::INTERNAL, e.to_string()),
    }
}

#[async_trait]
impl<S: Kv + Send + Sync + 'static> JobArtifactsApiServer for AuditRpc<S> {
    async fn logs(&self, job_id: String) -> RpcResult<Vec<JobLog>> {
        let id = parse_job_id(&job_id)?;
        super::artifacts::logs(&self.indexer, &self.blocks, self.p2p.as_ref(), &id)
            .await
            .map_err(|e| artifacts_rpc(&e))
    }

    async fn outputs(&self, job_id: String, dir: Option<String>) -> RpcResult<Vec<JobOutput>> {
        let id = parse_job_id(&job_id)?;
        let dir = dir.map(std::path::PathBuf::from);
        if let Some(d) = &dir
            && !d.is_absolute()
        {
            return Err(error(
                error::INVALID_PARAMS,
                format!("dir {} is not an absolute path", d.display()),
            ));
        }
        super::artifacts::outputs(
            &self.indexer,
            &self.blocks,
            self.p2p.as_ref(),
            &id,
            dir.as_deref(),
        )
        .await
        .map_err(|e| artifacts_rpc(&e))
    }
}

#[async_trait]
impl<S: Kv + Send + Sync + 'static> MarketApiServer for AuditRpc<S> {
    async fn offers(&self) -> RpcResult<Vec<MarketOffer>> {
        self.market().await
    }
}

#[async_trait]
impl<S: Kv + Send + Sync + 'static> ProviderApiServer for AuditRpc<S> {
    async fn bond(&self) -> RpcResult<Vec<BondInfo>> {
        let me = self.me()?;
        record::bonds_of(&self.indexer, &me).map_err(|e| to_rpc(&e))
    }

    async fn offers(&self) -> RpcResult<Vec<MarketOffer>> {
        let me = hex::encode(self.me()?);
        Ok(self
            .market()
            .await?
            .into_iter()
            .filter(|o| o.provider == me)
            .collect())
    }
}
