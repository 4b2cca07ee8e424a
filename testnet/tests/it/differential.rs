//! The differential check (`ledger::differential`): pallas-validate's Conway phase-1 rules
//! beside the devnet ledger.
//!
//! Every `validate` of this suite already runs through it (this crate's tests turn the
//! `differential` feature on; a disagreement aborts the run). Here: the check does run, it
//! does catch a disagreement in either direction, the issue-19 attack is a documented
//! exception (pallas-validate, like the devnet before issue 19, would let it create ADA),
//! the fee floor is the same lovelace on both sides, and the real transactions of
//! `shared/fixtures/` go through both implementations' UTxO-independent rules.

use std::collections::BTreeSet;

use ganglion_cardano::fees::{min_utxo, script_fee, size_for_fee};
use ganglion_cardano::protocol::ProtocolParams;
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::differential::{
    self, Agreement, Exception, PallasVerdict, compare, fee_and_min_utxo, pallas_verdict,
};
use ganglion_testnet::ledger::utxo::UtxoSet;
use ganglion_testnet::ledger::{Rejection, Rules, decode_tx, phase1, tx_hash, validate};
use ganglion_testnet::txbuild::{self, TxSpec};
use pallas_addresses::{Address, Network};
use pallas_crypto::hash::Hash;
use pallas_primitives::conway;
use pallas_traverse::{MultiEraBlock, MultiEraTx};
use pallas_validate::utils::{
    PostAlonzoError, ValidationError, get_shelley_address, verify_signature,
};

use crate::sets::{body, input, signed, tagged_set};

const ADA: u64 = 1_000_000;

fn devnet() -> (Genesis, Rules) {
    let g = Genesis::devnet().expect("genesis");
    let rules = Rules::new(g.protocol_params.clone(), g.slot_config(), g.network_id);
    (g, rules)
}

/// A wallet holding one 100 ADA output at `[7; 32]#0`.
fn wallet() -> (DevKey, Vec<u8>, TxoRef, UtxoSet) {
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let hundred = TxoRef {
        tx_hash: [7; 32],
        index: 0,
    };
    let policy = Hash::<28>::new([0; 28]);
    let utxo = UtxoSet::from_entries([(hundred, encode_output(&me, 100 * ADA, &policy, &[], 0))]);
    (key, me, hundred, utxo)
}

/// The issue-19 attack: one 100 ADA input listed twice, 199.8 ADA out. The devnet refuses
/// it (`DuplicateSetElement`); pallas-validate *accepts* it — it decodes the set as a list
/// and counts the input twice — and the check excuses exactly that, naming why.
#[test]
fn the_duplicate_input_attack_is_the_documented_sets_exception() {
    let (_, rules) = devnet();
    let (key, me, hundred, utxo) = wallet();
    let policy = Hash::<28>::new([0; 28]);
    let fee = 200_000;
    let out = encode_output(&me, 200 * ADA - fee, &policy, &[], 0);
    let attack = signed(
        &body(
            tagged_set(&[input(&hundred), input(&hundred)]),
            &[out],
            fee,
            &[],
        ),
        &key,
    );
    let verdict = validate(&rules, &utxo, &attack, 1);
    assert!(matches!(
        verdict,
        Err(Rejection::DuplicateSetElement { .. })
    ));
    let tx = pallas_codec::minicbor::decode::<conway::Tx<'_>>(&attack).expect("pallas decodes");
    assert!(
        matches!(
            pallas_verdict(&rules, &utxo, &tx, 1),
            PallasVerdict::Accepts
        ),
        "pallas-validate counts the repeated input twice"
    );
    assert_eq!(
        compare(&rules, &utxo, &attack, 1, &verdict).expect("excused"),
        Agreement::Excused(Exception::SetsDecodedAsLists)
    );
}

/// A verdict the other implementation does not share is a disagreement, both ways.
#[test]
fn a_verdict_pallas_does_not_share_is_a_disagreement() {
    let (g, rules) = devnet();
    let (key, me, hundred, utxo) = wallet();
    let policy = Hash::<28>::new([0; 28]);
    let mut spec = TxSpec {
        inputs: vec![hundred],
        ..Default::default()
    };
    let honest = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![encode_output(&me, 100 * ADA - fee, &policy, &[], 0)];
    });
    let accepted = validate(&rules, &utxo, &honest, 1);
    assert!(accepted.is_ok());
    assert_eq!(
        compare(&rules, &utxo, &honest, 1, &accepted).expect("agree"),
        Agreement::BothAccept
    );
    // Had the devnet refused it for value, pallas would not agree.
    let refused: Result<_, Rejection> = Err(Rejection::ValueNotConservedUTxO {
        consumed: String::new(),
        produced: String::new(),
    });
    let d = compare(&rules, &utxo, &honest, 1, &refused).expect_err("a disagreement");
    assert!(
        d.what.contains("refuses what pallas-validate accepts"),
        "{d}"
    );

    // 50 ADA out of thin air: both refuse; had the devnet accepted it, a disagreement.
    let mut greedy = spec.clone();
    greedy.outputs = vec![encode_output(&me, 150 * ADA, &policy, &[], 0)];
    let greedy = txbuild::build(&greedy, &[&key]);
    let refused = validate(&rules, &utxo, &greedy, 1);
    assert!(matches!(
        refused,
        Err(Rejection::ValueNotConservedUTxO { .. })
    ));
    assert_eq!(
        compare(&rules, &utxo, &greedy, 1, &refused).expect("agree"),
        Agreement::BothRefuse
    );
    let d = compare(&rules, &utxo, &greedy, 1, &accepted).expect_err("a disagreement");
    assert!(
        d.what.contains("accepts what pallas-validate refuses"),
        "{d}"
    );
    assert!(
        matches!(
            d.pallas,
            PallasVerdict::Refuses(ValidationError::PostAlonzo(
                PostAlonzoError::PreservationOfValue
            ))
        ),
        "{d}"
    );
}

/// The fee floor is the same lovelace on both sides for a key-only payment: pallas, given
/// cardano-ledger's size (`differential::pallas_params`), accepts the devnet's exact minimum
/// and refuses one lovelace less with its own `FeeBelowMin`.
#[test]
fn pallas_and_the_devnet_draw_the_fee_floor_at_the_same_lovelace() {
    let (g, rules) = devnet();
    let (key, me, hundred, utxo) = wallet();
    let policy = Hash::<28>::new([0; 28]);
    let pay = |s: &mut TxSpec, fee: u64| {
        s.outputs = vec![encode_output(&me, 100 * ADA - fee, &policy, &[], 0)];
    };
    let mut spec = TxSpec {
        inputs: vec![hundred],
        ..Default::default()
    };
    let exact = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, pay);
    let tx = decode_tx(&exact).expect("decodes");
    assert!(matches!(
        pallas_verdict(&rules, &utxo, &tx, 1),
        PallasVerdict::Accepts
    ));
    let mut low = spec.clone();
    let fee = spec.fee - 1;
    low.fee = fee;
    pay(&mut low, fee);
    let low = txbuild::build(&low, &[&key]);
    let before = differential::checked();
    assert!(matches!(
        validate(&rules, &utxo, &low, 1),
        Err(Rejection::FeeTooSmallUTxO { .. })
    ));
    assert!(differential::checked() > before, "validate ran the check");
    let tx = decode_tx(&low).expect("decodes");
    assert!(matches!(
        pallas_verdict(&rules, &utxo, &tx, 1),
        PallasVerdict::Refuses(ValidationError::PostAlonzo(PostAlonzoError::FeeBelowMin))
    ));
}

/// Hex fixture → bytes.
fn hex_file(path: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../shared/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    hex::decode(text.trim()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every real transaction of the fixtures, as (name, address network id, raw bytes): the
/// transactions of the real blocks (re-encoded by pallas-traverse from their original body,
/// witness-set and auxiliary-data bytes) and the bare `*.tx` files, with the network column
/// of `shared/fixtures/cardano/README.md`.
fn real_transactions() -> Vec<(String, u8, Vec<u8>)> {
    let mut out = Vec::new();
    let blocks = [
        ("conway1.block", 0),
        ("conway2.block", 0),
        ("conway3.block", 0),
        ("conway4.block", 0),
        ("babbage1.block", 0),
        ("babbage7.block", 0),
        ("babbage9.block", 1),
    ];
    for (file, network) in blocks {
        let bytes = hex_file(&format!("cardano/{file}"));
        let block = MultiEraBlock::decode(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (i, tx) in block.txs().iter().enumerate() {
            out.push((format!("{file} tx {i}"), network, tx.encode()));
        }
    }
    for (file, network) in [("conway1.tx", 1), ("conway6.tx", 1), ("babbage13.tx", 0)] {
        out.push((file.into(), network, hex_file(&format!("cardano/{file}"))));
    }
    for file in ["tx-1a36a841.hex", "tx-495d4ac7.hex", "tx-47dab938.hex"] {
        out.push((file.into(), 1, hex_file(&format!("field/fee-size/{file}"))));
    }
    out
}

/// The real transactions through both implementations, on every rule that needs no UTxO
/// (the fixtures carry none of their inputs, so value preservation, input witnesses,
/// collateral and redeemer pointers cannot run on them; nothing is made up in their place):
///
/// - both decoders take them (the devnet's, with Conway's set rule, and pallas-traverse's);
/// - fee size and fee floor: [`fee_and_min_utxo`] (pallas' size = ours + 1; our size term
///   = `minFeeA × size + minFeeB`), and each paid at least that plus the price of its
///   declared ExUnits at mainnet's prices;
/// - min-UTxO and value size: every output a real chain accepted passes the devnet's output
///   rules (`check_output`, mainnet's `coinsPerUTxOByte` 4310), whose minimum is at least
///   pallas';
/// - output network: the devnet's address reading and pallas' (`get_shelley_address`)
///   agree, and match the README's network column (Byron outputs, which the devnet refuses
///   as `WrongNetwork` and Cardano accepts, get the min-UTxO check only);
/// - signatures: every vkey witness verifies under both the devnet's check and pallas'
///   `verify_signature`;
/// - auxiliary data hash: the devnet's rule passes;
/// - script integrity hash: the devnet's `script_data_hash` equals pallas-primitives'
///   `ScriptData::build_for(..).hash()` for the languages the witness set names; where the
///   hash does not depend on cost models (no redeemers), it is the hash the transaction
///   declares.
#[test]
fn real_transactions_pass_both_implementations_on_every_rule_without_utxos() {
    let params = ProtocolParams::mainnet().expect("mainnet parameters");
    let txs = real_transactions();
    assert_eq!(
        txs.len(),
        1 + 1 + 1 + 1 + 1 + 4 + 47 + 3 + 3,
        "README's counts"
    );
    let mut with_redeemers = 0;
    let mut declared_checked = 0;
    let mut byron_outputs = 0;
    for (name, network, bytes) in &txs {
        let tx = decode_tx(bytes).unwrap_or_else(|r| panic!("{name}: devnet decoder: {r}"));
        assert!(
            MultiEraTx::decode(bytes).is_ok(),
            "{name}: pallas-traverse decodes it"
        );
        fee_and_min_utxo(&params, &tx, true).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (units, _) = phase1::declared_ex_units(&tx);
        let floor =
            params.min_fee_a * size_for_fee(&tx) + params.min_fee_b + script_fee(&params, units);
        assert!(
            tx.transaction_body.fee >= floor,
            "{name}: paid {} < size + ExUnits floor {floor}",
            tx.transaction_body.fee
        );

        for (i, out) in tx.transaction_body.outputs.iter().enumerate() {
            let raw = match out {
                conway::TransactionOutput::Legacy(o) => o.address.to_vec(),
                conway::TransactionOutput::PostAlonzo(o) => o.address.to_vec(),
            };
            if let Ok(Address::Byron(_)) = Address::from_bytes(&raw) {
                // The devnet refuses Byron outputs (`WrongNetwork`: a Byron address has
                // no network id), which Cardano accepts; its min-UTxO still applies.
                let coin = phase1::facts_of(out).value.coin;
                let min = min_utxo(&params, phase1::output_raw(out).len() as u64);
                assert!(
                    coin >= i128::from(min),
                    "{name} output {i}: Byron, min-UTxO"
                );
                byron_outputs += 1;
                continue;
            }
            phase1::check_output(&params, *network, i, out)
                .unwrap_or_else(|r| panic!("{name} output {i}: {r}"));
            let ours = Address::from_bytes(&raw)
                .ok()
                .and_then(|a| a.network())
                .map(|n| n.value());
            let theirs = get_shelley_address(&raw).map(|a| a.network().value());
            assert_eq!(ours, theirs, "{name} output {i}: network");
            assert_eq!(ours, Some(*network), "{name} output {i}: README network");
        }

        let hash = tx_hash(&tx);
        let signed = phase1::check_vkey_witnesses(&tx, &hash)
            .unwrap_or_else(|r| panic!("{name}: devnet signature check: {r}"));
        let witnesses = tx
            .transaction_witness_set
            .vkeywitness
            .as_ref()
            .map(|w| w.iter().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        assert!(!witnesses.is_empty(), "{name}: signed");
        // A repeated witness is merged (a set until protocol version 12): babbage9's tx 8
        // carries one key's witness three times.
        assert!(
            !signed.is_empty() && signed.len() <= witnesses.len(),
            "{name}: signers"
        );
        for w in &witnesses {
            assert!(
                verify_signature(w, hash.as_ref()),
                "{name}: pallas signature check"
            );
        }

        phase1::check_auxiliary_data(&tx).unwrap_or_else(|r| panic!("{name}: {r}"));

        let ws = &tx.transaction_witness_set;
        let mut languages = BTreeSet::new();
        for (lang, present) in [
            (0u8, ws.plutus_v1_script.is_some()),
            (1, ws.plutus_v2_script.is_some()),
            (2, ws.plutus_v3_script.is_some()),
        ] {
            if present {
                languages.insert(lang);
            }
        }
        let ours = phase1::script_data_hash(&tx, &params, &languages);
        let views = conway::LanguageViews(
            languages
                .iter()
                .map(|l| {
                    let model = match l {
                        0 => params.cost_model_v1.clone(),
                        1 => params.cost_model_v2.clone(),
                        _ => params.cost_model_v3.clone(),
                    };
                    (*l, model)
                })
                .collect(),
        );
        let theirs = conway::ScriptData::build_for(ws, &Some(views)).map(|d| d.hash());
        assert_eq!(ours, theirs, "{name}: script integrity hash");
        if phase1::has_redeemers(&tx) {
            with_redeemers += 1;
        } else if let Some(datums) = &ws.plutus_data {
            // No redeemers: no cost model in the hash, so the declared one can be checked.
            // Conway encodes the absent redeemers as an empty map (`a0 ‖ datums ‖ a0`, the
            // devnet's); Babbage as an empty list (`80 ‖ datums ‖ a0`): conway.cddl and
            // babbage.cddl, the notes on `script_data_hash`.
            let babbage = name.starts_with("babbage") || name.starts_with("tx-");
            let expected = if babbage {
                let mut buf = vec![0x80];
                buf.extend_from_slice(datums.raw_cbor());
                buf.push(0xa0);
                Some(pallas_crypto::hash::Hasher::<256>::hash(&buf))
            } else {
                ours
            };
            assert_eq!(
                tx.transaction_body.script_data_hash, expected,
                "{name}: declared hash"
            );
            declared_checked += 1;
        }
    }
    assert!(
        with_redeemers >= 6,
        "the fixtures' Plutus transactions were compared"
    );
    // docs/networks.md quotes these two numbers.
    assert_eq!(
        declared_checked, 13,
        "declared hashes that need no cost model"
    );
    assert_eq!(byron_outputs, 3, "Byron outputs (babbage9.block)");
}
