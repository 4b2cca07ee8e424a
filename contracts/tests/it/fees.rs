//! The minimum fee as Cardano counts it: the size without the `is_valid` flag.
//!
//! Checked on three real mainnet transactions (`shared/fixtures/field/fee-size/`, minimum
//! fees from that folder's README) and on a transaction this crate builds, which must pay
//! exactly the minimum: not one lovelace less, not 44 more.

use ganglion_contracts::fees::{min_fee, tx_size_for_fee};
use ganglion_contracts::protocol::{ExUnits, ProtocolParams};
use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_contracts::tx::sign;
use pallas_codec::minicbor;
use pallas_primitives::conway::{self, Redeemers};

/// (file, wire bytes, minimum fee in lovelace) from the fee-size README.
const MAINNET: [(&str, usize, u64); 3] = [
    ("tx-1a36a841.hex", 862, 260_125),
    ("tx-495d4ac7.hex", 864, 260_903),
    ("tx-47dab938.hex", 1022, 477_015),
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../shared/fixtures/field/fee-size/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    hex::decode(text.trim()).expect("hex")
}

/// Σ ExUnits declared by the redeemers.
fn declared(tx: &conway::Tx<'_>) -> ExUnits {
    let mut sum = ExUnits::default();
    let mut add = |e: &pallas_primitives::ExUnits| {
        sum = sum.plus(ExUnits {
            mem: e.mem,
            steps: e.steps,
        })
    };
    match tx.transaction_witness_set.redeemer.as_deref() {
        Some(Redeemers::List(l)) => l.iter().for_each(|r| add(&r.ex_units)),
        Some(Redeemers::Map(m)) => m.values().for_each(|v| add(&v.ex_units)),
        None => {}
    }
    sum
}

#[test]
fn three_mainnet_transactions_give_their_minimum_fees() {
    let pp = ProtocolParams::mainnet().expect("mainnet parameters");
    for (name, wire, expected) in MAINNET {
        let bytes = fixture(name);
        assert_eq!(bytes.len(), wire, "{name}: wire size");
        let tx: conway::Tx<'_> = minicbor::decode(&bytes).expect("decodes");
        let size = tx_size_for_fee(&bytes).expect("fee size");
        assert_eq!(size, wire as u64 - 1, "{name}: is_valid is not counted");
        // No reference-script fee term before Conway: these are Babbage transactions.
        assert_eq!(min_fee(&pp, size, declared(&tx), 0), expected, "{name}");
        assert!(
            tx.transaction_body.fee >= expected,
            "{name} paid at least the minimum"
        );
    }
}

#[test]
fn a_balanced_script_transaction_pays_exactly_the_minimum() {
    let mut h = Harness::new(1);
    h.post_bonds();
    let (_, b) = h.lock(100 * NTX, 7200);
    assert!(b.total_ex_units().mem > 0, "the lock runs a script");
    let signed = sign(&b, &[&h.orch.key]).expect("signs");
    assert_eq!(
        signed.len(),
        b.size,
        "the fee was priced for the signed size"
    );
    let size = tx_size_for_fee(&signed).expect("fee size");
    assert_eq!(size, signed.len() as u64 - 1);
    let pp = &h.env().params;
    let minimum = min_fee(pp, size, b.total_ex_units(), b.ref_script_bytes);
    assert_eq!(b.fee, minimum, "exactly the minimum");
    let tx: conway::Tx<'_> = minicbor::decode(&signed).expect("decodes");
    assert_eq!(tx.transaction_body.fee, minimum, "the body carries it");
}
