//! The `usage[i]` check of a service's claim: the usage line its provider attested in its log
//! ([`crate::usage`]) is the orchestrator's — signed by the escrow's receipt key for this job
//! and assignment — and runs no later than the receipt the claim was paid on; with it the
//! bill reads per request.

use cid::Cid;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::event::ReceiptTerms;

use super::Check;
use super::checks::{fail, pass};
use super::dag;
use super::evidence::Evidence;
use crate::usage::{self, Attested};

/// The check for assignment `i`'s claim, whose attested log is `logs` (binary CID), paid `paid`
/// NTX base units on a receipt acknowledging up to `receipt_until_ms` (`None`: no receipt).
/// `None` when its log carries no usage line (a batch job's share, or a replica nobody
/// routed to) or cannot be read (the `logs_cid[i]` check says why).
pub(super) fn check(
    e: &Evidence,
    terms: &ReceiptTerms,
    i: usize,
    logs: &[u8],
    paid: u64,
    receipt_until_ms: Option<u64>,
) -> Option<Check> {
    let root = Cid::try_from(logs).ok()?;
    let (content, _) = dag::reimport_file(&e.blocks, &root).ok()?;
    let name = format!("usage[{i}]");
    let attested = match usage::parse(&content)? {
        Ok(a) => a,
        Err(why) => return Some(fail(name, why)),
    };
    Some(judge(
        name,
        e.job.job_id,
        terms,
        i,
        &attested,
        paid,
        receipt_until_ms,
    ))
}

fn judge(
    name: String,
    job: JobId,
    terms: &ReceiptTerms,
    i: usize,
    a: &Attested,
    paid: u64,
    receipt_until_ms: Option<u64>,
) -> Check {
    if let Err(err) = a.verify(&terms.key, job, i as u64) {
        return fail(
            name,
            format!("not signed by the escrow's receipt key: {err}"),
        );
    }
    if receipt_until_ms.is_none_or(|r| a.acknowledged_until_ms > r) {
        return fail(
            name,
            format!(
                "counts up to {} ms, past the receipt the claim was paid on ({})",
                a.acknowledged_until_ms,
                receipt_until_ms.map_or("none".into(), |r| format!("{r} ms"))
            ),
        );
    }
    let u = &a.usage;
    let per_request = if u.requests > 0 {
        format!(
            "; {:.1} NTX base units per request",
            paid as f64 / u.requests as f64
        )
    } else {
        String::new()
    };
    pass(
        name,
        format!(
            "{} requests answered, {} failed, {} bytes in, {} bytes out up to {} ms, signed by \
             the escrow's receipt key{per_request}",
            u.requests, u.failed, u.bytes_in, u.bytes_out, a.acknowledged_until_ms
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;
    use ganglion_contracts::v2::signed::Receipt;
    use ganglion_p2p::protocols::{ServedUsage, SignedReceipt};

    const UNTIL: u64 = 1_700_000_060_000;

    fn attested(key: &SigningKey, index: u64, requests: u64) -> Attested {
        let r = SignedReceipt::sign_with_usage(
            &Receipt {
                job_id: JobId([5; 32]),
                provider_index: index,
                acknowledged_until_ms: UNTIL,
            },
            ServedUsage {
                requests,
                failed: 0,
                bytes_in: requests * 40,
                bytes_out: requests * 1500,
            },
            key,
        );
        Attested::of(&r).expect("usage")
    }

    fn terms(key: &SigningKey) -> ReceiptTerms {
        ReceiptTerms {
            key: key.verifying_key().to_bytes(),
            interval_ms: 2_000,
        }
    }

    #[test]
    fn the_orchestrators_usage_passes_with_the_price_per_request() {
        let key = SigningKey::from_bytes(&[1; 32]);
        let c = judge(
            "usage[1]".into(),
            JobId([5; 32]),
            &terms(&key),
            1,
            &attested(&key, 1, 200),
            1_000,
            Some(UNTIL),
        );
        assert!(c.pass, "{c:?}");
        assert!(c.detail.contains("200 requests answered"), "{}", c.detail);
        assert!(
            c.detail.contains("5.0 NTX base units per request"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn usage_forged_moved_or_later_than_the_paid_receipt_fails() {
        let key = SigningKey::from_bytes(&[1; 32]);
        let t = terms(&key);
        let job = JobId([5; 32]);
        // Signed by someone else (the provider inflating its own count).
        let forged = attested(&SigningKey::from_bytes(&[2; 32]), 1, 10_000);
        assert!(!judge("u".into(), job, &t, 1, &forged, 1, Some(UNTIL)).pass);
        // Another assignment's statement attested as this one's.
        assert!(
            !judge(
                "u".into(),
                job,
                &t,
                0,
                &attested(&key, 1, 5),
                1,
                Some(UNTIL)
            )
            .pass
        );
        // Counts edited after signing.
        let mut edited = attested(&key, 1, 5);
        edited.usage.requests = 5_000;
        assert!(!judge("u".into(), job, &t, 1, &edited, 1, Some(UNTIL)).pass);
        // Running past the receipt the claim was paid on, or without one.
        let a = attested(&key, 1, 5);
        assert!(!judge("u".into(), job, &t, 1, &a, 1, Some(UNTIL - 1)).pass);
        assert!(!judge("u".into(), job, &t, 1, &a, 1, None).pass);
        assert!(judge("u".into(), job, &t, 1, &a, 1, Some(UNTIL + 5_000)).pass);
    }
}
