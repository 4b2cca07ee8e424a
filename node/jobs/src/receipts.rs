//! Receipts under escrow v2 (DESIGN §3.1 G1–G3, §3.2 "Receipts"; `docs/escrow-v2.md`): the
//! orchestrator's signed acknowledgements of a provider's work, the rules both sides follow
//! with them, and the provider's best receipt in the job store (its `receipts` tree, keyed by
//! job id, the signed receipt's JSON).
//!
//! - The **orchestrator** signs `Receipt{job_id, provider_index, acknowledged_until}` with the
//!   escrow's receipt key once per receipt interval while it sees that provider's ranks alive
//!   ([`acknowledge`]). It never acknowledges past the deadline nor before the assign.
//! - The **provider** keeps the best receipt it was given ([`take`]: checked against the escrow's
//!   terms and receipt key, kept only when it acknowledges more), stops its containers when the
//!   orchestrator has been silent for the agreed number of intervals or the deadline comes
//!   ([`Liveness::must_stop`]), and claims at most what the validator will pay
//!   ([`claimable_gpu_ms`]): a claim above the on-chain bound can only fail.
//!
//! Each side risks at most one interval of pay to a cheat (G2): the provider works at most
//! `missed_limit` intervals past its last receipt and is paid for one of them; the
//! orchestrator pays at most one interval past what it acknowledged.
//!
//! Units: times POSIX ms, intervals ms, GPU time GPU-milliseconds.

use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::rules;
use ganglion_contracts::v2::signed::Receipt;
pub use ganglion_p2p::protocols::{ReceiptError, SignedReceipt};

use super::store::{JobStore, StoreError};

/// What both sides read from the v2 escrow about one provider's assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    /// The job.
    pub job_id: JobId,
    /// Index of the provider's assignment in the escrow datum.
    pub provider_index: u64,
    /// GPUs of the assignment.
    pub gpus: u64,
    /// When the assignment's paid window starts, POSIX ms: the validity lower bound of the
    /// transaction that added it (the assign, or a later rescale of a service).
    pub started_at_ms: u64,
    /// When the assignment's paid window ends, POSIX ms: the escrow's deadline, or earlier when
    /// the orchestrator released the provider (a service scaled down). No GPU time after it
    /// is receipted, run or paid.
    pub until_ms: u64,
    /// The escrow's receipt interval, ms (> 0 on-chain).
    pub receipt_interval_ms: u64,
    /// The escrow's ed25519 receipt verification key (the orchestrator's).
    pub receipt_key: [u8; 32],
}

impl Terms {
    /// The terms of assignment `provider_index` of the assigned escrow `view`; `None` before
    /// the assign or for an index it does not have.
    pub fn of(view: &ganglion_indexer::JobView, provider_index: u64) -> Option<Self> {
        let a = view
            .assignments
            .get(usize::try_from(provider_index).ok()?)?;
        let r = view.receipts;
        Some(Self {
            job_id: view.job_id,
            provider_index,
            gpus: a.gpus,
            started_at_ms: a.started_at_ms,
            until_ms: a.until_ms,
            receipt_interval_ms: r.interval_ms,
            receipt_key: r.key,
        })
    }
}

/// Why the orchestrator withholds a receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Withheld {
    /// The assignment is not on chain yet (or `now` is before it).
    #[error("the assignment has not started")]
    NotStarted,
    /// The deadline has passed: nothing more is acknowledged.
    #[error("the deadline has passed")]
    PastDeadline,
    /// The provider's ranks are not all seen running.
    #[error("the provider's ranks are not seen running")]
    NotRunning,
}

/// Provider side: takes `new` if it belongs to `terms`' assignment, verifies under the
/// receipt key and acknowledges more than `held`. Returns the receipt to keep from now on.
///
/// # Errors
/// [`ReceiptError`] for a foreign (replayed) or forged receipt; `held` stays what it was.
pub fn take(
    terms: &Terms,
    held: Option<SignedReceipt>,
    new: SignedReceipt,
) -> Result<Option<SignedReceipt>, ReceiptError> {
    new.verify(&terms.receipt_key, terms.job_id, terms.provider_index)?;
    Ok(match held {
        Some(h) if acknowledged(&h) >= acknowledged(&new) => Some(h),
        _ => Some(new),
    })
}

/// The POSIX ms a receipt acknowledges.
pub fn acknowledged(r: &SignedReceipt) -> u64 {
    r.receipt.acknowledged_until_ms
}

/// When a provider stops working for a silent orchestrator, and before the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Intervals without a new receipt after which the provider stops (≥ 1).
    pub missed_limit: u32,
    /// How long before the deadline the containers are stopped, ms: time to attest and claim
    /// inside the deadline's accounting.
    pub deadline_margin_ms: u64,
}

/// Why a provider stops its containers early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StopReason {
    /// No new receipt for `missed` intervals.
    #[error("no receipt for {missed} intervals")]
    Silent {
        /// Intervals missed.
        missed: u64,
    },
    /// The end of the assignment's paid window (the deadline, or its release by a rescale),
    /// minus the margin, has come.
    #[error("the paid window's end is near")]
    Deadline,
}

impl Liveness {
    /// Whole intervals elapsed since the last acknowledged moment (the receipt's, or the
    /// assign's when there is none).
    pub fn missed(terms: &Terms, held: Option<&SignedReceipt>, now_ms: u64) -> u64 {
        let since = held.map_or(terms.started_at_ms, acknowledged);
        now_ms.saturating_sub(since) / terms.receipt_interval_ms.max(1)
    }

    /// Whether the provider must stop its containers now, and why.
    pub fn must_stop(
        &self,
        terms: &Terms,
        held: Option<&SignedReceipt>,
        now_ms: u64,
    ) -> Option<StopReason> {
        if now_ms.saturating_add(self.deadline_margin_ms) >= terms.until_ms {
            return Some(StopReason::Deadline);
        }
        let missed = Self::missed(terms, held, now_ms);
        (missed >= u64::from(self.missed_limit.max(1))).then_some(StopReason::Silent { missed })
    }
}

/// Provider side: the GPU-ms to claim, `min(measured, on-chain bound)` where the bound is
/// [`rules::claim_bound_gpu_ms`] for a claim whose validity lower bound is `lower_bound_ms`.
/// Equal measured work gives equal claims (no rounding before the validator's own floor).
pub fn claimable_gpu_ms(
    terms: &Terms,
    held: Option<&SignedReceipt>,
    measured_gpu_ms: u64,
    lower_bound_ms: u64,
) -> u64 {
    measured_gpu_ms.min(rules::claim_bound_gpu_ms(
        terms.gpus,
        terms.started_at_ms,
        terms.until_ms,
        terms.receipt_interval_ms,
        held.map(acknowledged),
        lower_bound_ms,
    ))
}

/// Orchestrator side: the receipt to sign for a provider whose ranks are (`running`) or are
/// not seen alive at `now_ms`: it acknowledges up to `min(now, deadline)`.
///
/// # Errors
/// [`Withheld`]: before the assign, after the deadline, ranks not running.
pub fn acknowledge(terms: &Terms, running: bool, now_ms: u64) -> Result<Receipt, Withheld> {
    if now_ms < terms.started_at_ms {
        return Err(Withheld::NotStarted);
    }
    if now_ms >= terms.until_ms {
        return Err(Withheld::PastDeadline);
    }
    if !running {
        return Err(Withheld::NotRunning);
    }
    Ok(Receipt {
        job_id: terms.job_id,
        provider_index: terms.provider_index,
        acknowledged_until_ms: now_ms,
    })
}

const TREE: &str = "receipts";

impl JobStore {
    /// Keeps `receipt` as the provider's best for its job (replacing the earlier one) and
    /// flushes: on return it survives `kill -9`, so a restarted provider claims with it.
    ///
    /// # Errors
    /// Store errors.
    pub fn put_receipt(&self, receipt: &SignedReceipt) -> Result<(), StoreError> {
        let b = self.backend();
        b.insert(
            TREE,
            &receipt.receipt.job_id.0,
            serde_json::to_vec(receipt)?,
        )?;
        b.flush()
    }

    /// The best receipt held for `job`.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn receipt(&self, job: &JobId) -> Result<Option<SignedReceipt>, StoreError> {
        self.backend()
            .get(TREE, &job.0)?
            .map(|v| Ok(serde_json::from_slice(&v)?))
            .transpose()
    }

    /// Drops `job`'s receipt (its claim is on chain).
    ///
    /// # Errors
    /// Store errors.
    pub fn forget_receipt(&self, job: &JobId) -> Result<(), StoreError> {
        self.backend().remove(TREE, &job.0)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;
    use proptest::prelude::*;

    use crate::store::conformance::{Backing, on_both_backends};

    const INTERVAL: u64 = 10_000;

    fn orchestrator_key() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    fn terms() -> Terms {
        Terms {
            job_id: JobId([1; 32]),
            provider_index: 1,
            gpus: 2,
            started_at_ms: 1_000_000,
            until_ms: 1_000_000 + 600_000,
            receipt_interval_ms: INTERVAL,
            receipt_key: orchestrator_key().verifying_key().to_bytes(),
        }
    }

    fn receipt_at(t: &Terms, at_ms: u64) -> SignedReceipt {
        SignedReceipt::sign(
            &acknowledge(t, true, at_ms).expect("acknowledged"),
            &orchestrator_key(),
        )
    }

    #[test]
    fn the_provider_keeps_the_receipt_that_acknowledges_most() {
        let t = terms();
        let early = receipt_at(&t, t.started_at_ms + INTERVAL);
        let late = receipt_at(&t, t.started_at_ms + 3 * INTERVAL);
        let held = take(&t, None, late.clone()).expect("taken");
        assert_eq!(held.as_ref(), Some(&late));
        // An older receipt delivered late does not lower what is held.
        assert_eq!(take(&t, held, early).expect("checked"), Some(late));
    }

    #[test]
    fn replayed_and_forged_receipts_are_refused_and_change_nothing() {
        let t = terms();
        let good = receipt_at(&t, t.started_at_ms + INTERVAL);
        // Another job's receipt, validly signed by the same orchestrator: a replay.
        let other_job = Terms {
            job_id: JobId([2; 32]),
            ..t
        };
        let replay = receipt_at(&other_job, t.started_at_ms + 5 * INTERVAL);
        assert!(matches!(
            take(&t, Some(good.clone()), replay),
            Err(ReceiptError::WrongJob { .. })
        ));
        // Another provider's index in the same job.
        let other_index = Terms {
            provider_index: 0,
            ..t
        };
        let theirs = receipt_at(&other_index, t.started_at_ms + 5 * INTERVAL);
        assert!(matches!(
            take(&t, Some(good.clone()), theirs),
            Err(ReceiptError::WrongProvider { .. })
        ));
        // Signed by someone else (a co-provider posing as the orchestrator).
        let forged = SignedReceipt::sign(
            &acknowledge(&t, true, t.started_at_ms + 5 * INTERVAL).expect("ack"),
            &SigningKey::from_bytes(&[9; 32]),
        );
        assert!(matches!(
            take(&t, Some(good.clone()), forged),
            Err(ReceiptError::BadSignature(_))
        ));
        // A receipt with its acknowledged time raised after signing.
        let mut raised = good.clone();
        raised.receipt.acknowledged_until_ms += INTERVAL;
        assert!(matches!(
            take(&t, None, raised),
            Err(ReceiptError::BadSignature(_))
        ));
    }

    #[test]
    fn the_orchestrator_acknowledges_only_live_ranks_inside_the_window() {
        let t = terms();
        assert_eq!(
            acknowledge(&t, true, t.started_at_ms - 1),
            Err(Withheld::NotStarted)
        );
        assert_eq!(
            acknowledge(&t, false, t.started_at_ms + 1),
            Err(Withheld::NotRunning)
        );
        assert_eq!(
            acknowledge(&t, true, t.until_ms),
            Err(Withheld::PastDeadline)
        );
        let r = acknowledge(&t, true, t.started_at_ms + 1234).expect("ack");
        assert_eq!(r.acknowledged_until_ms, t.started_at_ms + 1234);
        assert_eq!(r.provider_index, t.provider_index);
    }

    #[test]
    fn a_provider_stops_after_the_agreed_silence_and_before_the_deadline() {
        let t = terms();
        let l = Liveness {
            missed_limit: 3,
            deadline_margin_ms: 5_000,
        };
        let r = receipt_at(&t, t.started_at_ms + 4 * INTERVAL);
        let last = acknowledged(&r);
        assert_eq!(l.must_stop(&t, Some(&r), last + 3 * INTERVAL - 1), None);
        assert_eq!(
            l.must_stop(&t, Some(&r), last + 3 * INTERVAL),
            Some(StopReason::Silent { missed: 3 })
        );
        // Without any receipt the silence counts from the assign.
        assert_eq!(
            l.must_stop(&t, None, t.started_at_ms + 3 * INTERVAL),
            Some(StopReason::Silent { missed: 3 })
        );
        // A chatty orchestrator cannot keep the containers past the deadline.
        let fresh = receipt_at(&t, t.until_ms - 6_000);
        assert_eq!(
            l.must_stop(&t, Some(&fresh), t.until_ms - 5_000),
            Some(StopReason::Deadline)
        );
    }

    #[test]
    fn a_claim_never_exceeds_one_interval_past_the_receipt_nor_the_time_elapsed() {
        let t = terms();
        let r = receipt_at(&t, t.started_at_ms + 10 * INTERVAL);
        let lots = u64::MAX / 4;
        // Bounded by receipt + one interval …
        assert_eq!(
            claimable_gpu_ms(&t, Some(&r), lots, t.until_ms),
            t.gpus * 11 * INTERVAL
        );
        // … by the claim's lower bound …
        assert_eq!(
            claimable_gpu_ms(&t, Some(&r), lots, t.started_at_ms + 7 * INTERVAL),
            t.gpus * 7 * INTERVAL
        );
        // … without a receipt, by one interval after the assign …
        assert_eq!(
            claimable_gpu_ms(&t, None, lots, t.until_ms),
            t.gpus * INTERVAL
        );
        // … and never above what was measured.
        assert_eq!(claimable_gpu_ms(&t, Some(&r), 1234, t.until_ms), 1234);
    }

    proptest! {
        /// G2 from the orchestrator's side: whatever a provider measured and whenever it
        /// claims, it is paid at most one interval past the last acknowledged moment.
        #[test]
        fn unacknowledged_pay_is_at_most_one_interval(
            ack in 0u64..600_000,
            measured in 0u64..u64::MAX / 4,
            lower in 0u64..1_200_000,
        ) {
            let t = terms();
            let r = receipt_at(&t, t.started_at_ms + ack.min(599_999));
            let claim = claimable_gpu_ms(&t, Some(&r), measured, t.started_at_ms + lower);
            let since_start = acknowledged(&r) - t.started_at_ms;
            prop_assert!(claim <= t.gpus * (since_start + INTERVAL));
            prop_assert!(claim <= measured);
        }
    }

    on_both_backends!(the_best_receipt_survives_a_reopened_store);

    fn the_best_receipt_survives_a_reopened_store(b: Backing) {
        let t = terms();
        let r = receipt_at(&t, t.started_at_ms + INTERVAL);
        {
            let store = b.open();
            store.put_receipt(&r).expect("put");
        }
        let store = b.open();
        assert_eq!(store.receipt(&t.job_id).expect("get"), Some(r));
        store.forget_receipt(&t.job_id).expect("forget");
        assert_eq!(store.receipt(&t.job_id).expect("get"), None);
    }
}
