//! A decoded block's transactions, moved out of it.
//!
//! `MultiEraBlock::txs` (pallas-traverse 1.4) clones every transaction's body, witness set
//! and auxiliary data out of the block it borrows: on a full block that copy and its drop were
//! about a fifth of the indexer's time. The indexer reads each block once, so it takes the
//! parts instead. Transaction `i` is body `i`, witness set `i`, the auxiliary data keyed `i`,
//! and valid unless `i` is listed in `invalid_transactions` (the ledger's block CDDL, as
//! pallas assembles them).

use std::borrow::Cow;
use std::collections::HashSet;

use pallas_primitives::{alonzo, babbage, conway};
use pallas_traverse::{MultiEraBlock, MultiEraTx};

/// The transactions of `block` in block order, as `block.txs()` gives them, without copies;
/// `Err(block)` for a kind of block this code does not know (pallas's enum is
/// non-exhaustive): read that one with `block.txs()`.
pub(crate) fn into_txs(block: MultiEraBlock<'_>) -> Result<Vec<MultiEraTx<'_>>, MultiEraBlock<'_>> {
    macro_rules! take {
        ($b:expr, $era:ident, $wrap:expr) => {{
            let b = *$b;
            let invalid: HashSet<u32> = b
                .invalid_transactions
                .map(|x| x.into_iter().collect())
                .unwrap_or_default();
            let mut aux = b.auxiliary_data_set;
            b.transaction_bodies
                .into_iter()
                .zip(b.transaction_witness_sets)
                .enumerate()
                .map(|(i, (body, witnesses))| {
                    let i = i as u32;
                    $wrap($era::Tx {
                        transaction_body: body,
                        transaction_witness_set: witnesses,
                        success: !invalid.contains(&i),
                        auxiliary_data: aux.remove(&i).into(),
                    })
                })
                .collect()
        }};
    }
    Ok(match block {
        MultiEraBlock::Conway(b) => {
            take!(b, conway, |tx| MultiEraTx::Conway(Box::new(Cow::Owned(tx))))
        }
        MultiEraBlock::Babbage(b) => take!(b, babbage, |tx| MultiEraTx::Babbage(Box::new(
            Cow::Owned(tx)
        ))),
        MultiEraBlock::AlonzoCompatible(b, era) => take!(b, alonzo, |tx| {
            MultiEraTx::AlonzoCompatible(Box::new(Cow::Owned(tx)), era)
        }),
        MultiEraBlock::Byron(b) => b
            .body
            .tx_payload
            .to_vec()
            .into_iter()
            .map(|tx| MultiEraTx::Byron(Box::new(Cow::Owned(tx))))
            .collect(),
        MultiEraBlock::EpochBoundary(_) => Vec::new(),
        other => return Err(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On every real fixture block, the moved transactions are the cloned ones: same hash,
    /// same validity, same bytes (body, witnesses, validity and auxiliary data).
    #[test]
    fn moved_transactions_equal_pallas_clones_on_the_fixtures() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/cardano");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("block") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("fixture");
            let cbor = hex::decode(text.trim()).expect("hex");
            let block = MultiEraBlock::decode(&cbor).expect("decodes");
            let cloned: Vec<_> = block
                .txs()
                .iter()
                .map(|t| (t.hash(), t.encode(), t.is_valid()))
                .collect();
            let moved: Vec<_> = into_txs(MultiEraBlock::decode(&cbor).expect("decodes"))
                .expect("a known era")
                .iter()
                .map(|t| (t.hash(), t.encode(), t.is_valid()))
                .collect();
            assert!(!cloned.is_empty(), "{} has transactions", path.display());
            assert_eq!(moved, cloned, "{}", path.display());
            seen += 1;
        }
        assert!(seen >= 7, "all fixture blocks read: {seen}");
    }
}
