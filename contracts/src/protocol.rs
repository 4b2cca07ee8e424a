//! Protocol parameters: the real mainnet values from `shared/fixtures/cardano/`.
//!
//! Sources (see that folder's README for provenance):
//! - `mainnet-shelley-genesis.json`: `minFeeA` (lovelace per byte), `minFeeB` (lovelace),
//!   `maxTxSize` (bytes);
//! - `mainnet-alonzo-genesis.json`: execution prices, `collateralPercentage`,
//!   `maxCollateralInputs`, `lovelacePerUTxOWord` (Babbage's `coinsPerUTxOByte` is that
//!   divided by 8, rounded down: 34482 / 8 → 4310, today's mainnet value);
//! - `mainnet-conway-genesis.json`: `minFeeRefScriptCostPerByte`;
//! - `mainnet-ppu-2026-01-12-exunits.action.json`: `maxTxExecutionUnits`;
//! - `mainnet-costmodels-2026-05-12-ppu.json`: the PlutusV3 cost model (350 values).

use serde_json::Value as Json;

use crate::error::{Error, Result};

const SHELLEY: &str = include_str!("../../../shared/fixtures/cardano/mainnet-shelley-genesis.json");
const ALONZO: &str = include_str!("../../../shared/fixtures/cardano/mainnet-alonzo-genesis.json");
const CONWAY: &str = include_str!("../../../shared/fixtures/cardano/mainnet-conway-genesis.json");
const EXUNITS: &str =
    include_str!("../../../shared/fixtures/cardano/mainnet-ppu-2026-01-12-exunits.action.json");
const COST_MODELS: &str =
    include_str!("../../../shared/fixtures/cardano/mainnet-costmodels-2026-05-12-ppu.json");

/// A non-negative rational, as the ledger keeps prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ratio {
    /// Numerator.
    pub num: u64,
    /// Denominator (> 0).
    pub den: u64,
}

/// Execution units: memory and CPU steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ExUnits {
    /// Memory units.
    pub mem: u64,
    /// CPU steps.
    pub steps: u64,
}

impl ExUnits {
    /// Component-wise sum.
    pub fn plus(self, o: ExUnits) -> ExUnits {
        ExUnits {
            mem: self.mem + o.mem,
            steps: self.steps + o.steps,
        }
    }
}

/// The protocol parameters that fees, min-UTxO and evaluation depend on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProtocolParams {
    /// `minFeeA`: lovelace per byte of transaction.
    pub min_fee_a: u64,
    /// `minFeeB`: constant lovelace per transaction.
    pub min_fee_b: u64,
    /// `maxTxSize`: bytes.
    pub max_tx_size: u64,
    /// Price of one memory unit, lovelace.
    pub price_mem: Ratio,
    /// Price of one CPU step, lovelace.
    pub price_steps: Ratio,
    /// `maxTxExecutionUnits`.
    pub max_tx_ex_units: ExUnits,
    /// `coinsPerUTxOByte`: lovelace per byte of output (plus 160 bytes of overhead).
    pub coins_per_utxo_byte: u64,
    /// `collateralPercentage`: collateral must cover this percentage of the fee.
    pub collateral_percentage: u64,
    /// `maxCollateralInputs`.
    pub max_collateral_inputs: u64,
    /// `minFeeRefScriptCostPerByte`: lovelace per byte of reference script (first tier).
    pub min_fee_ref_script_cost_per_byte: u64,
    /// The PlutusV3 cost model, in ledger order.
    pub cost_model_v3: Vec<i64>,
    /// Protocol major version (Conway: 10).
    pub protocol_major: u16,
}

fn field<'a>(j: &'a Json, path: &[&str]) -> Result<&'a Json> {
    path.iter().try_fold(j, |j, k| {
        j.get(k)
            .ok_or_else(|| Error::ProtocolParams(format!("missing {}", path.join("."))))
    })
}

fn u(j: &Json, path: &[&str]) -> Result<u64> {
    field(j, path)?
        .as_u64()
        .ok_or_else(|| Error::ProtocolParams(format!("{} is not a natural number", path.join("."))))
}

fn parse(what: &str, s: &str) -> Result<Json> {
    serde_json::from_str(s).map_err(|e| Error::ProtocolParams(format!("{what}: {e}")))
}

impl ProtocolParams {
    /// Today's mainnet parameters, from the committed fixtures.
    ///
    /// # Errors
    /// [`Error::ProtocolParams`] when a fixture lacks a field (they are compiled in, so
    /// this only fails if the fixtures change shape).
    pub fn mainnet() -> Result<Self> {
        let shelley = parse("shelley genesis", SHELLEY)?;
        let alonzo = parse("alonzo genesis", ALONZO)?;
        let conway = parse("conway genesis", CONWAY)?;
        let exunits = parse("exunits action", EXUNITS)?;
        let costs = parse("cost models", COST_MODELS)?;
        let max = exunits
            .get("governance action")
            .and_then(|g| g.get("contents"))
            .and_then(Json::as_array)
            .and_then(|c| c.iter().find_map(|x| x.get("maxTxExecutionUnits")))
            .ok_or_else(|| Error::ProtocolParams("maxTxExecutionUnits missing".into()))?;
        let cost_model_v3 = field(&costs, &["PlutusV3"])?
            .as_array()
            .ok_or_else(|| Error::ProtocolParams("PlutusV3 is not a list".into()))?
            .iter()
            .map(|v| {
                v.as_i64()
                    .ok_or_else(|| Error::ProtocolParams("PlutusV3 holds a non-integer".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            min_fee_a: u(&shelley, &["protocolParams", "minFeeA"])?,
            min_fee_b: u(&shelley, &["protocolParams", "minFeeB"])?,
            max_tx_size: u(&shelley, &["protocolParams", "maxTxSize"])?,
            price_mem: Ratio {
                num: u(&alonzo, &["executionPrices", "prMem", "numerator"])?,
                den: u(&alonzo, &["executionPrices", "prMem", "denominator"])?,
            },
            price_steps: Ratio {
                num: u(&alonzo, &["executionPrices", "prSteps", "numerator"])?,
                den: u(&alonzo, &["executionPrices", "prSteps", "denominator"])?,
            },
            max_tx_ex_units: ExUnits {
                mem: u(max, &["memory"])?,
                steps: u(max, &["steps"])?,
            },
            coins_per_utxo_byte: u(&alonzo, &["lovelacePerUTxOWord"])? / 8,
            collateral_percentage: u(&alonzo, &["collateralPercentage"])?,
            max_collateral_inputs: u(&alonzo, &["maxCollateralInputs"])?,
            min_fee_ref_script_cost_per_byte: u(&conway, &["minFeeRefScriptCostPerByte"])?,
            cost_model_v3,
            protocol_major: 10,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mainnet_parameters_are_todays_values() {
        let p = ProtocolParams::mainnet().unwrap();
        assert_eq!((p.min_fee_a, p.min_fee_b), (44, 155_381));
        assert_eq!(p.coins_per_utxo_byte, 4310);
        assert_eq!(
            p.max_tx_ex_units,
            ExUnits {
                mem: 16_500_000,
                steps: 10_000_000_000
            }
        );
        assert_eq!(p.cost_model_v3.len(), 350);
        assert_eq!(p.min_fee_ref_script_cost_per_byte, 15);
        assert_eq!(
            p.price_mem,
            Ratio {
                num: 577,
                den: 10_000
            }
        );
    }
}
