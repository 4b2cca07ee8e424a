//! A UTxO set and a slot that apply every transaction through the devnet's real ledger
//! (feature `test-utils`): [`ganglion_testnet::ledger::validate`] judges the signed bytes
//! exactly as the devnet's mempool does — phase 1 (fees, value preservation, min-UTxO,
//! validity interval, vkey and script witnesses, collateral, script integrity hash) and
//! phase 2 (every script through uplc, declared ExUnits covering the measured ones).
//!
//! `World` adds nothing to those rules; it only keeps a decoded view of the UTxO set (so
//! tests can read values and datums) next to the raw set the ledger validates against, and
//! the signed bytes of every applied transaction (to replay them as blocks elsewhere).

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;
use ganglion_testnet::ledger::utxo::UtxoSet;
use ganglion_testnet::ledger::{Rejection, Rules, Validated, validate};
use pallas_crypto::hash::Hasher;
use pallas_traverse::{Era, MultiEraOutput};

use crate::blueprint::{key_address, key_hash};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::params::KeyHash;
use crate::tx::{Balanced, Output, TxoRef, Utxo, Value, Wallet, encode_output, sign};

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

/// The UTxO set and clock, judged by the devnet ledger.
#[derive(Debug, Clone)]
pub struct World {
    /// Chain parameters.
    pub env: Env,
    /// Unspent outputs, decoded (a view of the raw set the ledger validates against; read
    /// it, do not write it: [`World::fund`] and [`World::submit`] keep both in step).
    pub utxos: BTreeMap<TxoRef, Output>,
    /// Current slot: the slot a submitted transaction lands in.
    pub slot: u64,
    /// Signed bytes of every transaction applied, in order (to replay them elsewhere, e.g.
    /// as blocks for an indexer).
    pub applied: Vec<Vec<u8>>,
    raw: UtxoSet,
    rules: Rules,
    minted: u64,
}

impl World {
    /// An empty world at slot `slot`, under the ledger rules of `env` (its protocol
    /// parameters and slot config; network id 0 for a testnet `env`, 1 for mainnet).
    pub fn new(env: Env, slot: u64) -> Self {
        let network_id = match env.network {
            pallas_addresses::Network::Mainnet => 1,
            _ => 0,
        };
        let rules = Rules::new(env.params.clone(), env.slot_config, network_id);
        Self {
            env,
            utxos: BTreeMap::new(),
            slot,
            applied: Vec::new(),
            raw: UtxoSet::default(),
            rules,
            minted: 0,
        }
    }

    /// Creates an output out of thin air (a genesis UTxO).
    ///
    /// # Panics
    /// When `value` holds an asset of quantity 0 (it cannot be encoded).
    pub fn fund(&mut self, address: &[u8], value: Value) -> Utxo {
        self.minted += 1;
        let reference = TxoRef {
            tx_hash: *Hasher::<256>::hash(&self.minted.to_be_bytes()),
            index: 0,
        };
        let output = Output::new(address.to_vec(), value);
        let raw = encode_output(&output).expect("a genesis output encodes");
        self.raw.apply(&ganglion_testnet::ledger::utxo::UtxoDelta {
            consumed: Vec::new(),
            produced: vec![(reference, raw)],
        });
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

    /// Signs `balanced` with `keys` and submits it.
    ///
    /// # Errors
    /// As [`World::submit`].
    pub fn sign_and_submit(
        &mut self,
        balanced: &Balanced,
        keys: &[&SigningKey],
    ) -> Result<Validated> {
        let signed = sign(balanced, keys)?;
        self.submit(balanced, &signed)
    }

    /// Applies a signed transaction built from `balanced` (its id must be `balanced`'s).
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when the bytes are not `balanced`'s; otherwise as
    /// [`World::submit_bytes`].
    pub fn submit(&mut self, balanced: &Balanced, signed: &[u8]) -> Result<Validated> {
        let tx = ganglion_testnet::ledger::decode_tx(signed).map_err(Error::from)?;
        if *ganglion_testnet::ledger::tx_hash(&tx) != balanced.hash {
            return Err(Error::InvalidRequest(
                "signed bytes do not match the balanced body".into(),
            ));
        }
        self.submit_bytes(signed)
    }

    /// Validates raw signed transaction bytes with the devnet ledger at the current slot
    /// and, when accepted, applies its UTxO delta (for a transaction included as
    /// phase-2 invalid, `is_valid = false`: its collateral only).
    ///
    /// # Errors
    /// [`Error::Rejected`] with the ledger's [`Rejection`] naming the first broken rule
    /// (`FeeTooSmallUTxO`, `ValueNotConservedUTxO`, `BabbageOutputTooSmallUTxO`,
    /// `OutsideValidityIntervalUTxO`, `MissingVKeyWitnessesUTXOW`, `PlutusScriptFailed`, …).
    pub fn submit_bytes(&mut self, signed: &[u8]) -> Result<Validated> {
        let validated = self.judge(signed)?;
        let mut produced = Vec::with_capacity(validated.delta.produced.len());
        for (r, raw) in &validated.delta.produced {
            let o = MultiEraOutput::decode(Era::Conway, raw).map_err(|e| Error::Cbor {
                what: "produced output",
                reason: e.to_string(),
            })?;
            produced.push((*r, Output::from_chain(&o)));
        }
        self.raw.apply(&validated.delta);
        for (r, _) in &validated.delta.consumed {
            self.utxos.remove(r);
        }
        self.utxos.extend(produced);
        self.applied.push(signed.to_vec());
        Ok(validated)
    }

    /// Validates raw signed transaction bytes with the devnet ledger at the current slot
    /// without applying them.
    ///
    /// # Errors
    /// As [`World::submit_bytes`].
    pub fn judge(&self, signed: &[u8]) -> Result<Validated> {
        Ok(validate(&self.rules, &self.raw, signed, self.slot)?)
    }

    /// The ledger rules transactions are judged by.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// POSIX ms at the start of the current slot.
    pub fn now_ms(&self) -> u64 {
        self.env.slot_config.slot_start_saturating(self.slot)
    }
}

impl From<Rejection> for Error {
    fn from(r: Rejection) -> Self {
        Error::Rejected(Box::new(r))
    }
}
