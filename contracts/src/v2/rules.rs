//! The validator's arithmetic, mirrored off-chain so builders, nodes and auditors compute
//! exactly what the chain accepts (DESIGN §3.1, rounding as on-chain: floor division).
//!
//! Units: times POSIX ms, GPU time GPU-milliseconds, rates NTX base units per GPU-hour,
//! amounts NTX base units.

use crate::v2::datum::Assignment;

/// Milliseconds in an hour: rates are per GPU-hour, GPU time is in GPU-ms.
pub const MS_PER_HOUR: u128 = 3_600_000;

/// NTX base units earned for `gpu_ms` GPU-milliseconds at `rate` per GPU-hour:
/// `⌊gpu_ms × rate / 3 600 000⌋`. Saturates at `u64::MAX` (never reached by a payable claim).
pub fn pay_for(gpu_ms: u64, rate: u64) -> u64 {
    let pay = u128::from(gpu_ms) * u128::from(rate) / MS_PER_HOUR;
    u64::try_from(pay).unwrap_or(u64::MAX)
}

/// What a provider may claim at most (G1): `gpus × max(0, min(acknowledged + interval,
/// lower_bound, deadline) − started_at)` GPU-ms, where `acknowledged` is its receipt's
/// `acknowledged_until` or, without a receipt, `started_at`. `lower_bound_ms` is the claim
/// transaction's validity lower bound: a submitter can only make it earlier.
pub fn claim_bound_gpu_ms(
    gpus: u64,
    started_at_ms: u64,
    deadline_ms: u64,
    receipt_interval_ms: u64,
    acknowledged_until_ms: Option<u64>,
    lower_bound_ms: u64,
) -> u64 {
    let acknowledged = acknowledged_until_ms.unwrap_or(started_at_ms);
    let end = acknowledged
        .saturating_add(receipt_interval_ms)
        .min(lower_bound_ms)
        .min(deadline_ms);
    gpus.saturating_mul(end.saturating_sub(started_at_ms))
}

/// An assignment's value over the window `started_at_ms`..`deadline_ms`, `⌊gpus × rate ×
/// (deadline − started_at) / 3 600 000⌋`: for an assignment of an escrow no Rescale changed,
/// its whole window (G4, G6). [`assignment_value`] reads the assignment's own window.
pub fn window_value(a: &Assignment, started_at_ms: u64, deadline_ms: u64) -> u128 {
    u128::from(a.gpus) * u128::from(a.rate) * u128::from(deadline_ms.saturating_sub(started_at_ms))
        / MS_PER_HOUR
}

/// Budget sufficiency (G6) of an Assign, exactly as on-chain: `Σ gpus × rate × (deadline −
/// started_at) ≤ budget × 3 600 000` (every assignment of an Assign spans that window; see
/// [`budget_covers_left`] for a Rescale).
pub fn budget_covers(
    assignments: &[Assignment],
    started_at_ms: u64,
    deadline_ms: u64,
    budget: u64,
) -> bool {
    let window = u128::from(deadline_ms.saturating_sub(started_at_ms));
    let need: u128 = assignments
        .iter()
        .map(|a| u128::from(a.gpus) * u128::from(a.rate) * window)
        .sum();
    need <= u128::from(budget) * MS_PER_HOUR
}

/// The slash of one defaulter (G4) over the window `started_at_ms`..`deadline_ms`, capped by
/// its stake: the validator's for an escrow no Rescale changed ([`assignment_slash`] reads
/// the assignment's own window).
pub fn slash_of(a: &Assignment, stake: u64, started_at_ms: u64, deadline_ms: u64) -> u64 {
    let value = window_value(a, started_at_ms, deadline_ms);
    u64::try_from(value.min(u128::from(stake))).unwrap_or(stake)
}

/// What assignment `a` may claim at most (G1) over its own window: [`claim_bound_gpu_ms`]
/// from its `started_at_ms` to its `until_ms` (the deadline, or its release by a Rescale),
/// `acknowledged` defaulting to its own start. This is the validator's bound.
pub fn assignment_bound_gpu_ms(
    a: &Assignment,
    receipt_interval_ms: u64,
    acknowledged_until_ms: Option<u64>,
    lower_bound_ms: u64,
) -> u64 {
    claim_bound_gpu_ms(
        a.gpus,
        a.started_at_ms,
        a.until_ms,
        receipt_interval_ms,
        acknowledged_until_ms,
        lower_bound_ms,
    )
}

/// `gpus × rate × (until − started_at)` of assignment `a`, unscaled (NTX base units ×
/// 3 600 000): its share of G6's sum.
fn assignment_cost(a: &Assignment) -> u128 {
    u128::from(a.gpus) * u128::from(a.rate) * u128::from(a.window_ms())
}

/// Assignment `a`'s value for its own window, `⌊gpus × rate × (until − started_at) /
/// 3 600 000⌋`: the most its default can be slashed (G4).
pub fn assignment_value(a: &Assignment) -> u128 {
    assignment_cost(a) / MS_PER_HOUR
}

/// The slash of a defaulter (G4) as the validator computes it: its assignment's value for
/// its own window, capped by its stake.
pub fn assignment_slash(a: &Assignment, stake: u64) -> u64 {
    u64::try_from(assignment_value(a).min(u128::from(stake))).unwrap_or(stake)
}

/// G6 on what is left, exactly as on-chain (Assign with `claimed = []` and `paid = 0`;
/// Rescale): `Σ gpus × rate × (until − started_at)` over the assignments not in `claimed`
/// `≤ (budget − paid) × 3 600 000`.
pub fn budget_covers_left(
    assignments: &[Assignment],
    claimed: &[u64],
    budget: u64,
    paid: u64,
) -> bool {
    let need: u128 = unclaimed(assignments, claimed).map(assignment_cost).sum();
    budget
        .checked_sub(paid)
        .is_some_and(|left| need <= u128::from(left) * MS_PER_HOUR)
}

/// GPUs the assignments not in `claimed` and not released (`until == deadline_ms`) hold:
/// what a Rescale caps at the escrow's `gpus`.
pub fn running_gpus(assignments: &[Assignment], claimed: &[u64], deadline_ms: u64) -> u64 {
    unclaimed(assignments, claimed)
        .filter(|a| !a.is_released(deadline_ms))
        .map(|a| a.gpus)
        .sum()
}

fn unclaimed<'a>(
    assignments: &'a [Assignment],
    claimed: &'a [u64],
) -> impl Iterator<Item = &'a Assignment> {
    assignments
        .iter()
        .enumerate()
        .filter(|(i, _)| !claimed.contains(&(*i as u64)))
        .map(|(_, a)| a)
}

/// How an expire splits the slashes (G4): the orchestrator recovers at most what it paid
/// (`min(Σ slashes, paid)`), the rest is burnt. Returns `(to_orchestrator, burnt)`.
pub fn split_slashes(total_slashed: u64, paid: u64) -> (u64, u64) {
    let to_orchestrator = total_slashed.min(paid);
    (to_orchestrator, total_slashed - to_orchestrator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v2::payout::Payout;

    fn a(gpus: u64, rate: u64) -> Assignment {
        Assignment {
            provider: [1; 28],
            attest_key: [2; 32],
            payout: Payout::enterprise([1; 28]),
            gpus,
            rate,
            accept_by_ms: 0,
            started_at_ms: 0,
            until_ms: 10_000,
        }
    }

    #[test]
    fn equal_gpu_ms_is_equal_pay_and_a_short_run_is_paid() {
        assert_eq!(pay_for(1_500, 3_600_000), 1_500);
        assert_eq!(pay_for(7_200_000, 10), 20);
        assert_eq!(pay_for(1, 3_599_999), 0, "floor, as on-chain");
    }

    #[test]
    fn the_bound_takes_the_earliest_of_receipt_plus_interval_lower_bound_and_deadline() {
        // started 1 000, deadline 100 000, interval 10 000, 2 GPUs
        let b = |ack, lower| claim_bound_gpu_ms(2, 1_000, 100_000, 10_000, ack, lower);
        assert_eq!(b(None, 50_000), 2 * 10_000, "no receipt: one interval");
        assert_eq!(b(Some(30_000), 50_000), 2 * 39_000, "receipt + interval");
        assert_eq!(b(Some(30_000), 20_000), 2 * 19_000, "lower bound first");
        assert_eq!(b(Some(99_000), 200_000), 2 * 99_000, "deadline caps");
        assert_eq!(b(None, 500), 0, "a lower bound before the start");
    }

    #[test]
    fn budget_and_slashes_follow_the_window() {
        let assignments = [a(2, 3_600_000), a(1, 3_600_000)];
        // 3 GPUs × 3.6 M/h × 10 s = 30 000
        assert!(budget_covers(&assignments, 0, 10_000, 30_000));
        assert!(!budget_covers(&assignments, 0, 10_000, 29_999));
        assert_eq!(slash_of(&assignments[0], 1_000_000, 0, 10_000), 20_000);
        assert_eq!(
            slash_of(&assignments[0], 5_000, 0, 10_000),
            5_000,
            "capped by the bond"
        );
        assert_eq!(split_slashes(20_000, 7_000), (7_000, 13_000));
        assert_eq!(split_slashes(5_000, 7_000), (5_000, 0));
    }

    #[test]
    fn each_assignment_answers_for_its_own_window() {
        // Added at 4 000, released at 6 000: 2 s of a 10 s escrow.
        let late = Assignment {
            started_at_ms: 4_000,
            until_ms: 6_000,
            ..a(2, 3_600_000)
        };
        let b = |ack, lower| assignment_bound_gpu_ms(&late, 1_000, ack, lower);
        assert_eq!(b(None, 9_000), 2 * 1_000, "one interval from its own start");
        assert_eq!(b(Some(5_500), 9_000), 2 * 2_000, "its release caps");
        assert_eq!(b(Some(3_000), 9_000), 0, "nothing before its start");
        assert_eq!(assignment_value(&late), 4_000);
        assert_eq!(assignment_slash(&late, 1_000), 1_000, "capped by the stake");
        assert_eq!(assignment_slash(&late, 1_000_000), 4_000);
        let all = [a(1, 3_600_000), late.clone(), a(3, 3_600_000)];
        // Unclaimed: 10 000 + 4 000 + 30 000 ≤ budget − paid.
        assert!(budget_covers_left(&all, &[], 44_000, 0));
        assert!(!budget_covers_left(&all, &[], 44_000, 1));
        // The first claimed: its window is paid already.
        assert!(budget_covers_left(&all, &[0], 44_000, 10_000));
        assert!(!budget_covers_left(&all, &[0], 33_999, 0));
        assert!(
            !budget_covers_left(&all, &[], 10, 11),
            "paid above the budget"
        );
        assert_eq!(
            running_gpus(&all, &[], 10_000),
            4,
            "the released one runs no more"
        );
        assert_eq!(running_gpus(&all, &[2], 10_000), 1);
    }
}
