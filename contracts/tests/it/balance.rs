//! What the balancer takes from a wallet besides the draft's own inputs: collateral without a
//! return when the wallet keeps a small pure-ADA UTxO for it (CIP-30 `getCollateral`), with
//! a return otherwise, and a pure-ADA fee input when only lovelace is missing. Every
//! transaction goes through the devnet ledger.

use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::{ADA_UTXO, COLLATERAL_UTXO, Harness};
use ganglion_contracts::tx::{Balanced, MAX_COLLATERAL_WITHOUT_RETURN, Utxo, balance};
use ganglion_contracts::v2::build;
use pallas_codec::minicbor;
use pallas_primitives::conway;

/// `(collateral inputs, collateral return present, total collateral)` of a balanced
/// transaction, from its bytes.
fn collateral_of(b: &Balanced) -> (usize, bool, Option<u64>) {
    let tx: conway::Tx<'_> = minicbor::decode(&b.unsigned).expect("decodes");
    let body = &tx.transaction_body;
    (
        body.collateral.as_ref().map_or(0, |c| c.len()),
        body.collateral_return.is_some(),
        body.total_collateral,
    )
}

/// The collateral input's reference, from the transaction's bytes.
fn collateral_input(b: &Balanced) -> ganglion_contracts::tx::TxoRef {
    let tx: conway::Tx<'_> = minicbor::decode(&b.unsigned).expect("decodes");
    let input = &tx.transaction_body.collateral.as_ref().expect("collateral")[0];
    ganglion_contracts::tx::TxoRef {
        tx_hash: *input.transaction_id,
        index: input.index,
    }
}

#[test]
fn a_small_pure_ada_utxo_is_put_up_whole_without_a_return() {
    const { assert!(COLLATERAL_UTXO <= MAX_COLLATERAL_WITHOUT_RETURN) };
    let mut h = Harness::new(1);
    let orch = h.orch.clone();
    let set_aside: Utxo = h
        .world
        .at(&orch.address)
        .into_iter()
        .find(|u| u.output.value.is_pure_ada() && u.output.value.lovelace == COLLATERAL_UTXO)
        .expect("the orchestrator's collateral UTxO");
    let (_, lock) = h.lock(100 * NTX, 7200);
    assert_eq!(collateral_of(&lock), (1, false, None));
    assert_eq!(collateral_input(&lock), set_aside.reference);
    // Not spent: it serves the next transaction too.
    assert!(h.world.get(&set_aside.reference).is_ok());
}

#[test]
fn without_a_small_pure_ada_utxo_the_collateral_has_a_return() {
    let mut h = Harness::new(1);
    let orch = h.orch.clone();
    let req = h.lock_request(2, 100 * NTX, 7200, 60_000);
    let (draft, _) = build::lock(&h.dep, h.env(), &req).expect("lock draft");
    // The wallet without its collateral UTxO: only UTxOs above 5 ADA (one pure ADA).
    let utxos: Vec<Utxo> = h
        .world
        .at(&orch.address)
        .into_iter()
        .filter(|u| u.output.value.lovelace > MAX_COLLATERAL_WITHOUT_RETURN)
        .collect();
    let b = balance(draft, &h.world.wallet(&orch, &utxos), h.env()).expect("balances");
    let (inputs, has_return, total) = collateral_of(&b);
    assert_eq!((inputs, has_return), (1, true));
    assert!(total.is_some(), "a return declares the total collateral");
    // The pure-ADA UTxO is preferred, and its lovelace above the total comes back.
    let put_up = utxos
        .iter()
        .find(|u| u.reference == collateral_input(&b))
        .expect("a wallet UTxO");
    assert!(put_up.output.value.is_pure_ada());
    assert_eq!(put_up.output.value.lovelace, ADA_UTXO);
    h.world
        .sign_and_submit(&b, &[&orch.key])
        .expect("the ledger accepts it");
}

#[test]
fn when_only_lovelace_is_missing_a_pure_ada_utxo_pays_and_the_change_is_ada_only() {
    let mut h = Harness::new(2);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    let orch = h.orch.clone();
    let before: Vec<Utxo> = h.world.at(&orch.address);
    let assign = h.assign(&mut job);
    let wallet_spent: Vec<&Utxo> = before
        .iter()
        .filter(|u| assign.spent().iter().any(|s| s.reference == u.reference))
        .collect();
    assert_eq!(wallet_spent.len(), 1, "one wallet input");
    assert!(wallet_spent[0].output.value.is_pure_ada());
    assert_eq!(wallet_spent[0].output.value.lovelace, ADA_UTXO);
    let change = assign.outputs().last().cloned().expect("change");
    assert_eq!(change.address, orch.address);
    assert!(change.value.is_pure_ada(), "{change:?}");
    // A claim by a provider: the payout's lovelace and the fee from its pure-ADA UTxO too.
    h.world.slot += 600;
    let now = h.world.now_ms();
    let claim = h.claim(&mut job, 0, 2 * 600_000, Some(now)).expect("claim");
    let change = claim.outputs().last().cloned().expect("change");
    assert_eq!(change.address, h.providers[0].party.address);
    assert!(change.value.is_pure_ada(), "{change:?}");
    assert_eq!(collateral_of(&claim), (1, false, None));
}
