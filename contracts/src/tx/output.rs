//! Outputs every builder needs: one raised to its min-UTxO, a key's payee address, and the
//! output publishing a script as a reference script.

use pallas_primitives::PlutusData;

use crate::blueprint::{Script, key_address};
use crate::env::Env;
use crate::error::Result;
use crate::params::KeyHash;
use crate::tx::{Draft, Output, Value, min_lovelace};

/// An output carrying `value` and `datum` whose lovelace is raised to its min-UTxO.
pub(crate) fn funded(
    env: &Env,
    address: Vec<u8>,
    value: Value,
    datum: Option<PlutusData>,
) -> Result<Output> {
    let mut o = Output {
        address,
        value,
        datum,
        script_ref: None,
    };
    let min = min_lovelace(env, &o)?;
    o.value.lovelace = o.value.lovelace.max(min);
    Ok(o)
}

/// The enterprise address of `key` on the env's network.
pub(crate) fn payee(env: &Env, key: &KeyHash) -> Vec<u8> {
    key_address(env.network, key)
}

/// The output that publishes a script as a reference script: at the script's own address
/// with no datum, so no handler can ever spend it.
///
/// # Errors
/// Only on encoding failures.
pub fn reference_script_output(env: &Env, script: &Script) -> Result<Output> {
    let mut o = Output::new(script.address(env.network), Value::default());
    o.script_ref = Some(script.bytes.clone());
    let min = min_lovelace(env, &o)?;
    o.value.lovelace = min;
    Ok(o)
}

/// A draft deploying `script` as a reference script.
///
/// # Errors
/// Only on encoding failures.
pub fn deploy(env: &Env, script: &Script) -> Result<Draft> {
    let mut d = Draft::default();
    d.pay(reference_script_output(env, script)?);
    Ok(d)
}
