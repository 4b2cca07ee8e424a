//! `/utils/txs/evaluate` and `/utils/txs/evaluate/utxos`: each redeemer's ExUnits, in the
//! Ogmios v5 `EvaluateTx` response Blockfrost relays (`{"result": {"EvaluationResult":
//! {"spend:0": {"memory", "steps"}}}}`, or `{"result": {"EvaluationFailure": …}}`), and the
//! `additionalUtxoset` of the second route (outputs not on the chain yet, as Blaze and Lucid
//! send them) decoded into ledger outputs.

use pallas_codec::minicbor;
use serde::Deserialize;
use serde_json::{Value as Json, json};

use ganglion_cardano::txo::TxoRef;

use crate::ledger::Rejection;
use crate::ledger::phase2::ScriptRun;

/// A request's transaction: hex text (Blockfrost's documented body) or raw CBOR bytes.
pub fn tx_bytes(body: &[u8]) -> Vec<u8> {
    let text = body.trim_ascii();
    match std::str::from_utf8(text)
        .ok()
        .and_then(|t| hex::decode(t).ok())
    {
        Some(bytes) if !bytes.is_empty() => bytes,
        _ => body.to_vec(),
    }
}

/// The Ogmios v5 envelope around `result`.
fn envelope(result: Json) -> Json {
    json!({
        "type": "jsonwsp/response",
        "version": "1.0",
        "servicename": "ogmios",
        "methodname": "EvaluateTx",
        "result": result,
        "reflection": null,
    })
}

/// The answer for an evaluation: the measured units, or why it failed.
pub fn answer(outcome: Result<Vec<ScriptRun>, Rejection>) -> Json {
    match outcome {
        Ok(runs) => {
            let units: serde_json::Map<String, Json> = runs
                .into_iter()
                .map(|r| {
                    let v = json!({ "memory": r.actual.mem, "steps": r.actual.steps });
                    (r.redeemer, v)
                })
                .collect();
            envelope(json!({ "EvaluationResult": units }))
        }
        Err(Rejection::PlutusScriptFailed {
            redeemer,
            reason,
            logs,
        }) => envelope(json!({ "EvaluationFailure": { "ScriptFailures": {
            redeemer: [{ "validatorFailed": { "error": reason, "traces": logs } }]
        } } })),
        Err(Rejection::BadInputsUTxO { inputs }) => {
            let unknown: Vec<Json> = inputs
                .iter()
                .map(|r| json!({ "txId": hex::encode(r.tx_hash), "index": r.index }))
                .collect();
            envelope(json!({ "EvaluationFailure": { "UnknownInputs": unknown } }))
        }
        Err(other) => envelope(json!({ "EvaluationFailure": {
            "CannotCreateEvaluationContext": { "rule": other.rule(), "reason": other.to_string() }
        } })),
    }
}

/// The body of `/utils/txs/evaluate/utxos`.
#[derive(Debug, Deserialize)]
pub struct WithUtxos {
    /// The transaction, hex.
    pub cbor: String,
    /// Outputs to resolve inputs against besides the chain's: `[[input, output]…]`.
    #[serde(default, rename = "additionalUtxoset", alias = "additionalUtxoSet")]
    pub additional: Vec<(InputJson, OutputJson)>,
}

/// An output reference, Ogmios v5.
#[derive(Debug, Deserialize)]
pub struct InputJson {
    /// Transaction id, hex.
    #[serde(rename = "txId")]
    pub tx_id: String,
    /// Output index.
    pub index: u64,
}

/// An output, Ogmios v5 (`datumHash`) or as Blaze sends it (`datum_hash`).
#[derive(Debug, Deserialize)]
pub struct OutputJson {
    /// Address, bech32.
    pub address: String,
    /// `{coins, assets: {"policy.name": quantity}}`.
    pub value: ValueJson,
    /// Datum hash, hex.
    #[serde(default, alias = "datumHash")]
    pub datum_hash: Option<String>,
    /// Inline datum, CBOR hex.
    #[serde(default)]
    pub datum: Option<String>,
    /// Reference script: a script's CBOR `[language, bytes]` as hex, or Ogmios'
    /// `{"plutus:v1" | "plutus:v2" | "plutus:v3": bytes hex}`.
    #[serde(default)]
    pub script: Option<Json>,
}

/// A value, Ogmios v5.
#[derive(Debug, Deserialize)]
pub struct ValueJson {
    /// Lovelace (a number or a decimal string).
    pub coins: Json,
    /// Native assets by `policy.name` (or `policy` for the empty name), hex.
    #[serde(default)]
    pub assets: Option<serde_json::Map<String, Json>>,
}

fn number(v: &Json, what: &str) -> Result<u64, String> {
    match v {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("{what} must be a non-negative integer"))
}

fn hex_field(s: &str, what: &str) -> Result<Vec<u8>, String> {
    hex::decode(s).map_err(|_| format!("{what} is not hex"))
}

/// A reference script as the ledger's `script_ref` content: `[language tag, bytes]` CBOR.
fn script_cbor(v: &Json) -> Result<Vec<u8>, String> {
    if let Some(s) = v.as_str() {
        return hex_field(s, "script");
    }
    let obj = v
        .as_object()
        .ok_or("script must be hex or {\"plutus:vN\": hex}")?;
    let (tag, bytes) = match obj.iter().next() {
        Some((k, Json::String(b))) if k == "plutus:v1" => (1u8, b),
        Some((k, Json::String(b))) if k == "plutus:v2" => (2, b),
        Some((k, Json::String(b))) if k == "plutus:v3" => (3, b),
        _ => return Err("script: only plutus:v1, plutus:v2 and plutus:v3 are accepted".into()),
    };
    let bytes = hex_field(bytes, "script")?;
    let mut out = Vec::new();
    let mut e = minicbor::Encoder::new(&mut out);
    e.array(2)
        .and_then(|e| e.u8(tag))
        .and_then(|e| e.bytes(&bytes))
        .map_err(|e| e.to_string())?;
    Ok(out)
}

impl OutputJson {
    /// The ledger output (Babbage map form) this describes.
    ///
    /// # Errors
    /// A message naming the field that is not well-formed.
    pub fn to_ledger(&self) -> Result<Vec<u8>, String> {
        let address = pallas_addresses::Address::from_bech32(&self.address)
            .map_err(|_| format!("{} is not a bech32 address", self.address))?
            .to_vec();
        let coins = number(&self.value.coins, "value.coins")?;
        let mut assets: std::collections::BTreeMap<Vec<u8>, Vec<(Vec<u8>, u64)>> =
            Default::default();
        for (unit, q) in self.value.assets.iter().flatten() {
            let (policy, name) = unit.split_once('.').unwrap_or((unit, ""));
            let policy = hex_field(policy, "asset policy")?;
            if policy.len() != 28 {
                return Err(format!("asset {unit}: a policy id is 28 bytes"));
            }
            let name = hex_field(name, "asset name")?;
            assets
                .entry(policy)
                .or_default()
                .push((name, number(q, "asset quantity")?));
        }
        let datum = match (&self.datum, &self.datum_hash) {
            (Some(d), _) => Some((1u8, hex_field(d, "datum")?)),
            (None, Some(h)) => Some((0, hex_field(h, "datum_hash")?)),
            (None, None) => None,
        };
        let script = self.script.as_ref().map(script_cbor).transpose()?;
        let mut out = Vec::new();
        let mut e = minicbor::Encoder::new(&mut out);
        let fields = 2 + u64::from(datum.is_some()) + u64::from(script.is_some());
        (|| -> Result<(), minicbor::encode::Error<std::convert::Infallible>> {
            e.map(fields)?.u8(0)?.bytes(&address)?.u8(1)?;
            if assets.is_empty() {
                e.u64(coins)?;
            } else {
                e.array(2)?.u64(coins)?.map(assets.len() as u64)?;
                for (policy, names) in &assets {
                    e.bytes(policy)?.map(names.len() as u64)?;
                    for (name, q) in names {
                        e.bytes(name)?.u64(*q)?;
                    }
                }
            }
            match &datum {
                Some((0, h)) => {
                    e.u8(2)?.array(2)?.u8(0)?.bytes(h)?;
                }
                Some((_, d)) => {
                    e.u8(2)?
                        .array(2)?
                        .u8(1)?
                        .tag(minicbor::data::Tag::new(24))?
                        .bytes(d)?;
                }
                None => {}
            }
            if let Some(s) = &script {
                e.u8(3)?.tag(minicbor::data::Tag::new(24))?.bytes(s)?;
            }
            Ok(())
        })()
        .map_err(|e| e.to_string())?;
        // What was written must be an output the ledger reads.
        crate::ledger::phase1::output_facts(&out)
            .map_err(|e| format!("output {}: {e}", self.address))?;
        Ok(out)
    }
}

impl InputJson {
    /// The output reference.
    ///
    /// # Errors
    /// A message when `txId` is not 32 bytes of hex.
    pub fn to_ref(&self) -> Result<TxoRef, String> {
        let tx_hash: [u8; 32] = hex_field(&self.tx_id, "txId")?
            .try_into()
            .map_err(|_| "txId must be 32 bytes".to_string())?;
        Ok(TxoRef {
            tx_hash,
            index: self.index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_raw_bodies_give_the_same_bytes() {
        assert_eq!(tx_bytes(b"84a0\n"), vec![0x84, 0xa0]);
        assert_eq!(tx_bytes(&[0x84, 0xa0]), vec![0x84, 0xa0]);
    }

    #[test]
    fn an_additional_output_becomes_the_ledger_output_it_describes() {
        let mut enterprise = vec![0x60];
        enterprise.extend([7u8; 28]);
        let addr = crate::serve::blockfrost::render::bech32(&enterprise);
        assert!(addr.starts_with("addr_test1"), "{addr}");
        let j: OutputJson = serde_json::from_value(json!({
            "address": addr,
            "value": { "coins": "2000000", "assets": { format!("{}.4e5458", "ab".repeat(28)): 5 } },
            "datumHash": "cd".repeat(32),
        }))
        .expect("json");
        let raw = j.to_ledger().expect("encode");
        let facts = crate::ledger::phase1::output_facts(&raw).expect("facts");
        assert_eq!(facts.value.coin, 2_000_000);
        assert_eq!(
            facts.value.assets.get(&(vec![0xab; 28], b"NTX".to_vec())),
            Some(&5)
        );
        assert_eq!(facts.datum_hash.map(|h| h.to_vec()), Some(vec![0xcd; 32]));
        let bad: OutputJson = serde_json::from_value(json!({
            "address": "addr_test1nope", "value": { "coins": 1 }
        }))
        .expect("json");
        assert!(bad.to_ledger().expect_err("bad address").contains("bech32"));
    }
}
