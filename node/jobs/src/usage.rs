//! What a service's replicas served, signed with their receipts (issue #24 "pay by use"): the
//! receipts pay GPU time (DESIGN §3.2); these counts let the bill be read per request.
//!
//! - **Orchestrator**: its gateway reports each routed replica's cumulative counts and health
//!   ([`record`], from `EngineHandle::served`); a replica not healthy there gets no receipt
//!   ([`healthy`]: one that never answers is paid at most one interval), and each receipt
//!   for a healthy one carries its counts,
//!   signed by the receipt key ([`to_sign`], [`ganglion_p2p::protocols::SignedUsage`]). What
//!   was signed is kept in the job store, so a restarted node (whose gateway counts from zero
//!   again) goes on from it and never signs less than it signed before.
//! - **Provider**: keeps the usage with its best receipt; when its replica ends it attests it,
//!   one line appended to its log ([`line`]) next to the container's, so the orchestrator's
//!   signature reaches every auditor under the provider's attestation ([`parse`], the audit's
//!   `usage[i]` check).

use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::signed::Receipt;
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::store::Kv;
use ganglion_p2p::protocols::{ServedUsage, SignedReceipt, SignedUsage};
use serde::{Deserialize, Serialize};

use super::engine::Ctx;
use super::store::{JobStore, StoreError};

/// The prefix of the attested usage line in a replica's log.
pub const PREFIX: &str = "[ganglion] usage: ";

/// A routed replica as the orchestrator's gateway sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtGateway {
    /// What it served so far (cumulative since this process began routing it).
    pub usage: ServedUsage,
    /// Whether it takes requests: it passed its last health check and no request failed to
    /// reach it since.
    pub healthy: bool,
}

/// Orchestrator: replica `index` of `job` as the gateway sees it now.
pub(crate) fn record<S: Kv, E: Executor>(ctx: &Ctx<S, E>, job: JobId, index: u64, at: AtGateway) {
    ctx.served
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert((job, index), at);
}

/// Orchestrator: whether `job`'s replica `index` is healthy at this node's gateway — `None`
/// when this node routes no service (no gateway: its receipts do not depend on health), else
/// `Some(false)` for a replica the gateway does not route yet.
pub(crate) fn healthy<S: Kv, E: Executor>(ctx: &Ctx<S, E>, job: JobId, index: u64) -> Option<bool> {
    if !ctx.gateway.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    Some(
        ctx.served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(job, index))
            .is_some_and(|at| at.healthy),
    )
}

/// Orchestrator: the usage to sign with a receipt for `job`'s assignment `index`, and keeps it
/// as signed: what this process's gateway counted on top of what was signed before it started
/// (every count at least what was signed last). `None` when nothing was ever counted for it
/// (not a routed service's replica).
///
/// # Errors
/// Store errors.
pub(crate) fn to_sign<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: JobId,
    index: u64,
) -> Result<Option<ServedUsage>, StoreError> {
    let signed = ctx.store.usage_signed(&job, index)?;
    let mut base = ctx.served_base.lock().unwrap_or_else(|p| p.into_inner());
    let counted = ctx
        .served
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&(job, index))
        .map(|at| at.usage);
    let usage = match (counted, signed) {
        (None, None) => return Ok(None),
        (None, Some(s)) => s,
        (Some(c), s) => {
            // What was signed before this process counted anything.
            let from = *base.entry((job, index)).or_insert(s.unwrap_or_default());
            at_least(plus(from, c), s.unwrap_or_default())
        }
    };
    if Some(usage) != signed {
        ctx.store.put_usage_signed(&job, index, &usage)?;
    }
    Ok(Some(usage))
}

fn plus(a: ServedUsage, b: ServedUsage) -> ServedUsage {
    ServedUsage {
        requests: a.requests.saturating_add(b.requests),
        failed: a.failed.saturating_add(b.failed),
        bytes_in: a.bytes_in.saturating_add(b.bytes_in),
        bytes_out: a.bytes_out.saturating_add(b.bytes_out),
    }
}

fn at_least(a: ServedUsage, floor: ServedUsage) -> ServedUsage {
    ServedUsage {
        requests: a.requests.max(floor.requests),
        failed: a.failed.max(floor.failed),
        bytes_in: a.bytes_in.max(floor.bytes_in),
        bytes_out: a.bytes_out.max(floor.bytes_out),
    }
}

/// A usage line as attested in a replica's log: the statement's counts, the receipt's moment
/// they run to, and the orchestrator's signature (hex). JSON after [`PREFIX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attested {
    /// The receipt's `acknowledged_until_ms` the counts run to, POSIX ms.
    pub acknowledged_until_ms: u64,
    /// The counts.
    #[serde(flatten)]
    pub usage: ServedUsage,
    /// ed25519 signature by the escrow's receipt key over the
    /// [`ganglion_contracts::v2::signed::UsageStatement`] (hex, 128 digits).
    #[serde(with = "hex_signature")]
    pub signature: [u8; 64],
}

impl Attested {
    /// The usage a provider's best receipt carries, as attested.
    pub fn of(receipt: &SignedReceipt) -> Option<Self> {
        receipt.usage.map(|u| Attested {
            acknowledged_until_ms: receipt.receipt.acknowledged_until_ms,
            usage: u.usage,
            signature: u.signature,
        })
    }

    /// Checks the orchestrator's signature for `job`'s assignment `index` under `receipt_key`.
    ///
    /// # Errors
    /// The signature does not verify.
    pub fn verify(
        &self,
        receipt_key: &[u8; 32],
        job: JobId,
        index: u64,
    ) -> Result<(), ganglion_contracts::Error> {
        SignedUsage {
            usage: self.usage,
            signature: self.signature,
        }
        .verify(
            receipt_key,
            &Receipt {
                job_id: job,
                provider_index: index,
                acknowledged_until_ms: self.acknowledged_until_ms,
            },
        )
    }
}

/// The line a provider appends to its replica's log for `attested`.
pub fn line(attested: &Attested) -> String {
    // Serialising plain numbers and a hex string cannot fail.
    let json = serde_json::to_string(attested).unwrap_or_default();
    format!("{PREFIX}{json}\n")
}

/// The usage line the provider appended to `log`: its last line, or the last before the
/// node's own notes that follow it (a failure note, [`super::failure_note`]). `None` when the
/// log does not end so (a line the container printed earlier is not read); an error when it
/// does not parse.
pub fn parse(log: &[u8]) -> Option<Result<Attested, String>> {
    let text = String::from_utf8_lossy(log);
    let last = text
        .lines()
        .rev()
        .find(|l| l.starts_with(PREFIX) || !l.starts_with(super::failure_note::PREFIX))?;
    let json = last.strip_prefix(PREFIX)?;
    Some(serde_json::from_str(json).map_err(|e| format!("the usage line: {e}")))
}

mod hex_signature {
    use serde::{Deserialize, Deserializer, Serializer, de};

    pub(super) fn serialize<S: Serializer>(sig: &[u8; 64], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(sig))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 64], D::Error> {
        let text = String::deserialize(d)?;
        let bytes = hex::decode(&text).map_err(de::Error::custom)?;
        <[u8; 64]>::try_from(bytes.as_slice())
            .map_err(|_| de::Error::invalid_length(bytes.len(), &"64 bytes"))
    }
}

const TREE: &str = "usage_signed";

fn key(job: &JobId, index: u64) -> Vec<u8> {
    let mut k = job.0.to_vec();
    k.extend_from_slice(&index.to_be_bytes());
    k
}

impl JobStore {
    /// Orchestrator: keeps `usage` as the last signed for `job`'s assignment `index` (flushed:
    /// survives `kill -9`).
    ///
    /// # Errors
    /// Store errors.
    pub fn put_usage_signed(
        &self,
        job: &JobId,
        index: u64,
        usage: &ServedUsage,
    ) -> Result<(), StoreError> {
        let b = self.backend();
        b.insert(TREE, &key(job, index), serde_json::to_vec(usage)?)?;
        b.flush()
    }

    /// Orchestrator: the usage last signed for `job`'s assignment `index`.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn usage_signed(&self, job: &JobId, index: u64) -> Result<Option<ServedUsage>, StoreError> {
        self.backend()
            .get(TREE, &key(job, index))?
            .map(|v| Ok(serde_json::from_slice(&v)?))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    fn counts(requests: u64) -> ServedUsage {
        ServedUsage {
            requests,
            failed: 1,
            bytes_in: requests * 40,
            bytes_out: requests * 1500,
        }
    }

    fn signed(key: &SigningKey, index: u64, usage: ServedUsage) -> SignedReceipt {
        SignedReceipt::sign_with_usage(
            &Receipt {
                job_id: JobId([3; 32]),
                provider_index: index,
                acknowledged_until_ms: 1_700_000_060_000,
            },
            usage,
            key,
        )
    }

    #[test]
    fn an_attested_line_parses_back_and_verifies_for_its_job_and_index_only() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let receipt_key = key.verifying_key().to_bytes();
        let attested = Attested::of(&signed(&key, 1, counts(721))).expect("usage");
        let log = format!("model loaded\nserving on :8000\n{}", line(&attested));
        let back = parse(log.as_bytes()).expect("a line").expect("parses");
        assert_eq!(back, attested);
        back.verify(&receipt_key, JobId([3; 32]), 1)
            .expect("the orchestrator's signature");
        assert!(back.verify(&receipt_key, JobId([3; 32]), 0).is_err());
        assert!(back.verify(&receipt_key, JobId([4; 32]), 1).is_err());
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key().to_bytes();
        assert!(back.verify(&other, JobId([3; 32]), 1).is_err());
        let inflated = Attested {
            usage: counts(722),
            ..back
        };
        assert!(inflated.verify(&receipt_key, JobId([3; 32]), 1).is_err());
    }

    #[test]
    fn only_the_line_at_the_logs_end_counts_and_a_garbled_one_is_an_error_not_none() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let early = Attested::of(&signed(&key, 0, counts(5))).expect("usage");
        let late = Attested::of(&signed(&key, 0, counts(50))).expect("usage");
        let log = format!("{}x\n{}", line(&early), line(&late));
        assert_eq!(parse(log.as_bytes()), Some(Ok(late)));
        // A failure note after it (a replica that failed) is skipped.
        let noted = format!(
            "{log}{}",
            crate::failure_note::line(Some(0), "rank 0 exited with code 1")
        );
        assert_eq!(parse(noted.as_bytes()), Some(Ok(late)));
        // A line the container printed before more of its own output is not the provider's.
        let printed = format!("{}serving\n", line(&early));
        assert_eq!(parse(printed.as_bytes()), None);
        assert_eq!(parse(b"no usage here\n"), None);
        let garbled = format!("{PREFIX}{{\"requests\": \"many\"}}\n");
        assert!(parse(garbled.as_bytes()).expect("a line").is_err());
    }

    #[test]
    fn a_receipt_without_usage_attests_none() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let plain = SignedReceipt::sign(
            &Receipt {
                job_id: JobId([3; 32]),
                provider_index: 0,
                acknowledged_until_ms: 1,
            },
            &key,
        );
        assert_eq!(Attested::of(&plain), None);
    }

    #[test]
    fn what_was_signed_is_kept_per_assignment() {
        let store = JobStore::in_memory();
        let job = JobId([3; 32]);
        assert_eq!(store.usage_signed(&job, 2).expect("read"), None);
        store
            .put_usage_signed(&job, 2, &counts(10))
            .expect("written");
        assert_eq!(store.usage_signed(&job, 2).expect("read"), Some(counts(10)));
        assert_eq!(store.usage_signed(&job, 1).expect("read"), None);
    }

    #[test]
    fn counts_add_to_what_was_signed_before_and_never_go_back() {
        let before = counts(100);
        assert_eq!(plus(before, counts(3)).requests, 103);
        let reset = ServedUsage::default();
        assert_eq!(at_least(plus(reset, reset), before), before);
    }
}
