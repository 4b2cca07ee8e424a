//! The payment key: an ed25519 signing key stored as a cardano-cli text envelope
//! (`PaymentSigningKeyShelley_ed25519`, `cborHex` = CBOR bytes of the 32-byte seed), mode 0600,
//! and its enterprise address (payment key hash, no stake part).

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use pallas_crypto::hash::Hasher;
use serde::{Deserialize, Serialize};

use crate::secret;

/// Text-envelope type of a payment signing key (cardano-cli).
pub const ENVELOPE_TYPE: &str = "PaymentSigningKeyShelley_ed25519";

/// Key-file failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the file failed, or its mode is unsafe.
    #[error(transparent)]
    File(#[from] secret::Error),
    /// `wallet new` would overwrite an existing key.
    #[error("{0} already exists; refusing to overwrite a payment key")]
    Exists(PathBuf),
    /// The file is not a payment signing key envelope.
    #[error("{path}: not a {ENVELOPE_TYPE} text envelope: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    description: String,
    #[serde(rename = "cborHex")]
    cbor_hex: String,
}

/// The wallet's payment key.
#[derive(Clone)]
pub struct PaymentKey {
    key: SigningKey,
}

impl std::fmt::Debug for PaymentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("PaymentKey")
            .field("key_hash", &hex::encode(self.key_hash()))
            .finish()
    }
}

impl PaymentKey {
    /// A fresh key from the OS random source.
    pub fn generate() -> Self {
        Self {
            key: SigningKey::generate(&mut rand::rngs::OsRng),
        }
    }

    /// A key from its 32-byte seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// The devnet's deterministic key for `seed` ([`ganglion_cardano::devkey::secret`]: the
    /// key the devnet funds, seeds `0..4`, at genesis). Devnet and tests only: anyone can
    /// derive it.
    pub fn devnet(seed: u32) -> Self {
        Self::from_seed(ganglion_cardano::devkey::secret(seed))
    }

    /// The signing key (for [`ganglion_contracts::tx::sign`]).
    pub fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    /// blake2b-224 of the verification key: the payment credential.
    pub fn key_hash(&self) -> [u8; 28] {
        *Hasher::<224>::hash(self.key.verifying_key().as_bytes())
    }

    /// The enterprise address (no stake part) on `network`.
    pub fn address(&self, network: Network) -> ShelleyAddress {
        ShelleyAddress::new(
            network,
            ShelleyPaymentPart::key_hash(self.key_hash().into()),
            ShelleyDelegationPart::Null,
        )
    }

    /// Writes the key to `path` (mode 0600), refusing to replace an existing file.
    ///
    /// # Errors
    /// [`Error::Exists`], [`Error::File`].
    pub fn create(&self, path: &Path) -> Result<(), Error> {
        if path.exists() {
            return Err(Error::Exists(path.to_path_buf()));
        }
        let env = Envelope {
            kind: ENVELOPE_TYPE.into(),
            description: "Ganglion payment signing key".into(),
            cbor_hex: format!("5820{}", hex::encode(self.key.to_bytes())),
        };
        let text = serde_json::to_string_pretty(&env).map_err(|e| Error::Format {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        secret::write_secret(path, text.as_bytes())?;
        Ok(())
    }

    /// Reads a key written by [`PaymentKey::create`] or cardano-cli.
    ///
    /// # Errors
    /// [`Error::File`] (missing, unreadable, or readable by others), [`Error::Format`].
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = secret::read_secret(path)?;
        let bad = |reason: String| Error::Format {
            path: path.to_path_buf(),
            reason,
        };
        let env: Envelope = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if env.kind != ENVELOPE_TYPE {
            return Err(bad(format!("type is {:?}", env.kind)));
        }
        let raw = hex::decode(&env.cbor_hex).map_err(|e| bad(format!("cborHex: {e}")))?;
        let seed: [u8; 32] = raw
            .strip_prefix(&[0x58, 0x20])
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| bad("cborHex is not a 32-byte CBOR byte string".into()))?;
        Ok(Self::from_seed(seed))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn keys_round_trip_through_a_0600_envelope_and_are_never_overwritten() {
        let t = tempfile::tempdir().expect("tempdir");
        let p = t.path().join("payment.skey");
        let k = PaymentKey::generate();
        k.create(&p).expect("create");
        let mode = std::fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = PaymentKey::load(&p).expect("load");
        assert_eq!(back.key_hash(), k.key_hash());
        assert!(matches!(
            PaymentKey::generate().create(&p),
            Err(Error::Exists(_))
        ));
        assert_eq!(
            PaymentKey::load(&p).expect("still there").key_hash(),
            k.key_hash()
        );
    }

    #[test]
    fn the_address_matches_the_devnet_key_derivation() {
        // DevKey seed 1 is the 32-byte seed the testnet crate derives; the same seed must give
        // the same enterprise address (so devnet funds land on our key).
        let dev = ganglion_testnet::keys::DevKey::from_seed(1);
        let k = PaymentKey::devnet(1);
        assert_eq!(k.key_hash(), *dev.key_hash());
        assert_eq!(
            k.address(Network::Testnet).to_vec(),
            dev.address(Network::Testnet).to_vec()
        );
        assert!(
            k.address(Network::Testnet)
                .to_bech32()
                .expect("bech32")
                .starts_with("addr_test1")
        );
    }

    #[test]
    fn malformed_key_files_are_named_errors() {
        let t = tempfile::tempdir().expect("tempdir");
        let p = t.path().join("k");
        secret::write_secret(&p, b"{\"type\":\"StakeSigningKeyShelley_ed25519\",\"description\":\"\",\"cborHex\":\"5820\"}")
            .expect("write");
        assert!(matches!(PaymentKey::load(&p), Err(Error::Format { .. })));
        secret::write_secret(&p, b"not json").expect("write");
        assert!(matches!(PaymentKey::load(&p), Err(Error::Format { .. })));
    }
}
