//! Fee and min-UTxO arithmetic, pure over [`ProtocolParams`].
//!
//! Conway ledger rules (cardano-ledger `Conway.Tx`, `Alonzo.Tx`, `Babbage.Rules.Utxo`):
//! - min fee = `minFeeA × size + minFeeB + ⌈mem × priceMem + steps × priceSteps⌉ +
//!   tierRefScriptFee(Σ reference-script bytes)`;
//! - the reference-script fee charges `minFeeRefScriptCostPerByte` per byte for the first
//!   25 600 bytes, then 1.2× that for the next 25 600, and so on, rounded down at the end;
//! - min-UTxO of an output = `(160 + serialised output bytes) × coinsPerUTxOByte`;
//! - collateral ≥ `⌈fee × collateralPercentage / 100⌉`;
//! - the size counted is [`tx_size_for_fee`]: the transaction without its `is_valid` flag.

use pallas_codec::minicbor;
use pallas_codec::utils::Nullable;
use pallas_primitives::conway;

use crate::error::{Error, Result};
use crate::protocol::{ExUnits, ProtocolParams};

/// The size (bytes) the ledger counts for the minimum fee of the transaction `tx_cbor`: the
/// CBOR of `[body, witness set, auxiliary data]` (one-byte 3-array header, the three parts in
/// their original bytes, `null` = 1 byte without auxiliary data), i.e. without the `is_valid`
/// flag. For a definite 4-array (what [`crate::tx`] encodes) that is the wire size − 1.
///
/// Source: cardano-ledger `Cardano.Ledger.Alonzo.Tx` `sizeAlonzoTxF` /
/// `toCBORForSizeComputation`, which Conway's `sizeTxF` reuses.
///
/// # Errors
/// [`Error::Cbor`] when `tx_cbor` is not one Conway transaction.
pub fn tx_size_for_fee(tx_cbor: &[u8]) -> Result<u64> {
    let tx: conway::Tx<'_> = minicbor::decode(tx_cbor).map_err(|e| Error::Cbor {
        what: "transaction (fee size)",
        reason: e.to_string(),
    })?;
    let aux = match &tx.auxiliary_data {
        Nullable::Some(a) => a.raw_cbor().len(),
        Nullable::Null | Nullable::Undefined => 1,
    };
    Ok((1
        + tx.transaction_body.raw_cbor().len()
        + tx.transaction_witness_set.raw_cbor().len()
        + aux) as u64)
}

/// Size of one reference-script fee tier, bytes.
pub const REF_SCRIPT_TIER_BYTES: u64 = 25_600;

/// Lovelace for the scripts' execution units, rounded up.
pub fn script_fee(pp: &ProtocolParams, ex: ExUnits) -> u64 {
    // mem·pm/dm + steps·ps/ds, as one fraction over dm·ds, then ceiling.
    let (pm, dm) = (
        u128::from(pp.price_mem.numerator),
        u128::from(pp.price_mem.denominator),
    );
    let (ps, ds) = (
        u128::from(pp.price_steps.numerator),
        u128::from(pp.price_steps.denominator),
    );
    let num = u128::from(ex.mem) * pm * ds + u128::from(ex.steps) * ps * dm;
    let den = dm * ds;
    num.div_ceil(den) as u64
}

/// Lovelace for `bytes` of reference scripts (tiered, rounded down).
pub fn ref_script_fee(pp: &ProtocolParams, bytes: u64) -> u64 {
    // Price of tier k is base × (6/5)^k; keep the sum as a fraction over 5^k.
    let mut remaining = u128::from(bytes);
    let mut num: u128 = 0; // sum × 5^k
    let mut den: u128 = 1; // 5^k
    let mut price_num = u128::from(pp.min_fee_ref_script_cost_per_byte); // price × 5^k
    loop {
        let chunk = remaining.min(u128::from(REF_SCRIPT_TIER_BYTES));
        num += chunk * price_num;
        remaining -= chunk;
        if remaining == 0 {
            return (num / den) as u64;
        }
        num *= 5;
        den *= 5;
        price_num *= 6;
    }
}

/// The minimum fee of a transaction whose [`tx_size_for_fee`] is `size` bytes, declaring `ex`
/// execution units and referencing `ref_script_bytes` bytes of reference scripts, in lovelace.
pub fn min_fee(pp: &ProtocolParams, size: u64, ex: ExUnits, ref_script_bytes: u64) -> u64 {
    pp.min_fee_a * size + pp.min_fee_b + script_fee(pp, ex) + ref_script_fee(pp, ref_script_bytes)
}

/// Minimum lovelace of an output whose CBOR is `output_bytes` long.
pub fn min_utxo(pp: &ProtocolParams, output_bytes: u64) -> u64 {
    (160 + output_bytes) * pp.coins_per_utxo_byte
}

/// Lovelace the collateral must cover for a transaction paying `fee`.
pub fn required_collateral(pp: &ProtocolParams, fee: u64) -> u64 {
    (u128::from(fee) * u128::from(pp.collateral_percentage)).div_ceil(100) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pp() -> ProtocolParams {
        ProtocolParams::mainnet().unwrap()
    }

    #[test]
    fn script_fee_rounds_up_the_sum() {
        // 1 mem = 0.0577, 1 step = 0.0000721 → 1 lovelace after ceiling.
        assert_eq!(script_fee(&pp(), ExUnits { mem: 1, steps: 1 }), 1);
        // 10 000 mem = 577 exactly; 10 000 000 steps = 721 exactly.
        assert_eq!(
            script_fee(
                &pp(),
                ExUnits {
                    mem: 10_000,
                    steps: 10_000_000
                }
            ),
            1298
        );
    }

    #[test]
    fn reference_scripts_are_priced_in_tiers() {
        let pp = pp();
        assert_eq!(ref_script_fee(&pp, 0), 0);
        assert_eq!(ref_script_fee(&pp, 1000), 15_000);
        assert_eq!(ref_script_fee(&pp, 25_600), 384_000);
        // second tier: 18 lovelace per byte
        assert_eq!(ref_script_fee(&pp, 25_601), 384_018);
        // third tier: 21.6 per byte, floor at the end
        assert_eq!(ref_script_fee(&pp, 51_200 + 5), 384_000 + 460_800 + 108);
    }

    #[test]
    fn min_fee_adds_every_part() {
        let pp = pp();
        assert_eq!(min_fee(&pp, 300, ExUnits::default(), 0), 44 * 300 + 155_381);
        assert_eq!(
            min_fee(
                &pp,
                300,
                ExUnits {
                    mem: 10_000,
                    steps: 10_000_000
                },
                1000
            ),
            44 * 300 + 155_381 + 1298 + 15_000
        );
    }

    #[test]
    fn min_utxo_and_collateral() {
        let pp = pp();
        assert_eq!(min_utxo(&pp, 65), 225 * 4310);
        assert_eq!(required_collateral(&pp, 200_001), 300_002);
    }
}
