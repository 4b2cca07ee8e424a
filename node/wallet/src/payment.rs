//! Balances and payments. A payment is a [`Draft`] with one output, balanced by
//! [`ganglion_contracts::tx::balance`] (coin selection over the wallet's UTxOs, change back to
//! the wallet, exact min fee) and signed by [`ganglion_contracts::tx::sign`].

use std::collections::BTreeMap;

use ganglion_contracts::env::Env;
use ganglion_contracts::tx::{self, Draft, Output, Utxo, Value};
use serde::Serialize;

use crate::key::PaymentKey;

/// The wallet's holdings: lovelace and native assets summed over its UTxOs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Balance {
    /// Lovelace.
    pub lovelace: u64,
    /// Native assets: `policy id hex . asset name hex` → quantity.
    pub assets: BTreeMap<String, u64>,
    /// Number of UTxOs.
    pub utxos: usize,
}

impl Balance {
    /// Sums `utxos`.
    pub fn of(utxos: &[Utxo]) -> Self {
        let mut b = Self {
            lovelace: 0,
            assets: BTreeMap::new(),
            utxos: utxos.len(),
        };
        for u in utxos {
            b.lovelace = b.lovelace.saturating_add(u.output.value.lovelace);
            for (policy, name, q) in u.output.value.iter_assets() {
                let e = b
                    .assets
                    .entry(format!("{}.{}", hex::encode(policy), hex::encode(name)))
                    .or_default();
                *e = e.saturating_add(q);
            }
        }
        b
    }

    /// Quantity of one asset.
    pub fn asset(&self, policy: &[u8; 28], name: &[u8]) -> u64 {
        self.assets
            .get(&format!("{}.{}", hex::encode(policy), hex::encode(name)))
            .copied()
            .unwrap_or(0)
    }
}

/// A signed payment, ready to submit.
#[derive(Debug, Clone, Serialize)]
pub struct Payment {
    /// Transaction id, hex.
    pub tx_id: String,
    /// Fee, lovelace.
    pub fee: u64,
    /// Signed transaction CBOR.
    #[serde(skip)]
    pub signed: Vec<u8>,
}

/// Builds and signs a payment of `value` to `to` (address bytes) from `utxos`, all locked by
/// `key`; change returns to `key`'s address on `env.network`.
///
/// # Errors
/// The contracts crate's errors: [`ganglion_contracts::Error::Unbalanceable`] (not enough
/// funds), [`ganglion_contracts::Error::OutputBelowMinUtxo`] (amount under min-UTxO), ...
pub fn pay(
    key: &PaymentKey,
    utxos: &[Utxo],
    to: Vec<u8>,
    value: Value,
    env: &Env,
) -> ganglion_contracts::Result<Payment> {
    let mut draft = Draft::default();
    draft.pay(Output::new(to, value));
    let wallet = tx::Wallet {
        utxos,
        key_hash: key.key_hash(),
        change_address: key.address(env.network).to_vec(),
    };
    let balanced = tx::balance(draft, &wallet, env)?;
    let signed = tx::sign(&balanced, &[key.signing_key()])?;
    Ok(Payment {
        tx_id: hex::encode(balanced.hash),
        fee: balanced.fee,
        signed,
    })
}
