//! The messages providers sign, byte for byte as the validator rebuilds them on-chain.
//!
//! The signed bytes are `serialiseData` of the message (see [`crate::data`]); the key is the
//! provider bond's ed25519 `attest_key`. The validator checks these signatures with the
//! Plutus builtin `verifyEd25519Signature`.

use crate::data::{bytes, constr, int, to_cbor};
use crate::datum::JobId;
use crate::params::KeyHash;
pub use crate::signing::{sign, verify};

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
