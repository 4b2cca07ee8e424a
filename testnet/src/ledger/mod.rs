//! The ledger: UTxO set, phase-1 rules, phase-2 (Plutus via uplc) and rejections.
//!
//! [`validate`] takes raw transaction bytes, the UTxO view and the slot the transaction
//! would land in, and returns either the [`Validated`] transaction (with its UTxO delta) or
//! the [`Rejection`] naming the first broken rule.
//!
//! **Phase-2 failures** are handled as the Conway ledger and cardano-node's mempool do:
//! a transaction marked `is_valid = true` whose script fails is *rejected*
//! ([`Rejection::PlutusScriptFailed`] / [`Rejection::ExUnitsExceeded`]); a transaction
//! submitted with `is_valid = false` whose script indeed fails is *included as invalid*:
//! only its collateral is consumed (and its collateral return produced at index
//! `outputs.len()`). `is_valid = false` with passing scripts is rejected
//! ([`Rejection::PassedUnexpectedly`]).

#[cfg(feature = "differential")]
pub mod differential;
pub mod phase1;
pub mod phase2;
pub mod rejection;
pub mod utxo;
pub mod value;

use std::collections::{BTreeSet, HashMap};

use pallas_codec::minicbor;
use pallas_crypto::hash::{Hash, Hasher};
use pallas_primitives::conway;

use ganglion_cardano::fees;
use ganglion_cardano::protocol::{ExUnits, ProtocolParams};
use ganglion_cardano::time::SlotConfig;
use ganglion_cardano::txo::TxoRef;
use phase1::{Lock, OutputFacts, Script};
pub use rejection::Rejection;
use utxo::UtxoDelta;
use value::Value;

/// Read access to unspent outputs (raw CBOR by reference).
pub trait UtxoView {
    /// The raw output at `r`, if unspent.
    fn lookup(&self, r: &TxoRef) -> Option<&[u8]>;
}

impl UtxoView for utxo::UtxoSet {
    fn lookup(&self, r: &TxoRef) -> Option<&[u8]> {
        self.get(r)
    }
}

/// Everything validation needs besides the UTxO set.
#[derive(Clone)]
pub struct Rules {
    /// Protocol parameters.
    pub params: ProtocolParams,
    /// Cost models as uplc takes them (CBOR map), precomputed from `params`.
    pub cost_models: Vec<u8>,
    /// The shared slot config.
    pub slot_config: SlotConfig,
    /// Network id required in output addresses (0 = testnet).
    pub network_id: u8,
    /// How many slots past the current one the slot ↔ time conversion is known, for
    /// `OutsideForecast`. `None` (the devnet): one era with one fixed slot length and no
    /// hard fork ahead, so the conversion is total and the rule never fires. A real node
    /// knows the time up to its safe zone, 3k/f slots (129 600 on mainnet); this ledger
    /// does not round that up to an epoch boundary as the consensus layer does.
    pub forecast_horizon: Option<u64>,
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("params", &self.params)
            .field("slot_config", &self.slot_config)
            .field("network_id", &self.network_id)
            .field("forecast_horizon", &self.forecast_horizon)
            .finish_non_exhaustive()
    }
}

impl Rules {
    /// Rules for the given parameters, slot config and network id.
    pub fn new(params: ProtocolParams, slot_config: SlotConfig, network_id: u8) -> Self {
        let cost_models = params.cost_models_cbor();
        Self {
            params,
            cost_models,
            slot_config,
            network_id,
            forecast_horizon: None,
        }
    }

    /// The same rules with the time known only `slots` past the current slot
    /// ([`Rules::forecast_horizon`]).
    #[must_use]
    pub fn with_forecast_horizon(mut self, slots: u64) -> Self {
        self.forecast_horizon = Some(slots);
        self
    }
}

/// A transaction that passed validation.
#[derive(Debug, Clone)]
pub struct Validated {
    /// Transaction id (blake2b-256 of the original body bytes).
    pub tx_hash: Hash<32>,
    /// The original bytes (blocks are assembled from these, so hashes stay stable).
    pub bytes: Vec<u8>,
    /// `false` when included as phase-2 invalid (collateral consumed).
    pub is_valid: bool,
    /// Its effect on the UTxO set.
    pub delta: UtxoDelta,
    /// Declared fee (lovelace).
    pub fee: u64,
    /// ExUnits measured by the evaluator (0 without scripts).
    pub ex_units: ExUnits,
}

/// Decode raw bytes as exactly one Conway transaction, as the Conway decoder does: the
/// body's sets must not repeat an element ([`phase1::check_sets`]).
///
/// # Errors
/// [`Rejection::Malformed`], [`Rejection::DuplicateSetElement`].
pub fn decode_tx(bytes: &[u8]) -> Result<conway::Tx<'_>, Rejection> {
    let mut d = minicbor::Decoder::new(bytes);
    let tx: conway::Tx<'_> = d.decode().map_err(|e| Rejection::Malformed {
        reason: format!("not a Conway transaction: {e}"),
    })?;
    if d.position() != bytes.len() {
        return Err(Rejection::Malformed {
            reason: format!("{} trailing bytes", bytes.len() - d.position()),
        });
    }
    phase1::check_sets(&tx)?;
    Ok(tx)
}

/// The transaction id: blake2b-256 of the original body bytes.
pub fn tx_hash(tx: &conway::Tx<'_>) -> Hash<32> {
    Hasher::<256>::hash(tx.transaction_body.raw_cbor())
}

/// Resolve each distinct reference once, in order (a set: a UTxO counts once, whatever the
/// encoding; [`decode_tx`] already refuses a repeat).
fn resolve(
    view: &impl UtxoView,
    refs: impl Iterator<Item = TxoRef>,
    missing: &mut Vec<TxoRef>,
) -> Result<Vec<(TxoRef, Vec<u8>, OutputFacts)>, Rejection> {
    let mut out = Vec::new();
    let distinct: BTreeSet<TxoRef> = refs.collect();
    for r in distinct {
        match view.lookup(&r) {
            Some(raw) => {
                let facts = phase1::output_facts(raw)?;
                out.push((r, raw.to_vec(), facts));
            }
            None => missing.push(r),
        }
    }
    Ok(out)
}

/// The outputs `body` names for evaluation: its spent inputs, then its reference inputs, then
/// its collateral.
pub(crate) fn named_outputs<'a>(
    body: &'a conway::TransactionBody<'_>,
) -> impl Iterator<Item = TxoRef> + 'a {
    body.inputs
        .iter()
        .chain(body.reference_inputs.iter().flat_map(|s| s.iter()))
        .chain(body.collateral.iter().flat_map(|s| s.iter()))
        .map(TxoRef::from)
}

/// The measured ExUnits of each redeemer of `bytes` (a Conway transaction; the budgets it
/// declares, its fee and its signatures are not checked, so an unbalanced draft can be
/// costed), with its spent, referenced and collateral outputs resolved from `view`: what
/// Ogmios' `EvaluateTx` and Blockfrost's `/utils/txs/evaluate` answer.
///
/// # Errors
/// [`Rejection::Malformed`], [`Rejection::BadInputsUTxO`] (an unresolvable input),
/// [`Rejection::CollectErrors`] (a missing script, datum or redeemer),
/// [`Rejection::PlutusScriptFailed`].
pub fn evaluate(
    rules: &Rules,
    view: &impl UtxoView,
    bytes: &[u8],
) -> Result<Vec<phase2::ScriptRun>, Rejection> {
    let tx = decode_tx(bytes)?;
    let mut missing = Vec::new();
    let resolved: Vec<(TxoRef, Vec<u8>)> =
        resolve(view, named_outputs(&tx.transaction_body), &mut missing)?
            .into_iter()
            .map(|(r, raw, _)| (r, raw))
            .collect();
    if !missing.is_empty() {
        return Err(Rejection::BadInputsUTxO { inputs: missing });
    }
    match phase2::evaluate(
        bytes,
        &resolved,
        &rules.params,
        &rules.cost_models,
        &rules.slot_config,
    )? {
        phase2::Phase2Outcome::Passed(runs) => Ok(runs),
        phase2::Phase2Outcome::Failed(r) => Err(r),
    }
}

/// Validate `bytes` against `view` for inclusion at `slot`.
///
/// With the cargo feature `differential` (tests only), pallas-validate's Conway phase-1
/// rules judge the same transaction too, and an unexplained disagreement aborts the
/// process ([`differential`]).
///
/// # Errors
/// The [`Rejection`] of the first broken rule.
pub fn validate(
    rules: &Rules,
    view: &impl UtxoView,
    bytes: &[u8],
    slot: u64,
) -> Result<Validated, Rejection> {
    let verdict = validate_ledger(rules, view, bytes, slot);
    #[cfg(feature = "differential")]
    differential::enforce(rules, view, bytes, slot, &verdict);
    verdict
}

/// This ledger's verdict alone (see [`validate`]).
fn validate_ledger(
    rules: &Rules,
    view: &impl UtxoView,
    bytes: &[u8],
    slot: u64,
) -> Result<Validated, Rejection> {
    let params = &rules.params;
    let tx = decode_tx(bytes)?;
    // `maxTxSize` and the fee count the size without `is_valid` (`sizeAlonzoTxF`).
    let ledger_size = fees::size_for_fee(&tx);
    phase1::check_size(params, ledger_size)?;
    phase1::check_supported(&tx)?;
    let body = &tx.transaction_body;
    let hash = tx_hash(&tx);
    phase1::check_body_network(&tx, rules.network_id)?;
    phase1::check_auxiliary_data(&tx)?;

    // Conway's UTXO rule starts with `disjointRefInputs` (protocol versions 9 and 10).
    phase1::check_disjoint_ref_inputs(params.protocol_version.0, &tx)?;

    // Inputs exist and are unspent.
    if body.inputs.is_empty() {
        return Err(Rejection::InputSetEmptyUTxO);
    }
    let mut missing = Vec::new();
    let inputs = resolve(view, body.inputs.iter().map(TxoRef::from), &mut missing)?;
    let refs = resolve(
        view,
        body.reference_inputs
            .iter()
            .flat_map(|s| s.iter())
            .map(TxoRef::from),
        &mut missing,
    )?;
    let collateral = resolve(
        view,
        body.collateral
            .iter()
            .flat_map(|s| s.iter())
            .map(TxoRef::from),
        &mut missing,
    )?;
    if !missing.is_empty() {
        return Err(Rejection::BadInputsUTxO { inputs: missing });
    }

    phase1::check_validity_interval(slot, body.validity_interval_start, body.ttl)?;
    phase1::check_forecast(
        phase1::has_redeemers(&tx),
        slot,
        body.ttl,
        rules.forecast_horizon,
    )?;

    // Outputs.
    for (i, out) in body.outputs.iter().enumerate() {
        phase1::check_output(params, rules.network_id, i, out)?;
    }
    if let Some(ret) = &body.collateral_return {
        phase1::check_output(params, rules.network_id, usize::MAX, ret)?;
    }

    // Signatures.
    let signed = phase1::check_vkey_witnesses(&tx, &hash)?;

    // Scripts: those in the witness set and the reference scripts of spent and referenced
    // outputs (Babbage `getBabbageScriptsProvided`).
    let witnessed: HashMap<Hash<28>, Script> = phase1::witness_scripts(&tx);
    let mut by_reference: HashMap<Hash<28>, Script> = HashMap::new();
    let mut ref_script_bytes = 0u64;
    // Over `referenceInputs ∪ inputs` (Conway `txNonDistinctRefScriptsSize`): a UTxO both
    // spent and referenced (allowed from protocol version 11) counts once.
    let spent: BTreeSet<TxoRef> = inputs.iter().map(|(r, _, _)| *r).collect();
    let referenced_only = refs.iter().filter(|(r, _, _)| !spent.contains(r));
    for (_, _, f) in inputs.iter().chain(referenced_only) {
        if let Some((h, s, size)) = &f.script_ref {
            ref_script_bytes += size;
            by_reference.entry(*h).or_insert_with(|| s.clone());
        }
    }
    phase1::check_ref_script_size(ref_script_bytes)?;
    let mut available = by_reference.clone();
    for (h, s) in &witnessed {
        available.entry(*h).or_insert_with(|| s.clone());
    }

    // Scripts needed, by purpose: spent inputs (index in the sorted input set) and minting
    // policies (index in the sorted policy set).
    let mut required_keys: BTreeSet<Hash<28>> = BTreeSet::new();
    let mut needed: Vec<((u8, u32), Hash<28>)> = Vec::new();
    let mut datums_required: BTreeSet<Hash<32>> = BTreeSet::new();
    for (i, (_, _, f)) in inputs.iter().enumerate() {
        match phase1::lock_of(&f.address) {
            Some(Lock::Key(h)) => {
                required_keys.insert(h);
            }
            Some(Lock::Script(h)) => {
                needed.push(((0, i as u32), h));
                if let (Some(Script::Plutus(_)), Some(d)) = (available.get(&h), f.datum_hash) {
                    datums_required.insert(d);
                }
            }
            None => {
                return Err(Rejection::Unsupported {
                    feature: "spending Byron or non-payment addresses",
                });
            }
        }
    }
    for (_, _, f) in &collateral {
        if let Some(Lock::Key(h)) = phase1::lock_of(&f.address) {
            required_keys.insert(h);
        }
    }
    if let Some(rs) = &body.required_signers {
        required_keys.extend(rs.iter().copied());
    }
    if let Some(mint) = &body.mint {
        let policies: BTreeSet<Hash<28>> = mint.keys().copied().collect();
        for (j, p) in policies.into_iter().enumerate() {
            needed.push(((1, j as u32), p));
        }
    }
    let needed_scripts: BTreeSet<Hash<28>> = needed.iter().map(|(_, h)| *h).collect();

    // UTXOW, in the ledger's order: native scripts, script witnesses, datums, redeemers,
    // then signatures.
    for h in &needed_scripts {
        if let Some(Script::Native(n)) = available.get(h)
            && !phase1::eval_native(n, &signed, body.validity_interval_start, body.ttl)
        {
            return Err(Rejection::ScriptWitnessNotValidatingUTXOW {
                script_hash: h.to_string(),
            });
        }
    }
    phase1::check_script_witnesses(
        &needed_scripts,
        &by_reference.keys().copied().collect(),
        &witnessed.keys().copied().collect(),
    )?;
    let mut datums_allowed: BTreeSet<Hash<32>> = body
        .outputs
        .iter()
        .chain(body.collateral_return.iter())
        .filter_map(|o| phase1::facts_of(o).datum_hash)
        .collect();
    datums_allowed.extend(refs.iter().filter_map(|(_, _, f)| f.datum_hash));
    phase1::check_datums(
        &datums_required,
        &datums_allowed,
        &phase1::witness_datum_hashes(&tx),
    )?;
    let mut languages = BTreeSet::new();
    let mut plutus_purposes = BTreeSet::new();
    for (pointer, h) in &needed {
        if let Some(Script::Plutus(lang)) = available.get(h) {
            languages.insert(*lang);
            plutus_purposes.insert(*pointer);
        }
    }
    phase1::check_redeemers(&plutus_purposes, &phase1::redeemer_pointers(&tx))?;
    phase1::check_required_signers(&required_keys, &signed)?;
    let runs_plutus = !languages.is_empty() || phase1::has_redeemers(&tx);

    // Script integrity hash.
    let computed = phase1::script_data_hash(&tx, params, &languages);
    phase1::check_script_data_hash(body.script_data_hash, computed)?;

    // ExUnits, fee, collateral.
    let (declared, declared_each) = phase1::declared_ex_units(&tx);
    phase1::check_ex_units(params, declared)?;
    let required_fee = phase1::min_fee_of(params, &tx, ref_script_bytes);
    phase1::check_fee(required_fee, body.fee)?;
    let collateral_return = body.collateral_return.as_ref().map(phase1::facts_of);
    if runs_plutus {
        let coll: Vec<(TxoRef, OutputFacts)> = collateral
            .iter()
            .map(|(r, _, f)| {
                (
                    *r,
                    OutputFacts {
                        address: f.address.clone(),
                        value: f.value.clone(),
                        script_ref: None,
                        datum_hash: f.datum_hash,
                    },
                )
            })
            .collect();
        phase1::check_collateral(
            params,
            &coll,
            collateral_return.as_ref(),
            body.total_collateral,
            body.fee,
        )?;
    }

    // Value is preserved.
    let mut consumed = Value::default();
    for (_, _, f) in &inputs {
        consumed.add(&f.value);
    }
    if let Some(m) = &body.mint {
        consumed.add(&Value::from_mint(m));
    }
    let mut produced = Value::lovelace(body.fee);
    for out in body.outputs.iter() {
        produced.add(&phase1::facts_of(out).value);
    }
    phase1::check_balance(&consumed, &produced)?;

    // Phase 2.
    let mut measured = ExUnits::default();
    let failure = if runs_plutus {
        let mut resolved: Vec<(TxoRef, Vec<u8>)> = Vec::new();
        for (r, raw, _) in inputs.iter().chain(refs.iter()).chain(collateral.iter()) {
            if !resolved.iter().any(|(x, _)| x == r) {
                resolved.push((*r, raw.clone()));
            }
        }
        match phase2::evaluate(
            bytes,
            &resolved,
            params,
            &rules.cost_models,
            &rules.slot_config,
        )? {
            phase2::Phase2Outcome::Failed(r) => Some(r),
            phase2::Phase2Outcome::Passed(runs) => {
                let mut exceeded = None;
                for run in &runs {
                    measured.mem += run.actual.mem;
                    measured.steps += run.actual.steps;
                    let d = declared_each
                        .get(&run.redeemer)
                        .copied()
                        .unwrap_or_default();
                    if exceeded.is_none() && (run.actual.mem > d.mem || run.actual.steps > d.steps)
                    {
                        exceeded = Some(Rejection::ExUnitsExceeded {
                            redeemer: run.redeemer.clone(),
                            declared: d,
                            actual: run.actual,
                        });
                    }
                }
                exceeded
            }
        }
    } else {
        None
    };

    let is_valid = match (tx.success, failure) {
        (true, None) => true,
        (true, Some(r)) => return Err(r),
        (false, Some(_)) => false,
        (false, None) => return Err(Rejection::PassedUnexpectedly),
    };

    let delta = if is_valid {
        UtxoDelta {
            consumed: inputs.iter().map(|(r, raw, _)| (*r, raw.clone())).collect(),
            produced: body
                .outputs
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    (
                        TxoRef {
                            tx_hash: *hash,
                            index: i as u64,
                        },
                        phase1::output_raw(o).to_vec(),
                    )
                })
                .collect(),
        }
    } else {
        UtxoDelta {
            consumed: collateral
                .iter()
                .map(|(r, raw, _)| (*r, raw.clone()))
                .collect(),
            produced: body
                .collateral_return
                .iter()
                .map(|o| {
                    (
                        TxoRef {
                            tx_hash: *hash,
                            index: body.outputs.len() as u64,
                        },
                        phase1::output_raw(o).to_vec(),
                    )
                })
                .collect(),
        }
    };

    Ok(Validated {
        tx_hash: hash,
        bytes: bytes.to_vec(),
        is_valid,
        delta,
        fee: body.fee,
        ex_units: measured,
    })
}
