//! Phase-1 rules: one function per rule, each returning the [`Rejection`] named after it.
//! The order in which [`crate::ledger::validate`] calls them is cheap-first.

use std::collections::{BTreeSet, HashMap, HashSet};

use pallas_addresses::{Address, ShelleyPaymentPart};
use pallas_codec::minicbor;
use pallas_crypto::hash::{Hash, Hasher};
use pallas_primitives::conway::{self, NativeScript, Redeemers, ScriptRef, TransactionOutput};

use crate::keys;
use crate::ledger::rejection::Rejection;
use crate::ledger::value::Value;
use ganglion_cardano::fees;
use ganglion_cardano::protocol::{ExUnits, ProtocolParams};
use ganglion_cardano::txo::TxoRef;

/// How an output is locked (its payment credential).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// By a verification key hash.
    Key(Hash<28>),
    /// By a script hash.
    Script(Hash<28>),
}

/// A script available to the transaction (witness set or reference script).
#[derive(Debug, Clone)]
pub enum Script {
    /// A native (multisig/timelock) script.
    Native(NativeScript),
    /// A Plutus script of the given language id (0 = V1, 1 = V2, 2 = V3).
    Plutus(u8),
}

/// Decoded facts about one output.
pub struct OutputFacts {
    /// Raw address bytes.
    pub address: Vec<u8>,
    /// Its value.
    pub value: Value,
    /// Reference script carried, with its hash and size (bytes).
    pub script_ref: Option<(Hash<28>, Script, u64)>,
    /// The datum hash it carries (`None` for an inline datum or none at all).
    pub datum_hash: Option<Hash<32>>,
}

/// Decode a raw output.
///
/// # Errors
/// [`Rejection::Malformed`] if the bytes are not a ledger output.
pub fn output_facts(raw: &[u8]) -> Result<OutputFacts, Rejection> {
    let out: TransactionOutput<'_> = minicbor::decode(raw).map_err(|e| Rejection::Malformed {
        reason: format!("output: {e}"),
    })?;
    Ok(facts_of(&out))
}

/// Facts of an already-decoded output.
pub fn facts_of(out: &TransactionOutput<'_>) -> OutputFacts {
    match out {
        TransactionOutput::Legacy(o) => OutputFacts {
            address: o.address.to_vec(),
            value: Value::from_alonzo(&o.amount),
            script_ref: None,
            datum_hash: o.datum_hash,
        },
        TransactionOutput::PostAlonzo(o) => OutputFacts {
            address: o.address.to_vec(),
            value: Value::from_conway(&o.value),
            script_ref: o.script_ref.as_ref().map(|s| script_of_ref(s)),
            datum_hash: match o.datum_option.as_deref() {
                Some(conway::DatumOption::Hash(h)) => Some(*h),
                _ => None,
            },
        },
    }
}

/// The raw CBOR of an output as it appears in the transaction.
pub fn output_raw<'a>(out: &'a TransactionOutput<'_>) -> &'a [u8] {
    match out {
        TransactionOutput::Legacy(o) => o.raw_cbor(),
        TransactionOutput::PostAlonzo(o) => o.raw_cbor(),
    }
}

fn script_of_ref(s: &ScriptRef<'_>) -> (Hash<28>, Script, u64) {
    match s {
        ScriptRef::NativeScript(n) => (
            Hasher::<224>::hash_tagged(n.raw_cbor(), 0),
            Script::Native((**n).clone()),
            n.raw_cbor().len() as u64,
        ),
        ScriptRef::PlutusV1Script(p) => plutus(0, p.as_ref()),
        ScriptRef::PlutusV2Script(p) => plutus(1, p.as_ref()),
        ScriptRef::PlutusV3Script(p) => plutus(2, p.as_ref()),
    }
}

/// Hash, kind and size of a Plutus script of language id `lang` (0 = V1).
pub fn plutus(lang: u8, bytes: &[u8]) -> (Hash<28>, Script, u64) {
    (
        Hasher::<224>::hash_tagged(bytes, lang + 1),
        Script::Plutus(lang),
        bytes.len() as u64,
    )
}

/// The payment lock of an address; `None` for Byron/stake addresses (unsupported).
pub fn lock_of(address: &[u8]) -> Option<Lock> {
    match Address::from_bytes(address).ok()? {
        Address::Shelley(s) => Some(match s.payment() {
            ShelleyPaymentPart::Key(h) => Lock::Key(*h),
            ShelleyPaymentPart::Script(h) => Lock::Script(*h),
        }),
        _ => None,
    }
}

/// Refuse body fields the devnet does not implement, each under an honest name:
/// withdrawals as `WithdrawalsNotInRewardsCERTS` and votes as `VotersDoNotExist` (the devnet
/// registers no reward account, committee member, DRep or pool, so the real rules refuse
/// them too); certificates, proposals, treasury value / donation and bootstrap witnesses as
/// [`Rejection::Unsupported`] (the devnet cannot tell what Cardano would say).
///
/// # Errors
/// [`Rejection::WithdrawalsNotInRewardsCERTS`], [`Rejection::VotersDoNotExist`],
/// [`Rejection::Unsupported`].
pub fn check_supported(tx: &conway::Tx<'_>) -> Result<(), Rejection> {
    let b = &tx.transaction_body;
    let unsupported = |feature| Err(Rejection::Unsupported { feature });
    if b.certificates.is_some() {
        return unsupported("certificates");
    }
    if let Some(w) = b.withdrawals.as_ref().filter(|w| !w.is_empty()) {
        return Err(Rejection::WithdrawalsNotInRewardsCERTS {
            accounts: w
                .iter()
                .map(|(a, c)| format!("{}={c}", hex::encode(a.as_slice())))
                .collect(),
        });
    }
    if let Some(v) = &b.voting_procedures {
        use conway::Voter;
        return Err(Rejection::VotersDoNotExist {
            voters: v
                .keys()
                .map(|voter| match voter {
                    Voter::ConstitutionalCommitteeKey(h) => format!("committee-key:{h}"),
                    Voter::ConstitutionalCommitteeScript(h) => format!("committee-script:{h}"),
                    Voter::DRepKey(h) => format!("drep-key:{h}"),
                    Voter::DRepScript(h) => format!("drep-script:{h}"),
                    Voter::StakePoolKey(h) => format!("pool:{h}"),
                })
                .collect(),
        });
    }
    if b.proposal_procedures.is_some() {
        return unsupported("governance proposals");
    }
    if b.treasury_value.is_some() || b.donation.is_some() {
        return unsupported("treasury value / donation");
    }
    if tx.transaction_witness_set.bootstrap_witness.is_some() {
        return unsupported("Byron bootstrap witnesses");
    }
    Ok(())
}

/// The body's sets hold each element once: inputs, collateral inputs, reference inputs and
/// required signers (Conway CDDL `set<a>` / `nonempty_set<a>`, decoded by
/// cardano-ledger-binary `decodeSetEnforceNoDuplicates` from protocol version 9; see
/// [`Rejection::DuplicateSetElement`]).
///
/// # Errors
/// [`Rejection::DuplicateSetElement`] naming the field and the first repeated element.
pub fn check_sets(tx: &conway::Tx<'_>) -> Result<(), Rejection> {
    let b = &tx.transaction_body;
    fn distinct<T: Ord + Clone>(
        field: &'static str,
        items: impl Iterator<Item = T>,
        show: impl Fn(&T) -> String,
    ) -> Result<(), Rejection> {
        let mut seen = BTreeSet::new();
        for x in items {
            if !seen.insert(x.clone()) {
                return Err(Rejection::DuplicateSetElement {
                    field,
                    element: show(&x),
                });
            }
        }
        Ok(())
    }
    let input = |r: &TxoRef| r.to_string();
    distinct("inputs", b.inputs.iter().map(TxoRef::from), input)?;
    distinct(
        "collateral",
        b.collateral.iter().flat_map(|s| s.iter()).map(TxoRef::from),
        input,
    )?;
    distinct(
        "reference_inputs",
        b.reference_inputs
            .iter()
            .flat_map(|s| s.iter())
            .map(TxoRef::from),
        input,
    )?;
    distinct(
        "required_signers",
        b.required_signers.iter().flat_map(|s| s.iter()).copied(),
        ToString::to_string,
    )?;
    // Witness set keys 3, 6, 7: `scriptDecoderV9` keys each script by its hash and refuses a
    // repeat. Vkey witnesses, native scripts and datums are merged until protocol version 12
    // (see [`Rejection::DuplicateSetElement`]), so they are not checked here.
    let ws = &tx.transaction_witness_set;
    distinct(
        "plutus_v1_script",
        ws.plutus_v1_script
            .iter()
            .flat_map(|s| s.iter())
            .map(|p| plutus(0, p.as_ref()).0),
        ToString::to_string,
    )?;
    distinct(
        "plutus_v2_script",
        ws.plutus_v2_script
            .iter()
            .flat_map(|s| s.iter())
            .map(|p| plutus(1, p.as_ref()).0),
        ToString::to_string,
    )?;
    distinct(
        "plutus_v3_script",
        ws.plutus_v3_script
            .iter()
            .flat_map(|s| s.iter())
            .map(|p| plutus(2, p.as_ref()).0),
        ToString::to_string,
    )
}

/// `BabbageNonDisjointRefInputs`: at protocol major versions 9 and 10 no input may also be
/// a reference input (cardano-ledger `Babbage.Rules.Utxo.disjointRefInputs`, the first
/// check of Conway's UTXO rule; lifted again from version 11). `protocol_major` is the
/// ledger's protocol major version.
///
/// # Errors
/// [`Rejection::BabbageNonDisjointRefInputs`] listing every input in both sets.
pub fn check_disjoint_ref_inputs(
    protocol_major: u64,
    tx: &conway::Tx<'_>,
) -> Result<(), Rejection> {
    if !(9..11).contains(&protocol_major) {
        return Ok(());
    }
    let b = &tx.transaction_body;
    let inputs: BTreeSet<TxoRef> = b.inputs.iter().map(TxoRef::from).collect();
    let common: BTreeSet<TxoRef> = b
        .reference_inputs
        .iter()
        .flat_map(|s| s.iter())
        .map(TxoRef::from)
        .filter(|r| inputs.contains(r))
        .collect();
    if common.is_empty() {
        Ok(())
    } else {
        Err(Rejection::BabbageNonDisjointRefInputs {
            inputs: common.into_iter().collect(),
        })
    }
}

/// Conway's per-transaction limit on reference-script bytes (`maxRefScriptSizePerTx`).
pub const MAX_REF_SCRIPT_BYTES_PER_TX: u64 = 200 * 1024;

/// `ConwayTxRefScriptsSizeTooBig`.
///
/// # Errors
/// [`Rejection::ConwayTxRefScriptsSizeTooBig`].
pub fn check_ref_script_size(size: u64) -> Result<(), Rejection> {
    if size > MAX_REF_SCRIPT_BYTES_PER_TX {
        return Err(Rejection::ConwayTxRefScriptsSizeTooBig {
            size,
            max: MAX_REF_SCRIPT_BYTES_PER_TX,
        });
    }
    Ok(())
}

/// `WrongNetworkInTxBody`: a declared body `network_id` must be the devnet's.
///
/// # Errors
/// [`Rejection::WrongNetworkInTxBody`].
pub fn check_body_network(tx: &conway::Tx<'_>, expected: u8) -> Result<(), Rejection> {
    let declared = match tx.transaction_body.network_id {
        None => return Ok(()),
        Some(pallas_primitives::NetworkId::Testnet) => 0,
        Some(pallas_primitives::NetworkId::Mainnet) => 1,
    };
    if declared != expected {
        return Err(Rejection::WrongNetworkInTxBody { declared, expected });
    }
    Ok(())
}

/// The auxiliary-data rules: data present ⇔ hash present, and the hash is blake2b-256 of
/// the original auxiliary data bytes.
///
/// # Errors
/// [`Rejection::MissingTxBodyMetadataHash`], [`Rejection::MissingTxMetadata`],
/// [`Rejection::ConflictingMetadataHash`].
pub fn check_auxiliary_data(tx: &conway::Tx<'_>) -> Result<(), Rejection> {
    let declared = tx.transaction_body.auxiliary_data_hash;
    match (&tx.auxiliary_data, declared) {
        (pallas_codec::utils::Nullable::Some(aux), Some(h)) => {
            let computed = Hasher::<256>::hash(aux.raw_cbor());
            if computed != h {
                return Err(Rejection::ConflictingMetadataHash {
                    declared: h.to_string(),
                    computed: computed.to_string(),
                });
            }
            Ok(())
        }
        (pallas_codec::utils::Nullable::Some(_), None) => Err(Rejection::MissingTxBodyMetadataHash),
        (_, Some(h)) => Err(Rejection::MissingTxMetadata {
            declared: h.to_string(),
        }),
        (_, None) => Ok(()),
    }
}

/// `MaxTxSizeUTxO` on `size`, the transaction's [`fees::size_for_fee`] (bytes).
///
/// # Errors
/// [`Rejection::MaxTxSizeUTxO`].
pub fn check_size(params: &ProtocolParams, size: u64) -> Result<(), Rejection> {
    if size > params.max_tx_size {
        return Err(Rejection::MaxTxSizeUTxO {
            size,
            max: params.max_tx_size,
        });
    }
    Ok(())
}

/// `OutsideValidityIntervalUTxO`: `start ≤ slot < ttl`.
///
/// # Errors
/// [`Rejection::OutsideValidityIntervalUTxO`].
pub fn check_validity_interval(
    slot: u64,
    start: Option<u64>,
    end: Option<u64>,
) -> Result<(), Rejection> {
    if start.is_some_and(|s| slot < s) || end.is_some_and(|e| slot >= e) {
        return Err(Rejection::OutsideValidityIntervalUTxO { slot, start, end });
    }
    Ok(())
}

/// `WrongNetwork`, `BabbageOutputTooSmallUTxO`, `OutputTooBigUTxO` for one output.
///
/// # Errors
/// The rejection of the first broken rule.
pub fn check_output(
    params: &ProtocolParams,
    network_id: u8,
    index: usize,
    out: &TransactionOutput<'_>,
) -> Result<(), Rejection> {
    let facts = facts_of(out);
    match Address::from_bytes(&facts.address) {
        Ok(a) => {
            if a.network().map(|n| n.value()) != Some(network_id) {
                return Err(Rejection::WrongNetwork {
                    index,
                    expected: network_id,
                });
            }
        }
        Err(e) => {
            return Err(Rejection::Malformed {
                reason: format!("output {index} address: {e}"),
            });
        }
    }
    let required = fees::min_utxo(params, output_raw(out).len() as u64);
    let provided = u64::try_from(facts.value.coin).unwrap_or(0);
    if provided < required {
        return Err(Rejection::BabbageOutputTooSmallUTxO {
            index,
            required,
            provided,
        });
    }
    let value_size = match out {
        TransactionOutput::Legacy(o) => minicbor::to_vec(&o.amount).map(|v| v.len()),
        TransactionOutput::PostAlonzo(o) => minicbor::to_vec(&o.value).map(|v| v.len()),
    }
    .unwrap_or(usize::MAX) as u64;
    if value_size > params.max_value_size {
        return Err(Rejection::OutputTooBigUTxO {
            index,
            size: value_size,
            max: params.max_value_size,
        });
    }
    Ok(())
}

/// `InvalidWitnessesUTXOW`: every vkey witness must verify over the body hash.
/// Returns the set of key hashes that signed.
///
/// # Errors
/// [`Rejection::InvalidWitnessesUTXOW`].
pub fn check_vkey_witnesses(
    tx: &conway::Tx<'_>,
    body_hash: &Hash<32>,
) -> Result<HashSet<Hash<28>>, Rejection> {
    let mut signed = HashSet::new();
    if let Some(ws) = &tx.transaction_witness_set.vkeywitness {
        for w in ws.iter() {
            if !keys::verify(&w.vkey, &w.signature, body_hash.as_ref()) {
                return Err(Rejection::InvalidWitnessesUTXOW {
                    vkey: hex::encode(w.vkey.as_slice()),
                });
            }
            signed.insert(Hasher::<224>::hash(&w.vkey));
        }
    }
    Ok(signed)
}

/// `MissingVKeyWitnessesUTXOW`.
///
/// # Errors
/// [`Rejection::MissingVKeyWitnessesUTXOW`] listing every missing key hash.
pub fn check_required_signers(
    required: &BTreeSet<Hash<28>>,
    signed: &HashSet<Hash<28>>,
) -> Result<(), Rejection> {
    let missing: Vec<String> = required
        .iter()
        .filter(|h| !signed.contains(*h))
        .map(ToString::to_string)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Rejection::MissingVKeyWitnessesUTXOW {
            key_hashes: missing,
        })
    }
}

/// Evaluate a native script (Allegra timelock semantics) against the signing keys and the
/// transaction's validity interval.
pub fn eval_native(
    s: &NativeScript,
    signed: &HashSet<Hash<28>>,
    start: Option<u64>,
    ttl: Option<u64>,
) -> bool {
    match s {
        NativeScript::ScriptPubkey(h) => signed.contains(h),
        NativeScript::ScriptAll(v) => v.iter().all(|x| eval_native(x, signed, start, ttl)),
        NativeScript::ScriptAny(v) => v.iter().any(|x| eval_native(x, signed, start, ttl)),
        NativeScript::ScriptNOfK(n, v) => {
            let ok = v
                .iter()
                .filter(|x| eval_native(x, signed, start, ttl))
                .count();
            i64::try_from(ok).unwrap_or(i64::MAX) >= *n
        }
        NativeScript::InvalidBefore(s) => start.is_some_and(|st| st >= *s),
        NativeScript::InvalidHereafter(s) => ttl.is_some_and(|t| t <= *s),
    }
}

/// The scripts in the witness set, by hash.
pub fn witness_scripts(tx: &conway::Tx<'_>) -> HashMap<Hash<28>, Script> {
    let ws = &tx.transaction_witness_set;
    let mut out = HashMap::new();
    if let Some(ns) = &ws.native_script {
        for n in ns.iter() {
            out.insert(
                Hasher::<224>::hash_tagged(n.raw_cbor(), 0),
                Script::Native((**n).clone()),
            );
        }
    }
    if let Some(v) = &ws.plutus_v1_script {
        for p in v.iter() {
            let (h, s, _) = plutus(0, p.as_ref());
            out.insert(h, s);
        }
    }
    if let Some(v) = &ws.plutus_v2_script {
        for p in v.iter() {
            let (h, s, _) = plutus(1, p.as_ref());
            out.insert(h, s);
        }
    }
    if let Some(v) = &ws.plutus_v3_script {
        for p in v.iter() {
            let (h, s, _) = plutus(2, p.as_ref());
            out.insert(h, s);
        }
    }
    out
}

/// Σ declared ExUnits of the redeemers, and each redeemer's by pointer (`spend:0`).
///
/// Redeemers are a map from pointer to (data, ExUnits): a pointer listed twice counts once,
/// with its last entry, as cardano-ledger's `RedeemersRaw` decoder builds it with
/// `Map.fromList` (Alonzo `TxWits`, protocol versions 9–11; from 12 the list form is
/// refused). The fee (`totExUnits`) and `maxTxExUnits` see that map.
pub fn declared_ex_units(tx: &conway::Tx<'_>) -> (ExUnits, HashMap<String, ExUnits>) {
    let mut each = HashMap::new();
    if let Some(rs) = &tx.transaction_witness_set.redeemer {
        let mut add = |tag, index, eu: &pallas_primitives::ExUnits| {
            each.insert(
                crate::ledger::phase2::pointer(tag, index),
                ExUnits {
                    mem: eu.mem,
                    steps: eu.steps,
                },
            );
        };
        match &**rs {
            Redeemers::List(l) => l.iter().for_each(|r| add(r.tag, r.index, &r.ex_units)),
            Redeemers::Map(m) => m.iter().for_each(|(k, v)| add(k.tag, k.index, &v.ex_units)),
        }
    }
    let total = each.values().fold(ExUnits::default(), |t, eu| ExUnits {
        mem: t.mem.saturating_add(eu.mem),
        steps: t.steps.saturating_add(eu.steps),
    });
    (total, each)
}

/// True when the transaction carries at least one redeemer.
pub fn has_redeemers(tx: &conway::Tx<'_>) -> bool {
    match tx.transaction_witness_set.redeemer.as_deref() {
        Some(Redeemers::List(l)) => !l.is_empty(),
        Some(Redeemers::Map(m)) => !m.is_empty(),
        None => false,
    }
}

/// The script integrity hash (Alonzo spec `hashScriptIntegrity`) of a decoded transaction;
/// `None` when it has neither redeemers nor datums. See [`integrity_hash`].
pub fn script_data_hash(
    tx: &conway::Tx<'_>,
    params: &ProtocolParams,
    languages: &BTreeSet<u8>,
) -> Option<Hash<32>> {
    let ws = &tx.transaction_witness_set;
    let redeemers = ws.redeemer.as_ref().filter(|_| has_redeemers(tx));
    if redeemers.is_none() && ws.plutus_data.is_none() {
        return None;
    }
    Some(integrity_hash(
        redeemers.map(|r| r.raw_cbor()),
        ws.plutus_data.as_ref().map(|d| d.raw_cbor()),
        params,
        languages,
    ))
}

/// blake2b-256 of the original redeemer bytes (or `0xa0` when absent) ‖ the original datum
/// bytes (when present) ‖ the language views of `languages` (language ids, 0 = V1; `0xa0`
/// when there are no redeemers). Shared by the ledger and [`crate::txbuild`].
pub fn integrity_hash(
    redeemers: Option<&[u8]>,
    datums: Option<&[u8]>,
    params: &ProtocolParams,
    languages: &BTreeSet<u8>,
) -> Hash<32> {
    let mut buf = Vec::new();
    match redeemers {
        Some(r) => buf.extend_from_slice(r),
        None => buf.push(0xa0),
    }
    if let Some(d) = datums {
        buf.extend_from_slice(d);
    }
    if redeemers.is_some() && !languages.is_empty() {
        let views: conway::LanguageViews = languages
            .iter()
            .map(|l| {
                let model = match l {
                    0 => params.cost_model_v1.clone(),
                    1 => params.cost_model_v2.clone(),
                    _ => params.cost_model_v3.clone(),
                };
                (*l, model)
            })
            .collect();
        match minicbor::to_vec(&views) {
            Ok(v) => buf.extend_from_slice(&v),
            Err(_) => buf.push(0xa0),
        }
    } else {
        buf.push(0xa0);
    }
    Hasher::<256>::hash(&buf)
}

/// `PPViewHashesDontMatch`.
///
/// # Errors
/// [`Rejection::PPViewHashesDontMatch`] when the declared and computed hashes differ.
pub fn check_script_data_hash(
    declared: Option<Hash<32>>,
    computed: Option<Hash<32>>,
) -> Result<(), Rejection> {
    if declared != computed {
        return Err(Rejection::PPViewHashesDontMatch {
            declared: declared.map(|h| h.to_string()),
            computed: computed.map(|h| h.to_string()),
        });
    }
    Ok(())
}

/// The collateral rules (Babbage): present, at most `maxCollateralInputs`, key-locked,
/// ADA only net of the return, ≥ fee × collateralPercentage / 100, and `total_collateral`
/// (when declared) equal to the net balance.
///
/// `inputs` are the resolved collateral inputs.
///
/// # Errors
/// The rejection of the first broken rule.
pub fn check_collateral(
    params: &ProtocolParams,
    inputs: &[(TxoRef, OutputFacts)],
    collateral_return: Option<&OutputFacts>,
    total_collateral: Option<u64>,
    fee: u64,
) -> Result<(), Rejection> {
    if inputs.is_empty() {
        return Err(Rejection::NoCollateralInputs);
    }
    if inputs.len() as u64 > params.max_collateral_inputs {
        return Err(Rejection::TooManyCollateralInputs {
            count: inputs.len() as u64,
            max: params.max_collateral_inputs,
        });
    }
    let mut balance = Value::default();
    for (r, f) in inputs {
        if !matches!(lock_of(&f.address), Some(Lock::Key(_))) {
            return Err(Rejection::ScriptsNotPaidUTxO { input: *r });
        }
        balance.add(&f.value);
    }
    if let Some(ret) = collateral_return {
        let mut neg = ret.value.clone();
        neg.coin = -neg.coin;
        for q in neg.assets.values_mut() {
            *q = -*q;
        }
        balance.add(&neg);
    }
    if !balance.is_ada_only() {
        return Err(Rejection::CollateralContainsNonADA);
    }
    let actual = u64::try_from(balance.coin).unwrap_or(0);
    if let Some(declared) = total_collateral
        && declared != actual
    {
        return Err(Rejection::IncorrectTotalCollateralField { declared, actual });
    }
    let required_x100 = u128::from(fee) * u128::from(params.collateral_percentage);
    if u128::from(actual) * 100 < required_x100 {
        return Err(Rejection::InsufficientCollateral {
            required: u64::try_from(required_x100.div_ceil(100)).unwrap_or(u64::MAX),
            provided: actual,
        });
    }
    Ok(())
}

/// `ExUnitsTooBigUTxO`.
///
/// # Errors
/// [`Rejection::ExUnitsTooBigUTxO`].
pub fn check_ex_units(params: &ProtocolParams, declared: ExUnits) -> Result<(), Rejection> {
    let max = params.max_tx_ex_units;
    if declared.mem > max.mem || declared.steps > max.steps {
        return Err(Rejection::ExUnitsTooBigUTxO { declared, max });
    }
    Ok(())
}

/// The minimum fee (lovelace) of `tx` as the ledger computes it (cardano-ledger `Conway.UTxO`
/// `getConwayMinFeeTxUtxo`): `minFeeA ×` [`fees::size_for_fee`] (the size without
/// `is_valid`) `+ minFeeB +` the price of the declared ExUnits ([`declared_ex_units`]) `+` the
/// tiered fee of `ref_script_bytes`, the reference scripts of the UTxOs in
/// `inputs ∪ reference inputs` (`txNonDistinctRefScriptsSize`).
pub fn min_fee_of(params: &ProtocolParams, tx: &conway::Tx<'_>, ref_script_bytes: u64) -> u64 {
    let (units, _) = declared_ex_units(tx);
    fees::min_fee(params, fees::size_for_fee(tx), units, ref_script_bytes)
}

/// `FeeTooSmallUTxO`: `provided ≥ required` (lovelace; a fee equal to the minimum passes).
///
/// # Errors
/// [`Rejection::FeeTooSmallUTxO`].
pub fn check_fee(required: u64, provided: u64) -> Result<(), Rejection> {
    if provided < required {
        return Err(Rejection::FeeTooSmallUTxO { required, provided });
    }
    Ok(())
}

/// `ValueNotConservedUTxO`: Σ inputs + mint = Σ outputs + fee.
///
/// # Errors
/// [`Rejection::ValueNotConservedUTxO`].
pub fn check_balance(consumed: &Value, produced: &Value) -> Result<(), Rejection> {
    if consumed != produced {
        return Err(Rejection::ValueNotConservedUTxO {
            consumed: consumed.to_string(),
            produced: produced.to_string(),
        });
    }
    Ok(())
}

/// `ExtraneousScriptWitnessesUTXOW` and `MissingScriptWitnessesUTXOW` (Babbage
/// `babbageMissingScripts`, used by Conway): the witness set must hold exactly the needed
/// scripts that no reference script provides. `needed` are the needed script hashes,
/// `by_reference` those reference scripts provide, `witnessed` those in the witness set.
///
/// # Errors
/// [`Rejection::ExtraneousScriptWitnessesUTXOW`] (checked first, as the ledger lists it
/// first), [`Rejection::MissingScriptWitnessesUTXOW`].
pub fn check_script_witnesses(
    needed: &BTreeSet<Hash<28>>,
    by_reference: &BTreeSet<Hash<28>>,
    witnessed: &BTreeSet<Hash<28>>,
) -> Result<(), Rejection> {
    let needed_non_refs: BTreeSet<Hash<28>> = needed.difference(by_reference).copied().collect();
    let extra: Vec<String> = witnessed
        .difference(&needed_non_refs)
        .map(ToString::to_string)
        .collect();
    if !extra.is_empty() {
        return Err(Rejection::ExtraneousScriptWitnessesUTXOW {
            script_hashes: extra,
        });
    }
    if let Some(h) = needed_non_refs.difference(witnessed).next() {
        return Err(Rejection::MissingScriptWitnessesUTXOW {
            script_hash: h.to_string(),
        });
    }
    Ok(())
}

/// The datum hashes of the witness set's datums (blake2b-256 of their original bytes).
pub fn witness_datum_hashes(tx: &conway::Tx<'_>) -> BTreeSet<Hash<32>> {
    tx.transaction_witness_set
        .plutus_data
        .iter()
        .flat_map(|set| set.iter())
        .map(|d| Hasher::<256>::hash(d.raw_cbor()))
        .collect()
}

/// `MissingRequiredDatums` and `NotAllowedSupplementalDatums` (Alonzo
/// `missingRequiredDatums`, used by Babbage and Conway UTXOW).
///
/// `required` are the datum hashes of the spent outputs locked by a Plutus script
/// (`getInputDataHashesTxBody`; an inline datum needs no witness), `allowed` the datum
/// hashes of the transaction's outputs, its collateral return and its reference inputs'
/// outputs (`getBabbageSupplementalDataHashes`), `received` the witness set's datums.
/// Every required datum must be received; every other received datum must be allowed.
///
/// # Errors
/// [`Rejection::MissingRequiredDatums`], [`Rejection::NotAllowedSupplementalDatums`].
pub fn check_datums(
    required: &BTreeSet<Hash<32>>,
    allowed: &BTreeSet<Hash<32>>,
    received: &BTreeSet<Hash<32>>,
) -> Result<(), Rejection> {
    fn hexes<'a>(it: impl Iterator<Item = &'a Hash<32>>) -> Vec<String> {
        it.map(ToString::to_string).collect()
    }
    let missing = hexes(required.difference(received));
    if !missing.is_empty() {
        return Err(Rejection::MissingRequiredDatums {
            missing,
            received: hexes(received.iter()),
        });
    }
    let (ok, not_ok): (Vec<&Hash<32>>, Vec<&Hash<32>>) = received
        .difference(required)
        .partition(|h| allowed.contains(*h));
    if !not_ok.is_empty() {
        return Err(Rejection::NotAllowedSupplementalDatums {
            unallowed: hexes(not_ok.into_iter()),
            acceptable: hexes(ok.into_iter()),
        });
    }
    Ok(())
}

/// The redeemer pointers the witness set carries.
pub fn redeemer_pointers(tx: &conway::Tx<'_>) -> BTreeSet<(u8, u32)> {
    let tag = |t: conway::RedeemerTag| t as u8;
    match tx.transaction_witness_set.redeemer.as_deref() {
        Some(Redeemers::List(l)) => l.iter().map(|r| (tag(r.tag), r.index)).collect(),
        Some(Redeemers::Map(m)) => m.keys().map(|k| (tag(k.tag), k.index)).collect(),
        None => BTreeSet::new(),
    }
}

/// `ExtraRedeemers` and `MissingRedeemers` (Alonzo `hasExactSetOfRedeemers`, used by
/// Babbage and Conway UTXOW): the redeemers must point at exactly the purposes whose
/// script is a provided Plutus script. Pointers are `(tag, index)`, tag as the CDDL numbers
/// it (0 spend, 1 mint, 2 cert, 3 reward, 4 vote, 5 propose).
///
/// # Errors
/// [`Rejection::ExtraRedeemers`] (checked first), [`Rejection::MissingRedeemers`].
pub fn check_redeemers(
    needed: &BTreeSet<(u8, u32)>,
    provided: &BTreeSet<(u8, u32)>,
) -> Result<(), Rejection> {
    let show = |(t, i): &(u8, u32)| {
        let tag = match t {
            0 => "spend",
            1 => "mint",
            2 => "cert",
            3 => "reward",
            4 => "vote",
            5 => "propose",
            _ => "unknown",
        };
        format!("{tag}:{i}")
    };
    let extra: Vec<String> = provided.difference(needed).map(show).collect();
    if !extra.is_empty() {
        return Err(Rejection::ExtraRedeemers { pointers: extra });
    }
    let missing: Vec<String> = needed.difference(provided).map(show).collect();
    if !missing.is_empty() {
        return Err(Rejection::MissingRedeemers { pointers: missing });
    }
    Ok(())
}

/// `OutsideForecast` (Alonzo UTXO `validateOutsideForecast`, used by Babbage and Conway):
/// a transaction with redeemers whose validity upper bound `ttl` is a slot the ledger's epoch
/// info cannot turn into a time. `horizon` is how many slots past `slot` the slot config is
/// known (`None`: the whole chain has one fixed slot length, so every slot converts and the
/// rule never fires).
///
/// # Errors
/// [`Rejection::OutsideForecast`].
pub fn check_forecast(
    has_redeemers: bool,
    slot: u64,
    ttl: Option<u64>,
    horizon: Option<u64>,
) -> Result<(), Rejection> {
    if let (true, Some(ttl), Some(h)) = (has_redeemers, ttl, horizon)
        && ttl > slot.saturating_add(h)
    {
        return Err(Rejection::OutsideForecast { slot: ttl });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_interval_is_half_open() {
        assert!(check_validity_interval(10, Some(10), Some(11)).is_ok());
        assert!(check_validity_interval(9, Some(10), None).is_err());
        assert!(check_validity_interval(11, None, Some(11)).is_err());
        assert!(check_validity_interval(5, None, None).is_ok());
    }

    #[test]
    fn native_scripts_follow_timelock_semantics() {
        let k = Hash::<28>::new([1; 28]);
        let signed: HashSet<_> = [k].into_iter().collect();
        let s = NativeScript::ScriptAll(vec![
            NativeScript::ScriptPubkey(k),
            NativeScript::InvalidHereafter(100),
        ]);
        assert!(eval_native(&s, &signed, None, Some(100)));
        assert!(!eval_native(&s, &signed, None, Some(101)));
        assert!(!eval_native(&s, &signed, None, None));
        assert!(!eval_native(&s, &HashSet::new(), None, Some(50)));
        let n = NativeScript::ScriptNOfK(
            2,
            vec![
                NativeScript::ScriptPubkey(k),
                NativeScript::ScriptPubkey(Hash::new([2; 28])),
            ],
        );
        assert!(!eval_native(&n, &signed, None, None));
    }
}
