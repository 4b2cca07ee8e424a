//! Chain objects as Blockfrost's JSON: outputs with their amounts, transactions, blocks.
//! Amounts are strings (Blockfrost's `quantity`), hashes hex, addresses bech32.

use pallas_codec::minicbor;
use pallas_crypto::hash::{Hash, Hasher};
use pallas_primitives::conway::{DatumOption, TransactionOutput};
use pallas_traverse::{MultiEraBlock, MultiEraTx};
use serde_json::{Value as Json, json};

use crate::ledger::phase1;
use crate::ledger::value::Value;
use crate::store::StoredBlock;

/// An output as the ledger stores it could not be read (a corrupt store, never user input).
#[derive(Debug, thiserror::Error)]
#[error("stored {what} cannot be decoded")]
pub struct Undecodable {
    /// What could not be read.
    pub what: &'static str,
}

/// Blockfrost's `amount`: `[{unit: "lovelace", quantity}, {unit: policy ‖ name (hex),
/// quantity}…]`, quantities as decimal strings.
pub fn amount(v: &Value) -> Json {
    let mut out = vec![json!({ "unit": "lovelace", "quantity": v.coin.to_string() })];
    for ((policy, name), q) in &v.assets {
        out.push(json!({
            "unit": format!("{}{}", hex::encode(policy), hex::encode(name)),
            "quantity": q.to_string(),
        }));
    }
    Json::Array(out)
}

/// What an output carries, decoded once for the renderers.
pub struct Output {
    /// The address, bech32 (`addr_test1…`), or hex when it has no bech32 form.
    pub address: String,
    /// Its value.
    pub value: Value,
    /// The datum's hash (also for an inline datum: blake2b-256 of its CBOR).
    pub data_hash: Option<Hash<32>>,
    /// An inline datum's CBOR.
    pub inline_datum: Option<Vec<u8>>,
    /// The reference script's hash.
    pub script_hash: Option<Hash<28>>,
}

impl Output {
    /// Decode a raw ledger output.
    ///
    /// # Errors
    /// [`Undecodable`].
    pub fn decode(raw: &[u8]) -> Result<Self, Undecodable> {
        let what = "output";
        let facts = phase1::output_facts(raw).map_err(|_| Undecodable { what })?;
        let out: TransactionOutput<'_> = minicbor::decode(raw).map_err(|_| Undecodable { what })?;
        let inline_datum = match &out {
            TransactionOutput::PostAlonzo(o) => match o.datum_option.as_deref() {
                Some(DatumOption::Data(d)) => Some(d.0.raw_cbor().to_vec()),
                _ => None,
            },
            TransactionOutput::Legacy(_) => None,
        };
        Ok(Self {
            address: bech32(&facts.address),
            value: facts.value,
            data_hash: facts
                .datum_hash
                .or_else(|| inline_datum.as_deref().map(Hasher::<256>::hash)),
            inline_datum,
            script_hash: facts.script_ref.map(|(h, _, _)| h),
        })
    }

    /// The fields every Blockfrost output shares.
    pub fn json(&self) -> serde_json::Map<String, Json> {
        let mut m = serde_json::Map::new();
        m.insert("address".into(), json!(self.address));
        m.insert("amount".into(), amount(&self.value));
        m.insert(
            "data_hash".into(),
            json!(self.data_hash.map(|h| h.to_string())),
        );
        m.insert(
            "inline_datum".into(),
            json!(self.inline_datum.as_deref().map(hex::encode)),
        );
        m.insert(
            "reference_script_hash".into(),
            json!(self.script_hash.map(|h| h.to_string())),
        );
        m
    }
}

/// Raw address bytes as bech32 (`addr_test1…`, `addr1…`), or hex when they are not a
/// Shelley address.
pub fn bech32(address: &[u8]) -> String {
    pallas_addresses::Address::from_bytes(address)
        .ok()
        .and_then(|a| a.to_bech32().ok())
        .unwrap_or_else(|| hex::encode(address))
}

/// Slot → POSIX seconds (Blockfrost's `block_time`, `time`).
pub fn time_s(config: &ganglion_cardano::time::SlotConfig, slot: u64) -> u64 {
    ganglion_cardano::time::slot_to_posix_ms(config, slot).unwrap_or(0) / 1000
}

/// A stored block decoded.
///
/// # Errors
/// [`Undecodable`].
pub fn decode_block(b: &StoredBlock) -> Result<MultiEraBlock<'_>, Undecodable> {
    MultiEraBlock::decode(&b.wrapped).map_err(|_| Undecodable { what: "block" })
}

/// Blockfrost's `/blocks/{hash_or_number}` object.
pub fn block(
    b: &StoredBlock,
    config: &ganglion_cardano::time::SlotConfig,
    epoch_length: u64,
    previous: Option<Hash<32>>,
    next: Option<Hash<32>>,
    tip_number: u64,
) -> Result<Json, Undecodable> {
    let decoded = decode_block(b)?;
    let txs = decoded.txs();
    let fees: u64 = txs.iter().filter_map(MultiEraTx::fee).sum();
    let output: u64 = txs
        .iter()
        .flat_map(|t| t.produces())
        .map(|(_, o)| o.value().coin())
        .sum();
    Ok(json!({
        "time": time_s(config, b.at.slot),
        "height": b.at.number,
        "hash": b.at.hash.to_string(),
        "slot": b.at.slot,
        "epoch": b.at.slot / epoch_length,
        "epoch_slot": b.at.slot % epoch_length,
        "slot_leader": null,
        "size": decoded.size(),
        "tx_count": txs.len(),
        "output": (!txs.is_empty()).then(|| output.to_string()),
        "fees": (!txs.is_empty()).then(|| fees.to_string()),
        "block_vrf": null,
        "op_cert": null,
        "op_cert_counter": null,
        "previous_block": previous.map(|h| h.to_string()),
        "next_block": next.map(|h| h.to_string()),
        "confirmations": tip_number.saturating_sub(b.at.number),
    }))
}

/// Blockfrost's `/txs/{hash}` object for `tx`, the `index`-th transaction of `b`.
pub fn tx(
    tx: &MultiEraTx<'_>,
    b: &StoredBlock,
    index: u32,
    config: &ganglion_cardano::time::SlotConfig,
) -> Json {
    let mut out = Value::default();
    for (_, o) in tx.produces() {
        if let Ok(facts) = phase1::output_facts(&o.encode()) {
            out.add(&facts.value);
        }
    }
    let count = |n: usize| json!(n);
    json!({
        "hash": tx.hash().to_string(),
        "block": b.at.hash.to_string(),
        "block_height": b.at.number,
        "block_time": time_s(config, b.at.slot),
        "slot": b.at.slot,
        "index": index,
        "output_amount": amount(&out),
        "fees": tx.fee().unwrap_or(0).to_string(),
        "deposit": "0",
        "size": tx.size(),
        "invalid_before": tx.validity_start().map(|s| s.to_string()),
        "invalid_hereafter": tx.ttl().map(|s| s.to_string()),
        "utxo_count": tx.consumes().len() + tx.produces().len(),
        "withdrawal_count": tx.withdrawals_sorted_set().len(),
        "mir_cert_count": 0,
        "delegation_count": 0,
        "stake_cert_count": 0,
        "pool_update_count": 0,
        "pool_retire_count": 0,
        "asset_mint_or_burn_count": count(tx.mints().iter().map(|p| p.assets().len()).sum()),
        "redeemer_count": tx.redeemers().len(),
        "valid_contract": tx.is_valid(),
    })
}
