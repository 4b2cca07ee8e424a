//! The messages the parties sign, byte for byte as the validator rebuilds them on-chain.
//!
//! The signed bytes are `serialiseData` of the message (see [`crate::data`]). Acceptances and
//! attestations are signed by the provider bond's ed25519 `attest_key`, receipts by the
//! escrow's `receipt_key` (the orchestrator's). The validator checks these signatures with
//! the Plutus builtin `verifyEd25519Signature`.

use crate::data::{bytes, constr, int, to_cbor};
use crate::params::KeyHash;
pub use crate::signing::{sign, verify};
use crate::v2::datum::JobId;

/// A provider's acceptance of its share of a job: the terms it binds itself to. PlutusData:
/// constructor 0 `[job_id, spec, gpus, rate, deadline, accept_by, receipt_interval]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptance {
    /// The job.
    pub job_id: JobId,
    /// CID bytes of the ensemble spec the provider agreed to run.
    pub spec: Vec<u8>,
    /// GPUs the provider commits.
    pub gpus: u64,
    /// NTX base units per GPU-hour.
    pub rate: u64,
    /// The escrow's deadline, POSIX ms.
    pub deadline_ms: u64,
    /// The last moment (POSIX ms) the provider holds its GPUs for this job: an assign whose
    /// upper validity bound lies after it is refused on-chain.
    pub accept_by_ms: u64,
    /// The escrow's receipt interval, ms.
    pub receipt_interval_ms: u64,
}

/// An orchestrator's receipt: it saw provider `provider_index`'s ranks alive up to
/// `acknowledged_until_ms`. Signed by the escrow's receipt key. PlutusData: constructor 0
/// `[job_id, provider_index, acknowledged_until]`. Serde: the same fields by name (the
/// heartbeat protocol carries it as is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    /// The job.
    pub job_id: JobId,
    /// Index of the provider in the escrow's assignments.
    pub provider_index: u64,
    /// POSIX ms.
    pub acknowledged_until_ms: u64,
}

/// An orchestrator's statement of what a service's replica served through its gateway up to a
/// receipt's `acknowledged_until_ms` (issue #24 "pay by use": the bill read per request).
/// Signed by the escrow's receipt key and carried with the receipt (heartbeat protocol);
/// off-chain only: the validator never reads it. PlutusData: constructor **1** `[job_id,
/// provider_index, acknowledged_until, requests, failed, bytes_in, bytes_out]`, so its signed
/// bytes can never be a [`Receipt`]'s (constructor 0) under the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageStatement {
    /// The job.
    pub job_id: JobId,
    /// Index of the provider in the escrow's assignments.
    pub provider_index: u64,
    /// The receipt it rides with: counted up to this moment, POSIX ms.
    pub acknowledged_until_ms: u64,
    /// Requests the replica answered (any HTTP status it sent), cumulative.
    pub requests: u64,
    /// Requests that did not reach it or broke off before their response ended, cumulative.
    pub failed: u64,
    /// Request body bytes sent to it, cumulative.
    pub bytes_in: u64,
    /// Response body bytes received from it, cumulative.
    pub bytes_out: u64,
}

/// The body of a provider's attestation. PlutusData: constructor 0 `[job_id, provider,
/// result, logs, gpu_ms, exit_code]`.
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
    /// GPU-milliseconds used.
    pub gpu_ms: u64,
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
                bytes(self.spec.clone()),
                int(self.gpus),
                int(self.rate),
                int(self.deadline_ms),
                int(self.accept_by_ms),
                int(self.receipt_interval_ms),
            ],
        ))
    }
}

impl Receipt {
    /// The exact bytes signed.
    pub fn signed_bytes(&self) -> Vec<u8> {
        to_cbor(&constr(
            0,
            vec![
                bytes(self.job_id.0),
                int(self.provider_index),
                int(self.acknowledged_until_ms),
            ],
        ))
    }
}

impl UsageStatement {
    /// The exact bytes signed.
    pub fn signed_bytes(&self) -> Vec<u8> {
        to_cbor(&constr(
            1,
            vec![
                bytes(self.job_id.0),
                int(self.provider_index),
                int(self.acknowledged_until_ms),
                int(self.requests),
                int(self.failed),
                int(self.bytes_in),
                int(self.bytes_out),
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
                int(self.gpu_ms),
                int(self.exit_code),
            ],
        ))
    }
}
