//! The real blocks in `shared/fixtures/cardano/` go through the same decoding and scanning.

use std::path::Path;

use ganglion_indexer::Indexer;
use ganglion_indexer::store::MemoryKv;

use crate::scenario::run;

#[test]
fn real_blocks_are_scanned_without_events() {
    let watch = run().watch;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/cardano");
    // (file, transactions) from the fixtures' README.
    let expected = [
        ("conway1.block", 1),
        ("conway2.block", 1),
        ("conway3.block", 1),
        ("conway4.block", 1),
        ("babbage1.block", 1),
        ("babbage7.block", 4),
        ("babbage9.block", 47),
    ];
    for (file, txs) in expected {
        let hex_text = std::fs::read_to_string(dir.join(file)).expect("fixture");
        let bytes = hex::decode(hex_text.trim()).expect("hex");
        // The fixtures do not chain: a fresh indexer for each.
        let ix = Indexer::new(MemoryKv::new(), watch.clone(), 10);
        let applied = ix
            .apply_block(&bytes)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(applied.tx_count, txs, "{file}: every transaction seen");
        assert!(applied.records.is_empty(), "{file}: no Ganglion events");
        assert_eq!(
            ix.tip().expect("tip").map(|t| t.height),
            Some(applied.point.height)
        );
    }
}
