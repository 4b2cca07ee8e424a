//! Retries of claims, cancels and expires that failed before reaching the ledger (point 9: an
//! impossible transaction was rebuilt every 250 ms poll, a provider's log growing to 575 KB in
//! 15 minutes).
//!
//! A failure is [`Class::Fatal`] when the same inputs can never give a valid transaction: the
//! transaction builder refused the request (claims over the escrow, a bad index), the
//! validator would fail it (phase-2 evaluation), it is too large, or the terms cannot be met.
//! The attestations and the escrow do not change by waiting, so such a try is not repeated
//! (until the node restarts). Anything else (chain or p2p unreachable, a UTxO not yet seen or
//! just spent, the wallet short of ADA) is [`Class::Retryable`]: tried again after
//! [`Retries::BASE_MS`] doubling up to [`Retries::CAP_MS`]. Each failure is reported once, as
//! an [`EngineError::Deferred`] naming the reason and when (or whether) it is tried again;
//! the polls in between skip the step silently.

use std::collections::HashMap;
use std::sync::Mutex;

use ganglion_contracts::v2::datum::JobId;

use super::chain::ChainError;
use super::engine::EngineError;
use super::store::TxKind;

/// Whether a failed try can succeed later with the same inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Could succeed later (connection, a UTxO not yet confirmed, wallet funds).
    Retryable,
    /// Cannot succeed with these inputs: not tried again.
    Fatal,
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Retryable => "retryable",
            Self::Fatal => "fatal",
        })
    }
}

/// "tried again in N ms", or "not tried again" for `None` (an error message's words).
pub fn next_try(retry_in_ms: &Option<u64>) -> String {
    match *retry_in_ms {
        Some(ms) => format!("tried again in {ms} ms"),
        None => "not tried again".to_string(),
    }
}

/// The class of `e` (see the module docs).
pub fn classify(e: &EngineError) -> Class {
    use ganglion_contracts::Error as Build;
    match e {
        EngineError::Chain(ChainError::Build(
            Build::InvalidRequest(_)
            | Build::ScriptFailed { .. }
            | Build::MalformedData { .. }
            | Build::BadSignature { .. }
            | Build::ExUnitsTooLarge { .. }
            | Build::TxTooLarge { .. },
        ))
        | EngineError::Terms(_)
        | EngineError::ClaimAboveBound { .. }
        | EngineError::Spec(_) => Class::Fatal,
        EngineError::Deferred { source, .. } => classify(source),
        _ => Class::Retryable,
    }
}

/// Logs a driver step's failure for `job` by its class: one no retry can mend as an error
/// (`retryable = false`), the rest as a warning (`what`: `orchestrator step`, `provider step`).
pub(crate) fn log_step_failure(what: &'static str, job: &JobId, e: &EngineError) {
    match e.retry_class() {
        Class::Fatal => tracing::error!(job = %job, error = %e, retryable = false, "{what}"),
        Class::Retryable => tracing::warn!(job = %job, error = %e, retryable = true, "{what}"),
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    /// POSIX ms before which the step is skipped; `None`: stopped for good.
    next_ms: Option<u64>,
}

/// The retry state of every (job, transaction kind) whose last try failed. In memory: a
/// restarted node tries each once more.
#[derive(Debug, Default)]
pub struct Retries {
    entries: Mutex<HashMap<(JobId, TxKind), Entry>>,
}

impl Retries {
    /// First delay after a retryable failure, ms.
    pub const BASE_MS: u64 = 1_000;
    /// Longest delay between tries, ms.
    pub const CAP_MS: u64 = 60_000;

    /// Whether `kind` for `job` may be tried at `now_ms` (POSIX ms).
    pub fn due(&self, job: &JobId, kind: TxKind, now_ms: u64) -> bool {
        self.lock()
            .get(&(*job, kind))
            .is_none_or(|e| e.next_ms.is_some_and(|next| now_ms >= next))
    }

    /// Forgets the failures of `kind` for `job` (it succeeded).
    pub fn succeeded(&self, job: &JobId, kind: TxKind) {
        self.lock().remove(&(*job, kind));
    }

    /// Records that `kind` for `job` failed at `now_ms` with `error`; returns the error to
    /// report once, with its class and the next try (none for a fatal one).
    pub fn failed(
        &self,
        job: &JobId,
        kind: TxKind,
        now_ms: u64,
        error: EngineError,
    ) -> EngineError {
        let class = classify(&error);
        let mut entries = self.lock();
        let e = entries.entry((*job, kind)).or_insert(Entry {
            failures: 0,
            next_ms: None,
        });
        e.failures = e.failures.saturating_add(1);
        let retry_in_ms = match class {
            Class::Fatal => None,
            Class::Retryable => Some(Self::delay_ms(e.failures)),
        };
        e.next_ms = retry_in_ms.map(|d| now_ms.saturating_add(d));
        EngineError::Deferred {
            kind,
            class,
            failures: e.failures,
            retry_in_ms,
            source: Box::new(error),
        }
    }

    /// The delay after the `failures`-th consecutive retryable failure, ms: [`Self::BASE_MS`]
    /// doubled each time, at most [`Self::CAP_MS`].
    pub fn delay_ms(failures: u32) -> u64 {
        let doublings = failures.saturating_sub(1).min(16);
        Self::BASE_MS
            .saturating_mul(1 << doublings)
            .min(Self::CAP_MS)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(JobId, TxKind), Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs `attempt` for `kind` of `job` when [`Retries::due`]: `Ok(())` without running it while
/// it backs off (or stopped), the [`EngineError::Deferred`] of a failure once.
///
/// # Errors
/// [`EngineError::Deferred`] wrapping the attempt's error.
pub(crate) async fn governed<F>(
    retries: &Retries,
    job: &JobId,
    kind: TxKind,
    now_ms: u64,
    attempt: F,
) -> Result<(), EngineError>
where
    F: std::future::Future<Output = Result<(), EngineError>>,
{
    if !retries.due(job, kind, now_ms) {
        return Ok(());
    }
    match attempt.await {
        Ok(()) => {
            retries.succeeded(job, kind);
            Ok(())
        }
        Err(e) => Err(retries.failed(job, kind, now_ms, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over_budget() -> EngineError {
        EngineError::Chain(ChainError::Build(
            ganglion_contracts::Error::InvalidRequest(
                "attestations claim 11110 NTX, the escrow holds 1".into(),
            ),
        ))
    }

    #[test]
    fn an_error_says_whether_a_retry_can_help() {
        assert_eq!(over_budget().retry_class(), Class::Fatal);
        let unreachable = EngineError::Chain(ChainError::Missing("ab#0".into()));
        assert_eq!(unreachable.retry_class(), Class::Retryable);
    }

    #[test]
    fn an_impossible_settle_is_fatal_and_never_tried_again() {
        let r = Retries::default();
        let job = JobId([7; 32]);
        assert!(r.due(&job, TxKind::Claim, 0));
        let e = r.failed(&job, TxKind::Claim, 0, over_budget());
        assert!(
            matches!(
                e,
                EngineError::Deferred {
                    class: Class::Fatal,
                    failures: 1,
                    retry_in_ms: None,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("escrow holds 1"), "{e}");
        assert!(!r.due(&job, TxKind::Claim, u64::MAX), "stopped for good");
        assert!(r.due(&job, TxKind::Expire, 0), "per kind");
        assert!(r.due(&JobId([8; 32]), TxKind::Claim, 0), "per job");
    }

    #[test]
    fn a_retryable_failure_backs_off_doubling_to_the_cap_and_resets_on_success() {
        let r = Retries::default();
        let job = JobId([1; 32]);
        let down = || EngineError::Chain(ChainError::Missing("escrow".into()));
        assert_eq!(classify(&down()), Class::Retryable);
        let mut now = 0;
        for (i, expect) in [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
            .into_iter()
            .enumerate()
        {
            match r.failed(&job, TxKind::Claim, now, down()) {
                EngineError::Deferred {
                    retry_in_ms: Some(d),
                    failures,
                    ..
                } => assert_eq!((d, failures), (expect, i as u32 + 1)),
                other => panic!("{other}"),
            }
            assert!(!r.due(&job, TxKind::Claim, now + expect - 1));
            now += expect;
            assert!(r.due(&job, TxKind::Claim, now));
        }
        r.succeeded(&job, TxKind::Claim);
        assert!(r.due(&job, TxKind::Claim, 0));
    }

    #[test]
    fn governed_runs_a_failing_attempt_once_per_backoff_step() {
        let r = Retries::default();
        let job = JobId([2; 32]);
        let tries = std::sync::atomic::AtomicU32::new(0);
        let attempt = || async {
            tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(over_budget())
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            // 15 minutes of 250 ms polls.
            let mut reported = 0;
            for poll in 0..3_600u64 {
                if governed(&r, &job, TxKind::Claim, poll * 250, attempt())
                    .await
                    .is_err()
                {
                    reported += 1;
                }
            }
            assert_eq!(reported, 1, "reported once");
        });
        assert_eq!(
            tries.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "built once"
        );
    }
}
