//! ed25519 signatures over the protocol's messages (acceptances, attestations, receipts,
//! offers): the 64-byte signatures the validator checks with the Plutus builtin
//! `verifyEd25519Signature`. What each message's signed bytes are is in
//! [`crate::v2::signed`].

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

use crate::error::{Error, Result};

/// Signs `message` with an ed25519 key (an attest key, a receipt key); returns the 64-byte
/// signature.
pub fn sign(key: &SigningKey, message: &[u8]) -> Vec<u8> {
    key.sign(message).to_bytes().to_vec()
}

/// Verifies a signature made by [`sign`] with the key whose public half is `key`.
///
/// # Errors
/// [`Error::BadSignature`] when the key or signature is malformed or does not verify.
pub fn verify(key: &[u8; 32], message: &[u8], signature: &[u8]) -> Result<()> {
    let bad = |what| move |source| Error::BadSignature { what, source };
    let vkey = VerifyingKey::from_bytes(key).map_err(bad("the key is malformed"))?;
    let sig = Signature::from_slice(signature).map_err(bad("the signature is malformed"))?;
    vkey.verify(message, &sig)
        .map_err(bad("not signed by this key"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_for_its_message_only() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let public = key.verifying_key().to_bytes();
        let sig = sign(&key, b"message");
        assert_eq!(sig.len(), 64);
        verify(&public, b"message", &sig).expect("verifies");
        assert!(verify(&public, b"messagf", &sig).is_err());
        assert!(verify(&public, b"message", &sig[..63]).is_err());
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key().to_bytes();
        assert!(verify(&other, b"message", &sig).is_err());
    }
}
