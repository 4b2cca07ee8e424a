//! `/ganglion/heartbeat/1`: a provider's heartbeat for a running job, answered by the job's
//! orchestrator with a signed receipt (escrow protocol v2, `docs/escrow-v2.md`; DESIGN §3.2
//! "Receipts").
//!
//! While a job runs, the provider at assignment `provider_index` sends one
//! [`HeartbeatRequest`] per receipt interval to the orchestrator's node. When the orchestrator
//! acknowledges the work it answers [`HeartbeatResponse::Receipt`]: a
//! `ganglion_contracts::v2::signed::Receipt { job_id, provider_index, acknowledged_until_ms }`
//! signed (ed25519) by the escrow's `receipt_key`. The provider keeps its best receipt (the
//! latest `acknowledged_until_ms`) for its claim, where it bounds the pay (G1): `gpu_ms ≤ gpus ×
//! (acknowledged_until + receipt_interval − started_at)`.
//!
//! For a service's replica (`kind: service`) the receipt may also carry a [`SignedUsage`]:
//! what the replica served through the orchestrator's gateway up to the same moment
//! (requests, failures, bytes), signed by the same key over a [`UsageStatement`]. The
//! provider keeps it with the receipt and attests it in its log, so the bill can be read per
//! request; the validator never reads it.
//!
//! The sender is the connection's peer id (noise-authenticated); the request itself carries no
//! signature. The p2p layer only carries the messages and limits floods; whether a receipt is
//! due (the job, its assignment, its deadline, the interval since the last one) is the job
//! engine's judgement ([`crate::inbound::Inbound::Heartbeat`]).
//!
//! **Versioning.** Messages are CBOR maps keyed by field name. A receiver ignores fields it does
//! not know, so a later revision may add optional fields (`#[serde(default)]`) under the same
//! protocol name; a [`HeartbeatRefusal`] this node does not know decodes as
//! [`HeartbeatRefusal::Unrecognised`]. Anything else (a field removed or retyped, a new
//! [`HeartbeatResponse`] variant) is a new protocol name, `/ganglion/heartbeat/2`.

use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::signed::{Receipt, UsageStatement};
use libp2p::StreamProtocol;
use serde::{Deserialize, Serialize};

use super::Bounded;

/// The `heartbeat` protocol: provider → the job's orchestrator.
pub const HEARTBEAT_PROTOCOL: StreamProtocol = StreamProtocol::new("/ganglion/heartbeat/1");

/// Cap on a `heartbeat` request or response, bytes. The largest messages (every number at
/// `u64::MAX`, a 64-byte signature) encode to < 300 bytes, a request with the largest
/// [`LiveLog`] (the widest CID) to < 350; the rest is room for optional fields a later
/// revision adds.
pub const MAX_HEARTBEAT_BYTES: usize = 512;

/// A provider's heartbeat: its ranks of a job are alive (or not), and how far they got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    /// The job (escrow thread-token name).
    pub job_id: JobId,
    /// The provider's index in the escrow's assignments (the receipt's `provider_index`).
    pub provider_index: u64,
    /// The provider's ranks of the job, as its node sees them now.
    pub ranks: RankSummary,
    /// When the provider sent this, POSIX ms, by the provider's clock. Informational: the
    /// orchestrator acknowledges by its own clock, never past its own now.
    pub sent_at_ms: u64,
    /// The end of the provider's live container log, when it has one (added in a later
    /// revision: absent from older providers' heartbeats, ignored by older orchestrators).
    #[serde(default)]
    pub log: Option<LiveLog>,
    /// Set once, when the provider's share ended before any rank started because the job's
    /// network did not form (added in a later revision: absent from older providers'
    /// heartbeats, ignored by older orchestrators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unformed: Option<Unformed>,
}

/// Most unreachable node ranks one [`Unformed`] names (the heartbeat's size bound).
pub const MAX_UNFORMED_RANKS: usize = 16;

/// A provider's report that its share of a job ended before any rank started: it had no
/// working overlay link to the nodes in `unreachable` within its link timeout
/// (`[overlay] link_timeout_s`). Its claim attests no GPU time; the orchestrator re-matches
/// without them (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unformed {
    /// Node ranks (indices in the escrow's assignments) it could not reach, at most
    /// [`MAX_UNFORMED_RANKS`].
    pub unreachable: Vec<u64>,
}

/// Where a provider's live log can be read: the last bytes (at most 64 KiB) of its
/// container's stdout and stderr as written so far, imported into the provider's blockstore as
/// a UnixFS file (CIDv1, raw leaves, not pinned) that its swarm serves over bitswap. Unattested
/// and informational: only the log the provider signs in its claim is the job's record; this
/// lets the orchestrator show the log while the job runs (`job_liveLogs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveLog {
    /// The tail's CID, binary (a CBOR byte string).
    #[serde(with = "cid_bytes")]
    pub cid: Vec<u8>,
    /// Where the tail starts in the whole log, bytes from its first byte.
    pub offset: u64,
    /// The whole log's length when the tail was taken, bytes (`offset` + the tail's length).
    pub total: u64,
}

/// A compact summary of a provider's ranks of one job (one rank per GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RankSummary {
    /// Ranks whose containers are running.
    pub running: u32,
    /// Ranks whose containers have exited (any exit code).
    pub exited: u32,
    /// GPU-milliseconds the provider's ranks have used so far in this job: monotone, never
    /// decreasing between heartbeats of one job (the unit the attestation and the claim bound
    /// use).
    pub gpu_ms: u64,
    /// The workload's own progress counter (steps, samples, …; unit the workload's), monotone,
    /// when the workload reports one; `None` when it does not.
    #[serde(default)]
    pub progress: Option<u64>,
}

/// A receipt and its signature, as the escrow's `Claim` takes them (`SignedReceipt`), and for
/// a service's replica the usage the orchestrator's gateway counted up to the same moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedReceipt {
    /// What was signed.
    pub receipt: Receipt,
    /// ed25519 signature (CBOR byte string of exactly 64 bytes) by the escrow's `receipt_key`
    /// over `Receipt::signed_bytes()`.
    #[serde(with = "signature_bytes")]
    pub signature: [u8; 64],
    /// What the replica served up to `receipt.acknowledged_until_ms`, for a service's replica
    /// whose orchestrator routes it (added in a later revision: absent from batch jobs'
    /// receipts and from older orchestrators', ignored by older providers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<SignedUsage>,
}

/// What a service's replica served through its orchestrator's gateway, cumulative since the
/// replica was first routed (the gateway's per-replica counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServedUsage {
    /// Requests the replica answered (any HTTP status it sent).
    pub requests: u64,
    /// Requests that did not reach it or broke off before their response ended.
    pub failed: u64,
    /// Request body bytes sent to it.
    pub bytes_in: u64,
    /// Response body bytes received from it and passed on.
    pub bytes_out: u64,
}

impl ServedUsage {
    /// The statement signed for `receipt`: these counts up to its `acknowledged_until_ms`.
    pub fn statement(&self, receipt: &Receipt) -> UsageStatement {
        UsageStatement {
            job_id: receipt.job_id,
            provider_index: receipt.provider_index,
            acknowledged_until_ms: receipt.acknowledged_until_ms,
            requests: self.requests,
            failed: self.failed,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
        }
    }
}

/// A [`ServedUsage`] and the orchestrator's signature over its [`UsageStatement`] for the receipt it
/// rides with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedUsage {
    /// The counts.
    pub usage: ServedUsage,
    /// ed25519 signature (64 bytes) by the escrow's `receipt_key` over
    /// `usage.statement(receipt).signed_bytes()`.
    #[serde(with = "signature_bytes")]
    pub signature: [u8; 64],
}

/// Why a [`SignedReceipt`] is not the one a provider asked for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// The receipt names another job.
    #[error("receipt for job {got}, asked for {asked}")]
    WrongJob {
        /// The job asked about.
        asked: JobId,
        /// The job the receipt names.
        got: JobId,
    },
    /// The receipt names another assignment.
    #[error("receipt for assignment {got}, asked for {asked}")]
    WrongProvider {
        /// The provider index asked about.
        asked: u64,
        /// The index the receipt names.
        got: u64,
    },
    /// The signature does not verify under the escrow's receipt key.
    #[error("receipt signature: {0}")]
    BadSignature(#[source] ganglion_contracts::Error),
    /// The usage carried with the receipt is not signed by the escrow's receipt key for this
    /// receipt.
    #[error("usage signature: {0}")]
    BadUsageSignature(#[source] ganglion_contracts::Error),
}

impl SignedReceipt {
    /// Signs `receipt` with the escrow's receipt key (the orchestrator's).
    pub fn sign(receipt: &Receipt, receipt_key: &ed25519_dalek::SigningKey) -> Self {
        use ed25519_dalek::Signer;
        SignedReceipt {
            receipt: *receipt,
            signature: receipt_key.sign(&receipt.signed_bytes()).to_bytes(),
            usage: None,
        }
    }

    /// As [`SignedReceipt::sign`], with `usage` signed for the same receipt.
    pub fn sign_with_usage(
        receipt: &Receipt,
        usage: ServedUsage,
        receipt_key: &ed25519_dalek::SigningKey,
    ) -> Self {
        use ed25519_dalek::Signer;
        SignedReceipt {
            usage: Some(SignedUsage {
                usage,
                signature: receipt_key
                    .sign(&usage.statement(receipt).signed_bytes())
                    .to_bytes(),
            }),
            ..Self::sign(receipt, receipt_key)
        }
    }

    /// Checks that this receipt is for `job_id`'s assignment `provider_index` and is signed by
    /// `receipt_key` (32 bytes, the escrow datum's `receipt_key`), and so is the usage it
    /// carries (if any) for this receipt; returns the receipt.
    ///
    /// # Errors
    /// [`ReceiptError::WrongJob`], [`ReceiptError::WrongProvider`],
    /// [`ReceiptError::BadSignature`], [`ReceiptError::BadUsageSignature`].
    pub fn verify(
        &self,
        receipt_key: &[u8; 32],
        job_id: JobId,
        provider_index: u64,
    ) -> Result<Receipt, ReceiptError> {
        if self.receipt.job_id != job_id {
            return Err(ReceiptError::WrongJob {
                asked: job_id,
                got: self.receipt.job_id,
            });
        }
        if self.receipt.provider_index != provider_index {
            return Err(ReceiptError::WrongProvider {
                asked: provider_index,
                got: self.receipt.provider_index,
            });
        }
        let receipt = self.receipt;
        ganglion_contracts::v2::signed::verify(
            receipt_key,
            &receipt.signed_bytes(),
            &self.signature,
        )
        .map_err(ReceiptError::BadSignature)?;
        if let Some(u) = &self.usage {
            u.verify(receipt_key, &receipt)
                .map_err(ReceiptError::BadUsageSignature)?;
        }
        Ok(receipt)
    }
}

impl SignedUsage {
    /// Checks the signature: `receipt_key` (32 bytes) signed these counts for `receipt`.
    ///
    /// # Errors
    /// The signature does not verify (another key, another receipt, other counts).
    pub fn verify(
        &self,
        receipt_key: &[u8; 32],
        receipt: &Receipt,
    ) -> Result<(), ganglion_contracts::Error> {
        ganglion_contracts::v2::signed::verify(
            receipt_key,
            &self.usage.statement(receipt).signed_bytes(),
            &self.signature,
        )
    }
}

/// Why an orchestrator gives no receipt for a [`HeartbeatRequest`]. CBOR: a map with the
/// variant's name under `refusal`, plus its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "refusal")]
#[non_exhaustive]
pub enum HeartbeatRefusal {
    /// The receiving node orchestrates no such job (or does not act as an orchestrator).
    #[error("unknown job")]
    UnknownJob,
    /// The job's assignment `provider_index` does not exist or is not the sending peer's.
    #[error("the assignment is not the sender's")]
    NotAssigned,
    /// The job is not assigned on chain yet (as the receiver's indexer sees it): send again
    /// later.
    #[error("the job is not assigned on chain yet")]
    NotStarted,
    /// The job is over for this provider (it attested, claimed, or the job was settled or
    /// expired): no more receipts.
    #[error("the job is finished")]
    Finished,
    /// The escrow's deadline has passed: work after it is not paid (G1), so nothing more is
    /// acknowledged.
    #[error("past the job's deadline of {deadline_ms} ms")]
    PastDeadline {
        /// The escrow's deadline, POSIX ms.
        deadline_ms: u64,
    },
    /// Fewer of the provider's ranks are running than it was assigned (by the heartbeat or by
    /// the orchestrator's own view of the job).
    #[error("{running} of {expected} ranks running")]
    RanksNotRunning {
        /// Ranks running.
        running: u32,
        /// Ranks assigned (GPUs of the assignment).
        expected: u32,
    },
    /// The heartbeat's GPU time went back: it is below what an earlier heartbeat reported.
    #[error("GPU time went back from {acknowledged_gpu_ms} to {reported_gpu_ms} GPU-ms")]
    ProgressWentBack {
        /// The GPU-ms of the last acknowledged heartbeat.
        acknowledged_gpu_ms: u64,
        /// The GPU-ms this heartbeat reports.
        reported_gpu_ms: u64,
    },
    /// A receipt was given less than one receipt interval ago: ask again from `retry_at_ms`.
    #[error("too early: ask again at {retry_at_ms} ms")]
    TooEarly {
        /// When a new receipt is due, POSIX ms.
        retry_at_ms: u64,
    },
    /// The orchestrator stopped the job (`ganglion job stop`): stop the containers now and
    /// claim what ran (the last receipt bounds the claim, DESIGN §3.1 G1).
    #[error("the orchestrator stopped the job")]
    Stopped,
    /// A service's replica that its orchestrator's gateway does not see healthy now (it has
    /// not passed its health check yet, or fails it): its time is not acknowledged, so a
    /// replica that never answers is paid at most one interval (added in a later revision;
    /// older providers read it as [`HeartbeatRefusal::Unrecognised`]).
    #[error("the replica is not healthy at the orchestrator's gateway")]
    NotHealthy,
    /// A reason from a later revision of the protocol that this node does not know.
    #[serde(other)]
    #[error("a refusal this node does not know")]
    Unrecognised,
}

/// The orchestrator's answer to a [`HeartbeatRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeartbeatResponse {
    /// The work is acknowledged: here is the signed receipt.
    Receipt(SignedReceipt),
    /// No receipt, and why.
    Refused(HeartbeatRefusal),
    /// Too many requests from this peer, or the job engine is busy or gone: nothing was
    /// recorded; send again at the next interval.
    RateLimited,
}

impl Bounded for HeartbeatRequest {}
impl Bounded for HeartbeatResponse {}

/// A `Vec<u8>` as a CBOR byte string (serde writes a `Vec<u8>` as an array of numbers, up to
/// twice as long). Also read from a sequence of numbers.
mod cid_bytes {
    use serde::de::{Deserializer, SeqAccess, Visitor};
    use serde::ser::Serializer;

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a binary CID")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

/// A `[u8; 64]` as a CBOR byte string of exactly 64 bytes (serde has no impl for arrays over
/// 32 elements). Also read from a sequence of 64 numbers, how self-describing formats without
/// byte strings (JSON, in the job store) write it.
mod signature_bytes {
    use serde::de::{self, Deserializer, SeqAccess, Visitor};
    use serde::ser::Serializer;

    pub(super) fn serialize<S: Serializer>(sig: &[u8; 64], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(sig)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 64], D::Error> {
        struct Bytes64;
        impl<'de> Visitor<'de> for Bytes64 {
            type Value = [u8; 64];
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a 64-byte signature")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<[u8; 64], E> {
                <[u8; 64]>::try_from(v).map_err(|_| E::invalid_length(v.len(), &self))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<[u8; 64], A::Error> {
                let mut sig = [0u8; 64];
                for (i, b) in sig.iter_mut().enumerate() {
                    *b = seq
                        .next_element()?
                        .ok_or_else(|| de::Error::invalid_length(i, &self))?;
                }
                if seq.next_element::<u8>()?.is_some() {
                    return Err(de::Error::invalid_length(65, &self));
                }
                Ok(sig)
            }
        }
        d.deserialize_bytes(Bytes64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DecodeError, decode, encode, read_frame, write_frame};
    use super::*;
    use ciborium::Value;
    use ed25519_dalek::SigningKey;
    use proptest::prelude::*;

    fn request() -> HeartbeatRequest {
        HeartbeatRequest {
            unformed: None,
            job_id: JobId([7; 32]),
            provider_index: 1,
            ranks: RankSummary {
                running: 4,
                exited: 0,
                gpu_ms: 3_600_000,
                progress: Some(120),
            },
            sent_at_ms: 1_700_000_000_000,
            log: Some(LiveLog {
                cid: vec![0x01, 0x55, 0x12, 0x20, 7, 7, 7],
                offset: 65_536,
                total: 70_000,
            }),
        }
    }

    fn receipt() -> Receipt {
        Receipt {
            job_id: JobId([7; 32]),
            provider_index: 1,
            acknowledged_until_ms: 1_700_000_030_000,
        }
    }

    fn key(i: u8) -> SigningKey {
        SigningKey::from_bytes(&[i; 32])
    }

    fn frame(body: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        futures::executor::block_on(write_frame(
            &mut futures::io::Cursor::new(&mut out),
            body,
            1 << 20,
        ))
        .expect("writes to a Vec");
        out
    }

    fn read<T: serde::de::DeserializeOwned + Bounded>(bytes: &[u8]) -> std::io::Result<T> {
        futures::executor::block_on(read_frame(
            &mut futures::io::Cursor::new(bytes),
            MAX_HEARTBEAT_BYTES,
        ))
    }

    fn cbor(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(v, &mut out).expect("writes to a Vec");
        out
    }

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn requests_and_every_response_round_trip_through_frames() {
        let req = request();
        assert_eq!(read::<HeartbeatRequest>(&frame(encode(&req))).unwrap(), req);
        let responses = [
            HeartbeatResponse::Receipt(SignedReceipt::sign(&receipt(), &key(1))),
            HeartbeatResponse::Refused(HeartbeatRefusal::UnknownJob),
            HeartbeatResponse::Refused(HeartbeatRefusal::PastDeadline { deadline_ms: 9 }),
            HeartbeatResponse::Refused(HeartbeatRefusal::RanksNotRunning {
                running: 1,
                expected: 4,
            }),
            HeartbeatResponse::Refused(HeartbeatRefusal::ProgressWentBack {
                acknowledged_gpu_ms: u64::MAX,
                reported_gpu_ms: 0,
            }),
            HeartbeatResponse::Refused(HeartbeatRefusal::TooEarly { retry_at_ms: 5 }),
            HeartbeatResponse::Refused(HeartbeatRefusal::NotHealthy),
            HeartbeatResponse::RateLimited,
        ];
        for resp in responses {
            assert_eq!(
                read::<HeartbeatResponse>(&frame(encode(&resp))).unwrap(),
                resp
            );
        }
    }

    #[test]
    fn the_largest_messages_fit_the_cap_with_room_to_spare() {
        let req = HeartbeatRequest {
            job_id: JobId([0xff; 32]),
            provider_index: u64::MAX,
            ranks: RankSummary {
                running: u32::MAX,
                exited: u32::MAX,
                gpu_ms: u64::MAX,
                progress: Some(u64::MAX),
            },
            sent_at_ms: u64::MAX,
            log: None,
            unformed: None,
        };
        let resp = HeartbeatResponse::Receipt(SignedReceipt {
            receipt: Receipt {
                job_id: JobId([0xff; 32]),
                provider_index: u64::MAX,
                acknowledged_until_ms: u64::MAX,
            },
            signature: [0xff; 64],
            usage: None,
        });
        let refusal = HeartbeatResponse::Refused(HeartbeatRefusal::ProgressWentBack {
            acknowledged_gpu_ms: u64::MAX,
            reported_gpu_ms: u64::MAX,
        });
        for len in [
            encode(&req).len(),
            encode(&resp).len(),
            encode(&refusal).len(),
        ] {
            assert!(len < 300, "{len} bytes");
        }
        // A service's receipt with its usage, every count at its largest.
        let HeartbeatResponse::Receipt(widest) = &resp else {
            panic!("a receipt")
        };
        let with_usage = HeartbeatResponse::Receipt(SignedReceipt {
            usage: Some(SignedUsage {
                usage: ServedUsage {
                    requests: u64::MAX,
                    failed: u64::MAX,
                    bytes_in: u64::MAX,
                    bytes_out: u64::MAX,
                },
                signature: [0xff; 64],
            }),
            ..widest.clone()
        });
        let len = encode(&with_usage).len();
        assert!(len < 480, "{len} bytes");
        assert_eq!(
            read::<HeartbeatResponse>(&frame(encode(&with_usage))).unwrap(),
            with_usage
        );
        // With the largest live log: the longest CID this node parses (`cid::Cid`: every
        // varint at its widest, a 64-byte digest) and every number at its largest.
        let digest = cid::multihash::Multihash::<64>::wrap(u64::MAX, &[0xff; 64]).expect("fits");
        let widest = cid::Cid::new_v1(u64::MAX, digest).to_bytes();
        assert!(widest.len() > 80, "{} bytes", widest.len());
        let with_log = HeartbeatRequest {
            log: Some(LiveLog {
                cid: widest,
                offset: u64::MAX,
                total: u64::MAX,
            }),
            ..req.clone()
        };
        let len = encode(&with_log).len();
        assert!(len < 350, "{len} bytes");
        // The report of a network that did not form, at its widest (sent without a log).
        let unformed = HeartbeatRequest {
            unformed: Some(Unformed {
                unreachable: vec![u64::MAX; MAX_UNFORMED_RANKS],
            }),
            ..req.clone()
        };
        let len = encode(&unformed).len();
        assert!(len < MAX_HEARTBEAT_BYTES, "{len} bytes");
        assert_eq!(
            read::<HeartbeatRequest>(&frame(encode(&unformed))).unwrap(),
            unformed
        );
        assert!(len < MAX_HEARTBEAT_BYTES);
        assert_eq!(
            read::<HeartbeatRequest>(&frame(encode(&with_log))).unwrap(),
            with_log
        );
    }

    /// A heartbeat of a provider from before live logs (no `log` key) decodes, as `None`; the
    /// CID travels as a CBOR byte string.
    #[test]
    fn heartbeats_without_a_live_log_still_decode_and_the_cid_is_a_byte_string() {
        let mut old = cbor_of(&request());
        if let Value::Map(m) = &mut old {
            m.retain(|(k, _)| k != &text("log"));
        }
        let decoded = decode::<HeartbeatRequest>(&cbor(&old), MAX_HEARTBEAT_BYTES).unwrap();
        assert_eq!(
            decoded,
            HeartbeatRequest {
                log: None,
                ..request()
            }
        );
        let Value::Map(m) = cbor_of(&request()) else {
            panic!("a map")
        };
        let (_, log) = m
            .iter()
            .find(|(k, _)| k == &text("log"))
            .expect("the log key");
        let Value::Map(fields) = log else {
            panic!("a map: {log:?}")
        };
        assert!(
            fields.iter().any(|(k, v)| k == &text("cid")
                && v == &Value::Bytes(vec![1, 0x55, 0x12, 0x20, 7, 7, 7])),
            "{fields:?}"
        );
    }

    #[test]
    fn an_oversized_frame_is_refused() {
        // A request padded with an unknown field past the cap: refused on its length prefix.
        let padded = Value::Map(vec![
            (text("job_id"), text(&"07".repeat(32))),
            (text("provider_index"), Value::Integer(1.into())),
            (text("padding"), Value::Bytes(vec![0; MAX_HEARTBEAT_BYTES])),
        ]);
        let err = read::<HeartbeatRequest>(&frame(cbor(&padded))).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("more than"), "{err}");
        assert!(matches!(
            decode::<HeartbeatRequest>(&cbor(&padded), MAX_HEARTBEAT_BYTES),
            Err(DecodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn garbled_messages_are_refused() {
        let bytes = encode(&request());
        for cut in 0..bytes.len() {
            assert!(decode::<HeartbeatRequest>(&bytes[..cut], MAX_HEARTBEAT_BYTES).is_err());
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            decode::<HeartbeatRequest>(&trailing, MAX_HEARTBEAT_BYTES),
            Err(DecodeError::Trailing(1))
        ));
        // A negative provider index, a text where a number goes.
        let mut wrong = cbor_of(&request());
        set(&mut wrong, "provider_index", Value::Integer((-1).into()));
        assert!(decode::<HeartbeatRequest>(&cbor(&wrong), MAX_HEARTBEAT_BYTES).is_err());
        set(&mut wrong, "provider_index", text("1"));
        assert!(decode::<HeartbeatRequest>(&cbor(&wrong), MAX_HEARTBEAT_BYTES).is_err());
        // A missing field.
        let mut missing = cbor_of(&request());
        if let Value::Map(m) = &mut missing {
            m.retain(|(k, _)| k != &text("ranks"));
        }
        assert!(decode::<HeartbeatRequest>(&cbor(&missing), MAX_HEARTBEAT_BYTES).is_err());
    }

    #[test]
    fn a_signature_of_the_wrong_length_is_refused() {
        for len in [0, 63, 65] {
            let mut resp = cbor_of(&HeartbeatResponse::Receipt(SignedReceipt::sign(
                &receipt(),
                &key(1),
            )));
            let Value::Map(outer) = &mut resp else {
                panic!("a map")
            };
            set(&mut outer[0].1, "signature", Value::Bytes(vec![1; len]));
            assert!(
                matches!(
                    decode::<HeartbeatResponse>(&cbor(&resp), MAX_HEARTBEAT_BYTES),
                    Err(DecodeError::Cbor(_))
                ),
                "{len}-byte signature"
            );
        }
    }

    #[test]
    fn later_revisions_decode_unknown_fields_ignored_and_unknown_refusals_as_unrecognised() {
        let mut extended = cbor_of(&request());
        set(&mut extended, "rank_temperatures_c", Value::Array(vec![]));
        assert_eq!(
            decode::<HeartbeatRequest>(&cbor(&extended), MAX_HEARTBEAT_BYTES).unwrap(),
            request()
        );
        let mut no_progress = cbor_of(&request());
        if let Value::Map(m) = &mut no_progress {
            for (k, v) in m.iter_mut() {
                if k == &text("ranks")
                    && let Value::Map(r) = v
                {
                    r.retain(|(k, _)| k != &text("progress"));
                }
            }
        }
        let decoded = decode::<HeartbeatRequest>(&cbor(&no_progress), MAX_HEARTBEAT_BYTES).unwrap();
        assert_eq!(decoded.ranks.progress, None);
        let future = Value::Map(vec![(
            text("Refused"),
            Value::Map(vec![
                (text("refusal"), text("GpuOnFire")),
                (text("temperature_c"), Value::Integer(120.into())),
            ]),
        )]);
        assert_eq!(
            decode::<HeartbeatResponse>(&cbor(&future), MAX_HEARTBEAT_BYTES).unwrap(),
            HeartbeatResponse::Refused(HeartbeatRefusal::Unrecognised)
        );
    }

    #[test]
    fn a_signed_receipt_verifies_for_its_job_and_index_only() {
        let signed = SignedReceipt::sign(&receipt(), &key(1));
        let receipt_key = key(1).verifying_key().to_bytes();
        assert_eq!(
            signed.verify(&receipt_key, JobId([7; 32]), 1).unwrap(),
            receipt()
        );
        ganglion_contracts::v2::signed::verify(
            &receipt_key,
            &receipt().signed_bytes(),
            &signed.signature,
        )
        .expect("the contracts' check agrees");
        assert!(matches!(
            signed.verify(&key(2).verifying_key().to_bytes(), JobId([7; 32]), 1),
            Err(ReceiptError::BadSignature(_))
        ));
        assert!(matches!(
            signed.verify(&receipt_key, JobId([8; 32]), 1),
            Err(ReceiptError::WrongJob { .. })
        ));
        assert!(matches!(
            signed.verify(&receipt_key, JobId([7; 32]), 0),
            Err(ReceiptError::WrongProvider { asked: 0, got: 1 })
        ));
        let mut stretched = signed.clone();
        stretched.receipt.acknowledged_until_ms += 1;
        assert!(matches!(
            stretched.verify(&receipt_key, JobId([7; 32]), 1),
            Err(ReceiptError::BadSignature(_))
        ));
    }

    #[test]
    fn a_receipts_usage_verifies_for_its_receipt_and_key_only() {
        let served = ServedUsage {
            requests: 721,
            failed: 2,
            bytes_in: 30_000,
            bytes_out: 2_100_000,
        };
        let signed = SignedReceipt::sign_with_usage(&receipt(), served, &key(1));
        let receipt_key = key(1).verifying_key().to_bytes();
        assert_eq!(
            signed.verify(&receipt_key, JobId([7; 32]), 1).unwrap(),
            receipt()
        );
        assert_eq!(signed.usage.map(|u| u.usage), Some(served));
        // The receipt's own signature is the one the escrow checks, unchanged by the usage.
        assert_eq!(
            signed.signature,
            SignedReceipt::sign(&receipt(), &key(1)).signature
        );
        // Counts changed after signing, moved to another receipt, or signed by another key.
        let mut inflated = signed.clone();
        if let Some(u) = &mut inflated.usage {
            u.usage.requests += 1;
        }
        assert!(matches!(
            inflated.verify(&receipt_key, JobId([7; 32]), 1),
            Err(ReceiptError::BadUsageSignature(_))
        ));
        let later = Receipt {
            acknowledged_until_ms: receipt().acknowledged_until_ms + 30_000,
            ..receipt()
        };
        let moved = SignedReceipt {
            usage: signed.usage,
            ..SignedReceipt::sign(&later, &key(1))
        };
        assert!(matches!(
            moved.verify(&receipt_key, JobId([7; 32]), 1),
            Err(ReceiptError::BadUsageSignature(_))
        ));
        let foreign = SignedReceipt {
            usage: SignedReceipt::sign_with_usage(&receipt(), served, &key(2)).usage,
            ..signed.clone()
        };
        assert!(matches!(
            foreign.verify(&receipt_key, JobId([7; 32]), 1),
            Err(ReceiptError::BadUsageSignature(_))
        ));
        // A usage signature is never a receipt's: the statement is constructor 1, and the
        // usage's signature does not verify as the receipt's.
        let as_receipt = SignedReceipt {
            signature: signed.usage.expect("usage").signature,
            usage: None,
            ..signed.clone()
        };
        assert!(matches!(
            as_receipt.verify(&receipt_key, JobId([7; 32]), 1),
            Err(ReceiptError::BadSignature(_))
        ));
    }

    /// A receipt from before usage (no `usage` key) decodes as `None`, and a batch job's
    /// receipt is written without the key.
    #[test]
    fn receipts_without_usage_decode_and_are_written_without_the_key() {
        let plain = HeartbeatResponse::Receipt(SignedReceipt::sign(&receipt(), &key(1)));
        let Value::Map(outer) = cbor_of(&plain) else {
            panic!("a map")
        };
        let Value::Map(fields) = &outer[0].1 else {
            panic!("a map")
        };
        assert!(
            !fields.iter().any(|(k, _)| k == &text("usage")),
            "{fields:?}"
        );
        assert_eq!(
            decode::<HeartbeatResponse>(&encode(&plain), MAX_HEARTBEAT_BYTES).unwrap(),
            plain
        );
    }

    fn cbor_of<T: Serialize>(msg: &T) -> Value {
        ciborium::from_reader(encode(msg).as_slice()).expect("our own CBOR")
    }

    /// Sets (or adds) `key` in a CBOR map.
    fn set(map: &mut Value, key: &str, value: Value) {
        let Value::Map(entries) = map else {
            panic!("not a map: {map:?}")
        };
        match entries.iter_mut().find(|(k, _)| k == &text(key)) {
            Some((_, v)) => *v = value,
            None => entries.push((text(key), value)),
        }
    }

    proptest! {
        #[test]
        fn heartbeats_and_receipts_round_trip(
            job in any::<[u8; 32]>(), index in any::<u64>(), running in any::<u32>(),
            exited in any::<u32>(), gpu_ms in any::<u64>(), progress in any::<Option<u64>>(),
            at in any::<u64>(), sig in proptest::collection::vec(any::<u8>(), 64),
            log in proptest::option::of((proptest::collection::vec(any::<u8>(), 0..90), any::<u64>(), any::<u64>())),
            unreachable in proptest::option::of(proptest::collection::vec(any::<u64>(), 0..4)),
        ) {
            let req = HeartbeatRequest {
                job_id: JobId(job),
                provider_index: index,
                ranks: RankSummary { running, exited, gpu_ms, progress },
                sent_at_ms: at,
                log: log.map(|(cid, offset, total)| LiveLog { cid, offset, total }),
                unformed: unreachable.map(|unreachable| Unformed { unreachable }),
            };
            prop_assert_eq!(decode::<HeartbeatRequest>(&encode(&req), MAX_HEARTBEAT_BYTES).unwrap(), req);
            let mut signature = [0; 64];
            signature.copy_from_slice(&sig);
            let resp = HeartbeatResponse::Receipt(SignedReceipt {
                receipt: Receipt { job_id: JobId(job), provider_index: index, acknowledged_until_ms: at },
                signature,
                usage: (gpu_ms % 2 == 0).then_some(SignedUsage {
                    usage: ServedUsage { requests: gpu_ms, failed: at, bytes_in: index, bytes_out: gpu_ms },
                    signature,
                }),
            });
            prop_assert_eq!(decode::<HeartbeatResponse>(&encode(&resp), MAX_HEARTBEAT_BYTES).unwrap(), resp);
            let refusal = HeartbeatResponse::Refused(HeartbeatRefusal::ProgressWentBack {
                acknowledged_gpu_ms: gpu_ms, reported_gpu_ms: at,
            });
            prop_assert_eq!(decode::<HeartbeatResponse>(&encode(&refusal), MAX_HEARTBEAT_BYTES).unwrap(), refusal);
        }

        #[test]
        fn garbage_never_panics_the_heartbeat_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let _ = decode::<HeartbeatRequest>(&bytes, MAX_HEARTBEAT_BYTES);
            let _ = decode::<HeartbeatResponse>(&bytes, MAX_HEARTBEAT_BYTES);
            let _ = read::<HeartbeatRequest>(&bytes);
            let _ = read::<HeartbeatResponse>(&bytes);
        }
    }
}
