//! Ledger rules called directly (no sockets): one valid script spend, then one mutation
//! per collateral / size / ExUnits / network rule, each named after the rule it breaks.

use std::collections::BTreeSet;

use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::utxo::{TxoRef, UtxoSet};
use ganglion_testnet::ledger::{Rejection, Rules, phase1, validate};
use ganglion_testnet::params::ExUnits;
use ganglion_testnet::txbuild::{self, RedeemerSpec, TxSpec};
use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use pallas_crypto::hash::Hash;
use uplc::ast::{DeBruijn, Program};

struct World {
    g: Genesis,
    rules: Rules,
    utxo: UtxoSet,
    script: Vec<u8>,
    me: Vec<u8>,
}

fn r(i: u64) -> TxoRef {
    TxoRef {
        tx_id: Hash::new([5; 32]),
        index: i,
    }
}

const NO_POLICY: Hash<28> = Hash::new([0; 28]);

fn world() -> World {
    let g = Genesis::devnet().expect("genesis");
    let rules = Rules::new(g.protocol_params.clone(), g.slot_config(), g.network_id);
    let p = uplc::parser::program("(program 1.1.0 (lam ctx (con unit ())))").expect("parse");
    let p: Program<DeBruijn> = p.try_into().expect("debruijn");
    let script = p.to_cbor().expect("cbor");
    let (h, _, _) = phase1::plutus(2, &script);
    let script_addr = ShelleyAddress::new(
        Network::Testnet,
        ShelleyPaymentPart::script_hash(h),
        ShelleyDelegationPart::Null,
    )
    .to_vec();
    let me = DevKey::from_seed(1).address(Network::Testnet).to_vec();
    let utxo = UtxoSet::from_entries([
        (
            r(0),
            txbuild::output_with_datum(&script_addr, 10_000_000, &[0x01]),
        ),
        (r(1), encode_output(&me, 5_000_000, &NO_POLICY, &[], 0)),
        (r(2), encode_output(&me, 5_000_000, &NO_POLICY, &[], 0)),
        (r(3), encode_output(&me, 5_000_000, &NO_POLICY, &[], 0)),
        (r(4), encode_output(&me, 5_000_000, &NO_POLICY, &[], 0)),
        (r(5), encode_output(&me, 100_000, &NO_POLICY, &[], 0)),
        (
            r(6),
            txbuild::output_with_datum(&script_addr, 5_000_000, &[0x01]),
        ),
    ]);
    World {
        g,
        rules,
        utxo,
        script,
        me,
    }
}

fn spend(w: &World, edit: impl Fn(&mut TxSpec)) -> Vec<u8> {
    let redeemers = vec![RedeemerSpec {
        tag: 0,
        index: 0,
        data: vec![0xd8, 0x79, 0x80],
        ex_units: ExUnits {
            mem: 100_000,
            steps: 50_000_000,
        },
    }];
    let mut spec = TxSpec {
        inputs: vec![r(0)],
        collateral: vec![r(1)],
        plutus_v3_scripts: vec![w.script.clone()],
        redeemers,
        ..Default::default()
    };
    edit(&mut spec);
    spec.script_data_hash = Some(phase1::integrity_hash(
        Some(&txbuild::redeemers_cbor(&spec.redeemers)),
        None,
        &w.g.protocol_params,
        &BTreeSet::from([2u8]),
    ));
    let key = DevKey::from_seed(1);
    let me = w.me.clone();
    txbuild::build_balanced(
        &w.g.protocol_params,
        &mut spec,
        &[&key],
        0,
        move |s, fee| {
            if s.outputs.is_empty() || s.outputs.len() == 1 {
                s.outputs = vec![encode_output(&me, 10_000_000 - fee, &NO_POLICY, &[], 0)];
            }
        },
    )
}

fn rule_of(w: &World, tx: &[u8]) -> &'static str {
    match validate(&w.rules, &w.utxo, tx, 1) {
        Ok(_) => "accepted",
        Err(r) => r.rule(),
    }
}

#[test]
fn a_plutus_spend_passes_and_each_collateral_rule_is_enforced() {
    let w = world();
    let ok = validate(&w.rules, &w.utxo, &spend(&w, |_| {}), 1).expect("valid spend");
    assert!(ok.is_valid && ok.ex_units.mem > 0);

    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.collateral.clear())),
        "NoCollateralInputs"
    );
    assert_eq!(
        rule_of(
            &w,
            &spend(&w, |s| s.collateral = vec![r(1), r(2), r(3), r(4)])
        ),
        "TooManyCollateralInputs"
    );
    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.collateral = vec![r(5)])),
        "InsufficientCollateral"
    );
    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.collateral = vec![r(6)])),
        "ScriptsNotPaidUTxO"
    );
    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.total_collateral = Some(1))),
        "IncorrectTotalCollateralField"
    );
}

#[test]
fn size_ex_units_and_network_limits_are_enforced() {
    let w = world();
    assert_eq!(
        rule_of(
            &w,
            &spend(&w, |s| s.redeemers[0].ex_units = ExUnits {
                mem: 16_500_001,
                steps: 1
            })
        ),
        "ExUnitsTooBigUTxO"
    );
    let mainnet = DevKey::from_seed(2).address(Network::Mainnet).to_vec();
    assert_eq!(
        rule_of(
            &w,
            &spend(&w, |s| s.outputs = vec![
                encode_output(&mainnet, 2_000_000, &NO_POLICY, &[], 0),
                encode_output(&w.me, 7_000_000, &NO_POLICY, &[], 0),
            ])
        ),
        "WrongNetwork"
    );
    let big = spend(&w, |s| {
        s.outputs = (0..500)
            .map(|_| encode_output(&w.me, 1_000_000, &NO_POLICY, &[], 0))
            .collect()
    });
    assert!(big.len() > 16_384);
    assert_eq!(rule_of(&w, &big), "MaxTxSizeUTxO");
    // Without the script in the witness set the spend cannot be authorised.
    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.plutus_v3_scripts.clear())),
        "MissingScriptWitnessesUTXOW"
    );
    // A redeemer pointing at nothing is a collect error.
    assert!(matches!(
        validate(
            &w.rules,
            &w.utxo,
            &spend(&w, |s| s.redeemers[0].index = 3),
            1
        ),
        Err(Rejection::CollectErrors { .. })
    ));
}

#[test]
fn auxiliary_data_and_body_network_rules_are_enforced() {
    let w = world();
    // Metadata {674: "ganglion"} as a Shelley metadata map.
    let mut aux = vec![0xa1, 0x19, 0x02, 0xa2, 0x68];
    aux.extend_from_slice(b"ganglion");
    let with = |aux_data: Option<Vec<u8>>, hash: Option<Hash<32>>| {
        spend(&w, |s| {
            s.auxiliary_data = aux_data.clone();
            s.auxiliary_data_hash = hash;
        })
    };
    assert_eq!(
        rule_of(&w, &with(Some(aux.clone()), Some(txbuild::aux_hash(&aux)))),
        "accepted"
    );
    assert_eq!(
        rule_of(&w, &with(Some(aux.clone()), None)),
        "MissingTxBodyMetadataHash"
    );
    assert_eq!(
        rule_of(&w, &with(Some(aux.clone()), Some(Hash::new([1; 32])))),
        "ConflictingMetadataHash"
    );
    assert_eq!(
        rule_of(&w, &with(None, Some(txbuild::aux_hash(&aux)))),
        "MissingTxMetadata"
    );
    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.network_id = Some(0))),
        "accepted"
    );
    assert_eq!(
        rule_of(&w, &spend(&w, |s| s.network_id = Some(1))),
        "WrongNetworkInTxBody"
    );
}

#[test]
fn a_reference_script_authorises_a_spend_and_its_bytes_are_priced() {
    let mut w = world();
    let holder = r(7);
    w.utxo = UtxoSet::from_entries(w.utxo.iter().map(|(k, v)| (*k, v.clone())).chain([(
        holder,
        txbuild::output_with_script_ref(&w.me, 20_000_000, &w.script),
    )]));
    let build = |ref_bytes: u64| {
        let redeemers = vec![RedeemerSpec {
            tag: 0,
            index: 0,
            data: vec![0xd8, 0x79, 0x80],
            ex_units: ExUnits {
                mem: 100_000,
                steps: 50_000_000,
            },
        }];
        let mut spec = TxSpec {
            inputs: vec![r(0)],
            reference_inputs: vec![holder],
            collateral: vec![r(1)],
            script_data_hash: Some(phase1::integrity_hash(
                Some(&txbuild::redeemers_cbor(&redeemers)),
                None,
                &w.g.protocol_params,
                &BTreeSet::from([2u8]),
            )),
            redeemers,
            ..Default::default()
        };
        let me = w.me.clone();
        txbuild::build_balanced(
            &w.g.protocol_params,
            &mut spec,
            &[&DevKey::from_seed(1)],
            ref_bytes,
            move |s, fee| {
                s.outputs = vec![encode_output(&me, 10_000_000 - fee, &NO_POLICY, &[], 0)]
            },
        )
    };
    let size = w.script.len() as u64;
    assert_eq!(rule_of(&w, &build(size)), "accepted");
    match validate(&w.rules, &w.utxo, &build(0), 1) {
        Err(Rejection::FeeTooSmallUTxO { required, provided }) => {
            assert_eq!(
                required - provided,
                15 * size,
                "15 lovelace per reference-script byte"
            )
        }
        other => panic!("expected FeeTooSmallUTxO, got {other:?}"),
    }
}
