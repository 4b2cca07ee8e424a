//! The crate's error type: one variant per rule or operation, carrying what a caller needs.

use crate::tx::Purpose;

/// Everything that can go wrong while loading the blueprint, decoding on-chain data,
/// evaluating scripts or building a transaction.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `plutus.json` is not a valid CIP-57 blueprint or lacks the Ganglion validator.
    #[error("blueprint: {0}")]
    Blueprint(String),

    /// Applying the parameters to the compiled validator failed (uplc could not decode the
    /// program or the parameters). uplc's reason as text: its error holds `Rc`s, so it could
    /// not cross threads inside this error.
    #[error("applying validator parameters failed: {0}")]
    ApplyParams(String),

    /// A datum, redeemer or signed message does not have the expected PlutusData shape.
    #[error("malformed {what}: {reason}")]
    MalformedData {
        /// The type being decoded (`EscrowDatum`, `BondDatum`, …).
        what: &'static str,
        /// What was wrong with it.
        reason: String,
    },

    /// CBOR could not be decoded.
    #[error("CBOR decoding of {what} failed: {reason}")]
    Cbor {
        /// What was being decoded.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },

    /// The protocol parameters name a major version uplc cannot take (above `u16::MAX`).
    #[error("protocol major version {major} is out of range")]
    ProtocolVersion {
        /// The major version of `ProtocolParams::protocol_version`.
        major: u64,
    },

    /// A slot or time is outside the chain's slot clock.
    #[error("slot clock: {0}")]
    Time(#[from] ganglion_cardano::time::TimeError),

    /// A script failed in phase-2 evaluation (uplc).
    #[error("script evaluation failed for {purpose:?}: {reason}; logs: {logs:?}")]
    ScriptFailed {
        /// Which redeemer failed, when known.
        purpose: Option<Purpose>,
        /// The evaluator's message.
        reason: String,
        /// Traces emitted before the failure.
        logs: Vec<String>,
    },

    /// The wallet cannot cover the outputs, the fee and the minimum UTxO of the change.
    #[error(
        "transaction cannot be balanced: the wallet is short of {}",
        shortfall_text(*lovelace_short, assets_short)
    )]
    Unbalanceable {
        /// Missing lovelace.
        lovelace_short: u64,
        /// Missing native assets.
        assets_short: Vec<(String, String, u64)>,
    },

    /// No UTxO of the wallet holds only lovelace and enough of it to serve as collateral.
    #[error("no collateral: need a pure-ADA UTxO of at least {required} lovelace")]
    NoCollateral {
        /// Lovelace the collateral must cover.
        required: u64,
    },

    /// An output carries less than its minimum lovelace (Babbage `coinsPerUTxOByte` rule).
    #[error("output {index} holds {provided} lovelace, below its minimum of {required}")]
    OutputBelowMinUtxo {
        /// Index of the output in the transaction.
        index: usize,
        /// Minimum lovelace.
        required: u64,
        /// Lovelace it holds.
        provided: u64,
    },

    /// The scripts need more ExUnits than one transaction may use.
    #[error("ExUnits {mem} mem / {steps} steps exceed the per-transaction maximum")]
    ExUnitsTooLarge {
        /// Memory units needed.
        mem: u64,
        /// CPU steps needed.
        steps: u64,
    },

    /// The transaction is larger than `maxTxSize`.
    #[error("transaction is {size} bytes, above the maximum of {max}")]
    TxTooLarge {
        /// Size as the ledger counts it (without the `is_valid` flag), bytes.
        size: usize,
        /// `maxTxSize` in bytes.
        max: u64,
    },

    /// The fee did not reach a fixed point.
    #[error("fee did not converge after {rounds} rounds")]
    FeeDidNotConverge {
        /// Rounds tried.
        rounds: usize,
    },

    /// The draft spends an output it also lists as a reference input, which Conway refuses
    /// at protocol versions 9 and 10 (`BabbageNonDisjointRefInputs`).
    #[error("inputs also listed as reference inputs: {}", .inputs.join(", "))]
    InputAlsoReferenced {
        /// The inputs in both sets (`txid#index`).
        inputs: Vec<String>,
    },

    /// A request the protocol forbids before any transaction is built (e.g. gpus = 0).
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// A signature does not verify: `what` says whether the key or the signature was
    /// malformed or the signature is not the key's over the message.
    #[error("signature does not verify: {what}: {source}")]
    BadSignature {
        /// `the key is malformed`, `the signature is malformed` or `not signed by this key`.
        what: &'static str,
        /// ed25519's reason.
        #[source]
        source: ed25519_dalek::SignatureError,
    },

    /// The UTxO needed for an action is not in the given set.
    #[error("missing UTxO: {0}")]
    MissingUtxo(String),

    /// The devnet ledger refused a transaction (feature `test-utils`:
    /// [`crate::test_utils::world::World`] applies transactions through
    /// `ganglion_testnet::ledger::validate`); the rejection names the ledger rule.
    #[cfg(feature = "test-utils")]
    #[error("the ledger rejected the transaction: {0}")]
    Rejected(Box<ganglion_testnet::ledger::Rejection>),
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A wallet's shortfall as a person reads it: `"1.5 ADA (1500000 lovelace)"`, each native
/// asset as `"<quantity> base units of <name> (policy <hex>)"` (the name as text when it is
/// printable ASCII, else hex), joined by "and".
fn shortfall_text(lovelace: u64, assets: &[(String, String, u64)]) -> String {
    let mut parts = Vec::new();
    if lovelace > 0 {
        let ada = format!("{}.{:06}", lovelace / 1_000_000, lovelace % 1_000_000);
        let ada = ada.trim_end_matches('0').trim_end_matches('.');
        parts.push(format!("{ada} ADA ({lovelace} lovelace)"));
    }
    for (policy, name_hex, quantity) in assets {
        let name = hex::decode(name_hex)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_graphic()))
            .unwrap_or_else(|| name_hex.clone());
        parts.push(format!("{quantity} base units of {name} (policy {policy})"));
    }
    if parts.is_empty() {
        return "nothing (the fee or a minimum UTxO could not be met)".into();
    }
    parts.join(" and ")
}

#[cfg(test)]
mod shortfall_tests {
    use super::*;

    #[test]
    fn a_shortfall_names_ada_and_each_asset_readably() {
        let e = Error::Unbalanceable {
            lovelace_short: 1_500_000,
            assets_short: vec![("2baf".into(), "4e5458".into(), 999_900_089_997)],
        };
        assert_eq!(
            e.to_string(),
            "transaction cannot be balanced: the wallet is short of 1.5 ADA (1500000 lovelace) \
             and 999900089997 base units of NTX (policy 2baf)"
        );
        let only_asset = Error::Unbalanceable {
            lovelace_short: 0,
            assets_short: vec![("ab".into(), "00ff".into(), 7)],
        };
        assert_eq!(
            only_asset.to_string(),
            "transaction cannot be balanced: the wallet is short of 7 base units of 00ff (policy ab)"
        );
        assert!(!e.to_string().contains("(\""), "no Rust tuple syntax: {e}");
    }
}
