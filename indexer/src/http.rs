//! The read API over HTTP (`ganglion-indexer serve`), in Blockfrost's conventions: JSON
//! bodies, amounts as strings, `?count=&page=&order=` paging, and errors as
//! `{"status_code", "error", "message"}` (Blockfrost's error object) — bad input is a 4xx,
//! never a 5xx or a panic.
//!
//! | route | answers |
//! |---|---|
//! | `GET /health` | `{"is_healthy": true}` when the store answers |
//! | `GET /tip` | the last block the follower committed: `{slot, hash, height}` |
//! | `GET /jobs?status=&count=&page=&order=` | jobs (id, orchestrator, status, GPUs, budget, paid), by job id |
//! | `GET /jobs/{id}` | a job: its plan (assignments), claims, payments, history, confirmations |
//! | `GET /providers/{key}` | a provider (28-byte key hash, hex): bonds, jobs, earnings, defaults, slashes |
//! | `GET /providers/{key}/payments?count=&page=` | its pay from claims, newest first: slot, transaction, job, NTX |
//! | `GET /matches/{pattern}` | Kupo's matches among the live escrows and bonds (the validator's address): [`ganglion_cardano::kupo`] |
//!
//! Every answer is read from the store as of the last commit: any number of `serve`
//! processes can answer beside one follower ([`crate::Indexer::reader`]).

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use ganglion_cardano::blockfrost::{ApiError, Paging, Window};
use ganglion_cardano::kupo;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Indexer;
use crate::store::Kv;
use crate::view::{JobStatus, JobView};

/// Confirmations after which an answer is final (`tentative: false`), blocks.
const DEPTH: u64 = 6;

type Answer = Result<axum::Json<Value>, ApiError>;

/// The routes over `indexer`.
pub fn router<S: Kv + 'static>(indexer: Arc<Indexer<S>>) -> Router {
    Router::new()
        .route("/health", get(health::<S>))
        .route("/tip", get(tip::<S>))
        .route("/jobs", get(jobs::<S>))
        .route("/jobs/{id}", get(job::<S>))
        .route("/providers/{key}", get(provider::<S>))
        .route("/providers/{key}/payments", get(payments::<S>))
        .route("/matches/{*pattern}", get(matches::<S>))
        .fallback(|| async { ApiError::component_not_found() })
        .with_state(indexer)
}

/// Serves [`router`] on `listener` until `stop` is cancelled.
///
/// # Errors
/// Accept errors of the listener.
pub async fn serve<S: Kv + 'static>(
    listener: tokio::net::TcpListener,
    indexer: Arc<Indexer<S>>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(indexer))
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}

/// Runs a store read off the async workers (the stores block).
async fn read<S: Kv + 'static, T: Send + 'static>(
    ix: Arc<Indexer<S>>,
    f: impl FnOnce(&Indexer<S>) -> crate::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || f(&ix))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| {
            tracing::warn!(error = %e, "indexer read failed");
            ApiError::new(503, format!("the index is unavailable: {e}"))
        })
}

fn to_json<T: Serialize>(v: &T) -> Answer {
    serde_json::to_value(v)
        .map(axum::Json)
        .map_err(ApiError::internal)
}

async fn health<S: Kv + 'static>(State(ix): State<Arc<Indexer<S>>>) -> Answer {
    read(ix, |ix| ix.tip()).await?;
    Ok(axum::Json(json!({ "is_healthy": true })))
}

async fn tip<S: Kv + 'static>(State(ix): State<Arc<Indexer<S>>>) -> Answer {
    match read(ix, |ix| ix.tip()).await? {
        Some(p) => to_json(&p),
        None => Err(ApiError::not_found("no block has been indexed yet")),
    }
}

/// `/jobs`' filter (beside [`Paging`]).
#[derive(Debug, Deserialize)]
struct StatusFilter {
    status: Option<String>,
}

fn status_named(s: &str) -> Option<JobStatus> {
    serde_json::from_value(Value::String(s.to_owned())).ok()
}

fn summary(v: &JobView) -> Value {
    json!({
        "job_id": v.job_id.to_string(),
        "orchestrator": hex::encode(v.orchestrator),
        "status": v.status,
        "gpus": v.gpus,
        "budget": v.budget.to_string(),
        "paid": v.paid().to_string(),
        "providers": v.assignments.iter().map(|a| hex::encode(a.provider)).collect::<Vec<_>>(),
    })
}

async fn jobs<S: Kv + 'static>(
    State(ix): State<Arc<Indexer<S>>>,
    query: Result<Query<Paging>, QueryRejection>,
    filter: Result<Query<StatusFilter>, QueryRejection>,
) -> Answer {
    let Query(paging) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Query(filter) = filter.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Window {
        skip,
        take,
        descending,
    } = paging.window()?;
    let status = match filter.status.as_deref() {
        None => None,
        Some(s) => Some(status_named(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "status must be one of Locked, Assigned, Claiming, Claimed, Cancelled, Expired; not {s:?}"
            ))
        })?),
    };
    let views = read(ix, move |ix| ix.jobs_page(status, skip, take, descending)).await?;
    let page: Vec<Value> = views.iter().map(summary).collect();
    Ok(axum::Json(Value::Array(page)))
}

fn job_id(s: &str) -> Result<JobId, ApiError> {
    hex::decode(s)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .map(JobId)
        .ok_or_else(|| ApiError::bad_request(format!("{s:?} is not a job id (32 bytes, hex)")))
}

fn key_hash(s: &str) -> Result<KeyHash, ApiError> {
    hex::decode(s)
        .ok()
        .and_then(|b| KeyHash::try_from(b).ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!("{s:?} is not a provider key hash (28 bytes, hex)"))
        })
}

async fn job<S: Kv + 'static>(State(ix): State<Arc<Indexer<S>>>, Path(id): Path<String>) -> Answer {
    let id = job_id(&id)?;
    match read(ix, move |ix| ix.job(&id, DEPTH)).await? {
        Some(c) => {
            let mut v = to_json(&c.value)?.0;
            if let Value::Object(m) = &mut v {
                m.insert("paid".into(), Value::String(c.value.paid().to_string()));
                m.insert("confirmations".into(), json!(c.confirmations));
                m.insert("tentative".into(), json!(c.tentative));
            }
            Ok(axum::Json(v))
        }
        None => Err(ApiError::not_found(format!(
            "job {id} is not on this chain"
        ))),
    }
}

async fn provider<S: Kv + 'static>(
    State(ix): State<Arc<Indexer<S>>>,
    Path(key): Path<String>,
) -> Answer {
    let key = key_hash(&key)?;
    let summary = read(ix, move |ix| ix.provider(&key)).await?;
    let mut v = to_json(&summary)?.0;
    if let Value::Object(m) = &mut v {
        m.insert(
            "earnings".into(),
            Value::String(summary.earnings.to_string()),
        );
        m.insert("slashed".into(), Value::String(summary.slashed.to_string()));
    }
    Ok(axum::Json(v))
}

async fn payments<S: Kv + 'static>(
    State(ix): State<Arc<Indexer<S>>>,
    Path(key): Path<String>,
    query: Result<Query<Paging>, QueryRejection>,
) -> Answer {
    let key = key_hash(&key)?;
    let Query(paging) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Window {
        skip,
        take,
        descending,
    } = paging.window()?;
    if !descending && paging.order.is_some() {
        return Err(ApiError::bad_request(
            "payments are listed newest first: order=desc or no order",
        ));
    }
    let page = read(ix, move |ix| ix.payments_to(&key, skip, take)).await?;
    let rows: Vec<Value> = page
        .iter()
        .map(|p| {
            json!({
                "slot": p.slot,
                "tx_hash": hex::encode(p.tx_hash),
                "tx_index": p.tx_index,
                "job_id": p.job_id.to_string(),
                "ntx": p.ntx.to_string(),
            })
        })
        .collect();
    Ok(axum::Json(Value::Array(rows)))
}

/// Kupo's `/matches` over the escrows and bonds the index holds (as a Kupo run with
/// `--prune-utxo` on the validator's address answers).
async fn matches<S: Kv + 'static>(
    State(ix): State<Arc<Indexer<S>>>,
    Path(pattern): Path<String>,
    query: Result<Query<kupo::MatchQuery>, QueryRejection>,
) -> Answer {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let pattern: kupo::Pattern = pattern.parse().map_err(ApiError::bad_request)?;
    let oldest_first = kupo::oldest_first(q.order.as_deref()).map_err(ApiError::bad_request)?;
    if q.spent.is_some() {
        return Ok(axum::Json(json!([])));
    }
    let live = read(ix, |ix| ix.live_utxos()).await?;
    let all = live.iter().filter_map(|t| t.to_match()).collect();
    Ok(axum::Json(kupo::answer(&pattern, all, oldest_first)))
}
