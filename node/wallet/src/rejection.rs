//! Why a node refused a transaction: the reason a local-tx-submission `MsgRejectTx` carries,
//! decoded into typed, readable failures.
//!
//! Two encodings arrive on this path:
//! - **cardano-node** (Conway): the hard-fork combinator's `HardForkApplyTxErr`, i.e.
//!   `[[era_index, [ledger_failure, …]]]` (`encodeEitherMismatch`: a one-element list for a
//!   failure in the node's current era, two elements for an era mismatch), each failure a
//!   cardano-ledger `ConwayLedgerPredFailure` encoded as `[tag, fields…]` and nested through
//!   `ConwayUtxowPredFailure` → `ConwayUtxoPredFailure` → `ConwayUtxosPredFailure`, or
//!   `ConwayCertsPredFailure` / `ConwayGovPredFailure`. Tags follow the `EncCBOR` instances
//!   of cardano-ledger's Conway rules (`Cardano.Ledger.Conway.Rules.{Ledger,Utxow,Utxo,Utxos,
//!   Certs,Cert,Deleg,GovCert,Gov}`).
//! - **the devnet**: `[rule: text, message: text]` (`ganglion_cardano::localtx::WireRejection`).
//!
//! A failure's fields are rendered in CBOR diagnostic notation; a tag this table does not
//! know is kept as `Unknown(n)` with its fields, never dropped.

use std::fmt;

use pallas_codec::minicbor::data::Type;
use pallas_codec::minicbor::{self, Decoder};

use ganglion_cardano::client::ClientError;

/// A submission that did not go through.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitFailure {
    /// The node answered `MsgRejectTx`.
    #[error("{0}")]
    Rejected(SubmitRejection),
    /// The submission protocol itself failed (connection, agency) or the reason did not
    /// decode (the raw CBOR is kept, hex).
    #[error("{0}")]
    Transport(#[source] ClientError),
    /// A `MsgRejectTx` whose reason is neither encoding above.
    #[error("undecodable rejection ({reason}): {cbor_hex}")]
    Undecodable {
        /// The decoder's message.
        reason: String,
        /// The reason's CBOR (hex).
        cbor_hex: String,
    },
}

/// A decoded rejection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitRejection {
    /// cardano-node's ledger refused the transaction in era `era` (N2C era index: 6 =
    /// Conway) with these predicate failures, in the node's order.
    Ledger {
        /// The era index of the node's ledger.
        era: u64,
        /// Every predicate failure the node listed.
        failures: Vec<LedgerFailure>,
    },
    /// The transaction's era is not the node's current era.
    EraMismatch {
        /// The two era descriptions, CBOR diagnostic notation.
        detail: String,
    },
    /// The devnet's `[rule, message]`.
    Devnet {
        /// The rule, e.g. `FeeTooSmallUTxO`.
        rule: String,
        /// Its human-readable message.
        message: String,
    },
}

/// One ledger predicate failure with its path through the Conway rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerFailure {
    /// Rule names, outermost first, e.g. `["ConwayUtxowFailure", "UtxoFailure",
    /// "FeeTooSmallUTxO"]`.
    pub path: Vec<RuleName>,
    /// The innermost failure's fields, CBOR diagnostic notation (e.g. `[200000, 201234]`).
    pub detail: String,
}

/// A cardano-ledger predicate-failure constructor name, or a tag this decoder does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleName {
    /// A constructor name.
    Known(&'static str),
    /// An unknown tag in the rule named here.
    Unknown {
        /// The enclosing rule type, e.g. `ConwayUtxoPredFailure`.
        rule: &'static str,
        /// The tag.
        tag: u64,
    },
}

impl fmt::Display for RuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Known(n) => f.write_str(n),
            Self::Unknown { rule, tag } => write!(f, "{rule}#{tag}"),
        }
    }
}

impl LedgerFailure {
    /// The innermost rule, e.g. `FeeTooSmallUTxO`.
    pub fn rule(&self) -> RuleName {
        self.path
            .last()
            .copied()
            .unwrap_or(RuleName::Known("ApplyTxError"))
    }
}

impl fmt::Display for LedgerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path: Vec<String> = self.path.iter().map(ToString::to_string).collect();
        write!(f, "{} {}", path.join(" / "), self.detail)
    }
}

impl fmt::Display for SubmitRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ledger { era, failures } => {
                write!(f, "ledger (era {era}): ")?;
                let all: Vec<String> = failures.iter().map(ToString::to_string).collect();
                f.write_str(&all.join("; "))
            }
            Self::EraMismatch { detail } => write!(f, "era mismatch: {detail}"),
            Self::Devnet { rule, message } => write!(f, "{rule}: {message}"),
        }
    }
}

impl SubmitRejection {
    /// The innermost rule names, e.g. `["FeeTooSmallUTxO"]`.
    pub fn rules(&self) -> Vec<String> {
        match self {
            Self::Ledger { failures, .. } => {
                failures.iter().map(|f| f.rule().to_string()).collect()
            }
            Self::EraMismatch { .. } => vec!["EraMismatch".into()],
            Self::Devnet { rule, .. } => vec![rule.clone()],
        }
    }
}

/// Decode a `MsgRejectTx` reason: cardano-node's Conway `HardForkApplyTxErr` or the
/// devnet's `[rule, message]`.
///
/// # Errors
/// The decoder's message when the bytes are neither.
pub fn decode(cbor: &[u8]) -> Result<SubmitRejection, String> {
    let mut d = Decoder::new(cbor);
    let outer = d.array().map_err(|e| e.to_string())?;
    let first = d.datatype().map_err(|e| e.to_string())?;
    let out = match (outer, first) {
        (Some(2), Type::String) => {
            let rule = d.str().map_err(|e| e.to_string())?.to_string();
            let message = d.str().map_err(|e| e.to_string())?.to_string();
            SubmitRejection::Devnet { rule, message }
        }
        (Some(1), _) => {
            let n = d.array().map_err(|e| e.to_string())?;
            if n != Some(2) {
                return Err("an era-tagged ApplyTxErr is [era, failures]".into());
            }
            let era = d.u64().map_err(|e| e.to_string())?;
            let mut failures = Vec::new();
            each(&mut d, |d| {
                let mut path = Vec::new();
                let detail = ledger(d, &mut path)?;
                failures.push(LedgerFailure { path, detail });
                Ok(())
            })?;
            SubmitRejection::Ledger { era, failures }
        }
        (Some(2), _) => {
            let a = diag(&mut d)?;
            let b = diag(&mut d)?;
            SubmitRejection::EraMismatch {
                detail: format!("[{a}, {b}]"),
            }
        }
        _ => return Err("neither a HardForkApplyTxErr nor [rule, message]".into()),
    };
    if d.position() != cbor.len() {
        return Err(format!("{} trailing bytes", cbor.len() - d.position()));
    }
    Ok(out)
}

type R<T> = Result<T, String>;

/// Calls `f` once per element of a definite or indefinite array.
fn each(d: &mut Decoder<'_>, mut f: impl FnMut(&mut Decoder<'_>) -> R<()>) -> R<()> {
    match d.array().map_err(|e| e.to_string())? {
        Some(n) => {
            for _ in 0..n {
                f(d)?;
            }
        }
        None => {
            while d.datatype().map_err(|e| e.to_string())? != Type::Break {
                f(d)?;
            }
            d.skip().map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Reads `[tag, fields…]`: returns the tag and how many fields follow (`None`: indefinite).
fn sum(d: &mut Decoder<'_>) -> R<(u64, Option<u64>)> {
    let len = d.array().map_err(|e| e.to_string())?;
    let tag = d.u64().map_err(|e| e.to_string())?;
    Ok((tag, len.map(|n| n.saturating_sub(1))))
}

/// The remaining fields of a sum as diagnostic notation.
fn fields(d: &mut Decoder<'_>, n: Option<u64>) -> R<String> {
    let mut parts = Vec::new();
    match n {
        Some(n) => {
            for _ in 0..n {
                parts.push(diag(d)?);
            }
        }
        None => {
            while d.datatype().map_err(|e| e.to_string())? != Type::Break {
                parts.push(diag(d)?);
            }
            d.skip().map_err(|e| e.to_string())?;
        }
    }
    Ok(format!("[{}]", parts.join(", ")))
}

/// Which rule type a tag table belongs to, and its constructor names by tag.
struct Table {
    rule: &'static str,
    names: &'static [&'static str],
}

static LEDGER: Table = Table {
    rule: "ConwayLedgerPredFailure",
    names: &[
        "",
        "ConwayUtxowFailure",
        "ConwayCertsFailure",
        "ConwayGovFailure",
        "ConwayWdrlNotDelegatedToDRep",
        "ConwayTreasuryValueMismatch",
        "ConwayTxRefScriptsSizeTooBig",
        "ConwayMempoolFailure",
        "ConwayWithdrawalsMissingAccounts",
        "ConwayIncompleteWithdrawals",
    ],
};

static UTXOW: Table = Table {
    rule: "ConwayUtxowPredFailure",
    names: &[
        "UtxoFailure",
        "InvalidWitnessesUTXOW",
        "MissingVKeyWitnessesUTXOW",
        "MissingScriptWitnessesUTXOW",
        "ScriptWitnessNotValidatingUTXOW",
        "MissingTxBodyMetadataHash",
        "MissingTxMetadata",
        "ConflictingMetadataHash",
        "InvalidMetadata",
        "ExtraneousScriptWitnessesUTXOW",
        "MissingRedeemers",
        "MissingRequiredDatums",
        "NotAllowedSupplementalDatums",
        "PPViewHashesDontMatch",
        "UnspendableUTxONoDatumHash",
        "ExtraRedeemers",
        "MalformedScriptWitnesses",
        "MalformedReferenceScripts",
        "ScriptIntegrityHashMismatch",
    ],
};

static UTXO: Table = Table {
    rule: "ConwayUtxoPredFailure",
    names: &[
        "UtxosFailure",
        "BadInputsUTxO",
        "OutsideValidityIntervalUTxO",
        "MaxTxSizeUTxO",
        "InputSetEmptyUTxO",
        "FeeTooSmallUTxO",
        "ValueNotConservedUTxO",
        "WrongNetwork",
        "WrongNetworkWithdrawal",
        "OutputTooSmallUTxO",
        "OutputBootAddrAttrsTooBig",
        "OutputTooBigUTxO",
        "InsufficientCollateral",
        "ScriptsNotPaidUTxO",
        "ExUnitsTooBigUTxO",
        "CollateralContainsNonADA",
        "WrongNetworkInTxBody",
        "OutsideForecast",
        "TooManyCollateralInputs",
        "NoCollateralInputs",
        "IncorrectTotalCollateralField",
        "BabbageOutputTooSmallUTxO",
        "BabbageNonDisjointRefInputs",
    ],
};

static UTXOS: Table = Table {
    rule: "ConwayUtxosPredFailure",
    names: &["ValidationTagMismatch", "CollectErrors"],
};

static CERTS: Table = Table {
    rule: "ConwayCertsPredFailure",
    names: &["WithdrawalsNotInRewardsCERTS", "CertFailure"],
};

static CERT: Table = Table {
    rule: "ConwayCertPredFailure",
    names: &["", "DelegFailure", "PoolFailure", "GovCertFailure"],
};

static DELEG: Table = Table {
    rule: "ConwayDelegPredFailure",
    names: &[
        "",
        "IncorrectDepositDELEG",
        "StakeKeyRegisteredDELEG",
        "StakeKeyNotRegisteredDELEG",
        "StakeKeyHasNonZeroRewardAccountBalanceDELEG",
        "DelegateeDRepNotRegisteredDELEG",
        "DelegateeStakePoolNotRegisteredDELEG",
    ],
};

static POOL: Table = Table {
    rule: "ShelleyPoolPredFailure",
    names: &[
        "StakePoolNotRegisteredOnKeyPOOL",
        "StakePoolRetirementWrongEpochPOOL",
        "",
        "StakePoolCostTooLowPOOL",
        "WrongNetworkPOOL",
        "PoolMedataHashTooBig",
    ],
};

static GOVCERT: Table = Table {
    rule: "ConwayGovCertPredFailure",
    names: &[
        "ConwayDRepAlreadyRegistered",
        "ConwayDRepNotRegistered",
        "ConwayDRepIncorrectDeposit",
        "ConwayCommitteeHasPreviouslyResigned",
        "ConwayDRepIncorrectRefund",
        "ConwayCommitteeIsUnknown",
    ],
};

static GOV: Table = Table {
    rule: "ConwayGovPredFailure",
    names: &[
        "GovActionsDoNotExist",
        "MalformedProposal",
        "ProposalProcedureNetworkIdMismatch",
        "TreasuryWithdrawalsNetworkIdMismatch",
        "ProposalDepositIncorrect",
        "DisallowedVoters",
        "ConflictingCommitteeUpdate",
        "ExpirationEpochTooSmall",
        "InvalidPrevGovActionId",
        "VotingOnExpiredGovAction",
        "ProposalCantFollow",
        "InvalidPolicyHash",
        "DisallowedProposalDuringBootstrap",
        "DisallowedVotesDuringBootstrap",
        "VotersDoNotExist",
        "ZeroTreasuryWithdrawals",
        "ProposalReturnAccountDoesNotExist",
        "TreasuryWithdrawalReturnAccountsDoNotExist",
    ],
};

fn name(t: &Table, tag: u64) -> RuleName {
    match usize::try_from(tag).ok().and_then(|i| t.names.get(i)) {
        Some(n) if !n.is_empty() => RuleName::Known(n),
        _ => RuleName::Unknown { rule: t.rule, tag },
    }
}

/// Reads one `[tag, fields…]` of table `t`; when `inner` maps the tag to a nested table,
/// descends into its single field, else renders the fields.
fn nested(
    d: &mut Decoder<'_>,
    t: &Table,
    inner: fn(u64) -> Option<&'static Table>,
    path: &mut Vec<RuleName>,
) -> R<String> {
    let (tag, n) = sum(d)?;
    path.push(name(t, tag));
    match inner(tag) {
        Some(next) if n == Some(1) => nested(d, next, child_of(next), path),
        _ => fields(d, n),
    }
}

fn child_of(t: &'static Table) -> fn(u64) -> Option<&'static Table> {
    match t.rule {
        "ConwayUtxowPredFailure" => |tag| (tag == 0).then_some(&UTXO),
        "ConwayUtxoPredFailure" => |tag| (tag == 0).then_some(&UTXOS),
        "ConwayCertsPredFailure" => |tag| (tag == 1).then_some(&CERT),
        "ConwayCertPredFailure" => |tag| match tag {
            1 => Some(&DELEG),
            2 => Some(&POOL),
            3 => Some(&GOVCERT),
            _ => None,
        },
        _ => |_| None,
    }
}

fn ledger(d: &mut Decoder<'_>, path: &mut Vec<RuleName>) -> R<String> {
    nested(
        d,
        &LEDGER,
        |tag| match tag {
            1 => Some(&UTXOW),
            2 => Some(&CERTS),
            3 => Some(&GOV),
            _ => None,
        },
        path,
    )
}

/// One CBOR item in diagnostic notation (RFC 8949 §8): `h'…'` bytes, quoted text, tags as
/// `258([…])`.
fn diag(d: &mut Decoder<'_>) -> R<String> {
    let e = |e: minicbor::decode::Error| e.to_string();
    Ok(match d.datatype().map_err(e)? {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => d.u64().map_err(e)?.to_string(),
        Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => {
            i128::from(d.int().map_err(e)?).to_string()
        }
        Type::Bytes => format!("h'{}'", hex::encode(d.bytes().map_err(e)?)),
        Type::BytesIndef => {
            let mut all = Vec::new();
            for chunk in d.bytes_iter().map_err(e)? {
                all.extend_from_slice(chunk.map_err(e)?);
            }
            format!("h'{}'", hex::encode(all))
        }
        Type::String => format!("{:?}", d.str().map_err(e)?),
        Type::StringIndef => {
            let mut all = String::new();
            for chunk in d.str_iter().map_err(e)? {
                all.push_str(chunk.map_err(e)?);
            }
            format!("{all:?}")
        }
        Type::Array | Type::ArrayIndef => {
            let mut parts = Vec::new();
            each(d, |d| {
                parts.push(diag(d)?);
                Ok(())
            })?;
            format!("[{}]", parts.join(", "))
        }
        Type::Map | Type::MapIndef => {
            let mut parts = Vec::new();
            match d.map().map_err(e)? {
                Some(n) => {
                    for _ in 0..n {
                        let k = diag(d)?;
                        parts.push(format!("{k}: {}", diag(d)?));
                    }
                }
                None => {
                    while d.datatype().map_err(e)? != Type::Break {
                        let k = diag(d)?;
                        parts.push(format!("{k}: {}", diag(d)?));
                    }
                    d.skip().map_err(e)?;
                }
            }
            format!("{{{}}}", parts.join(", "))
        }
        Type::Tag => {
            let t = d.tag().map_err(e)?;
            format!("{}({})", t.as_u64(), diag(d)?)
        }
        Type::Bool => d.bool().map_err(e)?.to_string(),
        Type::Null => {
            d.skip().map_err(e)?;
            "null".into()
        }
        Type::Undefined => {
            d.skip().map_err(e)?;
            "undefined".into()
        }
        Type::F16 | Type::F32 | Type::F64 => d.f64().map_err(e)?.to_string(),
        other => return Err(format!("unexpected CBOR item {other:?}")),
    })
}

/// Turn a submission error of the N2C client into a [`SubmitFailure`], decoding a real
/// node's rejection.
pub fn from_client(e: ClientError) -> SubmitFailure {
    match e {
        ClientError::Rejected(w) => SubmitFailure::Rejected(SubmitRejection::Devnet {
            rule: w.rule,
            message: w.message,
        }),
        ClientError::RejectedCbor(raw) => match decode(&raw) {
            Ok(r) => SubmitFailure::Rejected(r),
            Err(reason) => SubmitFailure::Undecodable {
                reason,
                cbor_hex: hex::encode(raw),
            },
        },
        other => SubmitFailure::Transport(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(hex_cbor: &str) -> Vec<Vec<String>> {
        let bytes = hex::decode(hex_cbor).expect("hex");
        match decode(&bytes).expect("decodes") {
            SubmitRejection::Ledger { era, failures } => {
                assert_eq!(era, 6, "Conway");
                failures
                    .iter()
                    .map(|f| f.path.iter().map(ToString::to_string).collect())
                    .collect()
            }
            other => panic!("expected a ledger rejection, got {other:?}"),
        }
    }

    /// Real `HardForkApplyTxErr` payloads, encoded by cardano-node's own Haskell encoders
    /// (blockfrost's `testgen-hs`, cardano-ledger `Arbitrary` values): the vectors
    /// `test_cbor_0001`…`_0100` in txpipe/pallas `pallas-network/src/miniprotocols/
    /// localtxsubmission/codec.rs` (pallas-network 1.4.0, the same list as
    /// blockfrost/blockfrost-platform `src/cbor/tests/specific.rs`). Each vector's name in
    /// the source lists its rules; the expected paths below are those names.
    #[test]
    fn real_conway_rejections_decode_to_their_rules() {
        let cases: &[(&str, &str, &[&[&str]])] = &[
            (
                "0001_ConwayTreasuryValueMismatch",
                "8182068183051a000de7561a00080fd6",
                &[&["ConwayTreasuryValueMismatch"]],
            ),
            (
                "0003_ConwayUtxowFailure_MissingTxBodyMetadataHash",
                "818206818201820558200e13ba83be25492abf84e10545393932480e8ad43dacf8a3d93dff388cce84ed",
                &[&["ConwayUtxowFailure", "MissingTxBodyMetadataHash"]],
            ),
            (
                "0005_ConwayTxRefScriptsSizeTooBig",
                "8182068183060001",
                &[&["ConwayTxRefScriptsSizeTooBig"]],
            ),
            (
                "0010_ConwayMempoolFailure",
                "8182068182076162",
                &[&["ConwayMempoolFailure"]],
            ),
            (
                "0011_ConwayCertsFailure_WithdrawalsNotInRewardsCERTS",
                "8182068182028200a1581de180c1af75f8e788b08272ee30e8d87bc776e4bfc47adb0da175bf26ac1a000212eb",
                &[&["ConwayCertsFailure", "WithdrawalsNotInRewardsCERTS"]],
            ),
            (
                "0031_ConwayUtxowFailure_UtxoFailure_InsufficientCollateral",
                "8182068282018200830c1a000d8a871a000b075682018209d9010280",
                &[
                    &[
                        "ConwayUtxowFailure",
                        "UtxoFailure",
                        "InsufficientCollateral",
                    ],
                    &["ConwayUtxowFailure", "ExtraneousScriptWitnessesUTXOW"],
                ],
            ),
            (
                "0038_ConwayGovFailure_VotersDoNotExist",
                "818206828203820e818202581c6405197a2f6592f55ba348f14d540f35caf3a1dedf1d40cd8e474e04820760",
                &[
                    &["ConwayGovFailure", "VotersDoNotExist"],
                    &["ConwayMempoolFailure"],
                ],
            ),
            (
                "0039_ConwayUtxowFailure_PPViewHashesDontMatch",
                "818206828201830d815820d15252d17f47ba042f29becbd844d9aabd83b7dafb52bd46589fb10358adb9618158201d97ba11111aee873b749791e741e6f6e9e3d3e7a5e2fc0e532ac6f323a120bf83051a0009c7ac1a000b7da8",
                &[
                    &["ConwayUtxowFailure", "PPViewHashesDontMatch"],
                    &["ConwayTreasuryValueMismatch"],
                ],
            ),
            (
                "0048_ConwayUtxowFailure_MissingScriptWitnessesUTXOW",
                "8182068182018203d9010280",
                &[&["ConwayUtxowFailure", "MissingScriptWitnessesUTXOW"]],
            ),
            (
                "0056_ConwayUtxowFailure_MissingVKeyWitnessesUTXOW",
                "8182068182018202d9010281581c615ba1eac6d914f3e9f0460095bd98ecaf0c54e25039cdfbea8d6783",
                &[&["ConwayUtxowFailure", "MissingVKeyWitnessesUTXOW"]],
            ),
            (
                "0074_ConwayMempoolFailure_ConwayUtxowFailure_ExtraRedeemers",
                "81820682820764f0a386828201820f81820401",
                &[
                    &["ConwayMempoolFailure"],
                    &["ConwayUtxowFailure", "ExtraRedeemers"],
                ],
            ),
            (
                "0076_ConwayMempoolFailure_ConwayUtxowFailure_NotAllowedSupplementalDatums",
                "818206828207608201830cd901028158209ee8bb48e4ee4e6af2752bddcec3ec694b31702e40ad7a6f6c7fd67414d06f09d9010280",
                &[
                    &["ConwayMempoolFailure"],
                    &["ConwayUtxowFailure", "NotAllowedSupplementalDatums"],
                ],
            ),
            (
                "0086_ConwayUtxowFailure_UtxoFailure_OutputTooSmallUTxO",
                "8182068182018200820981a400583931b2d82464ee0f01a997469f62bfd2f86e2b81e2d6b57f32c76f15ee65470d8980522f46457bd0238fb07a7a86a488a78b595e013f9aea9d5601821b229f5c403dc6c2e3a1581cb0c53e2bf180858da4b64eb5598c5615bba7d723d2b604a83b7f9165a141351b1567a03e35825e8c02820058204cd8ff721542ba2426af9d0fa46638f60559d368b7d2fe4d1651c63e28327f4803d818584e82008303008283030181830301818200581cabde7a6c2f96943f3d0258dbb7ac1fc8769230b7c2b1a42e6aa10d758200581c8eab33aa0947bb8fff0df44cf26fe832ed82105a10ade2cb819ca68b",
                &[&["ConwayUtxowFailure", "UtxoFailure", "OutputTooSmallUTxO"]],
            ),
            (
                "0095_ConwayUtxowFailure_NotAllowedSupplementalDatums",
                "818206828201830cd901028158203c44228aea5f895b5acd0a677dabae4923d6ea1dad941c2f04e9e17fe88a98dbd901028158206f13d3fa99ccd62b8fd11c0d15d2a0b0d64d923e867d65bdcb9b740dd101664b820481581c2476e78bd0a862d6ef3de2a178d1f4f079bd2ac0ce4731a8bb3933b9",
                &[
                    &["ConwayUtxowFailure", "NotAllowedSupplementalDatums"],
                    &["ConwayWdrlNotDelegatedToDRep"],
                ],
            ),
        ];
        for (name, cbor, expected) in cases {
            let got = rules(cbor);
            let want: Vec<Vec<String>> = expected
                .iter()
                .map(|p| p.iter().map(|s| (*s).to_string()).collect())
                .collect();
            assert_eq!(got, want, "vector {name}");
        }
    }

    #[test]
    fn a_fee_mismatch_renders_its_fields() {
        // vector 0001: ConwayTreasuryValueMismatch (Mismatch supplied expected) as two coins.
        let r = decode(&hex::decode("8182068183051a000de7561a00080fd6").expect("hex"))
            .expect("decodes");
        assert_eq!(
            r.to_string(),
            "ledger (era 6): ConwayTreasuryValueMismatch [911190, 528342]"
        );
        assert_eq!(r.rules(), vec!["ConwayTreasuryValueMismatch".to_string()]);
    }

    #[test]
    fn the_devnet_codec_is_the_second_case() {
        let mut buf = Vec::new();
        minicbor::Encoder::new(&mut buf)
            .array(2)
            .and_then(|e| e.str("FeeTooSmallUTxO"))
            .and_then(|e| e.str("fee 1 lovelace is below the minimum 2 lovelace"))
            .expect("encode");
        assert_eq!(
            decode(&buf).expect("decodes"),
            SubmitRejection::Devnet {
                rule: "FeeTooSmallUTxO".into(),
                message: "fee 1 lovelace is below the minimum 2 lovelace".into(),
            }
        );
    }

    #[test]
    fn an_unknown_tag_is_kept_and_garbage_is_an_error() {
        // [[6, [[1, [99, 7]]]]]: UTXOW tag 99 does not exist (yet).
        assert_eq!(
            rules("81820681820182186307"),
            vec![vec![
                "ConwayUtxowFailure".to_string(),
                "ConwayUtxowPredFailure#99".to_string()
            ]]
        );
        assert!(decode(&[0x01]).is_err());
        assert!(decode(&[0x81]).is_err(), "truncated");
    }
}
