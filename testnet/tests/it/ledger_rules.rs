//! Ledger rules called directly (no sockets): one valid script spend, then one mutation
//! per collateral / size / ExUnits / network rule, each named after the rule it breaks.

use std::collections::BTreeSet;

use ganglion_cardano::protocol::ExUnits;
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::utxo::UtxoSet;
use ganglion_testnet::ledger::{Rejection, Rules, phase1, validate};
use ganglion_testnet::txbuild::{self, RedeemerSpec, TxSpec};
use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use pallas_codec::minicbor;
use pallas_crypto::hash::{Hash, Hasher};
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
        tx_hash: [5; 32],
        index: i,
    }
}

const NO_POLICY: Hash<28> = Hash::new([0; 28]);

/// The datum (PlutusData integer 2) whose hash `r(8)` carries.
const DATUM: &[u8] = &[0x02];

/// Another datum (PlutusData integer 3), for supplemental-datum cases.
const OTHER_DATUM: &[u8] = &[0x03];

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
        (
            r(8),
            output_with_datum_hash(&script_addr, 8_000_000, &Hasher::<256>::hash(DATUM)),
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
    spend_then(w, edit, |_| {})
}

/// A Plutus spend of `r(0)` with collateral `r(1)`, after `edit`; the script data hash is
/// computed from the redeemers and datums `edit` left, then `after` may change anything.
/// The last output is the change: Σ inputs − the other outputs − the exact fee.
fn spend_then(w: &World, edit: impl Fn(&mut TxSpec), after: impl Fn(&mut TxSpec)) -> Vec<u8> {
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
    let redeemers = (!spec.redeemers.is_empty()).then(|| txbuild::redeemers_cbor(&spec.redeemers));
    let datums = (!spec.datums.is_empty()).then(|| txbuild::datums_cbor(&spec.datums));
    spec.script_data_hash = (redeemers.is_some() || datums.is_some()).then(|| {
        phase1::integrity_hash(
            redeemers.as_deref(),
            datums.as_deref(),
            &w.g.protocol_params,
            &BTreeSet::from([2u8]),
        )
    });
    after(&mut spec);
    let coin = |raw: &[u8]| phase1::output_facts(raw).expect("output").value.coin as u64;
    let total_in: u64 = spec
        .inputs
        .iter()
        .map(|i| coin(w.utxo.get(i).expect("input in the world")))
        .sum();
    let key = DevKey::from_seed(1);
    let me = w.me.clone();
    txbuild::build_balanced(
        &w.g.protocol_params,
        &mut spec,
        &[&key],
        0,
        move |s, fee| {
            s.outputs.pop();
            let others: u64 = s.outputs.iter().map(|o| coin(o)).sum();
            let change = total_in.saturating_sub(others).saturating_sub(fee);
            s.outputs
                .push(encode_output(&me, change, &NO_POLICY, &[], 0));
        },
    )
}

/// A Babbage output `{0: address, 1: coin, 2: [0, datum_hash]}`.
fn output_with_datum_hash(address: &[u8], lovelace: u64, hash: &Hash<32>) -> Vec<u8> {
    let mut buf = Vec::new();
    minicbor::Encoder::new(&mut buf)
        .map(3)
        .and_then(|e| e.u8(0))
        .and_then(|e| e.bytes(address))
        .and_then(|e| e.u8(1))
        .and_then(|e| e.u64(lovelace))
        .and_then(|e| e.u8(2))
        .and_then(|e| e.array(2))
        .and_then(|e| e.u8(0))
        .and_then(|e| e.bytes(hash.as_ref()))
        .expect("encode");
    buf
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
    // A redeemer pointing at nothing is an extra redeemer (the ledger's UTXOW names it
    // before phase 2 could fail to collect it).
    assert!(matches!(
        validate(
            &w.rules,
            &w.utxo,
            &spend(&w, |s| s.redeemers[0].index = 3),
            1
        ),
        Err(Rejection::ExtraRedeemers { pointers }) if pointers == ["spend:3"]
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
    let build = |ref_bytes: u64, witness: bool| {
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
            plutus_v3_scripts: if witness {
                vec![w.script.clone()]
            } else {
                Vec::new()
            },
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
    assert_eq!(rule_of(&w, &build(size, false)), "accepted");
    // The same script also in the witness set is extraneous: a reference script provides it
    // (Babbage `babbageMissingScripts`: witnessed ⊆ needed − by reference).
    assert_eq!(
        rule_of(&w, &build(size, true)),
        "ExtraneousScriptWitnessesUTXOW"
    );
    match validate(&w.rules, &w.utxo, &build(0, false), 1) {
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

/// A key-only payment from `r(1)`: no script, no redeemer, no script data hash.
fn key_payment(s: &mut TxSpec) {
    s.inputs = vec![r(1)];
    s.collateral.clear();
    s.redeemers.clear();
    s.plutus_v3_scripts.clear();
}

#[test]
fn a_script_no_purpose_needs_is_an_extraneous_witness() {
    let w = world();
    assert_eq!(rule_of(&w, &spend(&w, key_payment)), "accepted");
    let with_script = spend(&w, |s| {
        key_payment(s);
        s.plutus_v3_scripts = vec![w.script.clone()];
    });
    match validate(&w.rules, &w.utxo, &with_script, 1) {
        Err(Rejection::ExtraneousScriptWitnessesUTXOW { script_hashes }) => {
            let (h, _, _) = phase1::plutus(2, &w.script);
            assert_eq!(script_hashes, vec![h.to_string()]);
        }
        other => panic!("expected ExtraneousScriptWitnessesUTXOW, got {other:?}"),
    }
}

#[test]
fn a_spent_datum_hash_needs_its_datum_in_the_witness_set() {
    let w = world();
    let spend_r8 = |datums: Vec<Vec<u8>>| {
        spend(&w, move |s| {
            s.inputs = vec![r(8)];
            s.datums = datums.clone();
        })
    };
    assert_eq!(rule_of(&w, &spend_r8(vec![DATUM.to_vec()])), "accepted");
    match validate(&w.rules, &w.utxo, &spend_r8(Vec::new()), 1) {
        Err(Rejection::MissingRequiredDatums { missing, received }) => {
            assert_eq!(missing, vec![Hasher::<256>::hash(DATUM).to_string()]);
            assert!(received.is_empty());
        }
        other => panic!("expected MissingRequiredDatums, got {other:?}"),
    }
}

#[test]
fn a_supplemental_datum_must_be_named_by_an_output() {
    let w = world();
    let other = Hasher::<256>::hash(OTHER_DATUM);
    // r(0) has an inline datum: a witness datum is supplemental, allowed when an output
    // names it by hash.
    let named = spend(&w, |s| {
        s.datums = vec![OTHER_DATUM.to_vec()];
        s.outputs = vec![output_with_datum_hash(&w.me, 2_000_000, &other), Vec::new()];
    });
    assert_eq!(rule_of(&w, &named), "accepted");
    let unnamed = spend(&w, |s| s.datums = vec![OTHER_DATUM.to_vec()]);
    match validate(&w.rules, &w.utxo, &unnamed, 1) {
        Err(Rejection::NotAllowedSupplementalDatums {
            unallowed,
            acceptable,
        }) => {
            assert_eq!(unallowed, vec![other.to_string()]);
            assert!(acceptable.is_empty());
        }
        other => panic!("expected NotAllowedSupplementalDatums, got {other:?}"),
    }
}

#[test]
fn redeemers_must_match_the_plutus_purposes_exactly() {
    let w = world();
    let redeemer = |index| RedeemerSpec {
        tag: 0,
        index,
        data: vec![0xd8, 0x79, 0x80],
        ex_units: ExUnits {
            mem: 100_000,
            steps: 50_000_000,
        },
    };
    // r(0) and r(6) are both locked by the script: spend:0 and spend:1.
    let both = |redeemers: Vec<RedeemerSpec>| {
        spend(&w, move |s| {
            s.inputs = vec![r(0), r(6)];
            s.redeemers = redeemers.clone();
        })
    };
    assert_eq!(
        rule_of(&w, &both(vec![redeemer(0), redeemer(1)])),
        "accepted"
    );
    match validate(&w.rules, &w.utxo, &both(vec![redeemer(0)]), 1) {
        Err(Rejection::MissingRedeemers { pointers }) => assert_eq!(pointers, ["spend:1"]),
        other => panic!("expected MissingRedeemers, got {other:?}"),
    }
    // A mint redeemer without any minting.
    let extra = spend(&w, |s| {
        let mut m = redeemer(0);
        m.tag = 1;
        s.redeemers.push(m);
    });
    match validate(&w.rules, &w.utxo, &extra, 1) {
        Err(Rejection::ExtraRedeemers { pointers }) => assert_eq!(pointers, ["mint:0"]),
        other => panic!("expected ExtraRedeemers, got {other:?}"),
    }
}

#[test]
fn a_wrong_script_data_hash_is_a_pp_view_mismatch() {
    let w = world();
    assert_eq!(rule_of(&w, &spend(&w, |_| {})), "accepted");
    let wrong = spend_then(
        &w,
        |_| {},
        |s| s.script_data_hash = Some(Hash::new([9; 32])),
    );
    assert_eq!(rule_of(&w, &wrong), "PPViewHashesDontMatch");
    let none = spend_then(&w, |_| {}, |s| s.script_data_hash = None);
    assert_eq!(rule_of(&w, &none), "PPViewHashesDontMatch");
}

#[test]
fn a_plutus_ttl_past_the_forecast_horizon_is_outside_forecast() {
    let w = world();
    // Mainnet's safe zone: 3k/f = 3 × 2160 / 0.05 slots.
    let horizon = 129_600;
    let limited = w.rules.clone().with_forecast_horizon(horizon);
    let slot = 1;
    let with_ttl = |ttl| spend(&w, move |s| s.ttl = Some(ttl));
    let rule = |rules: &Rules, tx: &[u8]| match validate(rules, &w.utxo, tx, slot) {
        Ok(_) => "accepted",
        Err(r) => r.rule(),
    };
    assert_eq!(rule(&limited, &with_ttl(slot + horizon)), "accepted");
    match validate(&limited, &w.utxo, &with_ttl(slot + horizon + 1), slot) {
        Err(Rejection::OutsideForecast { slot: s }) => assert_eq!(s, slot + horizon + 1),
        other => panic!("expected OutsideForecast, got {other:?}"),
    }
    // The devnet's own rules: one fixed slot length, every slot converts.
    assert_eq!(rule(&w.rules, &with_ttl(slot + horizon + 1)), "accepted");
    // Without redeemers the rule does not apply.
    let payment = spend(&w, |s| {
        key_payment(s);
        s.ttl = Some(slot + horizon + 1);
    });
    assert_eq!(rule(&limited, &payment), "accepted");
}

/// The reference-script world's holder `r(7)`: a key-locked output (the wallet's) carrying
/// the script as a reference script.
fn with_holder(w: &mut World) -> TxoRef {
    let holder = r(7);
    w.utxo = UtxoSet::from_entries(w.utxo.iter().map(|(k, v)| (*k, v.clone())).chain([(
        holder,
        txbuild::output_with_script_ref(&w.me, 20_000_000, &w.script),
    )]));
    holder
}

/// A Plutus spend of `r(0)` authorised by the holder's reference script, also spending
/// `also_spent` (key-locked inputs of the world), paying everything back to the wallet.
fn ref_spend(w: &World, holder: TxoRef, also_spent: &[TxoRef], ref_bytes: u64) -> Vec<u8> {
    let redeemers = vec![RedeemerSpec {
        tag: 0,
        index: 0,
        data: vec![0xd8, 0x79, 0x80],
        ex_units: ExUnits {
            mem: 100_000,
            steps: 50_000_000,
        },
    }];
    let mut inputs = vec![r(0)];
    inputs.extend_from_slice(also_spent);
    let coin = |raw: &[u8]| phase1::output_facts(raw).expect("output").value.coin as u64;
    let total: u64 = inputs
        .iter()
        .map(|i| coin(w.utxo.get(i).expect("input in the world")))
        .sum();
    let mut spec = TxSpec {
        inputs,
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
        move |s, fee| s.outputs = vec![encode_output(&me, total - fee, &NO_POLICY, &[], 0)],
    )
}

/// Conway's UTXO rule at protocol versions 9 and 10 refuses an input that is also a
/// reference input (`disjointRefInputs`); from version 11 the overlap is allowed and the
/// UTxO's reference script is priced once (`txNonDistinctRefScriptsSize` over
/// `referenceInputs ∪ inputs`).
#[test]
fn an_input_that_is_also_a_reference_input_is_non_disjoint() {
    let mut w = world();
    assert_eq!(
        w.g.protocol_params.protocol_version.0, 10,
        "the devnet's version"
    );
    let holder = with_holder(&mut w);
    let size = w.script.len() as u64;
    // Valid: the holder referenced, r(2) spent beside it.
    assert_eq!(
        rule_of(&w, &ref_spend(&w, holder, &[r(2)], size)),
        "accepted"
    );
    // Broken: the holder both referenced and spent.
    let overlap = ref_spend(&w, holder, &[holder], size);
    match validate(&w.rules, &w.utxo, &overlap, 1) {
        Err(Rejection::BabbageNonDisjointRefInputs { inputs }) => assert_eq!(inputs, [holder]),
        other => panic!("expected BabbageNonDisjointRefInputs, got {other:?}"),
    }
    // Protocol version 11: the overlap passes, its reference script priced once.
    let mut p11 = w.g.protocol_params.clone();
    p11.protocol_version = (11, 0);
    let rules11 = Rules::new(p11, w.g.slot_config(), w.g.network_id);
    let ok = validate(&rules11, &w.utxo, &overlap, 1).expect("allowed from version 11");
    let tx = ganglion_testnet::ledger::decode_tx(&overlap).expect("decodes");
    assert_eq!(
        ok.fee,
        phase1::min_fee_of(&w.g.protocol_params, &tx, size),
        "the fee pays for the script once and is accepted"
    );
}

/// Redeemers are a map keyed by pointer: a pointer listed twice counts once, with its last
/// entry (cardano-ledger decodes them with `Map.fromList`), for the fee and the ExUnits
/// limit alike.
#[test]
fn a_redeemer_pointer_listed_twice_counts_once() {
    let w = world();
    let units = |mem, steps| ExUnits { mem, steps };
    let tx = spend(&w, |s| {
        let mut again = s.redeemers[0].clone();
        again.ex_units = units(200_000, 60_000_000);
        s.redeemers.push(again);
    });
    let decoded = ganglion_testnet::ledger::decode_tx(&tx).expect("decodes");
    let (total, each) = phase1::declared_ex_units(&decoded);
    assert_eq!(total, units(200_000, 60_000_000), "the last entry, once");
    assert_eq!(each.len(), 1);
    assert_eq!(rule_of(&w, &tx), "accepted");
}
