//! Phase-2 evaluation through the real Plutus evaluator (uplc), over CBOR bytes.
//!
//! uplc 1.1.24 is built on pallas 0.35 while this crate uses pallas 1.4; the two meet only as
//! bytes (`eval_phase_two_raw`), as DESIGN §9 prescribes.

use pallas_primitives::Fragment;
use pallas_primitives::conway::{Redeemer, RedeemerTag};
use pallas_traverse::{Era, MultiEraTx};

use crate::error::{Error, Result};
use crate::protocol::{ExUnits, ProtocolParams};
use crate::time::SlotConfig;
use crate::tx::Purpose;
use crate::tx::{Utxo, encode_input, encode_output};

/// The outcome of one redeemer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// Which redeemer.
    pub purpose: Purpose,
    /// ExUnits the script actually consumed.
    pub ex_units: ExUnits,
    /// Traces it emitted.
    pub logs: Vec<String>,
}

fn purpose_of(r: &Redeemer) -> Option<Purpose> {
    match r.tag {
        RedeemerTag::Spend => Some(Purpose::Spend(r.index)),
        RedeemerTag::Mint => Some(Purpose::Mint(r.index)),
        _ => None,
    }
}

fn failure(err: &uplc::tx::error::Error) -> Error {
    use uplc::tx::error::Error as E;
    let (purpose, inner) = match err {
        E::RedeemerError { tag, index, err } => {
            let p = match tag.as_str() {
                "Spend" => Some(Purpose::Spend(*index)),
                "Mint" => Some(Purpose::Mint(*index)),
                _ => None,
            };
            (p, err.as_ref())
        }
        other => (None, other),
    };
    let logs = match inner {
        E::Machine(_, _, traces) => traces.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    Error::ScriptFailed {
        purpose,
        reason: inner.to_string(),
        logs,
    }
}

/// Runs every script of a Conway transaction with the mainnet cost model and returns the
/// ExUnits each consumed. `resolved` must hold every input, reference input and collateral
/// input of the transaction. The budget is the per-transaction maximum.
///
/// # Errors
/// [`Error::Cbor`] if the bytes are not a Conway transaction; [`Error::ScriptFailed`] when a
/// script fails or runs out of budget (with the failing redeemer and its traces).
pub fn evaluate(
    tx: &[u8],
    resolved: &[Utxo],
    pp: &ProtocolParams,
    slot_config: &SlotConfig,
) -> Result<Vec<Evaluation>> {
    // uplc panics on transactions of older eras: check the era first.
    MultiEraTx::decode_for_era(Era::Conway, tx).map_err(|e| Error::Cbor {
        what: "Conway transaction",
        reason: e.to_string(),
    })?;
    let utxos = resolved
        .iter()
        .map(|u| Ok((encode_input(&u.reference), encode_output(&u.output)?)))
        .collect::<Result<Vec<_>>>()?;
    let costs = pp.cost_models_cbor();
    let budget = (pp.max_tx_ex_units.steps, pp.max_tx_ex_units.mem);
    let slots = slot_config.as_tuple();
    let protocol_major =
        u16::try_from(pp.protocol_version.0).map_err(|_| Error::ProtocolVersion {
            major: pp.protocol_version.0,
        })?;
    let run = std::panic::catch_unwind(|| {
        uplc::tx::eval_phase_two_raw_with_protocol(
            tx,
            &utxos,
            Some(&costs),
            budget,
            slots,
            protocol_major,
            true,
            |_| (),
        )
    })
    .map_err(|_| Error::ScriptFailed {
        purpose: None,
        reason: "the evaluator panicked on this transaction".into(),
        logs: Vec::new(),
    })?;
    let results = run.map_err(|e| failure(&e))?;
    results
        .into_iter()
        .map(|(redeemer, result)| {
            let r = Redeemer::decode_fragment(&redeemer).map_err(|e| Error::Cbor {
                what: "evaluated redeemer",
                reason: e.to_string(),
            })?;
            let cost = result.cost();
            let logs = result.logs();
            if result.failed(false, &uplc::Language::PlutusV3) {
                return Err(Error::ScriptFailed {
                    purpose: purpose_of(&r),
                    reason: "script returned an error".into(),
                    logs,
                });
            }
            Ok(Evaluation {
                purpose: purpose_of(&r).ok_or_else(|| Error::ScriptFailed {
                    purpose: None,
                    reason: format!("unexpected redeemer tag {:?}", r.tag),
                    logs: Vec::new(),
                })?,
                ex_units: ExUnits {
                    mem: cost.mem.max(0) as u64,
                    steps: cost.cpu.max(0) as u64,
                },
                logs,
            })
        })
        .collect()
}
