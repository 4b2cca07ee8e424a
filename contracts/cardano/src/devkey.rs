//! The devnet's deterministic keys: the 32-byte ed25519 secret of devnet key `seed` is
//! blake2b-256(`"ganglion-devnet-key"` ‖ `seed` as 4 bytes big endian). The devnet funds
//! seeds `0..4` at genesis (`ganglion_testnet::keys::DevKey`); the node's wallet derives the
//! same keys (`wallet::PaymentKey::devnet`). Devnet and tests only: anyone can derive them.

use pallas_crypto::hash::Hasher;

/// The domain-separation prefix of the derivation.
pub const DOMAIN: &[u8] = b"ganglion-devnet-key";

/// The ed25519 secret key bytes (RFC 8032 seed) of devnet key `seed`.
pub fn secret(seed: u32) -> [u8; 32] {
    let mut material = DOMAIN.to_vec();
    material.extend_from_slice(&seed.to_be_bytes());
    *Hasher::<256>::hash(&material)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_give_distinct_fixed_secrets() {
        assert_ne!(secret(0), secret(1));
        assert_eq!(secret(7), secret(7));
        let mut material = b"ganglion-devnet-key".to_vec();
        material.extend_from_slice(&[0, 0, 1, 0]);
        assert_eq!(secret(256), *Hasher::<256>::hash(&material));
    }
}
