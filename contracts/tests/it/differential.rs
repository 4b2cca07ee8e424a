//! The differential check is on in this suite: every transaction the test world applies
//! through the devnet ledger is judged by pallas-validate too
//! (`ganglion_testnet::ledger::differential`, turned on by this crate's dev-dependencies),
//! and an unexplained disagreement aborts the run.

use ganglion_contracts::test_utils::env;
use ganglion_contracts::test_utils::world::{Party, World};
use ganglion_contracts::tx::{Draft, Output, Value, balance};
use ganglion_testnet::ledger::differential;

const ADA: u64 = 1_000_000;

#[test]
fn the_test_world_ledger_runs_pallas_validate_beside_it() {
    let env = env();
    let mut world = World::new(env.clone(), 1);
    let alice = Party::from_seed(&env, [7; 32]);
    let bob = Party::from_seed(&env, [8; 32]);
    world.fund(&alice.address, Value::lovelace(50 * ADA));
    let before = differential::checked();
    let mut d = Draft::default();
    d.pay(Output::new(bob.address.clone(), Value::lovelace(5 * ADA)));
    let utxos = world.at(&alice.address);
    let b = balance(d, &world.wallet(&alice, &utxos), &env).expect("balances");
    world.sign_and_submit(&b, &[&alice.key]).expect("applies");
    // Other tests of this binary run in parallel and only add to the count.
    assert!(
        differential::checked() > before,
        "the submission went through the differential check"
    );
}
