//! Encoding a draft as a Conway transaction (pallas primitives), and signing it.
//!
//! The encoding is deterministic: inputs, reference inputs, required signers, mint policies
//! and asset names are sorted, redeemers use the Conway map form keyed by (tag, index), and
//! only inline datums are used, so the witness set never carries datums.

use std::collections::{BTreeMap, BTreeSet};

use ed25519_dalek::{Signer, SigningKey};
use pallas_codec::utils::{Bytes, CborWrap, KeepRaw, NonEmptySet, Nullable, Set};
use pallas_crypto::hash::{Hash, Hasher};
use pallas_primitives::conway::LanguageViews;
use pallas_primitives::conway::ScriptData;
use pallas_primitives::conway::{
    CostModel, DatumOption, ExUnits as PallasExUnits, PostAlonzoTransactionOutput, RedeemerTag,
    Redeemers, RedeemersKey, RedeemersValue, ScriptRef, TransactionBody, TransactionInput,
    TransactionOutput, Tx, VKeyWitness, Value as PallasValue, WitnessSet,
};
use pallas_primitives::{Fragment, NonZeroInt, PlutusScript, PositiveCoin};

use crate::error::{Error, Result};
use crate::protocol::ExUnits;
use crate::tx::Purpose;
use crate::tx::{Draft, Output, TxoRef, Utxo, Value};

fn cbor_error(what: &'static str) -> impl Fn(String) -> Error {
    move |reason| Error::Cbor { what, reason }
}

fn input(r: &TxoRef) -> TransactionInput {
    TransactionInput {
        transaction_id: Hash::new(r.tx_hash),
        index: r.index,
    }
}

/// CBOR of a transaction input, as uplc's resolved-input table wants it.
pub fn encode_input(r: &TxoRef) -> Vec<u8> {
    input(r).encode_fragment().unwrap_or_default()
}

fn value(v: &Value) -> Result<PallasValue> {
    if v.assets.is_empty() {
        return Ok(PallasValue::Coin(v.lovelace));
    }
    let mut assets = BTreeMap::new();
    for (policy, names) in &v.assets {
        let mut m = BTreeMap::new();
        for (name, q) in names {
            let q = PositiveCoin::try_from(*q)
                .map_err(|_| Error::InvalidRequest("zero asset quantity in an output".into()))?;
            m.insert(Bytes::from(name.clone()), q);
        }
        assets.insert(Hash::new(*policy), m);
    }
    Ok(PallasValue::Multiasset(v.lovelace, assets))
}

fn output(o: &Output) -> Result<TransactionOutput<'static>> {
    Ok(TransactionOutput::PostAlonzo(KeepRaw::from(
        PostAlonzoTransactionOutput {
            address: Bytes::from(o.address.clone()),
            value: value(&o.value)?,
            datum_option: o
                .datum
                .clone()
                .map(|d| KeepRaw::from(DatumOption::Data(CborWrap(KeepRaw::from(d))))),
            script_ref: o
                .script_ref
                .clone()
                .map(|s| CborWrap(ScriptRef::PlutusV3Script(PlutusScript::<3>(Bytes::from(s))))),
        },
    )))
}

/// CBOR of a transaction output (post-Alonzo map form).
///
/// # Errors
/// [`Error::InvalidRequest`] for an asset quantity of zero.
pub fn encode_output(o: &Output) -> Result<Vec<u8>> {
    output(o)?
        .encode_fragment()
        .map_err(|e| cbor_error("output")(e.to_string()))
}

/// Everything besides the draft that goes into the bytes.
pub(crate) struct Assembly<'a> {
    pub draft: &'a Draft,
    /// Extra wallet inputs chosen by the balancer.
    pub extra_inputs: &'a [Utxo],
    /// Change output, appended after the draft's outputs.
    pub change: Option<&'a Output>,
    pub fee: u64,
    pub ex_units: &'a BTreeMap<Purpose, ExUnits>,
    /// Collateral input, total collateral (lovelace) and collateral return. The total is
    /// declared (body key 17) only beside a return: without one the whole input is the
    /// collateral and the ledger needs no total.
    pub collateral: Option<(&'a Utxo, u64, Option<&'a Output>)>,
    pub witnesses: &'a [VKeyWitness],
    pub cost_model_v3: &'a [i64],
}

/// The sorted input references of a draft plus extra inputs.
pub(crate) fn sorted_inputs(draft: &Draft, extra: &[Utxo]) -> Vec<TxoRef> {
    let mut refs: Vec<TxoRef> = draft
        .inputs
        .keys()
        .copied()
        .chain(extra.iter().map(|u| u.reference))
        .collect();
    refs.sort();
    refs.dedup();
    refs
}

/// Redeemer purposes and data of a draft, keyed as the ledger keys them.
pub(crate) fn redeemers(
    draft: &Draft,
    extra: &[Utxo],
) -> Vec<(Purpose, pallas_primitives::PlutusData)> {
    let inputs = sorted_inputs(draft, extra);
    let mut out = Vec::new();
    for (i, r) in inputs.iter().enumerate() {
        if let Some((_, Some(redeemer))) = draft.inputs.get(r) {
            out.push((Purpose::Spend(i as u32), redeemer.clone()));
        }
    }
    for (i, policy) in draft.mint.keys().enumerate() {
        if let Some(redeemer) = draft.mint_redeemers.get(policy) {
            out.push((Purpose::Mint(i as u32), redeemer.clone()));
        }
    }
    out
}

/// Encodes the transaction; returns `(tx bytes, body bytes)`.
pub(crate) fn encode(a: &Assembly<'_>) -> Result<(Vec<u8>, Vec<u8>)> {
    let d = a.draft;
    let inputs: Vec<TransactionInput> =
        sorted_inputs(d, a.extra_inputs).iter().map(input).collect();
    let mut outputs = d.outputs.iter().map(output).collect::<Result<Vec<_>>>()?;
    if let Some(c) = a.change {
        outputs.push(output(c)?);
    }
    let mut mint = BTreeMap::new();
    for (policy, names) in &d.mint {
        let mut m = BTreeMap::new();
        for (name, q) in names {
            if let Ok(q) = NonZeroInt::try_from(*q) {
                m.insert(Bytes::from(name.clone()), q);
            }
        }
        if !m.is_empty() {
            mint.insert(Hash::new(*policy), m);
        }
    }

    let redeemer_map: BTreeMap<RedeemersKey, RedeemersValue> = redeemers(d, a.extra_inputs)
        .into_iter()
        .map(|(purpose, data)| {
            let (tag, index) = match purpose {
                Purpose::Spend(i) => (RedeemerTag::Spend, i),
                Purpose::Mint(i) => (RedeemerTag::Mint, i),
            };
            let ex = a.ex_units.get(&purpose).copied().unwrap_or_default();
            (
                RedeemersKey { tag, index },
                RedeemersValue {
                    data,
                    ex_units: PallasExUnits {
                        mem: ex.mem,
                        steps: ex.steps,
                    },
                },
            )
        })
        .collect();
    let redeemers = (!redeemer_map.is_empty()).then_some(Redeemers::Map(redeemer_map));

    let script_data_hash = redeemers.as_ref().map(|r| {
        let views: LanguageViews = [(2u8, CostModel::from(a.cost_model_v3.to_vec()))]
            .into_iter()
            .collect();
        ScriptData {
            redeemers: Some(r.clone()),
            datums: None,
            language_views: Some(views),
        }
        .hash()
    });

    let body = TransactionBody {
        inputs: Set::from(inputs),
        outputs,
        fee: a.fee,
        ttl: d.valid_until_slot,
        certificates: None,
        withdrawals: None,
        auxiliary_data_hash: None,
        validity_interval_start: d.valid_from_slot,
        mint: (!mint.is_empty()).then_some(mint),
        script_data_hash,
        collateral: a
            .collateral
            .and_then(|(u, _, _)| NonEmptySet::from_vec(vec![input(&u.reference)])),
        required_signers: NonEmptySet::from_vec(
            d.required_signers.iter().map(|k| Hash::new(*k)).collect(),
        ),
        network_id: None,
        collateral_return: match a.collateral {
            Some((_, _, Some(ret))) => Some(output(ret)?),
            _ => None,
        },
        total_collateral: a.collateral.and_then(|(_, total, ret)| ret.map(|_| total)),
        reference_inputs: NonEmptySet::from_vec(d.reference_inputs.keys().map(input).collect()),
        voting_procedures: None,
        proposal_procedures: None,
        treasury_value: None,
        donation: None,
    };
    let body_bytes = body
        .encode_fragment()
        .map_err(|e| cbor_error("transaction body")(e.to_string()))?;

    let witness_set = WitnessSet {
        vkeywitness: NonEmptySet::from_vec(a.witnesses.to_vec()),
        native_script: None,
        bootstrap_witness: None,
        plutus_v1_script: None,
        plutus_data: None,
        redeemer: redeemers.map(KeepRaw::from),
        plutus_v2_script: None,
        plutus_v3_script: NonEmptySet::from_vec(
            d.witness_scripts
                .iter()
                .map(|s| PlutusScript::<3>(Bytes::from(s.clone())))
                .collect(),
        ),
    };
    let tx = Tx {
        transaction_body: KeepRaw::from(body),
        transaction_witness_set: KeepRaw::from(witness_set),
        success: true,
        auxiliary_data: Nullable::Null,
    };
    let tx_bytes = tx
        .encode_fragment()
        .map_err(|e| cbor_error("transaction")(e.to_string()))?;
    Ok((tx_bytes, body_bytes))
}

/// blake2b-256 of the body bytes: the transaction id.
pub fn body_hash(body: &[u8]) -> [u8; 32] {
    *Hasher::<256>::hash(body)
}

/// A witness for `body_hash` by `key`.
pub(crate) fn witness(key: &SigningKey, body_hash: &[u8; 32]) -> VKeyWitness {
    VKeyWitness {
        vkey: Bytes::from(key.verifying_key().to_bytes().to_vec()),
        signature: Bytes::from(key.sign(body_hash).to_bytes().to_vec()),
    }
}

/// Placeholder witnesses of the right size, for fee estimation.
pub(crate) fn dummy_witnesses(n: usize) -> Vec<VKeyWitness> {
    (0..n)
        .map(|i| VKeyWitness {
            vkey: Bytes::from(vec![i as u8; 32]),
            signature: Bytes::from(vec![0u8; 64]),
        })
        .collect()
}

/// Adds vkey witnesses by `keys` to a balanced transaction (replacing any) and returns the
/// signed bytes, one witness per distinct key. The body, hence the transaction id and fee,
/// is unchanged.
///
/// # Errors
/// [`Error::Cbor`] if the balanced transaction cannot be re-encoded.
pub fn sign(balanced: &crate::tx::Balanced, keys: &[&SigningKey]) -> Result<Vec<u8>> {
    // One witness per distinct key: the witness set is a set, and the fee was priced for
    // one witness per distinct signer (a repeat would also make the transaction larger
    // than its fee pays for).
    let mut seen = BTreeSet::new();
    let witnesses = keys
        .iter()
        .filter(|k| seen.insert(k.verifying_key().to_bytes()))
        .map(|k| witness(k, &balanced.hash))
        .collect();
    balanced.with_witnesses(witnesses)
}
