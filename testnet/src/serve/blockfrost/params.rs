//! `/epochs/latest/parameters`: the devnet's protocol parameters in Blockfrost's shape
//! (what a transaction builder reads to pay fees, min-UTxO and execution units).
//!
//! The ledger's own parameters ([`ProtocolParams`]) give every field it enforces; the
//! staking and pool fields it has no rules for (deposits, `e_max`, `n_opt`, `a0`, `rho`,
//! `tau`, `min_pool_cost`, the header size) are mainnet's, from the same Shelley genesis
//! fixture the ledger's fees come from. Blockfrost's types: lovelace amounts and ExUnits
//! limits as strings, prices as numbers, `cost_models_raw` as integer lists by language.

use ganglion_cardano::protocol::{ProtocolParams, Ratio};
use serde_json::{Value as Json, json};

const SHELLEY: &str =
    include_str!("../../../../../shared/fixtures/cardano/mainnet-shelley-genesis.json");

/// Slots per epoch: mainnet's `epochLength` (the devnet has one era and no epoch rules;
/// Blockfrost's `epoch` fields count in these).
pub const EPOCH_LENGTH: u64 = 432_000;

fn ratio(r: Ratio) -> f64 {
    if r.denominator == 0 {
        0.0
    } else {
        r.numerator as f64 / r.denominator as f64
    }
}

/// The parameters object of `epoch`.
pub fn parameters(p: &ProtocolParams, epoch: u64) -> Json {
    let shelley: Json = serde_json::from_str(SHELLEY).unwrap_or(Json::Null);
    let mainnet = |key: &str| shelley.pointer(&format!("/protocolParams/{key}")).cloned();
    let string = |key: &str| mainnet(key).map(|v| Json::String(v.to_string()));
    json!({
        "epoch": epoch,
        "min_fee_a": p.min_fee_a,
        "min_fee_b": p.min_fee_b,
        "max_block_size": p.max_block_body_size,
        "max_tx_size": p.max_tx_size,
        "max_block_header_size": mainnet("maxBlockHeaderSize"),
        "key_deposit": string("keyDeposit"),
        "pool_deposit": string("poolDeposit"),
        "e_max": mainnet("eMax"),
        "n_opt": mainnet("nOpt"),
        "a0": mainnet("a0"),
        "rho": mainnet("rho"),
        "tau": mainnet("tau"),
        "decentralisation_param": 0,
        "extra_entropy": null,
        "protocol_major_ver": p.protocol_version.0,
        "protocol_minor_ver": p.protocol_version.1,
        "min_utxo": p.coins_per_utxo_byte.to_string(),
        "min_pool_cost": string("minPoolCost"),
        "nonce": null,
        "cost_models": null,
        "cost_models_raw": {
            "PlutusV1": p.cost_model_v1,
            "PlutusV2": p.cost_model_v2,
            "PlutusV3": p.cost_model_v3,
        },
        "price_mem": ratio(p.price_mem),
        "price_step": ratio(p.price_steps),
        "max_tx_ex_mem": p.max_tx_ex_units.mem.to_string(),
        "max_tx_ex_steps": p.max_tx_ex_units.steps.to_string(),
        "max_block_ex_mem": p.max_block_ex_units.mem.to_string(),
        "max_block_ex_steps": p.max_block_ex_units.steps.to_string(),
        "max_val_size": p.max_value_size.to_string(),
        "collateral_percent": p.collateral_percentage,
        "max_collateral_inputs": p.max_collateral_inputs,
        "coins_per_utxo_size": p.coins_per_utxo_byte.to_string(),
        "coins_per_utxo_word": p.coins_per_utxo_byte.to_string(),
        "min_fee_ref_script_cost_per_byte": p.min_fee_ref_script_cost_per_byte,
    })
}
