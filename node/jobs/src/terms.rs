//! Whether a job's terms can be met at all, checked before anything costs money or time
//!: by the orchestrator before it locks the budget, and by a provider
//! before it starts a container for an assignment.
//!
//! Two rules (DESIGN §3.1 G6 "every claim is payable", G3 "no forced default"):
//! - **the budget pays the whole window**: `budget ≥ ⌊gpus × max_rate × max_duration_s / 3600⌋`
//!   NTX base units (the escrow's own pay rule, `v2::rules::pay_for`, applied to every GPU for
//!   the longest run the spec allows); otherwise the claims of an honest run exceed the escrow
//!   and cannot all be paid;
//! - **the run fits before the deadline**: `now + max_duration_s × 1000 + margin ≤ deadline`
//!   (ms), the margin leaving time to attest and claim before the deadline
//!   ([`SETTLE_MARGIN_MS`]); otherwise the provider is stopped by the deadline, not by the
//!   spec.

use ganglion_market::spec::Ensemble;

/// Time kept between the end of the longest run and the deadline, ms: the attestation, the
/// claim transaction and its confirmation (a few blocks) must land before the deadline.
pub const SETTLE_MARGIN_MS: u64 = 10_000;

/// Terms no honest run can meet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TermsError {
    /// The budget cannot pay every GPU at the maximum rate for the maximum duration.
    #[error(
        "budget_ntx {budget} cannot pay {gpus} GPU(s) × {max_rate} NTX per GPU-hour × \
         {max_duration_s} s = {needed} NTX base units"
    )]
    BudgetBelowWindow {
        /// NTX base units locked.
        budget: u64,
        /// GPUs in total.
        gpus: u64,
        /// NTX base units per GPU-hour, at most.
        max_rate: u64,
        /// `limits.max_duration_s`, seconds.
        max_duration_s: u64,
        /// What the window costs at most, NTX base units.
        needed: u64,
    },
    /// The budget cannot pay every GPU at the maximum rate until the deadline: the escrow's
    /// assign would be refused (escrow v2, G6).
    #[error(
        "budget_ntx {budget} cannot pay {gpus} GPU(s) × {max_rate} NTX per GPU-hour until the \
         deadline ({window_ms} ms from now) = {needed} NTX base units: the escrow pays every \
         assignment for its whole window; raise the budget or bring the deadline closer"
    )]
    BudgetBelowDeadlineWindow {
        /// NTX base units locked.
        budget: u64,
        /// GPUs in total.
        gpus: u64,
        /// NTX base units per GPU-hour, at most.
        max_rate: u64,
        /// `deadline_ms − now`, ms.
        window_ms: u64,
        /// What the window to the deadline costs at most, NTX base units.
        needed: u64,
    },
    /// The longest run (plus [`SETTLE_MARGIN_MS`]) does not fit before the deadline.
    #[error(
        "limits.max_duration_s {max_duration_s} s does not fit before the deadline: \
         {left_ms} ms left, {margin_ms} ms of which are kept to attest and claim"
    )]
    DurationPastDeadline {
        /// `limits.max_duration_s`, seconds.
        max_duration_s: u64,
        /// `deadline_ms − now`, ms (0 when past).
        left_ms: u64,
        /// [`SETTLE_MARGIN_MS`].
        margin_ms: u64,
    },
}

/// The most the escrow can owe for `gpus` GPUs at `max_rate` NTX base units per GPU-hour for
/// `max_duration_s` seconds, NTX base units: the escrow's `⌊gpu_ms × rate / 3 600 000⌋`
/// (`v2::rules::pay_for`) of all the GPU time, saturating at `u64::MAX`.
pub fn window_cost(gpus: u64, max_rate: u64, max_duration_s: u64) -> u64 {
    let gpu_seconds = u128::from(gpus) * u128::from(max_duration_s);
    let cost = gpu_seconds.saturating_mul(u128::from(max_rate)) / 3600;
    u64::try_from(cost).unwrap_or(u64::MAX)
}

/// Checks `budget` against the window (first rule of the module).
///
/// # Errors
/// [`TermsError::BudgetBelowWindow`].
pub fn check_budget(
    budget: u64,
    gpus: u64,
    max_rate: u64,
    max_duration_s: u64,
) -> Result<(), TermsError> {
    check_assigned(budget, [(gpus, max_rate)], max_duration_s)
}

/// Checks `budget` against the window of assignments `(gpus, rate)` (a provider's check of
/// the escrow it was assigned in: the real rates, not the maximum).
///
/// # Errors
/// [`TermsError::BudgetBelowWindow`] with the total GPUs and the highest rate.
pub fn check_assigned(
    budget: u64,
    assignments: impl IntoIterator<Item = (u64, u64)>,
    max_duration_s: u64,
) -> Result<(), TermsError> {
    let (mut gpus, mut max_rate, mut needed) = (0u64, 0u64, 0u64);
    for (g, rate) in assignments {
        gpus = gpus.saturating_add(g);
        max_rate = max_rate.max(rate);
        needed = needed.saturating_add(window_cost(g, rate, max_duration_s));
    }
    if budget < needed {
        return Err(TermsError::BudgetBelowWindow {
            budget,
            gpus,
            max_rate,
            max_duration_s,
            needed,
        });
    }
    Ok(())
}

/// Checks that a run of `max_duration_s` started at `now_ms` (POSIX ms) ends
/// [`SETTLE_MARGIN_MS`] before `deadline_ms` (second rule of the module).
///
/// # Errors
/// [`TermsError::DurationPastDeadline`].
pub fn check_deadline(
    max_duration_s: u64,
    deadline_ms: u64,
    now_ms: u64,
) -> Result<(), TermsError> {
    let left_ms = deadline_ms.saturating_sub(now_ms);
    let needed = max_duration_s
        .saturating_mul(1000)
        .saturating_add(SETTLE_MARGIN_MS);
    if needed > left_ms {
        return Err(TermsError::DurationPastDeadline {
            max_duration_s,
            left_ms,
            margin_ms: SETTLE_MARGIN_MS,
        });
    }
    Ok(())
}

/// What the escrow's `Assign` requires the budget to cover (escrow v2, G6): every assignment
/// `(gpus, rate)` paid at its rate from `started_at_ms` to `deadline_ms`, NTX base units,
/// rounded up (on chain: `Σ gpus × rate × (deadline − started_at) ≤ budget × 3 600 000`).
pub fn deadline_window_cost(
    assignments: impl IntoIterator<Item = (u64, u64)>,
    deadline_ms: u64,
    started_at_ms: u64,
) -> u64 {
    let window = u128::from(deadline_ms.saturating_sub(started_at_ms));
    let sum: u128 = assignments
        .into_iter()
        .map(|(g, r)| {
            u128::from(g)
                .saturating_mul(u128::from(r))
                .saturating_mul(window)
        })
        .fold(0, u128::saturating_add);
    u64::try_from(sum.div_ceil(3_600_000)).unwrap_or(u64::MAX)
}

/// Checks that `budget` pays `gpus` GPUs at `max_rate` from `now_ms` to `deadline_ms` (the
/// assign's G6 rule at the highest rate the escrow allows: an escrow that fails it may find
/// no assign the ledger accepts).
///
/// # Errors
/// [`TermsError::BudgetBelowDeadlineWindow`].
pub fn check_deadline_window(
    budget: u64,
    gpus: u64,
    max_rate: u64,
    deadline_ms: u64,
    now_ms: u64,
) -> Result<(), TermsError> {
    let needed = deadline_window_cost([(gpus, max_rate)], deadline_ms, now_ms);
    if budget < needed {
        return Err(TermsError::BudgetBelowDeadlineWindow {
            budget,
            gpus,
            max_rate,
            window_ms: deadline_ms.saturating_sub(now_ms),
            needed,
        });
    }
    Ok(())
}

/// Both rules for `spec` at `now_ms` (POSIX ms), budget first: the budget pays every GPU at
/// the maximum rate until the deadline ([`check_deadline_window`], which covers the longest
/// run), and the longest run fits before the deadline.
///
/// # Errors
/// The first [`TermsError`] that applies.
pub fn check(spec: &Ensemble, now_ms: u64) -> Result<(), TermsError> {
    let t = spec.escrow_terms();
    check_budget(t.budget, t.gpus, t.max_rate, spec.limits.max_duration_s)?;
    check_deadline(spec.limits.max_duration_s, t.deadline_ms, now_ms)?;
    check_deadline_window(t.budget, t.gpus, t.max_rate, t.deadline_ms, now_ms)
}

/// How long a provider may let its containers run when it starts them at `now_ms`: the spec's
/// `max_duration_s`, cut so the run ends [`SETTLE_MARGIN_MS`] before `deadline_ms` (the
/// provider stops its containers before the deadline and attests what ran, DESIGN §3.1 G3).
/// Seconds; 0 when no time is left.
pub fn run_limit_s(max_duration_s: u64, deadline_ms: u64, now_ms: u64) -> u64 {
    let left_s = deadline_ms
        .saturating_sub(now_ms)
        .saturating_sub(SETTLE_MARGIN_MS)
        / 1000;
    max_duration_s.min(left_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_pays_every_gpu_until_the_deadline_to_the_base_unit() {
        // 4 GPUs at 3 600 000 per GPU-hour for 100 s: 4 × 1000 × 100 = 400 000.
        assert_eq!(deadline_window_cost([(4, 3_600_000)], 100_000, 0), 400_000);
        assert_eq!(
            check_deadline_window(400_000, 4, 3_600_000, 100_000, 0),
            Ok(())
        );
        let e = check_deadline_window(399_999, 4, 3_600_000, 100_000, 0).expect_err("short");
        assert!(matches!(
            e,
            TermsError::BudgetBelowDeadlineWindow {
                needed: 400_000,
                ..
            }
        ));
        // Rounded up, as the validator compares the exact product: 1 GPU × 1 per hour × 1 ms.
        assert_eq!(deadline_window_cost([(1, 1)], 1, 0), 1);
        assert_eq!(
            deadline_window_cost([(1, 1)], 0, 5),
            0,
            "past the deadline: no window"
        );
        assert_eq!(
            deadline_window_cost([(2, 3_600_000), (1, 7_200_000)], 1_000, 0),
            4_000,
            "assignments add up"
        );
    }

    #[test]
    fn a_budget_of_one_base_unit_for_four_gpus_is_refused_with_what_the_window_costs() {
        // The case: 4 GPUs at 3 600 000 per GPU-hour for 200 s, budget 1.
        let err = check_budget(1, 4, 3_600_000, 200).expect_err("cannot pay");
        assert_eq!(
            err,
            TermsError::BudgetBelowWindow {
                budget: 1,
                gpus: 4,
                max_rate: 3_600_000,
                max_duration_s: 200,
                needed: 800_000,
            }
        );
        assert!(err.to_string().contains("800000"), "{err}");
        assert_eq!(check_budget(800_000, 4, 3_600_000, 200), Ok(()));
        assert!(check_budget(799_999, 4, 3_600_000, 200).is_err());
        // The escrow's floor: 1 GPU-second at 3599 per hour costs 0.
        assert_eq!(window_cost(1, 3_599, 1), 0);
        assert_eq!(
            window_cost(u64::MAX, u64::MAX, u64::MAX),
            u64::MAX,
            "saturates"
        );
        assert_eq!(
            window_cost(2, 3_600_000, 120),
            ganglion_contracts::v2::rules::pay_for(240_000, 3_600_000)
        );
    }

    #[test]
    fn an_assigned_escrow_is_checked_at_its_real_rates() {
        // Two providers, 2 and 1 GPUs at 3 600 000 and 1 800 000 per GPU-hour, 100 s.
        let a = [(2, 3_600_000), (1, 1_800_000)];
        assert_eq!(check_assigned(250_000, a, 100), Ok(()));
        assert_eq!(
            check_assigned(249_999, a, 100),
            Err(TermsError::BudgetBelowWindow {
                budget: 249_999,
                gpus: 3,
                max_rate: 3_600_000,
                max_duration_s: 100,
                needed: 250_000,
            })
        );
    }

    #[test]
    fn a_run_longer_than_the_deadline_allows_is_refused() {
        // The case: deadline 150 s ahead, a 200 s command.
        let now = 1_000_000;
        let err = check_deadline(200, now + 150_000, now).expect_err("past the deadline");
        assert_eq!(
            err,
            TermsError::DurationPastDeadline {
                max_duration_s: 200,
                left_ms: 150_000,
                margin_ms: SETTLE_MARGIN_MS,
            }
        );
        assert_eq!(
            check_deadline(140, now + 150_000, now),
            Ok(()),
            "140 s + the margin fit in 150 s"
        );
        assert!(check_deadline(141, now + 150_000, now).is_err());
        assert!(check_deadline(0, now - 1, now).is_err(), "a past deadline");
    }

    #[test]
    fn the_run_limit_stops_before_the_deadline() {
        let now = 5_000;
        assert_eq!(run_limit_s(200, now + 150_000, now), 140);
        assert_eq!(run_limit_s(60, now + 150_000, now), 60);
        assert_eq!(run_limit_s(60, now + SETTLE_MARGIN_MS, now), 0);
        assert_eq!(run_limit_s(60, now - 1, now), 0);
    }
}
