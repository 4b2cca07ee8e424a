//! Local-state-query answers both sides read the same way: the devnet's server writes them,
//! the wallet (against the devnet or a cardano-node) reads them.
//!
//! - `GetSystemStart`: Haskell `UTCTime` as an ordinal date, CBOR
//!   `[year, day of year (from 1), picoseconds of day]` ([`system_start_cbor`],
//!   [`system_start_ms`]);
//! - `GetCurrentPParams` (Conway block query): pallas' `queries_v16::ProtocolParam`, the
//!   node's `ConwayPParams` ([`conway_pparams`], [`protocol_params_of`]).
//!
//! Source: ouroboros-consensus `Ouroboros.Consensus.Ledger.Query` (`GetSystemStart`) and
//! cardano-ledger `Cardano.Ledger.Conway.PParams` (field order and names), as pallas-network
//! 1.4 `miniprotocols::localstate::queries_v16` encodes them.

use pallas_codec::minicbor::{self, Encoder};
use pallas_codec::utils::{AnyUInt, KeyValuePairs};
use pallas_network::miniprotocols::localstate::queries_v16::{self as q16, BigInt, SystemStart};

use crate::protocol::{ExUnits, ProtocolParams, Ratio};

/// Hard-fork-combinator era index of Conway: the answer to `GetCurrentEra` and the era of
/// Conway block queries.
pub const CONWAY_ERA_INDEX: u16 = 6;

/// (year, day of year starting at 1, picoseconds of day) of a POSIX time in ms — the
/// shape of the node's `SystemStart` (Haskell `UTCTime` as ordinal date, proleptic
/// Gregorian calendar).
pub fn ordinal_date(posix_ms: u64) -> (i64, i64, u128) {
    let days = (posix_ms / 86_400_000) as i64;
    let ms_of_day = posix_ms % 86_400_000;
    // Civil-from-days (H. Hinnant), then day of year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy_mar = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy_mar + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let day_of_year = if month <= 2 {
        doy_mar - 305
    } else {
        doy_mar + 60 + i64::from(leap)
    };
    (year, day_of_year, u128::from(ms_of_day) * 1_000_000_000)
}

/// The `GetSystemStart` answer for a chain that starts at `posix_ms`: CBOR
/// `[year, day_of_year, picoseconds_of_day]` of [`ordinal_date`].
pub fn system_start_cbor(posix_ms: u64) -> Vec<u8> {
    let (y, d, ps) = ordinal_date(posix_ms);
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    // Writing into a Vec cannot fail; picoseconds of a day (< 8.64 × 10^16) fit a u64.
    let _ = e
        .array(3)
        .and_then(|e| e.i64(y))
        .and_then(|e| e.i64(d))
        .and_then(|e| e.u64(u64::try_from(ps).unwrap_or(u64::MAX)));
    buf
}

/// A `GetSystemStart` answer → POSIX ms; `None` when it is out of range (a year before
/// 1970, a negative or oversized number).
pub fn system_start_ms(s: &SystemStart) -> Option<u64> {
    let year = bigint_u64(&s.year)?;
    let picos = bigint_u64(&s.picoseconds_of_day)?;
    let year = i64::try_from(year).ok()?;
    // Days from 1970-01-01 to January 1st of `year` (proleptic Gregorian).
    let y = year - 1;
    let days_to_year =
        365 * (year - 1970) + (y / 4 - y / 100 + y / 400) - (1969 / 4 - 1969 / 100 + 1969 / 400);
    let days = days_to_year + s.day_of_year - 1;
    let ms = u64::try_from(days).ok()?.checked_mul(86_400_000)?;
    ms.checked_add(picos / 1_000_000_000)
}

fn bigint_u64(b: &BigInt) -> Option<u64> {
    match b {
        BigInt::Int(i) => u64::try_from(i128::from(*i)).ok(),
        BigInt::BigUInt(bytes) => bytes.iter().try_fold(0u64, |acc, b| {
            acc.checked_mul(256)?.checked_add(u64::from(*b))
        }),
        BigInt::BigNInt(_) => None,
    }
}

/// `parameters` in the node's `ConwayPParams` shape, as the devnet answers
/// `GetCurrentPParams`. Fields the devnet does not use — deposits, pools, governance — are
/// left empty; `minFeeRefScriptCostPerByte` is the whole number over 1.
pub fn conway_pparams(p: &ProtocolParams) -> q16::ProtocolParam {
    let ratio = |r: Ratio| q16::RationalNumber {
        numerator: r.numerator,
        denominator: r.denominator,
    };
    q16::ProtocolParam {
        minfee_a: Some(p.min_fee_a),
        minfee_b: Some(p.min_fee_b),
        max_block_body_size: Some(p.max_block_body_size),
        max_transaction_size: Some(p.max_tx_size),
        max_block_header_size: None,
        key_deposit: None,
        pool_deposit: None,
        maximum_epoch: None,
        desired_number_of_stake_pools: None,
        pool_pledge_influence: None,
        expansion_rate: None,
        treasury_growth_rate: None,
        protocol_version: Some(p.protocol_version),
        min_pool_cost: None,
        ada_per_utxo_byte: Some(AnyUInt::U64(p.coins_per_utxo_byte)),
        cost_models_for_script_languages: Some(q16::CostModels {
            plutus_v1: Some(p.cost_model_v1.clone()),
            plutus_v2: Some(p.cost_model_v2.clone()),
            plutus_v3: Some(p.cost_model_v3.clone()),
            unknown: KeyValuePairs::Def(vec![]),
        }),
        execution_costs: Some(q16::ExUnitPrices {
            mem_price: ratio(p.price_mem),
            step_price: ratio(p.price_steps),
        }),
        max_tx_ex_units: Some(q16::ExUnits {
            mem: p.max_tx_ex_units.mem,
            steps: p.max_tx_ex_units.steps,
        }),
        max_block_ex_units: Some(q16::ExUnits {
            mem: p.max_block_ex_units.mem,
            steps: p.max_block_ex_units.steps,
        }),
        max_value_size: Some(p.max_value_size),
        collateral_percentage: Some(p.collateral_percentage),
        max_collateral_inputs: Some(p.max_collateral_inputs),
        pool_voting_thresholds: None,
        drep_voting_thresholds: None,
        min_committee_size: None,
        committee_term_limit: None,
        governance_action_validity_period: None,
        governance_action_deposit: None,
        drep_deposit: None,
        drep_inactivity_period: None,
        minfee_refscript_cost_per_byte: Some(q16::RationalNumber {
            numerator: p.min_fee_ref_script_cost_per_byte,
            denominator: 1,
        }),
    }
}

/// A `GetCurrentPParams` answer that cannot be used, naming the ledger's field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PParamsError {
    /// A field the ledger rules or the builder need is absent.
    #[error("{field} missing")]
    Missing {
        /// The ledger's name of the field (`minFeeA`, `costModels`, …).
        field: &'static str,
    },
    /// A price or rate has a zero denominator.
    #[error("{field} has a zero denominator")]
    ZeroDenominator {
        /// The ledger's name of the field.
        field: &'static str,
    },
    /// A cost model the parameters carry is absent from `costModels`.
    #[error("the {language} cost model is missing")]
    MissingCostModel {
        /// `PlutusV1`, `PlutusV2` or `PlutusV3`.
        language: &'static str,
    },
}

/// The protocol parameters of a `ConwayPParams` answer (the inverse of [`conway_pparams`]).
/// `minFeeRefScriptCostPerByte` is a rational on the ledger; it is rounded up to whole
/// lovelace per byte so that a fee computed from it is never short.
///
/// # Errors
/// [`PParamsError`] naming the first field that is missing or unusable.
pub fn protocol_params_of(p: &q16::ProtocolParam) -> Result<ProtocolParams, PParamsError> {
    fn need<T: Clone>(v: &Option<T>, field: &'static str) -> Result<T, PParamsError> {
        v.clone().ok_or(PParamsError::Missing { field })
    }
    let ratio = |r: &q16::RationalNumber, field: &'static str| {
        if r.denominator == 0 {
            return Err(PParamsError::ZeroDenominator { field });
        }
        Ok(Ratio {
            numerator: r.numerator,
            denominator: r.denominator,
        })
    };
    let ex_units = |u: q16::ExUnits| ExUnits {
        mem: u.mem,
        steps: u.steps,
    };
    let prices = need(&p.execution_costs, "executionUnitPrices")?;
    let coins = need(&p.ada_per_utxo_byte, "coinsPerUTxOByte")?;
    let cost_models = need(&p.cost_models_for_script_languages, "costModels")?;
    let model = |m: Option<Vec<i64>>, language: &'static str| {
        m.ok_or(PParamsError::MissingCostModel { language })
    };
    let ref_cost = need(
        &p.minfee_refscript_cost_per_byte,
        "minFeeRefScriptCostPerByte",
    )?;
    let ref_cost = ratio(&ref_cost, "minFeeRefScriptCostPerByte")?;
    Ok(ProtocolParams {
        min_fee_a: need(&p.minfee_a, "minFeeA")?,
        min_fee_b: need(&p.minfee_b, "minFeeB")?,
        max_tx_size: need(&p.max_transaction_size, "maxTxSize")?,
        max_block_body_size: need(&p.max_block_body_size, "maxBlockBodySize")?,
        max_value_size: need(&p.max_value_size, "maxValueSize")?,
        coins_per_utxo_byte: u64::from(coins),
        price_mem: ratio(&prices.mem_price, "priceMemory")?,
        price_steps: ratio(&prices.step_price, "priceSteps")?,
        max_tx_ex_units: ex_units(need(&p.max_tx_ex_units, "maxTxExecutionUnits")?),
        max_block_ex_units: ex_units(need(&p.max_block_ex_units, "maxBlockExecutionUnits")?),
        collateral_percentage: need(&p.collateral_percentage, "collateralPercentage")?,
        max_collateral_inputs: need(&p.max_collateral_inputs, "maxCollateralInputs")?,
        min_fee_ref_script_cost_per_byte: ref_cost.numerator.div_ceil(ref_cost.denominator),
        protocol_version: need(&p.protocol_version, "protocolVersion")?,
        cost_model_v1: model(cost_models.plutus_v1, "PlutusV1")?,
        cost_model_v2: model(cost_models.plutus_v2, "PlutusV2")?,
        cost_model_v3: model(cost_models.plutus_v3, "PlutusV3")?,
    })
}

/// CBOR of a `GetCurrentPParams` answer: the one-element array `[ConwayPParams]` a node
/// sends for the Conway block query.
pub fn current_pparams_cbor(p: &ProtocolParams) -> Vec<u8> {
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = Encoder::new(&mut buf)
        .array(1)
        .and_then(|e| e.encode(conway_pparams(p)));
    buf
}

/// Decodes a `GetCurrentPParams` answer (see [`current_pparams_cbor`]).
///
/// # Errors
/// [`minicbor::decode::Error`] for bytes that are not `[ConwayPParams]`.
pub fn decode_current_pparams(raw: &[u8]) -> Result<q16::ProtocolParam, minicbor::decode::Error> {
    let (p,): (q16::ProtocolParam,) = minicbor::decode(raw)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinal_dates_match_the_calendar() {
        assert_eq!(ordinal_date(0), (1970, 1, 0));
        // 2017-09-23T21:44:51Z (mainnet system start) is day 266 of 2017.
        assert_eq!(ordinal_date(1_506_203_091_000).0, 2017);
        assert_eq!(ordinal_date(1_506_203_091_000).1, 266);
        // 2024-12-31 is day 366 of a leap year.
        assert_eq!(ordinal_date(1_735_603_200_000).1, 366);
        assert_eq!(ordinal_date(1_735_603_200_000 + 1000).2, 1_000_000_000_000);
    }

    #[test]
    fn system_start_round_trips_the_devnet_encoding() {
        for ms in [
            0,
            1_506_203_091_000,
            1_735_603_200_000 + 1234,
            1_767_225_600_000,
        ] {
            let s: SystemStart = minicbor::decode(&system_start_cbor(ms)).expect("decodes");
            assert_eq!(system_start_ms(&s), Some(ms), "{ms}");
        }
    }

    #[test]
    fn a_negative_year_is_out_of_range() {
        let s = SystemStart {
            year: BigInt::Int((-1i64).into()),
            day_of_year: 1,
            picoseconds_of_day: BigInt::Int(0i64.into()),
        };
        assert_eq!(system_start_ms(&s), None);
    }

    #[test]
    fn mainnet_parameters_survive_the_conway_pparams_wire() {
        let want = ProtocolParams::mainnet().expect("fixtures");
        let raw = current_pparams_cbor(&want);
        let got =
            protocol_params_of(&decode_current_pparams(&raw).expect("decodes")).expect("complete");
        assert_eq!(got, want);
    }

    #[test]
    fn missing_or_broken_fields_are_named() {
        let pp = ProtocolParams::mainnet().expect("fixtures");
        let mut q = conway_pparams(&pp);
        q.minfee_a = None;
        assert_eq!(
            protocol_params_of(&q),
            Err(PParamsError::Missing { field: "minFeeA" })
        );
        let mut q = conway_pparams(&pp);
        q.minfee_refscript_cost_per_byte = Some(q16::RationalNumber {
            numerator: 15,
            denominator: 0,
        });
        assert_eq!(
            protocol_params_of(&q),
            Err(PParamsError::ZeroDenominator {
                field: "minFeeRefScriptCostPerByte"
            })
        );
        let mut q = conway_pparams(&pp);
        if let Some(m) = q.cost_models_for_script_languages.as_mut() {
            m.plutus_v3 = None;
        }
        assert_eq!(
            protocol_params_of(&q),
            Err(PParamsError::MissingCostModel {
                language: "PlutusV3"
            })
        );
    }

    #[test]
    fn a_rational_reference_script_price_rounds_up() {
        let pp = ProtocolParams::mainnet().expect("fixtures");
        let mut q = conway_pparams(&pp);
        q.minfee_refscript_cost_per_byte = Some(q16::RationalNumber {
            numerator: 31,
            denominator: 2,
        });
        let got = protocol_params_of(&q).expect("complete");
        assert_eq!(got.min_fee_ref_script_cost_per_byte, 16);
    }
}
