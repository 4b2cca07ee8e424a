//! The minimum fee as Cardano counts it: on the size without the `is_valid` flag.
//!
//! Three real mainnet transactions (`shared/fixtures/field/fee-size/`, minimum fees from
//! that folder's README) go through the ledger's own fee function; a devnet payment paying
//! exactly that minimum is accepted and one lovelace less is refused.

use ganglion_cardano::fees::{min_fee, size_for_fee};
use ganglion_cardano::protocol::{ExUnits, ProtocolParams};
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::utxo::UtxoSet;
use ganglion_testnet::ledger::{Rejection, Rules, decode_tx, phase1, validate};
use ganglion_testnet::txbuild::{self, TxSpec};
use pallas_addresses::Network;
use pallas_crypto::hash::Hash;

/// (file, wire bytes, Σmem, Σsteps, minimum fee in lovelace) from the fee-size README.
const MAINNET: [(&str, usize, u64, u64, u64); 3] = [
    ("tx-1a36a841.hex", 862, 820_114, 270_993_264, 260_125),
    ("tx-495d4ac7.hex", 864, 829_116, 273_360_841, 260_903),
    ("tx-47dab938.hex", 1022, 3_452_498, 1_074_904_790, 477_015),
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../shared/fixtures/field/fee-size/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    hex::decode(text.trim()).expect("hex")
}

#[test]
fn three_mainnet_transactions_give_their_minimum_fees() {
    let p = ProtocolParams::mainnet().expect("mainnet parameters");
    for (name, wire, mem, steps, expected) in MAINNET {
        let bytes = fixture(name);
        assert_eq!(bytes.len(), wire, "{name}: wire size");
        let tx = decode_tx(&bytes).expect("decodes");
        let (declared, _) = phase1::declared_ex_units(&tx);
        assert_eq!(
            declared,
            ExUnits { mem, steps },
            "{name}: Σ redeemer ExUnits"
        );
        let size = size_for_fee(&tx);
        assert_eq!(size, wire as u64 - 1, "{name}: is_valid is not counted");
        // Babbage transactions: no reference-script fee term.
        assert_eq!(min_fee(&p, size, declared, 0), expected, "{name}");
        assert!(
            tx.transaction_body.fee >= expected,
            "{name} paid at least it"
        );
    }
}

/// `bytes` with the body's fee (key 2, a CBOR uint32 `1a xx xx xx xx`) rewritten to `fee`
/// at the same width, so the size, hence the minimum, does not change.
fn with_fee(bytes: &[u8], old: u64, fee: u64) -> Vec<u8> {
    let field = |f: u64| {
        let mut v = vec![0x02, 0x1a];
        v.extend_from_slice(&u32::try_from(f).expect("a uint32 fee").to_be_bytes());
        v
    };
    let (from, to) = (field(old), field(fee));
    let at: Vec<usize> = (0..=bytes.len() - from.len())
        .filter(|&i| bytes[i..].starts_with(&from))
        .collect();
    assert_eq!(at.len(), 1, "the fee field occurs once");
    let mut out = bytes.to_vec();
    out[at[0]..at[0] + to.len()].copy_from_slice(&to);
    out
}

/// The devnet ledger's fee rule ([`phase1::min_fee_of`], the function `validate` calls, and
/// [`phase1::check_fee`]) on the three mainnet transactions themselves, their fee set to
/// mainnet's minimum and to one lovelace less. (The whole `validate` cannot run on them: their
/// inputs are mainnet UTxOs the fixtures do not carry.)
#[test]
fn the_ledger_accepts_the_mainnet_minimum_on_the_real_transactions() {
    let p = ProtocolParams::mainnet().expect("mainnet parameters");
    for (name, _, _, _, minimum) in MAINNET {
        let bytes = fixture(name);
        let paid = decode_tx(&bytes).expect("decodes").transaction_body.fee;
        assert!(
            paid >= minimum && paid >= 1 << 16,
            "{name}: a uint32 fee, at least the minimum"
        );
        for (fee, accepted) in [(minimum, true), (minimum - 1, false)] {
            let patched = with_fee(&bytes, paid, fee);
            let tx = decode_tx(&patched).expect("still decodes");
            assert_eq!(tx.transaction_body.fee, fee);
            let required = phase1::min_fee_of(&p, &tx, 0);
            assert_eq!(required, minimum, "{name}: the ledger's minimum");
            match phase1::check_fee(required, fee) {
                Ok(()) => assert!(accepted, "{name}: fee {fee} accepted"),
                Err(Rejection::FeeTooSmallUTxO { required, provided }) => {
                    assert!(!accepted, "{name}: fee {fee} refused");
                    assert_eq!((required, provided), (minimum, minimum - 1));
                }
                Err(other) => panic!("{name}: {other}"),
            }
        }
    }
}

#[test]
fn a_fee_equal_to_the_minimum_is_accepted_and_one_lovelace_less_refused() {
    let g = Genesis::devnet().expect("genesis");
    let rules = Rules::new(g.protocol_params.clone(), g.slot_config(), g.network_id);
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let input = TxoRef {
        tx_hash: [7; 32],
        index: 0,
    };
    let policy = Hash::<28>::new([0; 28]);
    let funds = 50_000_000;
    let utxo = UtxoSet::from_entries([(input, encode_output(&me, funds, &policy, &[], 0))]);
    let pay = |s: &mut TxSpec, fee: u64| {
        s.outputs = vec![
            encode_output(&me, 10_000_000, &policy, &[], 0),
            encode_output(&me, funds - 10_000_000 - fee, &policy, &[], 0),
        ];
    };
    let mut spec = TxSpec {
        inputs: vec![input],
        ..Default::default()
    };
    let bytes = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, pay);
    let tx = decode_tx(&bytes).expect("decodes");
    let minimum = min_fee(&g.protocol_params, size_for_fee(&tx), ExUnits::default(), 0);
    assert_eq!(spec.fee, minimum, "the builder pays exactly the minimum");
    assert_eq!(
        minimum,
        44 * (bytes.len() as u64 - 1) + 155_381,
        "a × (wire − 1) + b"
    );
    let ok = validate(&rules, &utxo, &bytes, 1).expect("fee = minimum is accepted");
    assert_eq!(ok.fee, minimum);

    let mut low = spec.clone();
    low.fee = minimum - 1;
    pay(&mut low, minimum - 1);
    let low_bytes = txbuild::build(&low, &[&key]);
    assert_eq!(
        low_bytes.len(),
        bytes.len(),
        "same size, so the same minimum"
    );
    match validate(&rules, &utxo, &low_bytes, 1) {
        Err(Rejection::FeeTooSmallUTxO { required, provided }) => {
            assert_eq!((required, provided), (minimum, minimum - 1));
        }
        other => panic!("expected FeeTooSmallUTxO, got {other:?}"),
    }
}
