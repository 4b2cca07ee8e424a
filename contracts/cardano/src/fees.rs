//! Minimum fee, minimum UTxO and collateral: exact integer arithmetic over
//! [`ProtocolParams`], in lovelace — the rules the devnet's ledger enforces and the
//! transaction builders pay. Results saturate at `u64::MAX` instead of overflowing.
//!
//! Sources: Alonzo/Babbage ledger spec (`minfee`, `txscriptfee`, `utxoEntrySize` = 160 +
//! serialized output size, collateral ≥ `⌈fee × collateralPercentage / 100⌉`) and the Conway
//! ledger's `tierRefScriptFee` (price per reference-script byte grows ×1.2 every 25 KiB,
//! floored at the end); cardano-ledger `Conway.Tx` `getConwayMinFeeTx`.
//!
//! The size both the fee and `maxTxSize` count is [`size_for_fee`]: the transaction without
//! its `is_valid` flag, as cardano-ledger measures it.

use pallas_codec::utils::Nullable;
use pallas_primitives::conway;

use crate::protocol::{ExUnits, ProtocolParams};

/// The size (bytes) the ledger counts for the minimum fee and `maxTxSize`: the CBOR of
/// `[body, witness set, auxiliary data]` — a one-byte 3-array header, then the three parts in
/// their original bytes (`null` = 1 byte when there is no auxiliary data). The `is_valid`
/// flag is not counted.
///
/// Source: cardano-ledger `Cardano.Ledger.Alonzo.Tx` `sizeAlonzoTxF` /
/// `toCBORForSizeComputation` (used by Babbage and Conway: `Conway.Tx` `sizeTxF =
/// sizeAlonzoTxF`). For a transaction sent as a definite 4-array this is the wire size − 1
/// (checked on three mainnet transactions, `shared/fixtures/field/fee-size/`).
pub fn size_for_fee(tx: &conway::Tx<'_>) -> u64 {
    let aux = match &tx.auxiliary_data {
        Nullable::Some(a) => a.raw_cbor().len(),
        Nullable::Null | Nullable::Undefined => 1,
    };
    (1 + tx.transaction_body.raw_cbor().len() + tx.transaction_witness_set.raw_cbor().len() + aux)
        as u64
}

/// Reference-script tier size (bytes).
pub const REF_SCRIPT_TIER_BYTES: u64 = 25 * 1024;

/// Fixed per-entry overhead of a UTxO in the min-UTxO rule (bytes).
pub const UTXO_ENTRY_OVERHEAD_BYTES: u64 = 160;

/// Script execution fee (lovelace): ⌈mem × price_mem + steps × price_steps⌉.
pub fn script_fee(params: &ProtocolParams, units: ExUnits) -> u64 {
    let pm = params.price_mem;
    let ps = params.price_steps;
    let num = u128::from(units.mem) * u128::from(pm.numerator) * u128::from(ps.denominator)
        + u128::from(units.steps) * u128::from(ps.numerator) * u128::from(pm.denominator);
    let den = u128::from(pm.denominator) * u128::from(ps.denominator);
    if den == 0 {
        return u64::MAX;
    }
    u64::try_from(num.div_ceil(den)).unwrap_or(u64::MAX)
}

/// Reference-script fee (lovelace) for `size` bytes of reference scripts:
/// Conway `tierRefScriptFee 1.2 25600 minFeeRefScriptCostPerByte size` (floored at the end).
pub fn ref_script_fee(params: &ProtocolParams, size: u64) -> u64 {
    // acc and price are kept as numerators over den = 5^k (k = tiers passed).
    let mut acc_num: u128 = 0;
    let mut price_num: u128 = u128::from(params.min_fee_ref_script_cost_per_byte);
    let mut den: u128 = 1;
    let mut n = u128::from(size);
    let step = u128::from(REF_SCRIPT_TIER_BYTES);
    while n >= step {
        acc_num += step * price_num;
        acc_num *= 5;
        price_num *= 6;
        den *= 5;
        n -= step;
    }
    u64::try_from((acc_num + n * price_num) / den).unwrap_or(u64::MAX)
}

/// The exact minimum fee (lovelace) of a transaction whose [`size_for_fee`] is `tx_size`
/// bytes, declaring `units` in total and spending/referencing `ref_script_size` bytes of
/// reference scripts: `minFeeA × tx_size + minFeeB + script_fee + ref_script_fee`
/// (cardano-ledger `Conway.Tx` `getConwayMinFeeTx`).
pub fn min_fee(params: &ProtocolParams, tx_size: u64, units: ExUnits, ref_script_size: u64) -> u64 {
    params
        .min_fee_a
        .saturating_mul(tx_size)
        .saturating_add(params.min_fee_b)
        .saturating_add(script_fee(params, units))
        .saturating_add(ref_script_fee(params, ref_script_size))
}

/// Minimum lovelace of an output whose serialization is `output_size` bytes (Babbage rule).
pub fn min_utxo(params: &ProtocolParams, output_size: u64) -> u64 {
    (UTXO_ENTRY_OVERHEAD_BYTES + output_size).saturating_mul(params.coins_per_utxo_byte)
}

/// Lovelace the collateral must cover for a transaction paying `fee` lovelace:
/// `⌈fee × collateralPercentage / 100⌉` (Alonzo `feesOK`).
pub fn required_collateral(params: &ProtocolParams, fee: u64) -> u64 {
    u64::try_from((u128::from(fee) * u128::from(params.collateral_percentage)).div_ceil(100))
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> ProtocolParams {
        ProtocolParams::mainnet().expect("fixtures")
    }

    #[test]
    fn simple_payment_fee_is_a_times_size_plus_b() {
        assert_eq!(
            min_fee(&p(), 300, ExUnits::default(), 0),
            44 * 300 + 155_381
        );
    }

    #[test]
    fn script_fee_rounds_up() {
        // 1 mem = 0.0577 lovelace, rounded up to 1.
        assert_eq!(script_fee(&p(), ExUnits { mem: 1, steps: 0 }), 1);
        // 1e6 mem + 1e9 steps = 57700 + 72100.
        assert_eq!(
            script_fee(
                &p(),
                ExUnits {
                    mem: 1_000_000,
                    steps: 1_000_000_000
                }
            ),
            129_800
        );
    }

    #[test]
    fn ref_script_tiers_grow_by_one_fifth() {
        let p = p();
        assert_eq!(ref_script_fee(&p, 0), 0);
        assert_eq!(ref_script_fee(&p, 1000), 15_000);
        assert_eq!(ref_script_fee(&p, 25_600), 384_000);
        // second tier: 25600 × 15 + 100 × 18
        assert_eq!(ref_script_fee(&p, 25_700), 384_000 + 1_800);
        // third tier price 21.6: 25600×15 + 25600×18 + 10×21.6
        assert_eq!(ref_script_fee(&p, 51_210), 384_000 + 460_800 + 216);
    }

    #[test]
    fn script_fee_rounds_up_the_sum() {
        // 1 mem = 0.0577, 1 step = 0.0000721 → 1 lovelace after ceiling.
        assert_eq!(script_fee(&p(), ExUnits { mem: 1, steps: 1 }), 1);
        // 10 000 mem = 577 exactly; 10 000 000 steps = 721 exactly.
        let exact = ExUnits {
            mem: 10_000,
            steps: 10_000_000,
        };
        assert_eq!(script_fee(&p(), exact), 1298);
        assert_eq!(
            min_fee(&p(), 300, exact, 1000),
            44 * 300 + 155_381 + 1298 + 15_000
        );
    }

    #[test]
    fn the_second_tier_starts_at_the_next_byte() {
        assert_eq!(ref_script_fee(&p(), 25_601), 384_018);
        // third tier: 21.6 per byte, floor at the end
        assert_eq!(ref_script_fee(&p(), 51_200 + 5), 384_000 + 460_800 + 108);
    }

    #[test]
    fn min_utxo_counts_the_entry_overhead() {
        assert_eq!(min_utxo(&p(), 65), (160 + 65) * 4310);
    }

    #[test]
    fn collateral_is_a_rounded_up_percentage_of_the_fee() {
        assert_eq!(required_collateral(&p(), 200_001), 300_002);
        assert_eq!(required_collateral(&p(), 0), 0);
    }
}
