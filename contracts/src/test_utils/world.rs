//! A test double of the ledger (feature `test-utils`): a UTxO set and a slot clock that
//! apply transactions after running their scripts through uplc and checking their vkey
//! witnesses and validity interval.
//!
//! It is *not* the ledger — fees, balance and min-UTxO are the devnet's job (crate
//! `ganglion-testnet`) — but it lets this crate's tests chain real transactions (lock →
//! assign → settle) and have every script judged by the real evaluator on the exact bytes
//! that would be submitted.

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, SigningKey, Verifier, VerifyingKey};
use pallas_crypto::hash::Hasher;
use pallas_traverse::{Era, MultiEraTx};

use crate::blueprint::{key_address, key_hash};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::eval::{Evaluation, evaluate};
use crate::params::KeyHash;
use crate::tx::{Balanced, Output, TxoRef, Utxo, Value, Wallet, sign};

/// A key pair and its enterprise address.
#[derive(Debug, Clone)]
pub struct Party {
    /// Signing key.
    pub key: SigningKey,
    /// Payment key hash.
    pub hash: KeyHash,
    /// Enterprise address bytes.
    pub address: Vec<u8>,
}

impl Party {
    /// A party from a 32-byte seed.
    pub fn from_seed(env: &Env, seed: [u8; 32]) -> Self {
        let key = SigningKey::from_bytes(&seed);
        let hash = key_hash(&key.verifying_key().to_bytes());
        Self {
            address: key_address(env.network, &hash),
            key,
            hash,
        }
    }
}

/// The UTxO set and clock.
#[derive(Debug, Clone)]
pub struct World {
    /// Chain parameters.
    pub env: Env,
    /// Unspent outputs.
    pub utxos: BTreeMap<TxoRef, Output>,
    /// Current slot.
    pub slot: u64,
    /// Signed bytes of every transaction applied, in order (to replay them elsewhere, e.g.
    /// as blocks for an indexer).
    pub applied: Vec<Vec<u8>>,
    minted: u64,
}

impl World {
    /// An empty world at slot `slot`.
    pub fn new(env: Env, slot: u64) -> Self {
        Self {
            env,
            utxos: BTreeMap::new(),
            slot,
            applied: Vec::new(),
            minted: 0,
        }
    }

    /// Creates an output out of thin air (a genesis UTxO).
    pub fn fund(&mut self, address: &[u8], value: Value) -> Utxo {
        self.minted += 1;
        let reference = TxoRef {
            tx_hash: *Hasher::<256>::hash(&self.minted.to_be_bytes()),
            index: 0,
        };
        let output = Output::new(address.to_vec(), value);
        self.utxos.insert(reference, output.clone());
        Utxo { reference, output }
    }

    /// The UTxOs at an address.
    pub fn at(&self, address: &[u8]) -> Vec<Utxo> {
        self.utxos
            .iter()
            .filter(|(_, o)| o.address == address)
            .map(|(r, o)| Utxo {
                reference: *r,
                output: o.clone(),
            })
            .collect()
    }

    /// The UTxO at a reference.
    ///
    /// # Errors
    /// [`Error::MissingUtxo`].
    pub fn get(&self, reference: &TxoRef) -> Result<Utxo> {
        self.utxos
            .get(reference)
            .map(|o| Utxo {
                reference: *reference,
                output: o.clone(),
            })
            .ok_or_else(|| Error::MissingUtxo(reference.to_string()))
    }

    /// `party`'s wallet view.
    pub fn wallet<'a>(&self, party: &Party, utxos: &'a [Utxo]) -> Wallet<'a> {
        Wallet {
            utxos,
            key_hash: party.hash,
            change_address: party.address.clone(),
        }
    }

    /// Signs `balanced` with `keys` and submits it; returns the evaluations.
    ///
    /// # Errors
    /// As [`World::submit`].
    pub fn sign_and_submit(
        &mut self,
        balanced: &Balanced,
        keys: &[&SigningKey],
    ) -> Result<Vec<Evaluation>> {
        let signed = sign(balanced, keys)?;
        self.submit(balanced, &signed)
    }

    /// Applies a signed transaction: every input exists, the slot lies in the validity
    /// interval, every required signer and every spent key-locked input has a valid vkey
    /// witness over the body hash, and every script succeeds in uplc on `signed`.
    ///
    /// # Errors
    /// [`Error::MissingUtxo`], [`Error::InvalidRequest`] (validity, witnesses),
    /// [`Error::ScriptFailed`].
    pub fn submit(&mut self, balanced: &Balanced, signed: &[u8]) -> Result<Vec<Evaluation>> {
        let tx = MultiEraTx::decode_for_era(Era::Conway, signed).map_err(|e| Error::Cbor {
            what: "signed transaction",
            reason: e.to_string(),
        })?;
        if *tx.hash() != balanced.hash {
            return Err(Error::InvalidRequest(
                "signed bytes do not match the balanced body".into(),
            ));
        }
        for u in balanced.resolved() {
            self.get(&u.reference)?;
        }
        let d = balanced.draft();
        if d.valid_from_slot.is_some_and(|s| self.slot < s)
            || d.valid_until_slot.is_some_and(|s| self.slot >= s)
        {
            return Err(Error::InvalidRequest(format!(
                "slot {} outside the validity interval",
                self.slot
            )));
        }
        let mut signers: Vec<KeyHash> = Vec::new();
        for w in tx.vkey_witnesses() {
            let vkey: [u8; 32] = w
                .vkey
                .as_slice()
                .try_into()
                .map_err(|_| Error::InvalidRequest("bad vkey".into()))?;
            let key = VerifyingKey::from_bytes(&vkey)
                .map_err(|e| Error::InvalidRequest(e.to_string()))?;
            let sig = Signature::from_slice(&w.signature)
                .map_err(|e| Error::InvalidRequest(e.to_string()))?;
            key.verify(&balanced.hash, &sig)
                .map_err(|_| Error::InvalidRequest("vkey witness does not verify".into()))?;
            signers.push(key_hash(&vkey));
        }
        let mut needed: Vec<KeyHash> = d.required_signers.iter().copied().collect();
        for u in balanced.spent() {
            if let Some(k) = payment_key(&u.output.address) {
                needed.push(k);
            }
        }
        if let Some(missing) = needed.iter().find(|k| !signers.contains(k)) {
            return Err(Error::InvalidRequest(format!(
                "missing vkey witness for {}",
                hex::encode(missing)
            )));
        }
        let evaluations = evaluate(
            signed,
            &balanced.resolved(),
            &self.env.params,
            &self.env.slot_config,
        )?;
        for u in balanced.spent() {
            self.utxos.remove(&u.reference);
        }
        for (i, o) in balanced.outputs().into_iter().enumerate() {
            self.utxos.insert(
                TxoRef {
                    tx_hash: balanced.hash,
                    index: i as u64,
                },
                o,
            );
        }
        self.applied.push(signed.to_vec());
        Ok(evaluations)
    }

    /// POSIX ms at the start of the current slot.
    pub fn now_ms(&self) -> u64 {
        self.env.slot_config.slot_start_saturating(self.slot)
    }
}

/// The payment key hash of an enterprise or base key address.
fn payment_key(address: &[u8]) -> Option<KeyHash> {
    match address.first().map(|h| h >> 4) {
        Some(0 | 2 | 4 | 6) => address.get(1..29)?.try_into().ok(),
        _ => None,
    }
}
