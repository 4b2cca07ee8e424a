//! [`JobControl`]: what the RPC (and a CLI) asks of a running engine, object-safe so the
//! RPC server holds it without knowing the engine's store or executor types.

use std::sync::Arc;

use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::store::Kv;

use super::engine::{
    Ctx, EngineError, OrchestratorRecord, OrchestratorRole, ProviderRecord, ProviderRole,
};
use super::orchestrator;
use ganglion_dispatch::executor::Executor;
use ganglion_market::spec::Ensemble;

/// Submit, cancel and read jobs of a running [`super::Engine`] (from [`super::Engine::handle`]).
#[async_trait::async_trait]
pub trait JobControl: Send + Sync {
    /// See [`super::Engine::submit`].
    ///
    /// # Errors
    /// As [`super::Engine::submit`].
    async fn submit(&self, spec: &Ensemble) -> Result<JobId, EngineError>;

    /// See [`super::Engine::cancel`].
    ///
    /// # Errors
    /// As [`super::Engine::cancel`].
    async fn cancel(&self, job: &JobId) -> Result<(), EngineError>;

    /// See [`orchestrator::stop`]: an open job is cancelled, a running one stopped (its
    /// providers stop and claim what ran).
    ///
    /// # Errors
    /// As [`orchestrator::stop`].
    async fn stop(&self, job: &JobId) -> Result<(), EngineError>;

    /// The node's records of `job`: as orchestrator, as provider.
    ///
    /// # Errors
    /// Store errors.
    fn records(
        &self,
        job: &JobId,
    ) -> Result<(Option<OrchestratorRecord>, Option<ProviderRecord>), EngineError>;

    /// Could today's market place `spec`, on whom, at what worst-case cost ([`super::quote`]).
    /// Nothing is locked.
    ///
    /// # Errors
    /// As [`super::quote::quote`].
    async fn quote(&self, spec: &Ensemble) -> Result<super::quote::Quote, EngineError>;

    /// The shares of `job` (orchestrated here) whose heartbeat this node acknowledged with a
    /// receipt in the last two receipt intervals: `(assignment index, GPU-ms reported)`. In
    /// memory: empty after a restart until the next heartbeats.
    ///
    /// # Errors
    /// Indexer errors.
    fn running(&self, job: &JobId) -> Result<Vec<(u64, u64)>, EngineError>;

    /// The latest live log of each node of `job` (orchestrated here) that sent one with its
    /// heartbeats, in assignment order, its text read from the blockstore or fetched over
    /// bitswap from the node ([`super::live_logs`]). Unattested; in memory: empty after a
    /// restart until the next heartbeats.
    ///
    /// # Errors
    /// [`EngineError::State`] for a job this node does not orchestrate; store and indexer
    /// errors.
    async fn live_logs(
        &self,
        job: &JobId,
    ) -> Result<Vec<ganglion_rpc::audit::LiveJobLog>, EngineError>;

    /// Every record the node holds: as orchestrator, as provider.
    ///
    /// # Errors
    /// Store errors.
    fn all_records(&self) -> Result<(Vec<OrchestratorRecord>, Vec<ProviderRecord>), EngineError>;

    /// The replicas the service `job` wants and the indices of its running assignments (not
    /// claimed, not released, not given up as lost), as the escrow shows them now.
    ///
    /// # Errors
    /// [`EngineError::State`]: an unknown job; the indexer's store.
    fn replicas(&self, job: &JobId) -> Result<(u32, Vec<u64>), EngineError>;

    /// What the service `job`'s assignment `index` served, as this node (its orchestrator)
    /// last signed it with a receipt ([`super::usage`]); `None` before the first.
    ///
    /// # Errors
    /// Store errors.
    fn usage_signed(
        &self,
        job: &JobId,
        index: u64,
    ) -> Result<Option<ganglion_p2p::protocols::ServedUsage>, EngineError>;

    /// The best receipt this node holds as a provider of `job` (the one its claim carries).
    ///
    /// # Errors
    /// Store errors.
    fn held_receipt(
        &self,
        job: &JobId,
    ) -> Result<Option<ganglion_p2p::protocols::SignedReceipt>, EngineError>;
}

/// A cloneable handle on a running engine's jobs.
pub struct EngineHandle<S: Kv, E: Executor> {
    pub(crate) ctx: Arc<Ctx<S, E>>,
}

impl<S: Kv, E: Executor> Clone for EngineHandle<S, E> {
    fn clone(&self) -> Self {
        Self {
            ctx: self.ctx.clone(),
        }
    }
}

impl<S: Kv + 'static, E: Executor + 'static> EngineHandle<S, E> {
    /// Sets the replicas the service `job` wants (clamped to its spec's `replicas`): the
    /// engine's next pass rescales its escrow towards it ([`super::service`]). Returns the
    /// count now wanted.
    ///
    /// # Errors
    /// [`EngineError::State`]: an unknown job, or not a service.
    pub async fn scale(&self, job: &JobId, wanted: u32) -> Result<u32, EngineError> {
        let _guard = self.ctx.actions.lock().await;
        super::service::scale(&self.ctx, job, wanted)
    }

    /// Gives up the service `job`'s assignment `index` as lost (unhealthy too long): it is
    /// released and, below the count wanted, replaced. Returns the count wanted.
    ///
    /// # Errors
    /// [`EngineError::State`]: an unknown job, or not a service.
    pub async fn replica_lost(&self, job: &JobId, index: u64) -> Result<u32, EngineError> {
        let _guard = self.ctx.actions.lock().await;
        super::service::lost(&self.ctx, job, index)
    }

    /// The ensemble spec `spec_cid` (binary CID): read from this node's blockstore, or
    /// fetched over bitswap from the first of `from` that serves it (a job's providers hold
    /// its spec). For a gateway routing a service it does not orchestrate.
    ///
    /// # Errors
    /// The last peer's failure ([`EngineError`]: CID, blocks, JSON, p2p), or
    /// [`EngineError::State`] when `from` is empty.
    pub async fn fetch_spec(
        &self,
        job: &JobId,
        spec_cid: &[u8],
        from: &[libp2p::PeerId],
    ) -> Result<ganglion_market::Ensemble, EngineError> {
        let mut last = EngineError::State {
            job: *job,
            reason: "no peer to fetch the spec from".into(),
        };
        for peer in from {
            match super::provider::read_spec(&self.ctx, *peer, spec_cid).await {
                Ok(spec) => return Ok(spec),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// This node's gateway routes the services it orchestrates: from now on a receipt for a
    /// service's replica needs the replica healthy there ([`EngineHandle::served`]).
    pub fn routes_services(&self) {
        self.ctx
            .gateway
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The service `job`'s assignment `index` as this node's gateway sees it now: what it
    /// served so far (cumulative since this process began routing it), which the next
    /// receipts for it carry, signed, and whether it is healthy (no receipt while it is not;
    /// [`super::usage`]).
    pub fn served(&self, job: JobId, index: u64, at: super::usage::AtGateway) {
        super::usage::record(&self.ctx, job, index, at);
    }
}

#[async_trait::async_trait]
impl<S: Kv + 'static, E: Executor + 'static> JobControl for EngineHandle<S, E> {
    async fn submit(&self, spec: &Ensemble) -> Result<JobId, EngineError> {
        let _guard = self.ctx.actions.lock().await;
        orchestrator::submit(&self.ctx, spec).await
    }

    async fn cancel(&self, job: &JobId) -> Result<(), EngineError> {
        let _guard = self.ctx.actions.lock().await;
        orchestrator::cancel(&self.ctx, job).await
    }

    async fn stop(&self, job: &JobId) -> Result<(), EngineError> {
        let _guard = self.ctx.actions.lock().await;
        orchestrator::stop(&self.ctx, job).await
    }

    fn records(
        &self,
        job: &JobId,
    ) -> Result<(Option<OrchestratorRecord>, Option<ProviderRecord>), EngineError> {
        Ok((
            self.ctx.store.get::<OrchestratorRole>(job)?,
            self.ctx.store.get::<ProviderRole>(job)?,
        ))
    }

    async fn quote(&self, spec: &Ensemble) -> Result<super::quote::Quote, EngineError> {
        super::quote::quote(&self.ctx, spec).await
    }

    fn running(&self, job: &JobId) -> Result<Vec<(u64, u64)>, EngineError> {
        let Some(view) = self.ctx.indexer.job(job, 0)? else {
            return Ok(vec![]);
        };
        let window = view.value.receipts.interval_ms.saturating_mul(2);
        let now = self.ctx.now();
        let given = self
            .ctx
            .receipts_given
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut live: Vec<(u64, u64)> = given
            .iter()
            .filter(|((j, _), (at, _))| j == job && now.saturating_sub(*at) <= window)
            .map(|((_, index), (_, gpu_ms))| (*index, *gpu_ms))
            .collect();
        live.sort_unstable();
        Ok(live)
    }

    async fn live_logs(
        &self,
        job: &JobId,
    ) -> Result<Vec<ganglion_rpc::audit::LiveJobLog>, EngineError> {
        super::live_logs::of(&self.ctx, job).await
    }

    fn all_records(&self) -> Result<(Vec<OrchestratorRecord>, Vec<ProviderRecord>), EngineError> {
        Ok((
            self.ctx.store.all::<OrchestratorRole>()?,
            self.ctx.store.all::<ProviderRole>()?,
        ))
    }

    fn usage_signed(
        &self,
        job: &JobId,
        index: u64,
    ) -> Result<Option<ganglion_p2p::protocols::ServedUsage>, EngineError> {
        Ok(self.ctx.store.usage_signed(job, index)?)
    }

    fn held_receipt(
        &self,
        job: &JobId,
    ) -> Result<Option<ganglion_p2p::protocols::SignedReceipt>, EngineError> {
        Ok(self.ctx.store.receipt(job)?)
    }

    fn replicas(&self, job: &JobId) -> Result<(u32, Vec<u64>), EngineError> {
        let r = self
            .ctx
            .store
            .get::<OrchestratorRole>(job)?
            .ok_or_else(|| EngineError::State {
                job: *job,
                reason: "no such job".into(),
            })?;
        let running = match self.ctx.indexer.job(job, self.ctx.config.depth)? {
            Some(c) => super::service::serving(&c.value, &r.detail.scaling),
            None => Vec::new(),
        };
        Ok((r.detail.scaling.wanted_of(&r.detail.spec), running))
    }
}
