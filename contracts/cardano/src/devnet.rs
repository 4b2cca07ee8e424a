//! The embedded devnet's well-known values — what a node must know about the devnet before
//! it connects, defined once for the devnet (`ganglion-testnet`'s `Genesis::devnet`) and the
//! node's network preset, so the node needs nothing from the devnet crate to join one.
//!
//! A devnet's system start is the moment it was created: ask the chain (`GetSystemStart`)
//! or its genesis file; everything else is fixed here.

use pallas_crypto::hash::Hasher;
use pallas_crypto::key::ed25519::SecretKey;

use crate::devkey;

/// Network magic of the Ouroboros handshakes (N2N and N2C).
pub const NETWORK_MAGIC: u64 = 42;

/// Security parameter k, blocks: the deepest rollback the devnet injects or expects.
pub const SECURITY_PARAM: u64 = 10;

/// Slot length, ms.
pub const SLOT_LENGTH_MS: u32 = 1000;

/// Devnet keys `0..FUNDED_KEYS` ([`devkey::secret`]) are funded at genesis.
pub const FUNDED_KEYS: u32 = 4;

/// The devnet key that mints NTX (its policy is `ScriptPubkey` of this key's hash).
pub const NTX_MINTER_SEED: u32 = 0;

/// The NTX asset name (bytes of `"NTX"`).
pub const NTX_ASSET_NAME: &[u8] = b"NTX";

/// The payment key hash (blake2b-224 of the ed25519 verification key) of devnet key `seed`.
pub fn key_hash(seed: u32) -> [u8; 28] {
    let public = SecretKey::from(devkey::secret(seed)).public_key();
    *Hasher::<224>::hash(public.as_ref())
}

/// The CBOR of the native script `ScriptPubkey(key_hash)`: `[0, bytes .size 28]`
/// (Shelley `native_script`, CDDL `script_pubkey = (0, addr_keyhash)`).
pub fn script_pubkey_cbor(key_hash: &[u8; 28]) -> Vec<u8> {
    let mut cbor = vec![0x82, 0x00, 0x58, 0x1c];
    cbor.extend_from_slice(key_hash);
    cbor
}

/// The NTX policy id: blake2b-224(0x00 ‖ CBOR of `ScriptPubkey(key_hash(NTX_MINTER_SEED))`)
/// (a native script's hash is tagged 0).
pub fn ntx_policy_id() -> [u8; 28] {
    let cbor = script_pubkey_cbor(&key_hash(NTX_MINTER_SEED));
    *Hasher::<224>::hash_tagged(&cbor, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ntx_policy_is_the_minters_script_hash() {
        let minter = key_hash(NTX_MINTER_SEED);
        assert_ne!(minter, key_hash(1));
        let cbor = script_pubkey_cbor(&minter);
        assert_eq!(cbor.len(), 32);
        let mut tagged = vec![0u8];
        tagged.extend_from_slice(&cbor);
        assert_eq!(ntx_policy_id(), *Hasher::<224>::hash(&tagged));
    }
}
