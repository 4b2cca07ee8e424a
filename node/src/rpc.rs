//! The node's side of the JSON-RPC API: the `ganglion-rpc` traits implemented over the
//! settings, the network preset and the wallet, and [`serve`], which writes a fresh cookie
//! and starts the server.

use ganglion_rpc::jsonrpsee::core::RegisterMethodError;
use std::sync::Arc;

use ganglion_rpc::api::{JobApiServer, NodeApiServer, WalletApiServer};
use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::RpcModule;
use ganglion_rpc::jsonrpsee::core::{RpcResult, async_trait};
use ganglion_rpc::server::Running;
use ganglion_rpc::types::{
    AmountParam, Balance, GpuReport, JobStatus, JobSubmitted, JobTransition, JobTx, NodeInfo, Sent,
    Tip,
};

use crate::datadir::DataDir;
use crate::job::JobControl;
use crate::network::NetworkPreset;
use crate::settings::Settings;
use crate::wallet::{self, ChainClient, Wallet};

mod audit;
pub mod bond;
mod cip30;
mod codes;
mod events;
pub mod gpus;
mod shares;
mod storage;
pub use storage::import_options as storage_import_options;

/// Why the API could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Settings, data dir, preset or key file.
    #[error(transparent)]
    Wallet(#[from] wallet::Error),
    /// Binding the listen address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Two namespaces register the same method name.
    #[error("merging the RPC namespaces: {0}")]
    Merge(#[from] RegisterMethodError),
}

struct Inner {
    settings: Settings,
    preset: NetworkPreset,
    wallet: Option<Wallet>,
}

/// The implementation of every namespace (cheap to clone).
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
    jobs: Option<Arc<dyn JobControl>>,
    audit: Option<Arc<dyn crate::audit::service::Audit>>,
    bonds: Option<Arc<dyn bond::Bonds>>,
    locks: Option<Arc<dyn crate::job::WalletLocks>>,
    gpus: Option<Arc<GpuReport>>,
    storage: Option<ganglion_storage::pin::Embedded<ganglion_storage::blockstore::SledBlockstore>>,
    gateway: Option<Arc<ganglion_gateway::Gateway>>,
}

impl Api {
    /// The API over `settings`; the wallet is optional (its methods answer
    /// [`error::WALLET`] until `ganglion wallet new`).
    ///
    /// # Errors
    /// [`Error::Wallet`] for a broken key file or settings.
    pub fn new(settings: Settings) -> Result<Self, Error> {
        let preset = NetworkPreset::of(settings.network());
        let wallet = match Wallet::open(settings.clone()) {
            Ok(w) => Some(w),
            Err(wallet::Error::NoKey(_)) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                preset,
                wallet,
            }),
            jobs: None,
            audit: None,
            bonds: None,
            locks: None,
            gpus: None,
            storage: None,
            gateway: None,
        })
    }

    /// The same API showing the load of the services `gateway` routes in `job_status`
    /// (`[gateway] listen`).
    pub fn with_gateway(mut self, gateway: Arc<ganglion_gateway::Gateway>) -> Self {
        self.gateway = Some(gateway);
        self
    }

    /// The same API answering `node_gpus` with a provider's start-up report (inventory plus
    /// the container check) instead of a fresh detection without the check.
    pub fn with_gpus(mut self, report: GpuReport) -> Self {
        self.gpus = Some(Arc::new(report));
        self
    }

    /// The same API answering `storage_*` from the node's blockstore through `pinner` (the
    /// one the executor pins with).
    pub fn with_storage(
        mut self,
        pinner: ganglion_storage::pin::Embedded<ganglion_storage::blockstore::SledBlockstore>,
    ) -> Self {
        self.storage = Some(pinner);
        self
    }

    /// The same API answering `job_*` from a running job engine (`Engine::handle`).
    pub fn with_jobs(mut self, jobs: Arc<dyn JobControl>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// The same API answering `audit_*`, `market_*`, `provider_bond`, `provider_offers`,
    /// `job_logs` and `job_outputs` from `audit`.
    pub fn with_audit<S: ganglion_indexer::store::Kv + Send + Sync + 'static>(
        mut self,
        audit: crate::audit::service::AuditService<S>,
    ) -> Self {
        self.audit = Some(Arc::new(audit));
        self
    }

    /// The same API answering `provider_unbond` and `provider_withdraw` from `bonds`.
    pub fn with_bonds<S: ganglion_indexer::store::Kv + Send + Sync + 'static>(
        mut self,
        bonds: bond::BondRpc<S>,
    ) -> Self {
        self.bonds = Some(Arc::new(bonds));
        self
    }

    /// The same API answering `job_*`, `job_buildLock` and `tx_submit` from a running job
    /// engine's handle (`Engine::handle`).
    pub fn with_engine<H>(mut self, engine: H) -> Self
    where
        H: JobControl + crate::job::WalletLocks + Clone + 'static,
    {
        self.jobs = Some(Arc::new(engine.clone()));
        self.locks = Some(Arc::new(engine));
        self
    }

    /// Every namespace in one module (one trait each: `ganglion_rpc::api`).
    ///
    /// # Errors
    /// [`Error::Merge`] when two namespaces register the same method name.
    pub fn into_module(self) -> Result<RpcModule<()>, Error> {
        use ganglion_rpc::api::{
            AuditApiServer, MarketApiServer, ProviderApiServer, StorageApiServer, TxApiServer,
        };
        let mut m = RpcModule::new(());
        m.merge(NodeApiServer::into_rpc(self.clone()))?;
        m.merge(WalletApiServer::into_rpc(self.clone()))?;
        m.merge(JobApiServer::into_rpc(self.clone()))?;
        m.merge(TxApiServer::into_rpc(self.clone()))?;
        m.merge(ProviderApiServer::into_rpc(self.clone()))?;
        m.merge(AuditApiServer::into_rpc(self.clone()))?;
        m.merge(MarketApiServer::into_rpc(self.clone()))?;
        m.merge(StorageApiServer::into_rpc(self))?;
        Ok(m)
    }

    fn wallet(&self) -> RpcResult<&Wallet> {
        self.inner
            .wallet
            .as_ref()
            .ok_or_else(|| error(error::WALLET, "no wallet key: run `ganglion wallet new`"))
    }
}

/// Writes a fresh cookie to the data dir and serves the API on `settings`' `[rpc] listen`.
///
/// # Errors
/// [`Error::Wallet`] (data dir, settings), [`Error::Bind`].
pub async fn serve(settings: Settings) -> Result<Running, Error> {
    let dir = DataDir::open(settings.data_dir().map_err(wallet::Error::from)?)
        .map_err(wallet::Error::from)?;
    let token = dir.new_rpc_cookie().map_err(wallet::Error::from)?;
    let addr = settings.rpc.listen;
    let api = Api::new(settings)?;
    ganglion_rpc::server::start(addr, &token, api.into_module()?)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// The whole cause chain, for the error message.
#[async_trait]
impl NodeApiServer for Api {
    async fn info(&self) -> RpcResult<NodeInfo> {
        Ok(NodeInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            network: self.inner.preset.network.to_string(),
            magic: self.inner.preset.magic,
            wallet_address: self.inner.wallet.as_ref().map(Wallet::address),
        })
    }

    async fn tip(&self) -> RpcResult<Option<Tip>> {
        let n2c = self
            .inner
            .settings
            .n2c()
            .map_err(|e| codes::wallet(&wallet::Error::from(e)))?;
        let mut c = ChainClient::connect(&n2c, self.inner.preset.magic)
            .await
            .map_err(|e| codes::wallet(&e.into()))?;
        let tip = c.tip().await;
        c.close().await;
        let tip = tip.map_err(|e| codes::wallet(&e.into()))?;
        Ok(tip.map(|(slot, hash)| Tip {
            slot,
            hash: hex::encode(hash),
        }))
    }

    async fn gpus(&self) -> RpcResult<GpuReport> {
        if let Some(r) = &self.gpus {
            return Ok(r.as_ref().clone());
        }
        let cfg = self.inner.settings.gpus.clone();
        let inv = tokio::task::spawn_blocking(move || {
            ganglion_dispatch::gpu::detect(&cfg.sysfs_root, &cfg.declared)
        })
        .await
        .map_err(|e| error(error::INTERNAL, format!("GPU detection: {e}")))?;
        Ok(gpus::to_rpc(&inv, None))
    }
}

#[async_trait]
impl WalletApiServer for Api {
    async fn address(&self) -> RpcResult<String> {
        Ok(self.wallet()?.address())
    }

    async fn balance(&self) -> RpcResult<Balance> {
        let b = self
            .wallet()?
            .balance()
            .await
            .map_err(|e| codes::wallet(&e))?;
        Ok(Balance {
            lovelace: b.lovelace.into(),
            assets: b.assets.into_iter().map(|(k, q)| (k, q.into())).collect(),
            utxos: b.utxos,
        })
    }

    async fn send(
        &self,
        to: String,
        lovelace: AmountParam,
        ntx: Option<AmountParam>,
    ) -> RpcResult<Sent> {
        let lovelace = lovelace.parse("lovelace")?.get();
        let ntx = match ntx {
            Some(n) => n.parse("ntx")?.get(),
            None => 0,
        };
        let p = self
            .wallet()?
            .send(&to, lovelace, ntx)
            .await
            .map_err(|e| codes::wallet(&e))?;
        Ok(Sent {
            tx_id: p.tx_id,
            fee: p.fee.into(),
        })
    }
}

fn jobs_of(api: &Api) -> RpcResult<&Arc<dyn JobControl>> {
    api.jobs
        .as_ref()
        .ok_or_else(|| error(error::JOB, "no job engine runs on this node"))
}

/// The NTX amounts of an ensemble spec (`docs/ensemble-spec.md`), by their path in it.
const SPEC_AMOUNTS: [&[&str]; 2] = [&["budget_ntx"], &["limits", "max_rate_ntx_per_gpu_hour"]];

/// `spec` with each of its [`SPEC_AMOUNTS`] read as a JSON-RPC amount
/// ([`ganglion_rpc::amount`]: a decimal string or a JSON integer, parsed exactly, 0 to
/// 2^64 − 1) and written back as the integer the spec's schema takes. An absent amount, or one
/// under a parent that is not an object, is left for the spec's own parser to name.
///
/// # Errors
/// [`ganglion_rpc::types::InvalidAmount`] naming the field by its dotted path
/// (`limits.max_rate_ntx_per_gpu_hour`).
fn spec_amounts(
    spec: &serde_json::Value,
) -> Result<serde_json::Value, ganglion_rpc::types::InvalidAmount> {
    let mut spec = spec.clone();
    for path in SPEC_AMOUNTS {
        let mut at = Some(&mut spec);
        for key in path {
            at = at
                .and_then(|v| v.as_object_mut())
                .and_then(|o| o.get_mut(*key));
        }
        if let Some(value) = at {
            let amount = ganglion_rpc::types::Amount::from_json(&path.join("."), value)?;
            *value = serde_json::Value::from(amount.get());
        }
    }
    Ok(spec)
}

/// A spec given as a JSON-RPC param: its NTX amounts (`budget_ntx`,
/// `limits.max_rate_ntx_per_gpu_hour`) taken as decimal strings or JSON integers like every
/// amount of the API ([`spec_amounts`]), then deserialized, its `deadline` (`+2h`, RFC 3339),
/// when given, turned into `deadline_ms` at the node's now. Validation is the engine's.
pub(crate) fn spec_param(spec: &serde_json::Value) -> RpcResult<ganglion_market::spec::Ensemble> {
    let invalid = |e: ganglion_market::spec::SpecError| error(error::INVALID_PARAMS, e.to_string());
    let spec = spec_amounts(spec)?;
    let mut spec =
        ganglion_market::spec::Ensemble::from_json_str(&spec.to_string()).map_err(invalid)?;
    spec.resolve_deadline(ganglion_p2p::now_ms())
        .map_err(invalid)?;
    Ok(spec)
}

/// Every state a job record can be in (`job_list`'s filter), the orchestrator's then the
/// provider's (`crate::job::state`), snake_case.
const JOB_STATES: &[&str] = &[
    "locked",
    "matching",
    "assigning",
    "assigned",
    "settled",
    "cancelled",
    "expired",
    "reserved",
    "preparing",
    "running",
    "finished",
    "claiming",
    "paid",
    "failed",
    "slashed",
];

fn parse_job_id(s: &str) -> RpcResult<ganglion_contracts::v2::datum::JobId> {
    let bytes: [u8; 32] = hex::decode(s)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            error(
                error::INVALID_PARAMS,
                format!("job id {s:?} is not 64 hex digits"),
            )
        })?;
    Ok(ganglion_contracts::v2::datum::JobId(bytes))
}

fn name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A no-fit's closest failing pair as `job_quote` shows it: full key hashes, the limit's
/// field name and the bound it misses.
fn failing_pair(p: &ganglion_market::PairFailure) -> ganglion_rpc::types::FailingPair {
    use ganglion_market::PairBound;
    let (max_rtt_us, min_mbps) = match p.bound {
        PairBound::MaxRttUs(us) => (Some(us), None),
        PairBound::MinMbps(mbps) => (None, Some(mbps)),
    };
    ganglion_rpc::types::FailingPair {
        limit: p.constraint.to_string(),
        a: hex::encode(p.a),
        b: hex::encode(p.b),
        rtt_us: p.rtt_us,
        mbps: p.mbps,
        max_rtt_us,
        min_mbps,
    }
}

fn status_of<S: Copy + serde::Serialize, D>(
    role: &str,
    r: &crate::job::store::JobRecord<S, D>,
    last_error: Option<String>,
) -> JobStatus {
    JobStatus {
        job_id: hex::encode(r.job_id.0),
        role: role.to_string(),
        state: name(&r.state),
        history: r
            .history
            .iter()
            .map(|t| JobTransition {
                state: name(&t.state),
                at_ms: t.at_ms,
            })
            .collect(),
        txs: r
            .intents
            .iter()
            .map(|i| JobTx {
                kind: name(&i.kind),
                tx_id: hex::encode(i.tx_hash),
            })
            .collect(),
        last_error,
        nodes: vec![],
        outcome: None,
        links: vec![],
        successor: None,
        predecessor: None,
        service: None,
        usage: None,
    }
}

/// A service's replicas (the engine's count wanted and running assignments), its load at this
/// node's gateway (when it routes one) and its cost so far from its shares.
fn service_of(
    api: &Api,
    job: &ganglion_contracts::v2::datum::JobId,
    nodes: &mut [ganglion_rpc::types::JobNode],
) -> RpcResult<ganglion_rpc::types::JobService> {
    let jobs = jobs_of(api)?;
    let (wanted, running) = jobs.replicas(job).map_err(|e| codes::engine(&e))?;
    for n in nodes.iter_mut() {
        n.usage = jobs
            .usage_signed(job, n.index)
            .map_err(|e| codes::engine(&e))?
            .map(|u| replica_usage(u, None));
    }
    let requests: u64 = nodes
        .iter()
        .filter_map(|n| n.usage.map(|u| u.requests))
        .sum();
    let cost_so_far = shares::cost_so_far(nodes);
    let name = crate::daemon::services::service_name(job);
    let load = api
        .gateway
        .as_ref()
        .and_then(|g| g.status().remove(&name))
        .map(|s| ganglion_rpc::types::ServiceLoad {
            healthy: s.load.healthy,
            in_flight: s.load.in_flight,
            requests_per_s: s.load.requests_per_s,
            p50_ms: s.load.p50_ms,
            p90_ms: s.load.p90_ms,
        });
    Ok(ganglion_rpc::types::JobService {
        name,
        wanted,
        running,
        load,
        cost_so_far: cost_so_far.into(),
        requests,
        cost_per_1k_requests: (requests > 0).then(|| {
            let per_1k = u128::from(cost_so_far) * 1000 / u128::from(requests);
            u64::try_from(per_1k).unwrap_or(u64::MAX).into()
        }),
    })
}

/// A replica's signed usage in its JSON-RPC shape (`until_ms`: the receipt it rides with).
fn replica_usage(
    u: ganglion_p2p::protocols::ServedUsage,
    until_ms: Option<u64>,
) -> ganglion_rpc::types::ReplicaUsage {
    ganglion_rpc::types::ReplicaUsage {
        requests: u.requests,
        failed: u.failed,
        bytes_in: u.bytes_in,
        bytes_out: u.bytes_out,
        until_ms,
    }
}

async fn statuses(
    api: &Api,
    job: &ganglion_contracts::v2::datum::JobId,
) -> RpcResult<Vec<JobStatus>> {
    let (o, p) = jobs_of(api)?.records(job).map_err(|e| codes::engine(&e))?;
    let mut out = Vec::new();
    if let Some(o) = o {
        let mut s = status_of("orchestrator", &o, o.detail.last_error.clone());
        s.successor = o.detail.successor.map(|j| hex::encode(j.0));
        s.predecessor = o.detail.predecessor.map(|j| hex::encode(j.0));
        if let Some(links) = &o.detail.links {
            s.links = (links.pairs.iter())
                .map(|p| crate::job::links::rpc_pair(p, links.matched_ms))
                .collect();
        }
        if let Some(audit) = &api.audit {
            // Stopped because its network did not form: a failure, not the user's stop.
            let stopped = o.detail.stopped_at_ms.is_some() && o.detail.unformed.is_empty();
            (s.nodes, s.outcome) = shares::of(audit.as_ref(), job, stopped).await;
            let running = jobs_of(api)?.running(job).map_err(|e| codes::engine(&e))?;
            shares::mark_running(&mut s.nodes, &running);
            shares::mark_groups(&mut s.nodes, &o.detail.chosen);
        }
        if o.detail.spec.kind == ganglion_market::JobKind::Service {
            s.service = Some(service_of(api, job, &mut s.nodes)?);
        }
        out.push(s);
    }
    if let Some(p) = p {
        let mut s = status_of("provider", &p, p.detail.error.clone());
        // A service's replica: what it served, as the usage its best receipt carries (once
        // the receipt is dropped at the claim, as it attested it).
        let held = jobs_of(api)?
            .held_receipt(job)
            .map_err(|e| codes::engine(&e))?
            .and_then(|r| {
                r.usage
                    .map(|u| replica_usage(u.usage, Some(r.receipt.acknowledged_until_ms)))
            });
        s.usage = held.or_else(|| {
            p.detail
                .usage
                .map(|a| replica_usage(a.usage, Some(a.acknowledged_until_ms)))
        });
        out.push(s);
    }
    Ok(out)
}

#[async_trait]
impl JobApiServer for Api {
    async fn submit(&self, spec: serde_json::Value) -> RpcResult<JobSubmitted> {
        let spec = spec_param(&spec)?;
        let jobs = jobs_of(self)?;
        let job = jobs.submit(&spec).await.map_err(|e| codes::engine(&e))?;
        Ok(JobSubmitted {
            job_id: hex::encode(job.0),
        })
    }

    async fn status(&self, job_id: String) -> RpcResult<Vec<JobStatus>> {
        let job = parse_job_id(&job_id)?;
        statuses(self, &job).await
    }

    async fn quote(&self, spec: serde_json::Value) -> RpcResult<ganglion_rpc::types::JobQuote> {
        use crate::job::quote::Quote;
        let spec = spec_param(&spec)?;
        let q = jobs_of(self)?
            .quote(&spec)
            .await
            .map_err(|e| codes::engine(&e))?;
        let budget_ntx = spec.budget_ntx.into();
        Ok(match q {
            Quote::Placeable { nodes, worst_case } => ganglion_rpc::types::JobQuote {
                placeable: true,
                nodes: nodes
                    .iter()
                    .map(|n| ganglion_rpc::types::QuotedNode {
                        provider: hex::encode(n.provider),
                        gpus: n.gpus,
                        rate: n.rate.into(),
                        group: n.group,
                    })
                    .collect(),
                worst_case_ntx: worst_case.into(),
                budget_ntx,
                reason: None,
                pair: None,
            },
            Quote::NotPlaceable { reason, pair } => ganglion_rpc::types::JobQuote {
                placeable: false,
                nodes: vec![],
                worst_case_ntx: 0.into(),
                budget_ntx,
                reason: Some(reason),
                pair: pair.as_ref().map(failing_pair),
            },
        })
    }

    async fn list(&self, state: Option<String>) -> RpcResult<Vec<JobStatus>> {
        if let Some(s) = &state
            && !JOB_STATES.contains(&s.as_str())
        {
            return Err(error(
                error::INVALID_PARAMS,
                format!(
                    "state {s:?} is no job state: one of {} (orchestrator: locked … settled; \
                     provider: reserved … paid)",
                    JOB_STATES.join(", ")
                ),
            ));
        }
        let (orchestrated, provided) = jobs_of(self)?
            .all_records()
            .map_err(|e| codes::engine(&e))?;
        let changed = |h: &[ganglion_rpc::types::JobTransition]| h.last().map_or(0, |t| t.at_ms);
        let mut out: Vec<JobStatus> = orchestrated
            .iter()
            .map(|o| status_of("orchestrator", o, o.detail.last_error.clone()))
            .chain(
                provided
                    .iter()
                    .map(|p| status_of("provider", p, p.detail.error.clone())),
            )
            .filter(|s| state.as_deref().is_none_or(|want| s.state == want))
            .collect();
        out.sort_by_key(|s| std::cmp::Reverse(changed(&s.history)));
        Ok(out)
    }

    async fn cancel(&self, job_id: String) -> RpcResult<JobStatus> {
        let job = parse_job_id(&job_id)?;
        let jobs = jobs_of(self)?;
        jobs.cancel(&job).await.map_err(|e| codes::engine(&e))?;
        statuses(self, &job)
            .await?
            .into_iter()
            .find(|s| s.role == "orchestrator")
            .ok_or_else(|| error(error::JOB, "the job has no orchestrator record"))
    }

    async fn stop(&self, job_id: String) -> RpcResult<JobStatus> {
        let job = parse_job_id(&job_id)?;
        jobs_of(self)?
            .stop(&job)
            .await
            .map_err(|e| codes::engine(&e))?;
        statuses(self, &job)
            .await?
            .into_iter()
            .find(|s| s.role == "orchestrator")
            .ok_or_else(|| error(error::JOB, "the job has no orchestrator record"))
    }

    async fn build_lock(
        &self,
        spec: serde_json::Value,
        change_address: String,
        utxos: Option<Vec<String>>,
    ) -> RpcResult<ganglion_rpc::types::UnsignedLock> {
        cip30::build_lock(self, spec, change_address, utxos).await
    }

    async fn events(
        &self,
        pending: ganglion_rpc::jsonrpsee::PendingSubscriptionSink,
        job_id: String,
    ) -> ganglion_rpc::jsonrpsee::core::SubscriptionResult {
        events::subscribe(self, pending, job_id).await
    }

    async fn logs(&self, job_id: String) -> RpcResult<Vec<ganglion_rpc::audit::JobLog>> {
        audit::logs(self, job_id).await
    }

    async fn live_logs(&self, job_id: String) -> RpcResult<Vec<ganglion_rpc::audit::LiveJobLog>> {
        let job = parse_job_id(&job_id)?;
        jobs_of(self)?
            .live_logs(&job)
            .await
            .map_err(|e| codes::engine(&e))
    }

    async fn outputs(
        &self,
        job_id: String,
        dir: Option<String>,
    ) -> RpcResult<Vec<ganglion_rpc::audit::JobOutput>> {
        audit::outputs(self, job_id, dir).await
    }
}

#[cfg(test)]
mod tests {
    use ganglion_contracts::tx::{Output, Value, encode_output};

    /// `job_quote`'s `pair` gives the full key hashes the no-fit text shortens, the limit by
    /// its field and the bound it misses (`docs/ensemble-spec.md`, the closest failing pair).
    #[test]
    fn a_quotes_failing_pair_has_the_full_key_hashes() {
        use ganglion_market::{Constraint, PairBound, PairFailure};
        let p = PairFailure {
            constraint: Constraint::MaxRtt,
            a: [1; 28],
            b: [2; 28],
            rtt_us: Some(2_000),
            mbps: None,
            bound: PairBound::MaxRttUs(1_000),
        };
        let json = serde_json::to_value(super::failing_pair(&p)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "limit": "placement.max_rtt_ms",
                "a": "01".repeat(28),
                "b": "02".repeat(28),
                "rtt_us": 2_000,
                "mbps": null,
                "max_rtt_us": 1_000,
                "min_mbps": null,
            })
        );
        let floor = PairFailure {
            constraint: Constraint::MinBandwidth,
            rtt_us: None,
            mbps: Some(400),
            bound: PairBound::MinMbps(1_000),
            ..p
        };
        let got = super::failing_pair(&floor);
        assert_eq!(
            (got.limit.as_str(), got.max_rtt_us, got.min_mbps),
            ("placement.min_bandwidth_mbps", None, Some(1_000))
        );
    }

    /// `JOB_STATES` is exactly the states of the two state machines.
    #[test]
    fn job_states_are_the_state_machines_states() {
        use crate::job::state::{OrchestratorState, ProviderState};
        for s in super::JOB_STATES {
            let json = serde_json::Value::String((*s).to_string());
            let o = serde_json::from_value::<OrchestratorState>(json.clone()).is_ok();
            let p = serde_json::from_value::<ProviderState>(json).is_ok();
            assert!(o || p, "{s} is no state");
        }
        assert_eq!(super::JOB_STATES.len(), 7 + 9 - 1, "assigned is in both");
    }
    use ganglion_rpc::types::{Amount, AmountParam};

    /// `shared/fixtures/field/README.md`, "Amounts over JSON-RPC": the largest output amount,
    /// 2^64 − 1, sent as a decimal string, reaches the CBOR of an output unrounded (coin and an
    /// asset quantity) and comes back out as the same string; one more is refused by name.
    #[test]
    fn the_largest_amount_round_trips_from_json_into_output_cbor_and_back() {
        let p: AmountParam = serde_json::from_str("\"18446744073709551615\"").expect("json");
        let a = p.parse("lovelace").expect("an amount");
        let mut address = vec![0x60];
        address.extend_from_slice(&[7u8; 28]);
        let out = Output::new(
            address,
            Value::lovelace(a.get()).with([9u8; 28], b"NTX", a.get()),
        );
        let cbor = encode_output(&out).expect("cbor");
        let decoded = pallas_traverse::MultiEraOutput::decode(pallas_traverse::Era::Conway, &cbor)
            .expect("decodes");
        let back = Output::from_chain(&decoded);
        assert_eq!(back.value.lovelace, u64::MAX);
        assert_eq!(back.value.quantity(&[9u8; 28], b"NTX"), u64::MAX);
        assert_eq!(
            serde_json::to_value(Amount::from(back.value.lovelace)).expect("json"),
            serde_json::json!("18446744073709551615")
        );

        let over: AmountParam = serde_json::from_str("\"18446744073709551616\"").expect("json");
        let e = over.parse("lovelace").expect_err("refused");
        assert_eq!(e.field, "lovelace");
        assert_eq!(e.rule, ganglion_rpc::amount::AmountRule::TooLarge);
    }

    /// A spec (`job_submit`, `job_quote`, `job_buildLock`) with `budget` and `rate` as its NTX
    /// amounts, written as given (strings or JSON numbers).
    fn spec_with(budget: serde_json::Value, rate: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "image": { "local": "img" },
            "command": ["run"],
            "gpus": { "count": 1 },
            "limits": { "max_duration_s": 60, "max_rate_ntx_per_gpu_hour": rate },
            "budget_ntx": budget,
            "deadline_ms": 99_999_999_999_999_u64,
        })
    }

    /// `shared/fixtures/field/README.md`, "Amounts over JSON-RPC", for the NTX amounts inside
    /// a spec param: strings and integers are taken exactly (2^53 + 1 and 2^64 − 1 unrounded),
    /// and every refused form is the typed invalid-amount error (invalid params, `data.field`)
    /// naming the spec field.
    #[test]
    fn a_spec_params_ntx_amounts_are_strings_or_integers_and_bad_ones_name_the_field() {
        use serde_json::json;
        for (budget, rate, want) in [
            (json!("1000000"), json!("7"), (1_000_000, 7)),
            (json!(1_000_000), json!(7), (1_000_000, 7)),
            (
                json!("9007199254740993"),
                json!("18446744073709551615"),
                (9_007_199_254_740_993, u64::MAX),
            ),
        ] {
            let spec = super::spec_param(&spec_with(budget, rate)).expect("a spec");
            assert_eq!(
                (spec.budget_ntx, spec.limits.max_rate_ntx_per_gpu_hour),
                want
            );
        }
        let number =
            |text: &str| -> serde_json::Value { serde_json::from_str(text).expect("json") };
        for (value, rule) in [
            (json!(-1), "negative"),
            (json!("-1"), "negative"),
            (json!(1.5), "not_integer"),
            (json!("1.5"), "not_integer"),
            (number("1e3"), "not_integer"),
            (json!("1e3"), "not_integer"),
            (json!("+7"), "sign"),
            (json!("0x10"), "not_decimal"),
            (json!("18446744073709551616"), "too_large"),
            (number("18446744073709551616"), "too_large"),
        ] {
            for (spec, field) in [
                (spec_with(value.clone(), json!(7)), "budget_ntx"),
                (
                    spec_with(json!(1_000_000), value.clone()),
                    "limits.max_rate_ntx_per_gpu_hour",
                ),
            ] {
                let e = super::spec_param(&spec).expect_err("refused");
                assert_eq!(e.code(), ganglion_rpc::error::INVALID_PARAMS, "{value}");
                assert!(
                    e.message()
                        .starts_with(&format!("invalid amount for `{field}`: ")),
                    "{value}: {}",
                    e.message()
                );
                let data: serde_json::Value =
                    serde_json::from_str(e.data().expect("data").get()).expect("json");
                assert_eq!(data["field"], json!(field), "{value}");
                assert_eq!(data["rule"], json!(rule), "{value}");
            }
        }
        // A spec without its budget is still the spec parser's to name.
        let mut no_budget = spec_with(json!(1), json!(1));
        no_budget
            .as_object_mut()
            .expect("object")
            .remove("budget_ntx");
        let e = super::spec_param(&no_budget).expect_err("missing");
        assert!(e.message().contains("budget_ntx"), "{}", e.message());
    }
}
