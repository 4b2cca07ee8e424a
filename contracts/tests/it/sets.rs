//! The builder never emits what Conway refuses about sets: a wallet UTxO the draft
//! references is not also spent (`BabbageNonDisjointRefInputs`, protocol versions 9–10), a
//! wallet UTxO carrying a reference script is not picked (its bytes would raise the minimum
//! fee past what was priced), a draft that spends what it references is refused before
//! balancing, and a key given twice signs once. Every transaction goes through the devnet
//! ledger.

use ganglion_contracts::Error;
use ganglion_contracts::test_utils::env;
use ganglion_contracts::test_utils::world::{Party, World};
use ganglion_contracts::tx::{Draft, Output, Value, balance, sign};

const ADA: u64 = 1_000_000;

#[test]
fn coin_selection_skips_referenced_and_script_carrying_utxos() {
    let env = env();
    let mut world = World::new(env.clone(), 1);
    let alice = Party::from_seed(&env, [7; 32]);
    let bob = Party::from_seed(&env, [8; 32]);
    world.fund(&alice.address, Value::lovelace(100 * ADA));
    let small = world.fund(&alice.address, Value::lovelace(30 * ADA));

    // Alice gives herself a 60 ADA output carrying a reference script.
    let mut carrying = Output::new(alice.address.clone(), Value::lovelace(60 * ADA));
    carrying.script_ref = Some(vec![0x46, 0x01, 0x00, 0x00, 0x22, 0x49, 0x01]);
    let mut d = Draft::default();
    d.pay(carrying.clone());
    let utxos = world.at(&alice.address);
    let b = balance(d, &world.wallet(&alice, &utxos), &env).expect("balances");
    world.sign_and_submit(&b, &[&alice.key]).expect("applies");
    let utxos = world.at(&alice.address);
    let script_utxo = utxos
        .iter()
        .find(|u| u.output.script_ref.is_some())
        .expect("the script-carrying output")
        .clone();
    let change = utxos
        .iter()
        .find(|u| u.output.script_ref.is_none() && u.reference != small.reference)
        .expect("the change")
        .clone();
    assert!(
        script_utxo.output.value.lovelace > change.output.value.lovelace
            && change.output.value.lovelace > small.output.value.lovelace,
        "largest first would pick the script-carrying output, then the referenced change"
    );

    // Pay Bob while referencing the change: only `small` may be spent.
    let mut d = Draft::default();
    d.reference(change.clone());
    d.pay(Output::new(bob.address.clone(), Value::lovelace(5 * ADA)));
    let b = balance(d, &world.wallet(&alice, &utxos), &env).expect("balances");
    let spent: Vec<_> = b.spent().iter().map(|u| u.reference).collect();
    assert_eq!(spent, [small.reference]);
    // Alice's key given twice: one witness, the size the fee was priced for.
    let signed = sign(&b, &[&alice.key, &alice.key]).expect("signs");
    assert_eq!(signed.len(), b.size);
    world.submit(&b, &signed).expect("the ledger accepts it");

    // A draft spending what it references is refused before anything is built.
    let mut d = Draft::default();
    d.spend(change.clone());
    d.reference(change.clone());
    d.pay(Output::new(bob.address.clone(), Value::lovelace(5 * ADA)));
    let utxos = world.at(&alice.address);
    match balance(d, &world.wallet(&alice, &utxos), &env) {
        Err(Error::InputAlsoReferenced { inputs }) => {
            assert_eq!(inputs, [change.reference.to_string()])
        }
        other => panic!("expected InputAlsoReferenced, got {other:?}"),
    }
}
