//! The differential check: pallas-validate's Conway phase-1 rules — an implementation
//! written independently of this ledger (`pallas_validate::phase1::conway`, pallas 1.4.0,
//! the release our pallas crates come from) — judge every transaction [`super::validate`]
//! judges, on the same bytes, UTxO view and slot. The two verdicts must agree.
//!
//! **Where it runs.** Behind the cargo feature `differential`, which only dev-dependencies
//! turn on (this crate's own tests, and the tests of `ganglion-contracts`, the indexer, the
//! wallet, p2p and the node — every test suite whose transactions reach this ledger, the
//! devnet demo's included). A normal build (the `ganglion-devnet` binary, the node) does not
//! compile pallas-validate at all. With the feature on, [`super::validate`] calls
//! [`enforce`] after its own verdict; a disagreement that no [`Exception`] explains is
//! written to stderr and **aborts the process**. A panic would not do: the devnet validates
//! inside `spawn_blocking`, and its local-tx-submission server turns a panicked task into an
//! `Internal` rejection, which a test expecting a rejection could take for the answer it
//! wanted. An abort cannot be mistaken for success. ([`REPORT_ONLY`] lists every
//! disagreement of a run without aborting, to survey them.)
//!
//! **What "agree" means.** Verdicts, not rule names: both accept, or both refuse. The
//! reasons of two refusals are not compared, because the two implementations check in
//! different orders and cardano-ledger itself reports every failing predicate at once.
//!
//! **Exceptions.** Where the two disagree, cardano-ledger decides, and the devnet follows
//! cardano-ledger: each [`Exception`] names a rule pallas-validate 1.4.0 does not implement,
//! or implements differently from cardano-ledger, and is only granted when the transaction
//! is in exactly the case described (e.g. a fee refused by the devnet is excused only when
//! it covers pallas' size-only minimum). Pallas' verdict is never excused when the *devnet
//! accepts* and pallas refuses, except where an exception says so.
//!
//! **Fees and min-UTxO** are cross-checked against pallas' own code on every decodable
//! transaction ([`fee_and_min_utxo`]): its size (it re-encodes the transaction) must be
//! this ledger's fee size + 1 (cardano-ledger does not count the `is_valid` byte:
//! `sizeAlonzoTxF`); this ledger's minimum fee less its script-execution term must equal
//! pallas' `minFeeA × size + minFeeB` on that size; and for every output this ledger's
//! minimum lovelace must be at least pallas' (see [`Exception::MinUtxoOverWholeOutput`]).
//!
//! To judge with cardano-ledger's size, pallas is given `minFeeB − minFeeA` and
//! `maxTxSize + 1` ([`pallas_params`]): with its size one byte larger, its fee floor and size
//! limit are then exactly cardano-ledger's size term and limit.

use std::collections::{BTreeSet, HashMap};
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use pallas_codec::minicbor;
use pallas_primitives::conway::{self, TransactionOutput};
use pallas_primitives::{ExUnitPrices, ExUnits as PExUnits, RationalNumber, TransactionInput};
use pallas_traverse::{Era, MultiEraInput, MultiEraOutput};
use pallas_validate::phase1::conway::validate_conway_tx;
use pallas_validate::utils::{
    ConwayProtParams, UTxOs, ValidationError, conway_get_val_size_in_words, get_conway_tx_size,
    get_val_size_in_words,
};

use super::rejection::Rejection;
use super::{Rules, UtxoView, Validated, phase1};
use ganglion_cardano::fees;
use ganglion_cardano::protocol::ProtocolParams;

/// Set this environment variable (any value) to list every disagreement of a run on stderr
/// without aborting — to survey, never to pass a suite.
pub const REPORT_ONLY: &str = "GANGLION_DIFFERENTIAL_REPORT_ONLY";

static CHECKED: AtomicU64 = AtomicU64::new(0);
static EXCUSED: AtomicU64 = AtomicU64::new(0);

/// How many transactions this process has put through the differential check.
pub fn checked() -> u64 {
    CHECKED.load(Ordering::Relaxed)
}

/// How many of them disagreed under a documented [`Exception`].
pub fn excused() -> u64 {
    EXCUSED.load(Ordering::Relaxed)
}

/// A documented disagreement: the devnet and pallas-validate give different verdicts, and
/// the devnet is right per cardano-ledger. Each variant says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exception {
    /// Devnet refuses `DuplicateSetElement`, pallas accepts. pallas-primitives decodes a CDDL
    /// `set` as a plain list and keeps a repeat; Conway's decoder refuses it from protocol
    /// version 9 (cardano-ledger-binary `decodeSetEnforceNoDuplicates`), so a node fails the
    /// transaction's deserialisation. Devnet right.
    SetsDecodedAsLists,
    /// Devnet refuses `BabbageNonDisjointRefInputs`, pallas accepts: pallas has no such
    /// check. cardano-ledger `Babbage.Rules.Utxo.disjointRefInputs` runs first in Conway's
    /// UTXO rule at protocol versions 9 and 10. Devnet right.
    NonDisjointRefInputs,
    /// Devnet refuses `ConwayTxRefScriptsSizeTooBig`, pallas accepts: pallas has no limit on
    /// reference-script bytes (Conway `ConwayTxRefScriptsSizeTooBig`, 200 KiB). Devnet right.
    RefScriptSizeLimit,
    /// Devnet refuses `OutsideValidityIntervalUTxO` at `slot = ttl`, pallas accepts: pallas
    /// takes the upper bound as inclusive (`upper_bound < block_slot`). cardano-ledger
    /// `Allegra.Rules.Utxo` `inInterval`: `i_f ≤ slot && slot < i_t` — exclusive. Devnet
    /// right.
    TtlIsExclusive,
    /// Devnet refuses `FeeTooSmallUTxO` with a fee that covers `minFeeA × size + minFeeB`:
    /// pallas' minimum is that size term only, while Conway's `getConwayMinFeeTxUtxo` adds
    /// the price of the declared ExUnits (`txscriptfee`) and the tiered reference-script fee
    /// (`tierRefScriptFee`). Devnet right.
    ScriptAndRefScriptFees,
    /// Devnet refuses `BabbageOutputTooSmallUTxO` for an output that meets pallas' minimum:
    /// pallas computes `coinsPerUTxOByte × (160 + ⌈|value| / 8⌉)`, Alonzo's word count of
    /// the *value*, while Babbage/Conway charge `coinsPerUTxOByte × (160 + |output|)`, the
    /// serialized *output* in bytes (cardano-ledger `Babbage.PParams` `getMinCoinTxOut` /
    /// `Babbage.Rules.Utxo` `validateOutputTooSmallUTxO`). Devnet right.
    MinUtxoOverWholeOutput,
    /// Devnet refuses `OutputTooBigUTxO` for a value pallas lets through: pallas compares the
    /// value's size in 8-byte words with `maxValueSize`, which is in bytes (Alonzo
    /// `validateOutputTooBigUTxO`: `serSize v > maxValSize`). Devnet right.
    ValueSizeInWords,
    /// Devnet refuses `ExUnitsTooBigUTxO`, pallas accepts: pallas 1.4.0's `check_tx_ex_units`
    /// sums the redeemers in a lazy `map` that is never consumed, so its total stays 0
    /// (Alonzo `validateExUnitsTooBigUTxO`: `totExUnits tx ≤ maxTxExUnits`). Devnet right.
    ExUnitsNeverSummed,
    /// Devnet refuses `ScriptWitnessNotValidatingUTXOW`, pallas accepts: pallas does not run
    /// native scripts in phase 1 ("phase-1 validations do not include the execution of
    /// native scripts", its tests' README); Shelley `validateFailedNativeScripts` does.
    /// Devnet right.
    NativeScriptsNotRun,
    /// Devnet refuses a phase-2 outcome (`PlutusScriptFailed`, `ExUnitsExceeded`,
    /// `PassedUnexpectedly`, `CollectErrors`): pallas-validate is run without its `phase2`
    /// feature, so nothing here runs Plutus; the devnet's phase 2 is uplc's. Not a
    /// phase-1 disagreement.
    PhaseTwoOnly,
    /// Devnet refuses `OutsideForecast`: pallas has no time forecast (Alonzo UTXO
    /// `validateOutsideForecast`). Devnet right.
    NoForecast,
    /// Devnet refuses withdrawals (`WithdrawalsNotInRewardsCERTS`), votes
    /// (`VotersDoNotExist`) or a feature it declares `Unsupported`: pallas' Conway rules
    /// check no certificate, reward-account or governance state. The devnet has no reward
    /// account, DRep, committee member or pool, so Conway's CERTS/GOV rules refuse the first
    /// two; `Unsupported` is the devnet declining to judge, not a claim about Cardano.
    NoCertOrGovState,
    /// Devnet refuses `ExtraneousScriptWitnessesUTXOW` for witness-set scripts that a
    /// reference script already provides, pallas accepts: pallas drops a witnessed script
    /// from its check when a reference input carries the same script. Babbage
    /// `babbageMissingScripts` (used by Conway UTXOW): the witness set must be exactly
    /// `needed − provided by reference`, so such a script is extraneous. Devnet right.
    ScriptAlsoByReference,
    /// Devnet refuses a collateral rule (`NoCollateralInputs`, `InsufficientCollateral`, …)
    /// of a transaction whose Plutus scripts are all reference scripts: pallas checks
    /// collateral only when the *witness set* holds a Plutus script, Alonzo `feesOK` when
    /// the transaction has redeemers (`txrdmrs ≠ ∅`). Devnet right.
    CollateralForReferenceScripts,
}

impl Exception {
    /// The exception for a devnet refusal that pallas accepts, when one applies.
    /// `by_reference`: the hashes of the reference scripts on the spent and referenced
    /// outputs.
    fn for_refusal(
        rejection: &Rejection,
        tx: &conway::Tx<'_>,
        params: &ProtocolParams,
        slot: u64,
        by_reference: &BTreeSet<String>,
    ) -> Option<Self> {
        use Rejection as R;
        Some(match rejection {
            R::DuplicateSetElement { .. } => Self::SetsDecodedAsLists,
            R::BabbageNonDisjointRefInputs { .. } => Self::NonDisjointRefInputs,
            R::ConwayTxRefScriptsSizeTooBig { .. } => Self::RefScriptSizeLimit,
            R::OutsideValidityIntervalUTxO { end, .. } if *end == Some(slot) => {
                Self::TtlIsExclusive
            }
            R::FeeTooSmallUTxO { provided, .. }
                if *provided >= size_term(params, fees::size_for_fee(tx)) =>
            {
                Self::ScriptAndRefScriptFees
            }
            R::BabbageOutputTooSmallUTxO {
                index, provided, ..
            } => {
                let out = if *index == usize::MAX {
                    tx.transaction_body.collateral_return.as_ref()
                } else {
                    tx.transaction_body.outputs.get(*index)
                }?;
                if *provided >= pallas_min_lovelace(params, out) {
                    Self::MinUtxoOverWholeOutput
                } else {
                    return None;
                }
            }
            R::OutputTooBigUTxO { index, .. } => {
                let out = tx.transaction_body.outputs.get(*index)?;
                if value_words(out) <= params.max_value_size {
                    Self::ValueSizeInWords
                } else {
                    return None;
                }
            }
            R::ExtraneousScriptWitnessesUTXOW { script_hashes }
                if script_hashes.iter().all(|h| by_reference.contains(h)) =>
            {
                Self::ScriptAlsoByReference
            }
            R::ExUnitsTooBigUTxO { .. } => Self::ExUnitsNeverSummed,
            R::ScriptWitnessNotValidatingUTXOW { .. } => Self::NativeScriptsNotRun,
            R::PlutusScriptFailed { .. }
            | R::ExUnitsExceeded { .. }
            | R::PassedUnexpectedly
            | R::CollectErrors { .. } => Self::PhaseTwoOnly,
            R::OutsideForecast { .. } => Self::NoForecast,
            R::WithdrawalsNotInRewardsCERTS { .. }
            | R::VotersDoNotExist { .. }
            | R::Unsupported { .. } => Self::NoCertOrGovState,
            R::NoCollateralInputs
            | R::TooManyCollateralInputs { .. }
            | R::ScriptsNotPaidUTxO { .. }
            | R::CollateralContainsNonADA
            | R::InsufficientCollateral { .. }
            | R::IncorrectTotalCollateralField { .. }
                if !witnesses_plutus(tx) =>
            {
                Self::CollateralForReferenceScripts
            }
            _ => return None,
        })
    }
}

/// What the two implementations said, when they agree (or disagree under an exception).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Both accept.
    BothAccept,
    /// Both refuse (possibly under different rules).
    BothRefuse,
    /// They disagree, as documented by the exception.
    Excused(Exception),
}

/// Pallas-validate's verdict.
#[derive(Debug, Clone)]
pub enum PallasVerdict {
    /// Phase 1 passes.
    Accepts,
    /// Refused with this error.
    Refuses(ValidationError),
    /// The bytes do not decode as a Conway transaction for pallas-primitives.
    Undecodable(String),
    /// pallas-validate panicked (counts as a refusal; reported when the devnet accepted).
    Panicked(String),
}

impl PallasVerdict {
    fn accepts(&self) -> bool {
        matches!(self, Self::Accepts)
    }
}

/// An unexplained difference between the devnet's ledger and pallas-validate.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "differential check: devnet ledger and pallas-validate disagree on tx {tx} at slot {slot}: \
     {what}\n  devnet: {devnet}\n  pallas: {pallas:?}\n  tx cbor: {cbor}"
)]
pub struct Disagreement {
    /// Transaction id (hex), or `?` when it does not decode.
    pub tx: String,
    /// The slot it was judged for.
    pub slot: u64,
    /// What differs.
    pub what: String,
    /// The devnet's verdict (`accepted` or the rejection).
    pub devnet: String,
    /// Pallas' verdict.
    pub pallas: PallasVerdict,
    /// The transaction bytes (hex), to replay the case.
    pub cbor: String,
}

/// Compare the devnet's verdict `devnet` on `bytes` (judged against `view` at `slot` under
/// `rules`) with pallas-validate's, and cross-check fees and min-UTxO.
///
/// # Errors
/// The [`Disagreement`] when the verdicts differ outside every [`Exception`], or a fee /
/// min-UTxO cross-check fails.
pub fn compare(
    rules: &Rules,
    view: &impl UtxoView,
    bytes: &[u8],
    slot: u64,
    devnet: &Result<Validated, Rejection>,
) -> Result<Agreement, Box<Disagreement>> {
    let devnet_text = match devnet {
        Ok(v) if v.is_valid => "accepted".to_string(),
        Ok(_) => "accepted as phase-2 invalid (collateral taken)".to_string(),
        Err(r) => format!("{} ({r})", r.rule()),
    };
    let disagreement = |tx: String, what: String, pallas: PallasVerdict| {
        Box::new(Disagreement {
            tx,
            slot,
            what,
            devnet: devnet_text.clone(),
            pallas,
            cbor: hex::encode(bytes),
        })
    };

    let tx: conway::Tx<'_> = match minicbor::decode(bytes) {
        Ok(tx) => tx,
        Err(e) => {
            let pallas = PallasVerdict::Undecodable(e.to_string());
            return match devnet {
                Err(_) => Ok(Agreement::BothRefuse),
                Ok(_) => Err(disagreement(
                    "?".into(),
                    "pallas-primitives cannot decode a transaction the devnet accepted".into(),
                    pallas,
                )),
            };
        }
    };
    let id = super::tx_hash(&tx).to_string();

    if let Err(what) = fee_and_min_utxo(&rules.params, &tx, devnet.is_ok()) {
        return Err(disagreement(id, what, PallasVerdict::Accepts));
    }

    let pallas = pallas_verdict(rules, view, &tx, slot);
    match (devnet, pallas.accepts()) {
        (Ok(_), true) => Ok(Agreement::BothAccept),
        (Err(_), false) => Ok(Agreement::BothRefuse),
        (Err(r), true) => {
            match Exception::for_refusal(r, &tx, &rules.params, slot, &reference_scripts(view, &tx))
            {
                Some(e) => Ok(Agreement::Excused(e)),
                None => Err(disagreement(
                    id,
                    "the devnet refuses what pallas-validate accepts".into(),
                    pallas,
                )),
            }
        }
        (Ok(_), false) => Err(disagreement(
            id,
            "the devnet accepts what pallas-validate refuses".into(),
            pallas,
        )),
    }
}

/// Run [`compare`] and abort the process on a [`Disagreement`] (see the module docs for
/// why an abort and not a panic). Called by [`super::validate`] with the feature on.
pub(crate) fn enforce(
    rules: &Rules,
    view: &impl UtxoView,
    bytes: &[u8],
    slot: u64,
    devnet: &Result<Validated, Rejection>,
) {
    CHECKED.fetch_add(1, Ordering::Relaxed);
    match compare(rules, view, bytes, slot, devnet) {
        Ok(Agreement::Excused(_)) => {
            EXCUSED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(_) => {}
        Err(d) => {
            // Straight to the process' stderr: the test harness' capture would be lost.
            let _ = writeln!(std::io::stderr().lock(), "\n{d}\n");
            if std::env::var_os(REPORT_ONLY).is_none() {
                std::process::abort();
            }
        }
    }
}

/// Pallas-validate's phase-1 verdict on `tx`, with the UTxOs its inputs, collateral and
/// reference inputs resolve to in `view`.
pub fn pallas_verdict(
    rules: &Rules,
    view: &impl UtxoView,
    tx: &conway::Tx<'_>,
    slot: u64,
) -> PallasVerdict {
    let body = &tx.transaction_body;
    let wanted: Vec<&TransactionInput> = body
        .inputs
        .iter()
        .chain(body.collateral.iter().flat_map(|s| s.iter()))
        .chain(body.reference_inputs.iter().flat_map(|s| s.iter()))
        .collect();
    let mut utxos: UTxOs<'_> = HashMap::new();
    for input in wanted {
        let r = ganglion_cardano::txo::TxoRef::from(input);
        // An output the view lacks, or pallas cannot read, stays out: pallas then reports
        // the input as not in the UTxO set, as the devnet does (`BadInputsUTxO`).
        if let Some(raw) = view.lookup(&r)
            && let Ok(out) = MultiEraOutput::decode(Era::Conway, raw)
        {
            utxos.insert(MultiEraInput::from_alonzo_compatible(input), out);
        }
    }
    let pp = pallas_params(&rules.params);
    let network_id = rules.network_id;
    match catch_unwind(AssertUnwindSafe(|| {
        validate_conway_tx(tx, &utxos, &pp, &slot, &network_id)
    })) {
        Ok(Ok(())) => PallasVerdict::Accepts,
        Ok(Err(e)) => PallasVerdict::Refuses(e),
        Err(p) => PallasVerdict::Panicked(
            p.downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default(),
        ),
    }
}

/// The hashes (hex) of the reference scripts carried by the outputs `tx` spends or
/// references, as far as `view` knows them.
fn reference_scripts(view: &impl UtxoView, tx: &conway::Tx<'_>) -> BTreeSet<String> {
    let body = &tx.transaction_body;
    body.inputs
        .iter()
        .chain(body.reference_inputs.iter().flat_map(|s| s.iter()))
        .filter_map(|i| view.lookup(&ganglion_cardano::txo::TxoRef::from(i)))
        .filter_map(|raw| phase1::output_facts(raw).ok()?.script_ref)
        .map(|(h, _, _)| h.to_string())
        .collect()
}

/// The devnet's protocol parameters in pallas-validate's shape. Two are shifted so that
/// pallas, whose size counts the `is_valid` byte, judges with cardano-ledger's size
/// (`sizeAlonzoTxF`, one byte less): `minfee_b = minFeeB − minFeeA` (so `minFeeA × size' +
/// minfee_b = minFeeA × (size' − 1) + minFeeB`) and `max_transaction_size = maxTxSize + 1`.
/// Governance and reward fields, which no phase-1 rule reads, are placeholders.
pub fn pallas_params(p: &ProtocolParams) -> ConwayProtParams {
    let half = RationalNumber {
        numerator: 1,
        denominator: 2,
    };
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    ConwayProtParams {
        system_start: chrono::DateTime::from_timestamp(0, 0)
            .unwrap_or_default()
            .fixed_offset(),
        epoch_length: 432_000,
        slot_length: 1,
        minfee_a: u32_of(p.min_fee_a),
        minfee_b: u32_of(p.min_fee_b.saturating_sub(p.min_fee_a)),
        max_block_body_size: u32_of(p.max_block_body_size),
        max_transaction_size: u32_of(p.max_tx_size.saturating_add(1)),
        max_block_header_size: 1100,
        key_deposit: 2_000_000,
        pool_deposit: 500_000_000,
        desired_number_of_stake_pools: 500,
        protocol_version: p.protocol_version,
        min_pool_cost: 170_000_000,
        ada_per_utxo_byte: p.coins_per_utxo_byte,
        cost_models_for_script_languages: conway::CostModels {
            plutus_v1: Some(p.cost_model_v1.clone()),
            plutus_v2: Some(p.cost_model_v2.clone()),
            plutus_v3: Some(p.cost_model_v3.clone()),
            unknown: Default::default(),
        },
        execution_costs: ExUnitPrices {
            mem_price: RationalNumber {
                numerator: p.price_mem.numerator,
                denominator: p.price_mem.denominator,
            },
            step_price: RationalNumber {
                numerator: p.price_steps.numerator,
                denominator: p.price_steps.denominator,
            },
        },
        max_tx_ex_units: PExUnits {
            mem: p.max_tx_ex_units.mem,
            steps: p.max_tx_ex_units.steps,
        },
        max_block_ex_units: PExUnits {
            mem: p.max_block_ex_units.mem,
            steps: p.max_block_ex_units.steps,
        },
        max_value_size: u32_of(p.max_value_size),
        collateral_percentage: u32_of(p.collateral_percentage),
        max_collateral_inputs: u32_of(p.max_collateral_inputs),
        expansion_rate: half.clone(),
        treasury_growth_rate: half.clone(),
        maximum_epoch: 18,
        pool_pledge_influence: half.clone(),
        pool_voting_thresholds: conway::PoolVotingThresholds {
            motion_no_confidence: half.clone(),
            committee_normal: half.clone(),
            committee_no_confidence: half.clone(),
            hard_fork_initiation: half.clone(),
            security_voting_threshold: half.clone(),
        },
        drep_voting_thresholds: conway::DRepVotingThresholds {
            motion_no_confidence: half.clone(),
            committee_normal: half.clone(),
            committee_no_confidence: half.clone(),
            update_constitution: half.clone(),
            hard_fork_initiation: half.clone(),
            pp_network_group: half.clone(),
            pp_economic_group: half.clone(),
            pp_technical_group: half.clone(),
            pp_governance_group: half.clone(),
            treasury_withdrawal: half.clone(),
        },
        min_committee_size: 7,
        committee_term_limit: 146,
        governance_action_validity_period: 6,
        governance_action_deposit: 100_000_000_000,
        drep_deposit: 500_000_000,
        drep_inactivity_period: 20,
        minfee_refscript_cost_per_byte: RationalNumber {
            numerator: p.min_fee_ref_script_cost_per_byte,
            denominator: 1,
        },
    }
}

/// `minFeeA × size + minFeeB` (lovelace): the size term of the minimum fee.
fn size_term(p: &ProtocolParams, size: u64) -> u64 {
    p.min_fee_a.saturating_mul(size).saturating_add(p.min_fee_b)
}

/// Pallas' minimum lovelace of an output: `coinsPerUTxOByte × (160 + ⌈|value| / 8⌉)`
/// (its `compute_min_lovelace`, rebuilt from its public `*_val_size_in_words`).
pub fn pallas_min_lovelace(p: &ProtocolParams, out: &TransactionOutput<'_>) -> u64 {
    p.coins_per_utxo_byte
        .saturating_mul(fees::UTXO_ENTRY_OVERHEAD_BYTES + value_words(out))
}

/// The output's value size in 8-byte words, by pallas' code.
fn value_words(out: &TransactionOutput<'_>) -> u64 {
    match out {
        TransactionOutput::Legacy(o) => get_val_size_in_words(&o.amount),
        TransactionOutput::PostAlonzo(o) => conway_get_val_size_in_words(&o.value),
    }
}

/// True when the witness set holds a Plutus script (pallas' trigger for collateral checks).
fn witnesses_plutus(tx: &conway::Tx<'_>) -> bool {
    let ws = &tx.transaction_witness_set;
    ws.plutus_v1_script.as_ref().is_some_and(|s| !s.is_empty())
        || ws.plutus_v2_script.as_ref().is_some_and(|s| !s.is_empty())
        || ws.plutus_v3_script.as_ref().is_some_and(|s| !s.is_empty())
}

/// The fee and min-UTxO cross-checks against pallas-validate's code, on any transaction:
///
/// - pallas' size ([`get_conway_tx_size`], a re-encoding) is this ledger's fee size
///   ([`fees::size_for_fee`]) + 1, the `is_valid` byte cardano-ledger does not count;
/// - this ledger's minimum fee ([`phase1::min_fee_of`], no reference scripts) less the
///   price of the declared ExUnits ([`fees::script_fee`]) is `minFeeA × (pallas' size − 1)
///   + minFeeB`;
/// - when `outputs_paid` (the devnet accepted the transaction), every output (and the
///   collateral return) holds at least this ledger's minimum, which is at least pallas'.
///
/// # Errors
/// What differs, in words.
pub fn fee_and_min_utxo(
    params: &ProtocolParams,
    tx: &conway::Tx<'_>,
    outputs_paid: bool,
) -> Result<(), String> {
    let ours = fees::size_for_fee(tx);
    let theirs = get_conway_tx_size(tx).map(u64::from);
    if theirs != Some(ours + 1) {
        return Err(format!(
            "fee size: ledger counts {ours} bytes, pallas {theirs:?} (expected ledger + 1)"
        ));
    }
    let (units, _) = phase1::declared_ex_units(tx);
    let size_part =
        phase1::min_fee_of(params, tx, 0).saturating_sub(fees::script_fee(params, units));
    if size_part != size_term(params, ours) {
        return Err(format!(
            "min fee: ledger's size term {size_part} ≠ minFeeA × {ours} + minFeeB = {}",
            size_term(params, ours)
        ));
    }
    let body = &tx.transaction_body;
    for (i, out) in body
        .outputs
        .iter()
        .chain(body.collateral_return.iter())
        .enumerate()
    {
        let ledger_min = fees::min_utxo(params, phase1::output_raw(out).len() as u64);
        let pallas_min = pallas_min_lovelace(params, out);
        if ledger_min < pallas_min {
            return Err(format!(
                "min-UTxO of output {i}: ledger {ledger_min} < pallas {pallas_min} lovelace"
            ));
        }
        let coin = match out {
            TransactionOutput::Legacy(o) => match &o.amount {
                pallas_primitives::alonzo::Value::Coin(c)
                | pallas_primitives::alonzo::Value::Multiasset(c, _) => *c,
            },
            TransactionOutput::PostAlonzo(o) => match &o.value {
                conway::Value::Coin(c) | conway::Value::Multiasset(c, _) => *c,
            },
        };
        if outputs_paid && coin < ledger_min {
            return Err(format!(
                "min-UTxO of output {i}: accepted with {coin} lovelace, ledger minimum {ledger_min}"
            ));
        }
    }
    Ok(())
}
