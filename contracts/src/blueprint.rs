//! The committed CIP-57 blueprint (`contracts/aiken/plutus.json`): compiled code, parameter
//! application, script hash and addresses.

use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use pallas_crypto::hash::{Hash, Hasher};

use crate::data::to_cbor;
use crate::error::{Error, Result};
use crate::params::{KeyHash, PolicyId};
use crate::v2::params::Params;

/// The blueprint as built by `aiken build` (see `contracts/README.md`).
pub const PLUTUS_JSON: &str = include_str!("../aiken/plutus.json");

/// The unapplied compiled code of a validator (`ganglion_v2`, [`crate::v2::VALIDATOR`]) and
/// its hash as the blueprint states it.
#[derive(Debug, Clone)]
pub struct Blueprint {
    /// CBOR-wrapped flat UPLC program (as in `compiledCode`).
    pub compiled_code: Vec<u8>,
    /// Hash stated by the blueprint (of the unapplied program).
    pub hash: [u8; 28],
    /// Compiler version recorded in the blueprint preamble.
    pub compiler: String,
    /// Plutus version recorded in the blueprint preamble (`v3`).
    pub plutus_version: String,
}

fn bad(reason: impl Into<String>) -> Error {
    Error::Blueprint(reason.into())
}

impl Blueprint {
    /// Parses the `ganglion_v2` validator of a blueprint document.
    ///
    /// # Errors
    /// [`Error::Blueprint`] when the JSON is invalid or lacks the `ganglion_v2` validator.
    pub fn parse(json: &str) -> Result<Self> {
        Self::parse_validator(json, crate::v2::VALIDATOR)
    }

    /// Parses the validator titled `title` (`module.validator`) of a blueprint document.
    ///
    /// # Errors
    /// [`Error::Blueprint`] when the JSON is invalid or lacks that validator.
    pub fn parse_validator(json: &str, title: &str) -> Result<Self> {
        let doc: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        let preamble = doc.get("preamble").ok_or_else(|| bad("no preamble"))?;
        let v = doc
            .get("validators")
            .and_then(|v| v.as_array())
            .ok_or_else(|| bad("no validators"))?
            .iter()
            .find(|v| {
                v.get("title")
                    .and_then(|t| t.as_str())
                    .is_some_and(|t| t.strip_prefix(title).is_some_and(|h| h.starts_with('.')))
            })
            .ok_or_else(|| bad(format!("no validator {title}")))?;
        let code = v
            .get("compiledCode")
            .and_then(|c| c.as_str())
            .ok_or_else(|| bad("no compiledCode"))?;
        let hash = v
            .get("hash")
            .and_then(|c| c.as_str())
            .ok_or_else(|| bad("no hash"))?;
        let hash: [u8; 28] = hex::decode(hash)
            .map_err(|e| bad(e.to_string()))?
            .try_into()
            .map_err(|_| bad("hash is not 28 bytes"))?;
        let text = |k: &str| {
            preamble
                .get(k)
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string())
                })
                .unwrap_or_default()
        };
        Ok(Self {
            compiled_code: hex::decode(code).map_err(|e| bad(e.to_string()))?,
            hash,
            compiler: text("compiler"),
            plutus_version: text("plutusVersion"),
        })
    }

    /// The committed blueprint's `ganglion_v2` validator (as [`crate::v2::blueprint`]).
    ///
    /// # Errors
    /// [`Error::Blueprint`] if the committed file is broken.
    pub fn committed() -> Result<Self> {
        Self::parse(PLUTUS_JSON)
    }

    /// The validator with `params` applied: the script a deployment uses.
    ///
    /// # Errors
    /// [`Error::ApplyParams`] when uplc cannot decode the program.
    pub fn apply(&self, params: &Params) -> Result<Script> {
        self.apply_data(params.to_plutus_data())
    }

    /// The validator with one parameter, given as PlutusData, applied.
    ///
    /// # Errors
    /// [`Error::ApplyParams`] when uplc cannot decode the program.
    pub fn apply_data(&self, params: pallas_primitives::PlutusData) -> Result<Script> {
        let args = to_cbor(&crate::data::list(vec![params]));
        let bytes = uplc::tx::apply_params_to_script(&args, &self.compiled_code)
            .map_err(|e| Error::ApplyParams(e.to_string()))?;
        Ok(Script::new(bytes))
    }
}

/// A Plutus V3 script: bytes as carried in a witness set or reference script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// CBOR-wrapped flat program.
    pub bytes: Vec<u8>,
    /// blake2b-224 of `0x03 ‖ bytes` (the Plutus V3 language tag, ledger spec).
    pub hash: PolicyId,
}

impl Script {
    /// Wraps script bytes and computes their hash.
    pub fn new(bytes: Vec<u8>) -> Self {
        let hash = script_hash(&bytes);
        Self { bytes, hash }
    }

    /// The script's enterprise address (no stake part) on `network`.
    pub fn address(&self, network: Network) -> Vec<u8> {
        ShelleyAddress::new(
            network,
            ShelleyPaymentPart::Script(Hash::new(self.hash)),
            ShelleyDelegationPart::Null,
        )
        .to_vec()
    }

    /// The policy id of its minting purpose (the same hash).
    pub fn policy_id(&self) -> PolicyId {
        self.hash
    }
}

/// blake2b-224 of a Plutus V3 script.
pub fn script_hash(bytes: &[u8]) -> PolicyId {
    *Hasher::<224>::hash_tagged(bytes, 3)
}

/// The enterprise address of a payment key hash on `network`.
pub fn key_address(network: Network, key: &KeyHash) -> Vec<u8> {
    ShelleyAddress::new(
        network,
        ShelleyPaymentPart::Key(Hash::new(*key)),
        ShelleyDelegationPart::Null,
    )
    .to_vec()
}

/// blake2b-224 of an ed25519 verification key: its `VerificationKeyHash`.
pub fn key_hash(vkey: &[u8; 32]) -> KeyHash {
    *Hasher::<224>::hash(vkey)
}
