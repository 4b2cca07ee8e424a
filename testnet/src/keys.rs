//! Deterministic devnet keys: ed25519 keys derived from a seed, their key hashes and
//! enterprise addresses. For genesis funding, tests and demos only — never for value.

use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use pallas_crypto::hash::{Hash, Hasher};
use pallas_crypto::key::ed25519::{PublicKey, SecretKey, Signature};

/// A devnet signing key (ed25519) derived from a `u32` seed.
pub struct DevKey {
    secret: SecretKey,
    public: PublicKey,
}

impl DevKey {
    /// The key for `seed`: secret = [`ganglion_cardano::devkey::secret`]`(seed)`.
    pub fn from_seed(seed: u32) -> Self {
        let secret = SecretKey::from(ganglion_cardano::devkey::secret(seed));
        let public = secret.public_key();
        Self { secret, public }
    }

    /// The 32-byte verification key.
    pub fn public_key(&self) -> [u8; 32] {
        self.public.into()
    }

    /// The key hash: blake2b-224 of the verification key (payment credential).
    pub fn key_hash(&self) -> Hash<28> {
        Hasher::<224>::hash(self.public.as_ref())
    }

    /// The enterprise (no stake part) address of this key on `network`.
    pub fn address(&self, network: Network) -> ShelleyAddress {
        ShelleyAddress::new(
            network,
            ShelleyPaymentPart::key_hash(self.key_hash()),
            ShelleyDelegationPart::Null,
        )
    }

    /// Sign `message` (normally a 32-byte transaction body hash); returns the 64-byte signature.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        let sig: Signature = self.secret.sign(message);
        let mut out = [0u8; 64];
        out.copy_from_slice(sig.as_ref());
        out
    }
}

/// Verify an ed25519 `signature` by `public_key` over `message`.
/// Returns `false` for malformed key or signature bytes.
pub fn verify(public_key: &[u8], signature: &[u8], message: &[u8]) -> bool {
    let (Ok(pk), Ok(sig)) = (
        PublicKey::try_from(public_key),
        Signature::try_from(signature),
    ) else {
        return false;
    };
    pk.verify(message, &sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_forgeries_do_not() {
        let k = DevKey::from_seed(1);
        let msg = [7u8; 32];
        let sig = k.sign(&msg);
        assert!(verify(&k.public_key(), &sig, &msg));
        assert!(!verify(&k.public_key(), &sig, &[8u8; 32]));
        assert!(!verify(&DevKey::from_seed(2).public_key(), &sig, &msg));
        assert!(!verify(&[1, 2, 3], &sig, &msg));
    }
}
