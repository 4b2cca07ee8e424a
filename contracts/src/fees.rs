//! Fee and min-UTxO arithmetic, pure over [`ProtocolParams`](crate::protocol::ProtocolParams):
//! the rules are `ganglion_cardano::fees` (re-exported here), the same the devnet's ledger
//! enforces:
//! - min fee = `minFeeA × size + minFeeB + ⌈mem × priceMem + steps × priceSteps⌉ +
//!   tierRefScriptFee(Σ reference-script bytes)` ([`min_fee`]);
//! - the reference-script fee charges `minFeeRefScriptCostPerByte` per byte for the first
//!   25 600 bytes, then 1.2× that for the next 25 600, and so on, rounded down at the end;
//! - min-UTxO of an output = `(160 + serialised output bytes) × coinsPerUTxOByte`;
//! - collateral ≥ `⌈fee × collateralPercentage / 100⌉`;
//! - the size counted is [`tx_size_for_fee`]: the transaction without its `is_valid` flag.

use pallas_codec::minicbor;
use pallas_primitives::conway;

pub use ganglion_cardano::fees::{
    REF_SCRIPT_TIER_BYTES, min_fee, min_utxo, ref_script_fee, required_collateral, script_fee,
    size_for_fee,
};

use crate::error::{Error, Result};

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
    Ok(size_for_fee(&tx))
}
