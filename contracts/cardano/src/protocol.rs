//! Cardano protocol parameters: one struct for the devnet ledger that enforces them and for
//! the fee, min-UTxO and evaluation code that pays them, with the real mainnet values from
//! `shared/fixtures/cardano/`.
//!
//! Serde shape (the devnet's genesis JSON `protocol_params`): snake-case field names as
//! below, a [`Ratio`] as `{numerator, denominator}`, `protocol_version` as `[major, minor]`.
//!
//! Sources (all embedded at compile time, read-only; provenance in that folder's README):
//! - `mainnet-shelley-genesis.json`: `minFeeA`, `minFeeB`, `maxTxSize`, `maxBlockBodySize`;
//! - `mainnet-alonzo-genesis.json`: execution prices, collateral %, max collateral inputs,
//!   `maxValueSize`, `lovelacePerUTxOWord` (→ `coinsPerUTxOByte` = ⌊34482 / 8⌋ = 4310, the
//!   Babbage translation);
//! - `mainnet-conway-genesis.json`: `minFeeRefScriptCostPerByte`;
//! - `mainnet-ppu-2026-01-12-exunits.action.json`: max tx / block ExUnits;
//! - `mainnet-costmodels-2026-05-12-ppu.json`: Plutus V1/V2/V3 cost models (V3: 350 entries).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

const SHELLEY: &str =
    include_str!("../../../../shared/fixtures/cardano/mainnet-shelley-genesis.json");
const ALONZO: &str =
    include_str!("../../../../shared/fixtures/cardano/mainnet-alonzo-genesis.json");
const CONWAY: &str =
    include_str!("../../../../shared/fixtures/cardano/mainnet-conway-genesis.json");
const EXUNITS: &str =
    include_str!("../../../../shared/fixtures/cardano/mainnet-ppu-2026-01-12-exunits.action.json");
const COST_MODELS: &str =
    include_str!("../../../../shared/fixtures/cardano/mainnet-costmodels-2026-05-12-ppu.json");

/// A non-negative rational `numerator / denominator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ratio {
    /// Numerator.
    pub numerator: u64,
    /// Denominator (never 0 in valid parameters).
    pub denominator: u64,
}

/// Execution units: memory and CPU steps (the ledger's `ExUnits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExUnits {
    /// Memory units.
    pub mem: u64,
    /// CPU steps.
    pub steps: u64,
}

impl ExUnits {
    /// Component-wise sum (no overflow check: budgets are far below `u64::MAX`).
    pub fn plus(self, o: ExUnits) -> ExUnits {
        ExUnits {
            mem: self.mem + o.mem,
            steps: self.steps + o.steps,
        }
    }
}

/// The protocol parameters the devnet ledger enforces and transaction builders pay: fees in
/// lovelace, sizes in bytes, prices in lovelace per execution unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolParams {
    /// Fee per transaction byte (lovelace/byte), `minFeeA`.
    pub min_fee_a: u64,
    /// Constant fee per transaction (lovelace), `minFeeB`.
    pub min_fee_b: u64,
    /// Maximum transaction size (bytes).
    pub max_tx_size: u64,
    /// Maximum block body size (bytes).
    pub max_block_body_size: u64,
    /// Maximum serialized size of an output's value (bytes).
    pub max_value_size: u64,
    /// Lovelace per byte of a serialized output (min-UTxO), `coinsPerUTxOByte`.
    pub coins_per_utxo_byte: u64,
    /// Price of one memory unit (lovelace).
    pub price_mem: Ratio,
    /// Price of one CPU step (lovelace).
    pub price_steps: Ratio,
    /// Maximum ExUnits of one transaction.
    pub max_tx_ex_units: ExUnits,
    /// Maximum ExUnits of one block.
    pub max_block_ex_units: ExUnits,
    /// Collateral required, in percent of the fee.
    pub collateral_percentage: u64,
    /// Maximum number of collateral inputs.
    pub max_collateral_inputs: u64,
    /// Base price of reference-script bytes (lovelace/byte), `minFeeRefScriptCostPerByte`;
    /// grows ×1.2 every 25 KiB (Conway ledger `tierRefScriptFee`).
    pub min_fee_ref_script_cost_per_byte: u64,
    /// Protocol version (major, minor) carried in block headers; the major version is also
    /// what the Plutus evaluator is given (Conway: 10).
    pub protocol_version: (u64, u64),
    /// Plutus V1 cost model (ordered integers).
    pub cost_model_v1: Vec<i64>,
    /// Plutus V2 cost model (ordered integers).
    pub cost_model_v2: Vec<i64>,
    /// Plutus V3 cost model (ordered integers, 350 entries).
    pub cost_model_v3: Vec<i64>,
}

/// Errors reading the embedded fixture parameters.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// A fixture file is not valid JSON.
    #[error("fixture {file} is not valid JSON")]
    Json {
        /// The fixture file name.
        file: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A field is missing or has the wrong type.
    #[error("fixture {file}: missing or invalid field {field}")]
    Field {
        /// The fixture file name.
        file: &'static str,
        /// The JSON path of the field.
        field: &'static str,
    },
}

fn parse(file: &'static str, text: &str) -> Result<Json, ParamsError> {
    serde_json::from_str(text).map_err(|source| ParamsError::Json { file, source })
}

fn u64_at(file: &'static str, json: &Json, path: &'static str) -> Result<u64, ParamsError> {
    json.pointer(path)
        .and_then(Json::as_u64)
        .ok_or(ParamsError::Field { file, field: path })
}

fn ints_at(file: &'static str, json: &Json, path: &'static str) -> Result<Vec<i64>, ParamsError> {
    json.pointer(path)
        .and_then(Json::as_array)
        .and_then(|a| a.iter().map(Json::as_i64).collect::<Option<Vec<_>>>())
        .ok_or(ParamsError::Field { file, field: path })
}

impl ProtocolParams {
    /// The cost models as the CBOR map `{0: PlutusV1, 1: PlutusV2, 2: PlutusV3}` that uplc's
    /// phase-2 evaluation takes (the devnet's ledger and the off-chain builders both give it
    /// this one map).
    pub fn cost_models_cbor(&self) -> Vec<u8> {
        let models = pallas_primitives::conway::CostModels {
            plutus_v1: Some(self.cost_model_v1.clone()),
            plutus_v2: Some(self.cost_model_v2.clone()),
            plutus_v3: Some(self.cost_model_v3.clone()),
            unknown: Default::default(),
        };
        // Encoding into a Vec cannot fail.
        pallas_codec::minicbor::to_vec(&models).unwrap_or_default()
    }

    /// The real mainnet parameters from the fixtures, with protocol version 10.0.
    ///
    /// # Errors
    /// [`ParamsError`] if an embedded fixture lacks a field (a build of a broken checkout).
    pub fn mainnet() -> Result<Self, ParamsError> {
        let shelley = parse("mainnet-shelley-genesis.json", SHELLEY)?;
        let alonzo = parse("mainnet-alonzo-genesis.json", ALONZO)?;
        let conway = parse("mainnet-conway-genesis.json", CONWAY)?;
        let exunits = parse("mainnet-ppu-2026-01-12-exunits.action.json", EXUNITS)?;
        let costs = parse("mainnet-costmodels-2026-05-12-ppu.json", COST_MODELS)?;
        let s = "mainnet-shelley-genesis.json";
        let a = "mainnet-alonzo-genesis.json";
        let e = "mainnet-ppu-2026-01-12-exunits.action.json";
        let c = "mainnet-costmodels-2026-05-12-ppu.json";
        let ratio = |path_n: &'static str, path_d: &'static str| -> Result<Ratio, ParamsError> {
            Ok(Ratio {
                numerator: u64_at(a, &alonzo, path_n)?,
                denominator: u64_at(a, &alonzo, path_d)?,
            })
        };
        Ok(Self {
            min_fee_a: u64_at(s, &shelley, "/protocolParams/minFeeA")?,
            min_fee_b: u64_at(s, &shelley, "/protocolParams/minFeeB")?,
            max_tx_size: u64_at(s, &shelley, "/protocolParams/maxTxSize")?,
            max_block_body_size: u64_at(s, &shelley, "/protocolParams/maxBlockBodySize")?,
            max_value_size: u64_at(a, &alonzo, "/maxValueSize")?,
            coins_per_utxo_byte: u64_at(a, &alonzo, "/lovelacePerUTxOWord")? / 8,
            price_mem: ratio(
                "/executionPrices/prMem/numerator",
                "/executionPrices/prMem/denominator",
            )?,
            price_steps: ratio(
                "/executionPrices/prSteps/numerator",
                "/executionPrices/prSteps/denominator",
            )?,
            max_tx_ex_units: ExUnits {
                mem: u64_at(
                    e,
                    &exunits,
                    "/governance action/contents/1/maxTxExecutionUnits/memory",
                )?,
                steps: u64_at(
                    e,
                    &exunits,
                    "/governance action/contents/1/maxTxExecutionUnits/steps",
                )?,
            },
            max_block_ex_units: ExUnits {
                mem: u64_at(
                    e,
                    &exunits,
                    "/governance action/contents/1/maxBlockExecutionUnits/memory",
                )?,
                steps: u64_at(
                    e,
                    &exunits,
                    "/governance action/contents/1/maxBlockExecutionUnits/steps",
                )?,
            },
            collateral_percentage: u64_at(a, &alonzo, "/collateralPercentage")?,
            max_collateral_inputs: u64_at(a, &alonzo, "/maxCollateralInputs")?,
            min_fee_ref_script_cost_per_byte: u64_at(
                "mainnet-conway-genesis.json",
                &conway,
                "/minFeeRefScriptCostPerByte",
            )?,
            protocol_version: (10, 0),
            cost_model_v1: ints_at(c, &costs, "/PlutusV1")?,
            cost_model_v2: ints_at(c, &costs, "/PlutusV2")?,
            cost_model_v3: ints_at(c, &costs, "/PlutusV3")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mainnet_parameters_match_the_fixtures() {
        let p = ProtocolParams::mainnet().expect("fixtures parse");
        assert_eq!((p.min_fee_a, p.min_fee_b), (44, 155_381));
        assert_eq!(p.max_tx_size, 16_384);
        assert_eq!(p.coins_per_utxo_byte, 4310);
        assert_eq!(
            p.price_mem,
            Ratio {
                numerator: 577,
                denominator: 10_000
            }
        );
        assert_eq!(
            p.price_steps,
            Ratio {
                numerator: 721,
                denominator: 10_000_000
            }
        );
        assert_eq!(
            p.max_tx_ex_units,
            ExUnits {
                mem: 16_500_000,
                steps: 10_000_000_000
            }
        );
        assert_eq!((p.collateral_percentage, p.max_collateral_inputs), (150, 3));
        assert_eq!(p.min_fee_ref_script_cost_per_byte, 15);
        assert_eq!(p.cost_model_v3.len(), 350);
        assert_eq!(p.cost_model_v1.len(), 332);
        assert_eq!(p.protocol_version, (10, 0));
    }
}
