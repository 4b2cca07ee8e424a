//! [`AuditService`]: what the node's read-only methods answer (`audit_*`, `market_offers`,
//! `market_matrix`, `provider_bond` / `provider_offers`) and a job's attested artifacts
//! (`job_logs` / `job_outputs`), over a node's indexer, blockstore and swarm. The node's
//! JSON-RPC server holds it as the object-safe [`Audit`] and maps its [`AuditError`]s and
//! [`ArtifactsError`]s to JSON-RPC codes in one place (`ganglion_node::rpc::codes`).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_rpc::audit::{
    AuditCidUse, AuditJob, AuditProvider, AuditReport, BondInfo, JobLog, JobOutput, MarketMatrix,
    MarketOffer,
};
use ganglion_storage::blockstore::Blockstore;

use super::artifacts::{self, ArtifactsError};
use super::error::AuditError;
use super::record;
use ganglion_p2p as p2p;

/// The read-only queries of a node about the chain's record, the market and a job's
/// artifacts. Object-safe, so that the RPC server holds one whatever the indexer's store.
#[async_trait]
pub trait Audit: Send + Sync {
    /// The indexer's view of `job`.
    ///
    /// # Errors
    /// [`AuditError::UnknownJob`], [`AuditError::Indexer`].
    async fn job(&self, job: &JobId) -> Result<AuditJob, AuditError>;

    /// A provider by payment key hash (56 hex digits) or libp2p peer id (base58).
    ///
    /// # Errors
    /// [`AuditError::UnknownProvider`], [`AuditError::Indexer`].
    async fn provider(&self, key: &str) -> Result<AuditProvider, AuditError>;

    /// `job` re-derived from chain and IPFS only ([`super::verify`]).
    ///
    /// # Errors
    /// As [`super::verify`].
    async fn verify(&self, job: &JobId) -> Result<AuditReport, AuditError>;

    /// Where the chain's record names `cid` ([`record::cid_uses`]).
    ///
    /// # Errors
    /// [`AuditError::Indexer`].
    async fn cid(&self, cid: &cid::Cid) -> Result<Vec<AuditCidUse>, AuditError>;

    /// The log of each attested provider of `job` ([`artifacts::logs`]).
    ///
    /// # Errors
    /// As [`artifacts::logs`].
    async fn logs(&self, job: &JobId) -> Result<Vec<JobLog>, ArtifactsError>;

    /// The outputs of each attested provider of `job`, unpacked under `dir` when given
    /// ([`artifacts::outputs`]).
    ///
    /// # Errors
    /// As [`artifacts::outputs`].
    async fn outputs(
        &self,
        job: &JobId,
        dir: Option<&Path>,
    ) -> Result<Vec<JobOutput>, ArtifactsError>;

    /// Live, verified offers as this node's market holds them, its own included.
    ///
    /// # Errors
    /// [`AuditError::NoSwarm`], [`AuditError::Swarm`].
    async fn market(&self) -> Result<Vec<MarketOffer>, AuditError>;

    /// The latency matrix this node's matcher would use now, and its own ping row to the
    /// providers ([`crate::links::market_matrix`]).
    ///
    /// # Errors
    /// [`AuditError::NoSwarm`], [`AuditError::Swarm`].
    async fn matrix(&self) -> Result<MarketMatrix, AuditError>;

    /// This node's bonds on chain (active and unbonding).
    ///
    /// # Errors
    /// [`AuditError::NoPaymentKey`], [`AuditError::Indexer`].
    async fn own_bonds(&self) -> Result<Vec<BondInfo>, AuditError>;

    /// This node's own offers as its market holds them.
    ///
    /// # Errors
    /// As [`Audit::market`], and [`AuditError::NoPaymentKey`].
    async fn own_offers(&self) -> Result<Vec<MarketOffer>, AuditError>;
}

/// [`Audit`] over a following indexer, the node's blockstore and, when it runs one, its swarm.
/// Cheap to clone.
pub struct AuditService<S: Kv> {
    indexer: Arc<Indexer<S>>,
    blocks: Arc<dyn Blockstore>,
    p2p: Option<p2p::Client>,
    me: Option<KeyHash>,
    clock: fn() -> u64,
}

impl<S: Kv> Clone for AuditService<S> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            blocks: self.blocks.clone(),
            p2p: self.p2p.clone(),
            me: self.me,
            clock: self.clock,
        }
    }
}

impl<S: Kv + Send + Sync + 'static> AuditService<S> {
    /// Over a following `indexer` and the node's `blocks` (the one bitswap serves).
    pub fn new(indexer: Arc<Indexer<S>>, blocks: Arc<dyn Blockstore>) -> Self {
        Self {
            indexer,
            blocks,
            p2p: None,
            me: None,
            clock: p2p::now_ms,
        }
    }

    /// With the clock (POSIX ms) the node's job engine judges link freshness by (default the
    /// system clock), so that [`Audit::matrix`] shows the matrix the matcher would use.
    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = clock;
        self
    }

    /// With the node's swarm: [`Audit::verify`] fetches missing blocks over bitswap and the
    /// market queries answer (without it they fail with [`AuditError::NoSwarm`]).
    pub fn with_p2p(mut self, client: p2p::Client) -> Self {
        self.p2p = Some(client);
        self
    }

    /// With this node's payment key hash, for [`Audit::own_bonds`] and [`Audit::own_offers`]
    /// (without it they fail with [`AuditError::NoPaymentKey`]).
    pub fn with_provider(mut self, key_hash: KeyHash) -> Self {
        self.me = Some(key_hash);
        self
    }

    fn me(&self) -> Result<KeyHash, AuditError> {
        self.me.ok_or(AuditError::NoPaymentKey)
    }
}

#[async_trait]
impl<S: Kv + Send + Sync + 'static> Audit for AuditService<S> {
    async fn job(&self, job: &JobId) -> Result<AuditJob, AuditError> {
        let view = self
            .indexer
            .job(job, 0)?
            .ok_or(AuditError::UnknownJob(*job))?;
        Ok(record::job(&view))
    }

    async fn provider(&self, key: &str) -> Result<AuditProvider, AuditError> {
        let k = record::provider_key(&self.indexer, key)?;
        record::provider(&self.indexer, &k)
    }

    async fn verify(&self, job: &JobId) -> Result<AuditReport, AuditError> {
        super::verify(&self.indexer, self.blocks.as_ref(), self.p2p.as_ref(), job).await
    }

    async fn cid(&self, cid: &cid::Cid) -> Result<Vec<AuditCidUse>, AuditError> {
        Ok(record::cid_uses(&self.indexer.jobs()?, cid))
    }

    async fn logs(&self, job: &JobId) -> Result<Vec<JobLog>, ArtifactsError> {
        artifacts::logs(&self.indexer, &self.blocks, self.p2p.as_ref(), job).await
    }

    async fn outputs(
        &self,
        job: &JobId,
        dir: Option<&Path>,
    ) -> Result<Vec<JobOutput>, ArtifactsError> {
        artifacts::outputs(&self.indexer, &self.blocks, self.p2p.as_ref(), job, dir).await
    }

    async fn market(&self) -> Result<Vec<MarketOffer>, AuditError> {
        let client = self.p2p.as_ref().ok_or(AuditError::NoSwarm)?;
        let offers = client.market().await.map_err(Box::new)?;
        Ok(offers.iter().map(record::offer).collect())
    }

    async fn matrix(&self) -> Result<MarketMatrix, AuditError> {
        let client = self.p2p.as_ref().ok_or(AuditError::NoSwarm)?;
        let offers = client.market().await.map_err(Box::new)?;
        let row = client.rtts().await.map_err(Box::new)?;
        Ok(crate::links::market_matrix(
            &offers,
            &row,
            std::time::Instant::now(),
            (self.clock)(),
        ))
    }

    async fn own_bonds(&self) -> Result<Vec<BondInfo>, AuditError> {
        record::bonds_of(&self.indexer, &self.me()?)
    }

    async fn own_offers(&self) -> Result<Vec<MarketOffer>, AuditError> {
        let me = hex::encode(self.me()?);
        Ok(self
            .market()
            .await?
            .into_iter()
            .filter(|o| o.provider == me)
            .collect())
    }
}
