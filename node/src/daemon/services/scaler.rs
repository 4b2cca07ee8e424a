//! What the node's gateway asks of its job engine ([`Scaler`], implemented by
//! [`EngineHandle`]), and a service's replicas as the autoscaler sees them ([`EngineFleet`]).

use std::sync::Arc;

use ganglion_contracts::v2::datum::JobId;
use ganglion_dispatch::executor::Executor;
use ganglion_gateway::Fleet;
use ganglion_gateway::p2p::BoxFuture;
use ganglion_indexer::store::Kv;
use libp2p::PeerId;

use super::replica_index;
use crate::job::usage::AtGateway;
use crate::job::{EngineHandle, JobControl};

/// What the node's gateway asks of its job engine about the services it routes (implemented
/// by [`EngineHandle`]): the autoscaler's replica count and lost replicas, each replica's
/// usage and health (for the receipts), and the spec of a service it routes for another
/// orchestrator.
pub trait Scaler: Send + Sync + 'static {
    /// The replicas `job` wants and the indices of its running assignments.
    ///
    /// # Errors
    /// Why not, in words.
    fn replicas(&self, job: &JobId) -> Result<(u32, Vec<u64>), String>;
    /// Wants `wanted` replicas of `job` (clamped to its spec); returns the count now wanted.
    ///
    /// # Errors
    /// Why not, in words.
    fn scale(&self, job: JobId, wanted: u32) -> BoxFuture<'_, Result<u32, String>>;
    /// Gives up `job`'s assignment `index` as lost.
    ///
    /// # Errors
    /// Why not, in words.
    fn lost(&self, job: JobId, index: u64) -> BoxFuture<'_, Result<u32, String>>;
    /// This node's gateway routes the services it orchestrates (called once, before the
    /// first [`Scaler::served`]).
    fn routing(&self);
    /// `job`'s assignment `index` as the gateway sees it now: what it served so far (its next
    /// receipts carry it, signed) and whether it is healthy (no receipt while it is not).
    fn served(&self, job: JobId, index: u64, at: AtGateway);
    /// The spec `spec_cid` (binary CID) of `job`, which this node does not orchestrate,
    /// fetched from the first of `from` (its providers) that serves it.
    ///
    /// # Errors
    /// Why not, in words.
    fn spec(
        &self,
        job: JobId,
        spec_cid: Vec<u8>,
        from: Vec<PeerId>,
    ) -> BoxFuture<'_, Result<ganglion_market::Ensemble, String>>;
}

impl<S: Kv + 'static, E: Executor + 'static> Scaler for EngineHandle<S, E> {
    fn replicas(&self, job: &JobId) -> Result<(u32, Vec<u64>), String> {
        JobControl::replicas(self, job).map_err(|e| e.to_string())
    }

    fn scale(&self, job: JobId, wanted: u32) -> BoxFuture<'_, Result<u32, String>> {
        Box::pin(async move {
            EngineHandle::scale(self, &job, wanted)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn lost(&self, job: JobId, index: u64) -> BoxFuture<'_, Result<u32, String>> {
        Box::pin(async move {
            self.replica_lost(&job, index)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn routing(&self) {
        self.routes_services();
    }

    fn served(&self, job: JobId, index: u64, at: AtGateway) {
        EngineHandle::served(self, job, index, at);
    }

    fn spec(
        &self,
        job: JobId,
        spec_cid: Vec<u8>,
        from: Vec<PeerId>,
    ) -> BoxFuture<'_, Result<ganglion_market::Ensemble, String>> {
        Box::pin(async move {
            self.fetch_spec(&job, &spec_cid, &from)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// A service's replicas as the autoscaler sees them: one assignment of its escrow each; asking
/// for one more or fewer changes the count the engine rescales towards.
pub struct EngineFleet {
    job: JobId,
    scaler: Arc<dyn Scaler>,
}

impl EngineFleet {
    /// The fleet of service `job`.
    pub fn new(job: JobId, scaler: Arc<dyn Scaler>) -> Arc<Self> {
        Arc::new(Self { job, scaler })
    }

    fn wanted_now(&self) -> Result<u32, String> {
        self.scaler.replicas(&self.job).map(|(wanted, _)| wanted)
    }
}

impl Fleet for EngineFleet {
    fn wanted(&self) -> u32 {
        self.wanted_now().unwrap_or(0)
    }

    fn add(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let wanted = self.wanted_now()?;
            let now = self.scaler.scale(self.job, wanted + 1).await?;
            if now == wanted {
                return Err(format!("already at replicas.max ({wanted})"));
            }
            Ok(())
        })
    }

    fn release(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let wanted = self.wanted_now()?;
            let now = self
                .scaler
                .scale(self.job, wanted.saturating_sub(1))
                .await?;
            if now == wanted {
                return Err(format!("already at replicas.min ({wanted})"));
            }
            Ok(())
        })
    }

    fn lost(&self, id: &str) -> BoxFuture<'_, Result<(), String>> {
        let index = replica_index(id);
        Box::pin(async move {
            let index = index.ok_or_else(|| "not a replica of this service".to_string())?;
            self.scaler.lost(self.job, index).await.map(|_| ())
        })
    }
}
