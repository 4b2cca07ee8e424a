//! Plutus V3 spends through the real evaluator: an always-succeeds script is spent; a
//! failing script is rejected when marked valid and costs only the collateral when marked
//! invalid; a script using more than its declared ExUnits is rejected.

use std::collections::BTreeSet;

use ganglion_cardano::protocol::ExUnits;
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::chain::SubmitError;
use ganglion_testnet::devnet::DevnetHandle;
use ganglion_testnet::genesis::encode_output;
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::{Rejection, decode_tx, phase1, tx_hash};
use ganglion_testnet::txbuild::{self, RedeemerSpec, TxSpec};
use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use uplc::ast::{DeBruijn, Program};

use crate::common::*;

pub(crate) fn script(src: &str) -> Vec<u8> {
    let p = uplc::parser::program(src).expect("parses");
    let p: Program<DeBruijn> = p.try_into().expect("debruijn");
    p.to_cbor().expect("cbor")
}

pub(crate) const ALWAYS: &str = "(program 1.1.0 (lam ctx (con unit ())))";
pub(crate) const NEVER: &str = "(program 1.1.0 (lam ctx (error)))";
const LOCKED: u64 = 10_000_000;
const COLLATERAL: u64 = 5_000_000;

pub(crate) struct Locked {
    pub script: Vec<u8>,
    pub script_input: TxoRef,
    pub collateral: TxoRef,
    pub collateral_lovelace: u64,
}

/// Lock 10 ADA at the script's address (inline datum 42), leaving key 1's change as the
/// collateral UTxO; both in the mempool (chained spends are allowed).
pub(crate) async fn lock(h: &DevnetHandle, src: &str) -> Locked {
    let script = script(src);
    let (hash, _, _) = phase1::plutus(2, &script);
    let addr = ShelleyAddress::new(
        Network::Testnet,
        ShelleyPaymentPart::script_hash(hash),
        ShelleyDelegationPart::Null,
    )
    .to_vec();
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let (input, lovelace, ntx) = richest_utxo(h, 1);
    let g = h.genesis();
    let policy = g.ntx_policy_id().expect("policy");
    let name = g.ntx_asset_name().expect("name");
    let mut spec = TxSpec {
        inputs: vec![input],
        ..Default::default()
    };
    let bytes = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![
            txbuild::output_with_datum(&addr, LOCKED, &[0x18, 0x2a]),
            encode_output(
                &me,
                lovelace - LOCKED - COLLATERAL - fee,
                &policy,
                &name,
                ntx,
            ),
            // Collateral must be ADA only (CollateralContainsNonADA otherwise).
            encode_output(&me, COLLATERAL, &policy, &name, 0),
        ];
    });
    let id = h.submit(bytes).await.expect("lock accepted");
    Locked {
        script,
        script_input: TxoRef {
            tx_hash: *id,
            index: 0,
        },
        collateral: TxoRef {
            tx_hash: *id,
            index: 2,
        },
        collateral_lovelace: COLLATERAL,
    }
}

/// Spend the locked output back to key 1.
pub(crate) fn spend(h: &DevnetHandle, l: &Locked, declared: ExUnits, invalid: bool) -> Vec<u8> {
    spend_with(h, l, declared, invalid, None)
}

/// [`spend`], optionally declaring a wrong script data hash.
fn spend_with(
    h: &DevnetHandle,
    l: &Locked,
    declared: ExUnits,
    invalid: bool,
    sdh_override: Option<pallas_crypto::hash::Hash<32>>,
) -> Vec<u8> {
    let g = h.genesis();
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let redeemers = vec![RedeemerSpec {
        tag: 0,
        index: 0,
        data: vec![0xd8, 0x79, 0x80],
        ex_units: declared,
    }];
    let sdh = phase1::integrity_hash(
        Some(&txbuild::redeemers_cbor(&redeemers)),
        None,
        &g.protocol_params,
        &BTreeSet::from([2u8]),
    );
    let mut spec = TxSpec {
        inputs: vec![l.script_input],
        collateral: vec![l.collateral],
        plutus_v3_scripts: vec![l.script.clone()],
        redeemers,
        script_data_hash: Some(sdh_override.unwrap_or(sdh)),
        invalid,
        ..Default::default()
    };
    txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![encode_output(
            &me,
            LOCKED - fee,
            &pallas_crypto::hash::Hash::new([0; 28]),
            &[],
            0,
        )];
    })
}

pub(crate) const BUDGET: ExUnits = ExUnits {
    mem: 200_000,
    steps: 100_000_000,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_succeeds_spend_is_included() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut events = h.events();
    let l = lock(&h, ALWAYS).await;
    let tx = spend(&h, &l, BUDGET, false);
    let dry = h.chain().dry_run(&tx).expect("dry run passes");
    assert!(dry.ex_units.mem > 0 && dry.ex_units.mem <= BUDGET.mem);
    // A dry run queues nothing: submitting the same bytes is not a double spend.
    let id = h.submit(tx).await.expect("script spend accepted");
    assert_eq!(id, dry.tx_hash);
    wait_included(&mut events, id).await;
    let me = DevKey::from_seed(1).address(Network::Testnet).to_vec();
    let mine = h.chain().utxos_at(&me).expect("utxos");
    assert!(
        mine.iter().any(|(r, _)| r.tx_hash == *id),
        "spent back to key 1"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_script_is_rejected_when_marked_valid_and_costs_collateral_when_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut events = h.events();
    let l = lock(&h, NEVER).await;

    match h.submit(spend(&h, &l, BUDGET, false)).await {
        Err(SubmitError::Rejected(Rejection::PlutusScriptFailed { redeemer, .. })) => {
            assert_eq!(redeemer, "spend:0")
        }
        other => panic!("expected PlutusScriptFailed, got {other:?}"),
    }

    let invalid = spend(&h, &l, BUDGET, true);
    let id = tx_hash(&decode_tx(&invalid).expect("tx"));
    h.submit(invalid)
        .await
        .expect("phase-2-invalid tx included as invalid");
    wait_included(&mut events, id).await;
    let utxos = h.chain().store().utxos().expect("utxos");
    assert!(
        utxos.iter().any(|(r, _)| *r == l.script_input),
        "the script output is still locked"
    );
    assert!(
        !utxos.iter().any(|(r, _)| *r == l.collateral),
        "the collateral ({} lovelace) was consumed",
        l.collateral_lovelace
    );
    assert!(
        !utxos.iter().any(|(r, _)| r.tx_hash == *id),
        "no outputs of the invalid tx"
    );

    // And the block marks it invalid.
    let tip = h.tip().expect("tip");
    let block = h
        .chain()
        .store()
        .block(tip.number)
        .expect("read")
        .expect("block");
    let b = pallas_traverse::MultiEraBlock::decode(&block.wrapped).expect("decodes");
    let index = b
        .txs()
        .iter()
        .position(|t| t.hash() == id)
        .expect("tx in the tip block") as u32;
    assert_eq!(
        b.as_conway().expect("conway").invalid_transactions.clone(),
        Some(vec![index])
    );
    assert!(!b.txs()[index as usize].is_valid());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_exceeding_its_declared_ex_units_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let l = lock(&h, ALWAYS).await;
    let tiny = ExUnits { mem: 10, steps: 10 };
    match h.submit(spend(&h, &l, tiny, false)).await {
        Err(SubmitError::Rejected(Rejection::ExUnitsExceeded {
            actual, declared, ..
        })) => {
            assert_eq!(declared, tiny);
            assert!(actual.mem > 10 && actual.steps > 10);
        }
        other => panic!("expected ExUnitsExceeded, got {other:?}"),
    }
    // A wrong script_data_hash is caught in phase 1.
    let wrong = spend_with(
        &h,
        &l,
        BUDGET,
        false,
        Some(pallas_crypto::hash::Hash::new([7; 32])),
    );
    match h.submit(wrong).await {
        Err(SubmitError::Rejected(Rejection::PPViewHashesDontMatch { computed, .. })) => {
            assert!(computed.is_some())
        }
        other => panic!("expected PPViewHashesDontMatch, got {other:?}"),
    }
    h.shutdown().await;
}
