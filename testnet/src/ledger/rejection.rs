//! Why the ledger refused a transaction: one variant per rule, named after the rule.
//!
//! Rule names follow the Conway ledger's predicate failures (cardano-ledger
//! `ConwayUtxoPredFailure` / `ConwayUtxowPredFailure`) where one exists, so a message
//! can be looked up in the ledger spec. [`Rejection::rule`] gives the stable name that
//! travels over local-tx-submission together with the human-readable message.

use ganglion_cardano::protocol::ExUnits;
use ganglion_cardano::txo::TxoRef;

/// A transaction rejection. `Display` is the human-readable reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The bytes are not a well-formed Conway transaction.
    #[error("malformed transaction: {reason}")]
    Malformed {
        /// What the decoder said.
        reason: String,
    },
    /// The transaction is larger than `maxTxSize`.
    #[error("transaction is {size} bytes, the maximum is {max}")]
    MaxTxSizeUTxO {
        /// Transaction size as the ledger counts it, without `is_valid` (bytes).
        size: u64,
        /// Protocol maximum (bytes).
        max: u64,
    },
    /// A transaction feature the devnet ledger does not implement: certificates, proposals,
    /// treasury value / donation, Byron bootstrap witnesses, spending Byron addresses. Not a
    /// Cardano rule: a real node may accept such a transaction; the devnet cannot check it,
    /// so it refuses it under this name rather than pretend.
    #[error("unsupported on the devnet: {feature}")]
    Unsupported {
        /// The body field or feature.
        feature: &'static str,
    },
    /// A set in the body (inputs, collateral inputs, reference inputs, required signers)
    /// or a Plutus script set of the witness set lists one element more than once.
    ///
    /// Conway refuses this **while decoding**, before any ledger rule runs: from protocol
    /// version 9 cardano-ledger-binary's `decodeSet` is `decodeSetEnforceNoDuplicates`
    /// (`decodeSetLikeEnforceNoDuplicates`: "Final number of elements … does not match the
    /// total count that was decoded"), so a repeated input never reaches value preservation.
    /// Before protocol version 9 the same bytes decoded as `Set.fromList`, silently counting
    /// the repeat once. A real node fails the transaction's deserialisation (no predicate
    /// failure exists for it); the devnet answers with this named rule instead.
    ///
    /// In the witness set (cardano-ledger `Alonzo.TxWits`), the Plutus script sets (keys 3,
    /// 6, 7) are decoded by `scriptDecoderV9` (`decodeMapLikeEnforceNoDuplicates`, from
    /// version 9): a repeated script is refused too. Vkey and bootstrap witnesses, native
    /// scripts and datums are decoded with `Set.fromList` / `Map.fromList` until version 12,
    /// so at the devnet's version 10 a repeat there is merged, not refused, and the devnet
    /// merges it too.
    #[error("{field} lists {element} more than once (a set: Conway refuses it at decoding)")]
    DuplicateSetElement {
        /// The body field, e.g. `inputs`.
        field: &'static str,
        /// The repeated element (an input `txid#index` or a key hash, hex).
        element: String,
    },
    /// The transaction spends no input.
    #[error("transaction has no inputs")]
    InputSetEmptyUTxO,
    /// Inputs that are also reference inputs. Conway refuses the overlap at protocol
    /// versions 9 and 10 (cardano-ledger `Babbage.Rules.Utxo.disjointRefInputs`:
    /// `inputs ∩ refInputs = ∅` when `eraProtVerHigh @BabbageEra < pv < 11`, run first in
    /// Conway's UTXO rule); from version 11 the overlap is allowed again.
    #[error("inputs also listed as reference inputs: {}", fmt_refs(.inputs))]
    BabbageNonDisjointRefInputs {
        /// The inputs in both sets.
        inputs: Vec<TxoRef>,
    },
    /// Inputs that are unknown or already spent (includes double spends).
    #[error("inputs unknown or already spent: {}", fmt_refs(.inputs))]
    BadInputsUTxO {
        /// The missing inputs.
        inputs: Vec<TxoRef>,
    },
    /// The current slot is outside the transaction's validity interval.
    #[error("slot {slot} is outside the validity interval [{start:?}, {end:?})")]
    OutsideValidityIntervalUTxO {
        /// The slot the transaction would be included in.
        slot: u64,
        /// `validity_interval_start` (inclusive).
        start: Option<u64>,
        /// `ttl` (exclusive).
        end: Option<u64>,
    },
    /// An output address is for another network.
    #[error("output {index} pays to another network (expected network id {expected})")]
    WrongNetwork {
        /// Output index.
        index: usize,
        /// The devnet's network id.
        expected: u8,
    },
    /// An output carries less lovelace than its minimum.
    #[error("output {index} holds {provided} lovelace, minimum is {required}")]
    BabbageOutputTooSmallUTxO {
        /// Output index (`usize::MAX` for the collateral return).
        index: usize,
        /// Minimum lovelace: (160 + size) × coinsPerUTxOByte.
        required: u64,
        /// Lovelace in the output.
        provided: u64,
    },
    /// An output's value is too large when serialized.
    #[error("output {index} value is {size} bytes, maximum is {max}")]
    OutputTooBigUTxO {
        /// Output index.
        index: usize,
        /// Serialized value size (bytes).
        size: u64,
        /// `maxValueSize` (bytes).
        max: u64,
    },
    /// The body's `network_id` is not the devnet's.
    #[error("body network id {declared} differs from the devnet's {expected}")]
    WrongNetworkInTxBody {
        /// Declared network id.
        declared: u8,
        /// The devnet's network id.
        expected: u8,
    },
    /// Auxiliary data is present but the body has no `auxiliary_data_hash`.
    #[error("auxiliary data without auxiliary_data_hash in the body")]
    MissingTxBodyMetadataHash,
    /// The body declares an `auxiliary_data_hash` but the transaction has no auxiliary data.
    #[error("auxiliary_data_hash {declared} declared but no auxiliary data")]
    MissingTxMetadata {
        /// Declared hash (hex).
        declared: String,
    },
    /// `auxiliary_data_hash` does not match the auxiliary data.
    #[error("auxiliary_data_hash {declared} differs from the data's hash {computed}")]
    ConflictingMetadataHash {
        /// Declared hash (hex).
        declared: String,
        /// blake2b-256 of the auxiliary data bytes (hex).
        computed: String,
    },
    /// Reference scripts spent or referenced exceed the Conway per-transaction limit.
    #[error("reference scripts total {size} bytes, the maximum is {max}")]
    ConwayTxRefScriptsSizeTooBig {
        /// Σ reference-script bytes (inputs and reference inputs).
        size: u64,
        /// Limit (bytes).
        max: u64,
    },
    /// Consumed and produced values differ.
    #[error("value not conserved: consumed {consumed}, produced {produced}")]
    ValueNotConservedUTxO {
        /// Σ inputs + mint.
        consumed: String,
        /// Σ outputs + fee.
        produced: String,
    },
    /// The fee is below the exact minimum.
    #[error("fee {provided} lovelace is below the minimum {required} lovelace")]
    FeeTooSmallUTxO {
        /// Minimum fee (lovelace): size + ExUnits + reference-script tiers.
        required: u64,
        /// Declared fee (lovelace).
        provided: u64,
    },
    /// A vkey witness signature does not verify over the body hash.
    #[error("invalid signature by vkey {vkey}")]
    InvalidWitnessesUTXOW {
        /// The verification key (hex).
        vkey: String,
    },
    /// Key hashes that must sign but did not.
    #[error("missing signatures from key hashes {}", .key_hashes.join(", "))]
    MissingVKeyWitnessesUTXOW {
        /// Missing key hashes (hex).
        key_hashes: Vec<String>,
    },
    /// A needed script is neither in the witness set nor a reference script.
    #[error("missing script {script_hash}")]
    MissingScriptWitnessesUTXOW {
        /// Script hash (hex).
        script_hash: String,
    },
    /// The witness set holds scripts no purpose needs, or needed scripts a reference
    /// script already provides (Babbage `babbageMissingScripts`).
    #[error("extraneous script witnesses {}", .script_hashes.join(", "))]
    ExtraneousScriptWitnessesUTXOW {
        /// The extraneous script hashes (hex).
        script_hashes: Vec<String>,
    },
    /// A spent output locked by a Plutus script carries a datum hash whose datum is not in
    /// the witness set.
    #[error("missing datums {} (witness set has {})", .missing.join(", "), .received.join(", "))]
    MissingRequiredDatums {
        /// The datum hashes required but absent (hex).
        missing: Vec<String>,
        /// The datum hashes the witness set has (hex).
        received: Vec<String>,
    },
    /// The witness set holds datums neither a spent output needs nor an output or
    /// reference input of the transaction names by hash.
    #[error("datums {} are not allowed as supplemental datums", .unallowed.join(", "))]
    NotAllowedSupplementalDatums {
        /// The datum hashes not allowed (hex).
        unallowed: Vec<String>,
        /// The supplemental datum hashes that are allowed (hex).
        acceptable: Vec<String>,
    },
    /// Redeemers that point at no purpose whose script is a Plutus script.
    #[error("redeemers {} point at nothing a Plutus script validates", .pointers.join(", "))]
    ExtraRedeemers {
        /// The redeemer pointers, e.g. `spend:3`.
        pointers: Vec<String>,
    },
    /// Purposes validated by a Plutus script without a redeemer.
    #[error("no redeemer for {}", .pointers.join(", "))]
    MissingRedeemers {
        /// The purposes' pointers, e.g. `spend:1`.
        pointers: Vec<String>,
    },
    /// A transaction with redeemers whose validity upper bound is past the slots the
    /// ledger can turn into time.
    #[error("validity upper bound slot {slot} is beyond the time forecast")]
    OutsideForecast {
        /// The transaction's `ttl` (slot).
        slot: u64,
    },
    /// Withdrawals from reward accounts that are not registered with exactly that balance.
    /// The devnet registers no reward account, so every withdrawal breaks this rule
    /// (Conway `ConwayCertsPredFailure::WithdrawalsNotInRewardsCERTS`).
    #[error("withdrawals from unregistered reward accounts or of a wrong amount: {}", .accounts.join(", "))]
    WithdrawalsNotInRewardsCERTS {
        /// The reward accounts (hex) and amounts (lovelace), `account=amount`.
        accounts: Vec<String>,
    },
    /// Votes by voters that do not exist. The devnet has no constitutional committee, DRep
    /// or stake pool, so every vote breaks this rule (Conway `ConwayGovPredFailure::VotersDoNotExist`).
    #[error("voters do not exist: {}", .voters.join(", "))]
    VotersDoNotExist {
        /// The voters, e.g. `drep-key:<hash>`.
        voters: Vec<String>,
    },
    /// A native script evaluated to false.
    #[error("native script {script_hash} failed")]
    ScriptWitnessNotValidatingUTXOW {
        /// Script hash (hex).
        script_hash: String,
    },
    /// `script_data_hash` does not match the redeemers, datums and cost models.
    #[error("script_data_hash mismatch: declared {declared:?}, computed {computed:?}")]
    PPViewHashesDontMatch {
        /// Declared hash (hex).
        declared: Option<String>,
        /// Computed hash (hex), `None` when no script data is present.
        computed: Option<String>,
    },
    /// Plutus scripts run but no collateral was given.
    #[error("no collateral inputs")]
    NoCollateralInputs,
    /// More collateral inputs than `maxCollateralInputs`.
    #[error("{count} collateral inputs, maximum is {max}")]
    TooManyCollateralInputs {
        /// Number given.
        count: u64,
        /// Protocol maximum.
        max: u64,
    },
    /// A collateral input is locked by a script.
    #[error("collateral input {input} is not locked by a key")]
    ScriptsNotPaidUTxO {
        /// The offending input.
        input: TxoRef,
    },
    /// Collateral (net of the collateral return) contains native assets.
    #[error("collateral contains native assets")]
    CollateralContainsNonADA,
    /// Collateral is below `collateralPercentage` of the fee.
    #[error("collateral {provided} lovelace is below the required {required} lovelace")]
    InsufficientCollateral {
        /// Required lovelace (fee × percentage / 100, rounded up).
        required: u64,
        /// Net collateral (lovelace).
        provided: u64,
    },
    /// `total_collateral` disagrees with the collateral balance.
    #[error("total_collateral {declared} differs from the collateral balance {actual}")]
    IncorrectTotalCollateralField {
        /// Declared lovelace.
        declared: u64,
        /// Actual net collateral lovelace.
        actual: u64,
    },
    /// Declared ExUnits exceed `maxTxExecutionUnits`.
    #[error("declared ExUnits {declared:?} exceed the maximum {max:?}")]
    ExUnitsTooBigUTxO {
        /// Σ declared ExUnits.
        declared: ExUnits,
        /// Protocol maximum.
        max: ExUnits,
    },
    /// The evaluator could not collect the scripts' inputs (e.g. a datum or cost model it
    /// cannot find); redeemer and datum mismatches are caught before, under their own rules.
    #[error("cannot run scripts: {reason}")]
    CollectErrors {
        /// The evaluator's explanation.
        reason: String,
    },
    /// A Plutus script failed in a transaction marked valid (`ValidationTagMismatch`).
    #[error("script {redeemer} failed: {reason}; logs: {logs:?}")]
    PlutusScriptFailed {
        /// Redeemer pointer, e.g. `spend:0` (empty when unknown).
        redeemer: String,
        /// The evaluator's error.
        reason: String,
        /// Trace messages.
        logs: Vec<String>,
    },
    /// A script used more ExUnits than its redeemer declared.
    #[error("redeemer {redeemer} used {actual:?}, declared {declared:?}")]
    ExUnitsExceeded {
        /// Redeemer pointer, e.g. `spend:0`.
        redeemer: String,
        /// Declared budget.
        declared: ExUnits,
        /// Measured cost.
        actual: ExUnits,
    },
    /// `is_valid = false` but every script succeeded (`ValidationTagMismatch`, PassedUnexpectedly).
    #[error("transaction marked invalid but all scripts succeeded")]
    PassedUnexpectedly,
}

fn fmt_refs(refs: &[TxoRef]) -> String {
    refs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Rejection {
    /// The stable rule name (the variant name), e.g. `"FeeTooSmallUTxO"`.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::Malformed { .. } => "Malformed",
            Self::MaxTxSizeUTxO { .. } => "MaxTxSizeUTxO",
            Self::Unsupported { .. } => "Unsupported",
            Self::DuplicateSetElement { .. } => "DuplicateSetElement",
            Self::BabbageNonDisjointRefInputs { .. } => "BabbageNonDisjointRefInputs",
            Self::InputSetEmptyUTxO => "InputSetEmptyUTxO",
            Self::BadInputsUTxO { .. } => "BadInputsUTxO",
            Self::OutsideValidityIntervalUTxO { .. } => "OutsideValidityIntervalUTxO",
            Self::WrongNetwork { .. } => "WrongNetwork",
            Self::BabbageOutputTooSmallUTxO { .. } => "BabbageOutputTooSmallUTxO",
            Self::OutputTooBigUTxO { .. } => "OutputTooBigUTxO",
            Self::ValueNotConservedUTxO { .. } => "ValueNotConservedUTxO",
            Self::WrongNetworkInTxBody { .. } => "WrongNetworkInTxBody",
            Self::MissingTxBodyMetadataHash => "MissingTxBodyMetadataHash",
            Self::MissingTxMetadata { .. } => "MissingTxMetadata",
            Self::ConflictingMetadataHash { .. } => "ConflictingMetadataHash",
            Self::ConwayTxRefScriptsSizeTooBig { .. } => "ConwayTxRefScriptsSizeTooBig",
            Self::FeeTooSmallUTxO { .. } => "FeeTooSmallUTxO",
            Self::InvalidWitnessesUTXOW { .. } => "InvalidWitnessesUTXOW",
            Self::MissingVKeyWitnessesUTXOW { .. } => "MissingVKeyWitnessesUTXOW",
            Self::MissingScriptWitnessesUTXOW { .. } => "MissingScriptWitnessesUTXOW",
            Self::ScriptWitnessNotValidatingUTXOW { .. } => "ScriptWitnessNotValidatingUTXOW",
            Self::ExtraneousScriptWitnessesUTXOW { .. } => "ExtraneousScriptWitnessesUTXOW",
            Self::MissingRequiredDatums { .. } => "MissingRequiredDatums",
            Self::NotAllowedSupplementalDatums { .. } => "NotAllowedSupplementalDatums",
            Self::ExtraRedeemers { .. } => "ExtraRedeemers",
            Self::MissingRedeemers { .. } => "MissingRedeemers",
            Self::OutsideForecast { .. } => "OutsideForecast",
            Self::WithdrawalsNotInRewardsCERTS { .. } => "WithdrawalsNotInRewardsCERTS",
            Self::VotersDoNotExist { .. } => "VotersDoNotExist",
            Self::PPViewHashesDontMatch { .. } => "PPViewHashesDontMatch",
            Self::NoCollateralInputs => "NoCollateralInputs",
            Self::TooManyCollateralInputs { .. } => "TooManyCollateralInputs",
            Self::ScriptsNotPaidUTxO { .. } => "ScriptsNotPaidUTxO",
            Self::CollateralContainsNonADA => "CollateralContainsNonADA",
            Self::InsufficientCollateral { .. } => "InsufficientCollateral",
            Self::IncorrectTotalCollateralField { .. } => "IncorrectTotalCollateralField",
            Self::ExUnitsTooBigUTxO { .. } => "ExUnitsTooBigUTxO",
            Self::CollectErrors { .. } => "CollectErrors",
            Self::PlutusScriptFailed { .. } => "PlutusScriptFailed",
            Self::ExUnitsExceeded { .. } => "ExUnitsExceeded",
            Self::PassedUnexpectedly => "PassedUnexpectedly",
        }
    }
}
