//! Phase-2 validation: every redeemer runs through the `uplc` CEK machine
//! (`uplc::tx::eval_phase_two_raw`, bridged through CBOR bytes because uplc uses pallas 0.35).
//!
//! The caller must have decoded the transaction as Conway first: uplc panics
//! (`unimplemented!`) on older eras. The call is additionally guarded by `catch_unwind`,
//! so an evaluator panic becomes a rejection, never a crash.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pallas_codec::minicbor;
use pallas_primitives::conway::{Redeemer, RedeemerTag};

use crate::ledger::rejection::Rejection;
use ganglion_cardano::protocol::{ExUnits, ProtocolParams};
use ganglion_cardano::time::SlotConfig;
use ganglion_cardano::txo::TxoRef;

/// The measured cost of one redeemer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    /// Redeemer pointer, e.g. `spend:0`.
    pub redeemer: String,
    /// ExUnits the evaluator measured.
    pub actual: ExUnits,
}

/// The outcome of running all scripts of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase2Outcome {
    /// Every script succeeded.
    Passed(Vec<ScriptRun>),
    /// A script failed (the rejection says which and why).
    Failed(Rejection),
}

/// A redeemer pointer as text, e.g. `mint:1`.
pub fn pointer(tag: RedeemerTag, index: u32) -> String {
    let t = match tag {
        RedeemerTag::Spend => "spend",
        RedeemerTag::Mint => "mint",
        RedeemerTag::Cert => "cert",
        RedeemerTag::Reward => "reward",
        RedeemerTag::Vote => "vote",
        RedeemerTag::Propose => "propose",
    };
    format!("{t}:{index}")
}

/// A machine error (possibly wrapped in `RedeemerError`) is a script failure; anything
/// else means the scripts could not be collected.
fn classify(err: uplc::tx::error::Error, current: String) -> Result<Phase2Outcome, Rejection> {
    use uplc::tx::error::Error;
    match err {
        Error::RedeemerError { tag, index, err } => {
            let pointer = format!("{}:{index}", tag.to_lowercase());
            match *err {
                Error::Machine(e, _, traces) => {
                    Ok(Phase2Outcome::Failed(Rejection::PlutusScriptFailed {
                        redeemer: pointer,
                        reason: e.to_string(),
                        logs: traces.iter().map(ToString::to_string).collect(),
                    }))
                }
                other => classify(other, pointer),
            }
        }
        Error::Machine(e, _, traces) => Ok(Phase2Outcome::Failed(Rejection::PlutusScriptFailed {
            redeemer: current,
            reason: e.to_string(),
            logs: traces.iter().map(ToString::to_string).collect(),
        })),
        other => Err(Rejection::CollectErrors {
            reason: other.to_string(),
        }),
    }
}

/// Run every redeemer of `tx_bytes` (a Conway transaction) with the resolved inputs
/// (spent, referenced and collateral outputs), the genesis cost models, the transaction
/// budget `maxTxExUnits` and the shared slot config.
///
/// Returns [`Phase2Outcome::Failed`] for a script error; `Err` for a transaction whose
/// scripts cannot even be collected (missing redeemer, datum, cost model…).
///
/// # Errors
/// [`Rejection::CollectErrors`].
pub fn evaluate(
    tx_bytes: &[u8],
    resolved: &[(TxoRef, Vec<u8>)],
    params: &ProtocolParams,
    cost_models: &[u8],
    slot_config: &SlotConfig,
) -> Result<Phase2Outcome, Rejection> {
    let utxos: Vec<(Vec<u8>, Vec<u8>)> = resolved
        .iter()
        .map(|(r, o)| (r.to_cbor(), o.clone()))
        .collect();
    let budget = (params.max_tx_ex_units.steps, params.max_tx_ex_units.mem);
    let result = catch_unwind(AssertUnwindSafe(|| {
        uplc::tx::eval_phase_two_raw(
            tx_bytes,
            &utxos,
            Some(cost_models),
            budget,
            slot_config.as_tuple(),
            true,
            |_| (),
        )
    }));
    match result {
        Err(_) => Err(Rejection::CollectErrors {
            reason: "the Plutus evaluator panicked on this transaction".into(),
        }),
        Ok(Err(err)) => classify(err, String::new()),
        Ok(Ok(runs)) => {
            let mut out = Vec::with_capacity(runs.len());
            for (bytes, _result) in runs {
                let r: Redeemer =
                    minicbor::decode(&bytes).map_err(|e| Rejection::CollectErrors {
                        reason: format!("evaluator returned an undecodable redeemer: {e}"),
                    })?;
                out.push(ScriptRun {
                    redeemer: pointer(r.tag, r.index),
                    actual: ExUnits {
                        mem: r.ex_units.mem,
                        steps: r.ex_units.steps,
                    },
                });
            }
            Ok(Phase2Outcome::Passed(out))
        }
    }
}
