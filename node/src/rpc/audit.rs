//! `audit_*`, `market_*`, `provider_*` and `job_logs` / `job_outputs`: the read-only queries
//! answered by the node's [`Audit`] (its indexer, blockstore and swarm), and
//! `provider_unbond` / `provider_withdraw` by its [`Bonds`]. A node serving neither (an RPC
//! server without a running node) answers [`error::CHAIN_UNAVAILABLE`] and [`error::WALLET`].

use std::sync::Arc;

use ganglion_rpc::api::{AuditApiServer, MarketApiServer, ProviderApiServer};
use ganglion_rpc::audit::{
    AuditJob, AuditProvider, AuditReport, BondInfo, JobLog, JobOutput, MarketOffer,
};
use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::core::{RpcResult, async_trait};
use ganglion_rpc::types::BondTx;

use super::bond::Bonds;
use super::{Api, codes, parse_job_id};
use crate::audit::service::Audit;

fn audit_of(api: &Api) -> RpcResult<&Arc<dyn Audit>> {
    api.audit.as_ref().ok_or_else(|| {
        error(
            error::CHAIN_UNAVAILABLE,
            "this server follows no chain: audit, market and provider queries need a running \
             node (`ganglion node run`)",
        )
    })
}

fn bonds_of(api: &Api) -> RpcResult<&Arc<dyn Bonds>> {
    api.bonds.as_ref().ok_or_else(|| {
        error(
            error::WALLET,
            "this server cannot spend the node's bond: it needs a running node with a wallet \
             (`ganglion node run`)",
        )
    })
}

/// `job_logs` (`ganglion_rpc::api::JobApi`).
pub(super) async fn logs(api: &Api, job_id: String) -> RpcResult<Vec<JobLog>> {
    let job = parse_job_id(&job_id)?;
    audit_of(api)?
        .logs(&job)
        .await
        .map_err(|e| codes::artifacts(&e))
}

/// `job_outputs` (`ganglion_rpc::api::JobApi`): `dir` must be absolute.
pub(super) async fn outputs(
    api: &Api,
    job_id: String,
    dir: Option<String>,
) -> RpcResult<Vec<JobOutput>> {
    let job = parse_job_id(&job_id)?;
    let dir = dir.map(std::path::PathBuf::from);
    if let Some(d) = &dir
        && !d.is_absolute()
    {
        return Err(error(
            error::INVALID_PARAMS,
            format!("dir {} is not an absolute path", d.display()),
        ));
    }
    audit_of(api)?
        .outputs(&job, dir.as_deref())
        .await
        .map_err(|e| codes::artifacts(&e))
}

#[async_trait]
impl AuditApiServer for Api {
    async fn job(&self, job_id: String) -> RpcResult<AuditJob> {
        let job = parse_job_id(&job_id)?;
        audit_of(self)?
            .job(&job)
            .await
            .map_err(|e| codes::audit(&e))
    }

    async fn provider(&self, key: String) -> RpcResult<AuditProvider> {
        audit_of(self)?
            .provider(&key)
            .await
            .map_err(|e| codes::audit(&e))
    }

    async fn verify(&self, job_id: String) -> RpcResult<AuditReport> {
        let job = parse_job_id(&job_id)?;
        audit_of(self)?
            .verify(&job)
            .await
            .map_err(|e| codes::audit(&e))
    }

    async fn cid(&self, cid: String) -> RpcResult<Vec<ganglion_rpc::audit::AuditCidUse>> {
        let parsed = cid::Cid::try_from(cid.as_str()).map_err(|e| {
            error(
                error::INVALID_PARAMS,
                format!("cid {cid:?} is not a CID: {e}"),
            )
        })?;
        audit_of(self)?
            .cid(&parsed)
            .await
            .map_err(|e| codes::audit(&e))
    }
}

#[async_trait]
impl MarketApiServer for Api {
    async fn offers(&self) -> RpcResult<Vec<MarketOffer>> {
        audit_of(self)?.market().await.map_err(|e| codes::audit(&e))
    }

    async fn matrix(&self) -> RpcResult<ganglion_rpc::audit::MarketMatrix> {
        audit_of(self)?.matrix().await.map_err(|e| codes::audit(&e))
    }
}

#[async_trait]
impl ProviderApiServer for Api {
    async fn bond(&self) -> RpcResult<Vec<BondInfo>> {
        audit_of(self)?
            .own_bonds()
            .await
            .map_err(|e| codes::audit(&e))
    }

    async fn offers(&self) -> RpcResult<Vec<MarketOffer>> {
        audit_of(self)?
            .own_offers()
            .await
            .map_err(|e| codes::audit(&e))
    }

    async fn unbond(&self, bond: Option<String>) -> RpcResult<BondTx> {
        bonds_of(self)?.unbond(bond).await
    }

    async fn withdraw(&self, bond: Option<String>) -> RpcResult<BondTx> {
        bonds_of(self)?.withdraw(bond).await
    }

    async fn post(
        &self,
        stake_ntx: ganglion_rpc::types::AmountParam,
        gpus: Option<u64>,
    ) -> RpcResult<BondTx> {
        let stake = stake_ntx.parse("stake_ntx")?;
        bonds_of(self)?.post(stake.into(), gpus).await
    }

    async fn top_up(
        &self,
        add_ntx: ganglion_rpc::types::AmountParam,
        bond: Option<String>,
    ) -> RpcResult<BondTx> {
        let add = add_ntx.parse("add_ntx")?;
        bonds_of(self)?.top_up(add.into(), bond).await
    }
}
