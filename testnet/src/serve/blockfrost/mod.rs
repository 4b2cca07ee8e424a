//! The devnet's HTTP API in Blockfrost's conventions (`ganglion-devnet up --http`), so that
//! a wallet or a dApp library's Blockfrost provider can be pointed at the devnet unchanged:
//! the subset a CIP-30 dApp needs to build, evaluate, submit and follow a transaction, and
//! Kupo's `/matches`.
//!
//! | route | answers |
//! |---|---|
//! | `GET /health` | `{"is_healthy": true}` |
//! | `GET /blocks/latest`, `GET /blocks/{hash or height}` | a block (height, slot, time, size, txs, fees, neighbours, confirmations) |
//! | `GET /epochs/latest/parameters` | the ledger's protocol parameters ([`params`]) |
//! | `GET /addresses/{bech32}/utxos?count=&page=&order=` | the address's unspent outputs, oldest first |
//! | `GET /txs/{hash}` | a transaction on the chain: block, slot, index, fees, size, validity, counts |
//! | `GET /txs/{hash}/utxos` | its inputs (resolved: address, amount, datum; collateral and reference flagged) and outputs (with `consumed_by_tx`) |
//! | `GET /txs/{hash}/metadata/cbor` | its metadata by label (what wallets poll to see a transaction confirmed) |
//! | `GET /scripts/{hash}`, `GET /scripts/{hash}/cbor` | a reference script held by an unspent output: its type, its bytes |
//! | `POST /tx/submit` | `Content-Type: application/cbor`, the signed transaction's bytes → its id (a JSON string); a rejection is a 400 naming the ledger rule |
//! | `POST /utils/txs/evaluate` | a transaction (hex or bytes) → each redeemer's ExUnits ([`evaluate`]) |
//! | `POST /utils/txs/evaluate/utxos` | `{cbor, additionalUtxoset}` → the same, with outputs not on the chain yet |
//! | `GET /matches/{pattern}` | Kupo's matches over the unspent outputs ([`kupo`]) |
//!
//! Amounts are strings where Blockfrost has strings; every error is Blockfrost's
//! `{"status_code", "error", "message"}` with a 4xx for bad input (never a 5xx or a panic).
//! A path with doubled slashes (`…/api//tx/submit`, as clients that join a base URL ending
//! in `/` send) is read as if single. Only confirmed blocks are answered, except that
//! evaluation also sees the mempool's outputs, as submission does.

pub mod evaluate;
pub mod params;
pub mod render;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, header};
use axum::routing::{get, post};
use pallas_primitives::conway::{ScriptRef, TransactionOutput};
use pallas_traverse::MultiEraTx;
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;

use ganglion_cardano::blockfrost::{ApiError, Paging, Window};
use ganglion_cardano::kupo;
use ganglion_cardano::txo::TxoRef;

use crate::chain::Chain;
use crate::genesis::Genesis;
use crate::store::StoredBlock;
use render::Output;

type Answer = Result<axum::Json<Json>, ApiError>;

/// What the routes read: the chain and the genesis outputs (which no block carries).
pub struct Api {
    chain: Arc<Chain>,
    genesis_outputs: BTreeMap<TxoRef, Vec<u8>>,
}

impl Api {
    /// The API over `chain`, started from `genesis`.
    ///
    /// # Errors
    /// [`crate::genesis::GenesisError`] when the genesis outputs cannot be built.
    pub fn new(chain: Arc<Chain>, genesis: &Genesis) -> Result<Self, crate::genesis::GenesisError> {
        Ok(Self {
            chain,
            genesis_outputs: genesis.initial_utxos()?.into_iter().collect(),
        })
    }

    fn block(&self, number: u64) -> Result<Option<StoredBlock>, ApiError> {
        self.chain.store().block(number).map_err(ApiError::internal)
    }

    /// The raw output at `r`, wherever it is: genesis, or produced by a transaction on the
    /// chain (spent or not).
    fn output(&self, r: &TxoRef) -> Result<Option<Vec<u8>>, ApiError> {
        if let Some(o) = self.genesis_outputs.get(r) {
            return Ok(Some(o.clone()));
        }
        let Some((block, index)) = self.place(&r.tx_hash)? else {
            return Ok(None);
        };
        let decoded = render::decode_block(&block).map_err(ApiError::internal)?;
        let txs = decoded.txs();
        Ok(txs
            .get(index as usize)
            .and_then(|tx| tx.produces_at(r.index as usize))
            .map(|o| o.encode()))
    }

    /// The block holding transaction `id` and its position there.
    fn place(&self, id: &[u8]) -> Result<Option<(StoredBlock, u32)>, ApiError> {
        let store = self.chain.store();
        let Some(place) = store.tx_place(id).map_err(ApiError::internal)? else {
            return Ok(None);
        };
        Ok(self.block(place.block)?.map(|b| (b, place.index)))
    }

    /// The unspent output `raw` at `r` as Kupo shows it, with the block that created it.
    fn kupo_match(&self, r: TxoRef, raw: &[u8]) -> Result<kupo::Match, ApiError> {
        let facts = crate::ledger::phase1::output_facts(raw).map_err(ApiError::internal)?;
        let out = Output::decode(raw).map_err(ApiError::internal)?;
        let created = match self
            .chain
            .store()
            .tx_place(&r.tx_hash)
            .map_err(ApiError::internal)?
        {
            Some(p) => self.block(p.block)?.map(|b| kupo::Created {
                slot: b.at.slot,
                header_hash: *b.at.hash,
                tx_index: p.index,
            }),
            None => None,
        };
        let whole = |q: i128| u64::try_from(q).map_err(ApiError::internal);
        Ok(kupo::Match {
            reference: r,
            address: facts.address,
            coins: whole(facts.value.coin)?,
            assets: facts
                .value
                .assets
                .into_iter()
                .map(|(k, q)| Ok((k, whole(q)?)))
                .collect::<Result<_, ApiError>>()?,
            datum_hash: out.data_hash.map(|h| *h),
            inline_datum: out.inline_datum.is_some(),
            script_hash: out.script_hash.map(|h| *h),
            created,
        })
    }
}

/// The routes over `api`. Serve it through [`serve`] (which also reads doubled slashes).
pub fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(json!({ "is_healthy": true })) }),
        )
        .route("/blocks/latest", get(latest_block))
        .route("/blocks/{id}", get(block))
        .route("/epochs/latest/parameters", get(parameters))
        .route("/addresses/{address}/utxos", get(address_utxos))
        .route("/txs/{hash}", get(tx))
        .route("/txs/{hash}/utxos", get(tx_utxos))
        .route("/txs/{hash}/metadata/cbor", get(tx_metadata))
        .route("/scripts/{hash}", get(script))
        .route("/scripts/{hash}/cbor", get(script_cbor))
        .route("/tx/submit", post(submit))
        .route("/utils/txs/evaluate", post(evaluate_tx))
        .route("/utils/txs/evaluate/utxos", post(evaluate_with_utxos))
        .route("/matches/{*pattern}", get(matches))
        .fallback(|| async { ApiError::component_not_found() })
        .with_state(api)
}

/// Serves [`router`] on `listener` until `stop` is cancelled.
///
/// # Errors
/// Accept errors of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    api: Arc<Api>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let app = router(api).map_request(single_slashes);
    axum::serve(listener, axum::ServiceExt::into_make_service(app))
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}

/// The request with runs of `/` in its path read as one.
fn single_slashes(mut req: Request) -> Request {
    let uri = req.uri();
    if !uri.path().contains("//") {
        return req;
    }
    let mut path = String::with_capacity(uri.path().len());
    for c in uri.path().chars() {
        if !(c == '/' && path.ends_with('/')) {
            path.push(c);
        }
    }
    let with_query = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    if let Ok(pq) = with_query.parse::<axum::http::uri::PathAndQuery>() {
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = Some(pq);
        if let Ok(u) = axum::http::Uri::from_parts(parts) {
            *req.uri_mut() = u;
        }
    }
    req
}

/// Runs `f` off the async workers (sled reads, ledger evaluation).
async fn blocking<T: Send + 'static>(
    api: Arc<Api>,
    f: impl FnOnce(&Api) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || f(&api))
        .await
        .map_err(ApiError::internal)?
}

fn hash32(s: &str, what: &str) -> Result<[u8; 32], ApiError> {
    hex::decode(s)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!("Invalid {what}: {s:?} is not 32 bytes of hex"))
        })
}

fn hash28(s: &str) -> Result<[u8; 28], ApiError> {
    hex::decode(s)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!("Invalid script hash: {s:?} is not 28 bytes of hex"))
        })
}

fn block_json(api: &Api, b: &StoredBlock) -> Answer {
    let store = api.chain.store();
    let tip = store
        .tip()
        .map_err(ApiError::internal)?
        .map_or(0, |t| t.number);
    let previous = match b.at.number {
        0 | 1 => None,
        n => api.block(n - 1)?.map(|p| p.at.hash),
    };
    let next = api.block(b.at.number + 1)?.map(|n| n.at.hash);
    render::block(
        b,
        &api.chain.rules().slot_config,
        params::EPOCH_LENGTH,
        previous,
        next,
        tip,
    )
    .map(axum::Json)
    .map_err(ApiError::internal)
}

async fn latest_block(State(api): State<Arc<Api>>) -> Answer {
    blocking(api, |api| {
        let tip = api.chain.store().tip().map_err(ApiError::internal)?;
        let b = match tip {
            Some(t) => api.block(t.number)?,
            None => None,
        }
        .ok_or_else(|| ApiError::not_found("no block has been forged yet"))?;
        block_json(api, &b)
    })
    .await
}

async fn block(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Answer {
    let number = id.parse::<u64>().ok();
    let hash = match number {
        Some(_) => None,
        None => Some(hash32(&id, "block hash or number")?),
    };
    blocking(api, move |api| {
        let number = match (number, hash) {
            (Some(n), _) => Some(n),
            (None, Some(h)) => api
                .chain
                .store()
                .number_of(&h)
                .map_err(ApiError::internal)?,
            (None, None) => None,
        };
        let b = match number {
            Some(n) => api.block(n)?,
            None => None,
        }
        .ok_or_else(ApiError::component_not_found)?;
        block_json(api, &b)
    })
    .await
}

async fn parameters(State(api): State<Arc<Api>>) -> Answer {
    let slot = api.chain.tip().map_or(0, |t| t.slot);
    Ok(axum::Json(params::parameters(
        &api.chain.rules().params,
        slot / params::EPOCH_LENGTH,
    )))
}

/// Decode a bech32 address given in a path.
fn address_bytes(s: &str) -> Result<Vec<u8>, ApiError> {
    pallas_addresses::Address::from_bech32(s)
        .map(|a| a.to_vec())
        .map_err(|_| ApiError::bad_request(format!("Invalid address for this network: {s:?}")))
}

async fn address_utxos(
    State(api): State<Arc<Api>>,
    Path(address): Path<String>,
    query: Result<Query<Paging>, QueryRejection>,
) -> Answer {
    let Query(paging) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Window {
        skip,
        take,
        descending,
    } = paging.window()?;
    let bytes = address_bytes(&address)?;
    blocking(api, move |api| {
        let utxos = api.chain.utxos_at(&bytes).map_err(ApiError::internal)?;
        // Oldest first: (block, position in the block, output index); genesis outputs first.
        let mut placed = Vec::with_capacity(utxos.len());
        for (r, raw) in utxos {
            let place = api
                .chain
                .store()
                .tx_place(&r.tx_hash)
                .map_err(ApiError::internal)?;
            let block = match place {
                Some(p) => api.block(p.block)?.map(|b| b.at.hash),
                None => None,
            };
            let key = place.map(|p| (p.block, p.index));
            placed.push((key, r, raw, block));
        }
        placed.sort_by_key(|(key, r, _, _)| (*key, r.index, r.tx_hash));
        if descending {
            placed.reverse();
        }
        let page: Vec<Json> = placed
            .into_iter()
            .skip(skip)
            .take(take)
            .map(|(_, r, raw, block)| {
                let out = Output::decode(&raw).map_err(ApiError::internal)?;
                let mut m = out.json();
                m.insert("tx_hash".into(), json!(hex::encode(r.tx_hash)));
                m.insert("tx_index".into(), json!(r.index));
                m.insert("output_index".into(), json!(r.index));
                m.insert("block".into(), json!(block.map(|h| h.to_string())));
                Ok(Json::Object(m))
            })
            .collect::<Result<_, ApiError>>()?;
        Ok(axum::Json(Json::Array(page)))
    })
    .await
}

/// Runs `f` on transaction `hash` of the chain, a 404 when it is not on it.
async fn with_tx(
    api: Arc<Api>,
    hash: String,
    f: impl FnOnce(&Api, &MultiEraTx<'_>, &StoredBlock, u32) -> Answer + Send + 'static,
) -> Answer {
    let id = hash32(&hash, "transaction hash")?;
    blocking(api, move |api| {
        let (block, index) = api.place(&id)?.ok_or_else(ApiError::component_not_found)?;
        let decoded = render::decode_block(&block).map_err(ApiError::internal)?;
        let txs = decoded.txs();
        let tx = txs
            .get(index as usize)
            .ok_or_else(|| ApiError::internal("the transaction index points past its block"))?;
        f(api, tx, &block, index)
    })
    .await
}

async fn tx(State(api): State<Arc<Api>>, Path(hash): Path<String>) -> Answer {
    with_tx(api, hash, |api, tx, block, index| {
        Ok(axum::Json(render::tx(
            tx,
            block,
            index,
            &api.chain.rules().slot_config,
        )))
    })
    .await
}

async fn tx_utxos(State(api): State<Arc<Api>>, Path(hash): Path<String>) -> Answer {
    with_tx(api, hash, |api, tx, _, _| {
        let mut inputs = Vec::new();
        let groups = [
            (tx.inputs(), false, false),
            (tx.collateral(), true, false),
            (tx.reference_inputs(), false, true),
        ];
        for (list, collateral, reference) in groups {
            for i in list {
                let r = TxoRef {
                    tx_hash: **i.hash(),
                    index: i.index(),
                };
                let raw = api
                    .output(&r)?
                    .ok_or_else(|| ApiError::internal(format!("input {r} is not on the chain")))?;
                let mut m = Output::decode(&raw).map_err(ApiError::internal)?.json();
                m.insert("tx_hash".into(), json!(hex::encode(r.tx_hash)));
                m.insert("output_index".into(), json!(r.index));
                m.insert("collateral".into(), json!(collateral));
                m.insert("reference".into(), json!(reference));
                inputs.push(Json::Object(m));
            }
        }
        let id = tx.hash();
        let mut outputs = Vec::new();
        for (index, o) in tx.produces() {
            let r = TxoRef {
                tx_hash: *id,
                index: index as u64,
            };
            let mut m = Output::decode(&o.encode())
                .map_err(ApiError::internal)?
                .json();
            m.insert("output_index".into(), json!(index));
            m.insert("collateral".into(), json!(!tx.is_valid()));
            let spent = api.chain.store().spent_by(&r).map_err(ApiError::internal)?;
            m.insert("consumed_by_tx".into(), json!(spent.map(|h| h.to_string())));
            outputs.push(Json::Object(m));
        }
        Ok(axum::Json(json!({
            "hash": id.to_string(),
            "inputs": inputs,
            "outputs": outputs,
        })))
    })
    .await
}

async fn tx_metadata(State(api): State<Arc<Api>>, Path(hash): Path<String>) -> Answer {
    with_tx(api, hash, |_, tx, _, _| {
        let entries: Vec<Json> = tx
            .metadata()
            .as_alonzo()
            .map(|m| {
                m.iter()
                    .map(|(label, datum)| {
                        let cbor = pallas_codec::minicbor::to_vec(datum).unwrap_or_default();
                        json!({ "label": label.to_string(), "metadata": hex::encode(cbor) })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(axum::Json(Json::Array(entries)))
    })
    .await
}

/// The reference script `hash` held by an unspent output: its Blockfrost type and bytes.
fn find_script(api: &Api, hash: [u8; 28]) -> Result<(&'static str, Vec<u8>), ApiError> {
    let utxos = api.chain.store().utxos().map_err(ApiError::internal)?;
    for (_, raw) in utxos {
        let Ok(TransactionOutput::PostAlonzo(o)) =
            pallas_codec::minicbor::decode::<TransactionOutput<'_>>(&raw)
        else {
            continue;
        };
        let Some(script) = o.script_ref.as_deref() else {
            continue;
        };
        let facts = crate::ledger::phase1::output_facts(&raw).map_err(ApiError::internal)?;
        if facts.script_ref.is_none_or(|(h, _, _)| *h != hash) {
            continue;
        }
        return Ok(match script {
            ScriptRef::NativeScript(n) => ("timelock", n.raw_cbor().to_vec()),
            ScriptRef::PlutusV1Script(p) => ("plutusV1", p.as_ref().to_vec()),
            ScriptRef::PlutusV2Script(p) => ("plutusV2", p.as_ref().to_vec()),
            ScriptRef::PlutusV3Script(p) => ("plutusV3", p.as_ref().to_vec()),
        });
    }
    Err(ApiError::not_found(
        "The requested component has not been found.",
    ))
}

async fn script(State(api): State<Arc<Api>>, Path(hash): Path<String>) -> Answer {
    let h = hash28(&hash)?;
    blocking(api, move |api| {
        let (kind, bytes) = find_script(api, h)?;
        Ok(axum::Json(json!({
            "script_hash": hex::encode(h),
            "type": kind,
            "serialised_size": bytes.len(),
        })))
    })
    .await
}

async fn script_cbor(State(api): State<Arc<Api>>, Path(hash): Path<String>) -> Answer {
    let h = hash28(&hash)?;
    blocking(api, move |api| {
        let (_, bytes) = find_script(api, h)?;
        Ok(axum::Json(json!({ "cbor": hex::encode(bytes) })))
    })
    .await
}

async fn submit(State(api): State<Arc<Api>>, headers: HeaderMap, body: Bytes) -> Answer {
    let cbor = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/cbor"));
    if !cbor {
        return Err(ApiError::new(
            415,
            "Content-Type must be application/cbor (the transaction's bytes)",
        ));
    }
    let chain = api.chain.clone();
    let id = tokio::task::spawn_blocking(move || chain.submit(&body))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::bad_request(format!("transaction submit error: {e}")))?;
    Ok(axum::Json(json!(id.to_string())))
}

/// A 400 unless `bytes` is one Conway transaction.
fn check_tx(bytes: &[u8]) -> Result<(), ApiError> {
    crate::ledger::decode_tx(bytes)
        .map(|_| ())
        .map_err(|e| ApiError::bad_request(format!("not a transaction: {e}")))
}

async fn evaluate_tx(State(api): State<Arc<Api>>, body: Bytes) -> Answer {
    let bytes = evaluate::tx_bytes(&body);
    check_tx(&bytes)?;
    blocking(api, move |api| {
        Ok(axum::Json(evaluate::answer(
            api.chain.evaluate(&bytes, &[]),
        )))
    })
    .await
}

async fn evaluate_with_utxos(
    State(api): State<Arc<Api>>,
    body: Result<axum::Json<evaluate::WithUtxos>, JsonRejection>,
) -> Answer {
    let axum::Json(req) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let bytes = hex::decode(req.cbor.trim())
        .map_err(|_| ApiError::bad_request("cbor must be the transaction in hex"))?;
    check_tx(&bytes)?;
    let additional = req
        .additional
        .iter()
        .map(|(i, o)| Ok((i.to_ref()?, o.to_ledger()?)))
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| ApiError::bad_request(format!("additionalUtxoset: {e}")))?;
    blocking(api, move |api| {
        Ok(axum::Json(evaluate::answer(
            api.chain.evaluate(&bytes, &additional),
        )))
    })
    .await
}

async fn matches(
    State(api): State<Arc<Api>>,
    Path(pattern): Path<String>,
    query: Result<Query<kupo::MatchQuery>, QueryRejection>,
) -> Answer {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let pattern: kupo::Pattern = pattern.parse().map_err(ApiError::bad_request)?;
    let oldest_first = kupo::oldest_first(q.order.as_deref()).map_err(ApiError::bad_request)?;
    if q.spent.is_some() {
        // Spent outputs are not kept (Kupo's `--prune-utxo`).
        return Ok(axum::Json(json!([])));
    }
    blocking(api, move |api| {
        let utxos = api.chain.store().utxos().map_err(ApiError::internal)?;
        let all = utxos
            .into_iter()
            .map(|(r, raw)| api.kupo_match(r, &raw))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(axum::Json(kupo::answer(&pattern, all, oldest_first)))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubled_slashes_are_read_as_one() {
        let req = Request::builder()
            .uri("http://h/api//tx//submit?x=1")
            .body(axum::body::Body::empty())
            .expect("request");
        assert_eq!(
            single_slashes(req)
                .uri()
                .path_and_query()
                .map(|p| p.as_str()),
            Some("/api/tx/submit?x=1")
        );
    }

    #[test]
    fn hashes_in_paths_are_checked() {
        assert!(hash32("zz", "x").is_err());
        assert!(hash32(&"ab".repeat(28), "x").is_err());
        assert!(hash28(&"ab".repeat(28)).is_ok());
    }
}
