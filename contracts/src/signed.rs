//! The messages providers sign, byte for byte as the validator rebuilds them on-chain.
//!
//! The signed bytes are `serialiseData` of the message (see [`crate::data`]); the key is the
//! provider bond's ed25519 `attest_key`. The validator checks these signatures with the
//! Plutus builtin `verifyEd25519Signature`.

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

use crate::data::{bytes, constr, int, to_cbor};
use crate::datum::JobId;
use crate::error::{Error, Result};
use crate::params::KeyHash;

/// A provider's acceptance of its share of a job. PlutusData: constructor 0 `[job_id, gpus,
/// rate, deadline]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptance {
    /// The job.
    pub job_id: JobId,
    /// GPUs the provider commits.
    pub gpus: u64,
    /// NTX base units per GPU-hour.
    pub rate: u64,
    /// The escrow's deadline, POSIX ms.
    pub deadline_ms: u64,
}

/// The body of a provider's attestation. PlutusData: constructor 0 `[job_id, provider,
/// result, logs, gpu_seconds, exit_code]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttestationBody {
    /// The job.
    pub job_id: JobId,
    /// The provider's payment key hash.
    pub provider: KeyHash,
    /// CID bytes of the outputs.
    pub result: Vec<u8>,
    /// CID bytes of the logs.
    pub logs: Vec<u8>,
    /// GPU-seconds used.
    pub gpu_seconds: u64,
    /// Container exit code.
    pub exit_code: i64,
}

impl Acceptance {
    /// The exact bytes signed.
    pub fn signed_bytes(&self) -> Vec<u8> {
        to_cbor(&constr(
            0,
            vec![
                bytes(self.job_id.0),
                int(self.gpus),
                int(self.rate),
                int(self.deadline_ms),
            ],
        ))
    }
}

impl AttestationBody {
    /// The exact bytes signed.
    pub fn signed_bytes(&self) -> Vec<u8> {
        to_cbor(&constr(
            0,
            vec![
                bytes(self.job_id.0),
                bytes(self.provider),
                bytes(self.result.clone()),
                bytes(self.logs.clone()),
                int(self.gpu_seconds),
                int(self.exit_code),
            ],
        ))
    }
}

/// Signs `message` with an attest key; returns the 64-byte signature.
pub fn sign(key: &SigningKey, message: &[u8]) -> Vec<u8> {
    key.sign(message).to_bytes().to_vec()
}

/// Verifies a signature made by [`sign`].
///
/// # Errors
/// [`Error::BadSignature`] when the key or signature is malformed or does not verify.
pub fn verify(attest_key: &[u8; 32], message: &[u8], signature: &[u8]) -> Result<()> {
    let key = VerifyingKey::from_bytes(attest_key)
        .map_err(|e| Error::BadSignature(format!("attest key: {e}")))?;
    let sig = Signature::from_slice(signature)
        .map_err(|e| Error::BadSignature(format!("signature: {e}")))?;
    key.verify(message, &sig)
        .map_err(|e| Error::BadSignature(e.to_string()))
}
