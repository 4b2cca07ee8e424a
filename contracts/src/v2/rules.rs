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

/// An assignment's value for its whole window, `⌊gpus × rate × (deadline − started_at) /
/// 3 600 000⌋`: what the budget must cover (G6) and the most a default can be slashed (G4).
pub fn window_value(a: &Assignment, started_at_ms: u64, deadline_ms: u64) -> u128 {
    u128::from(a.gpus) * u128::from(a.rate) * u128::from(deadline_ms.saturating_sub(started_at_ms))
        / MS_PER_HOUR
}

/// Budget sufficiency (G6), exactly as on-chain: `Σ gpus × rate × (deadline − started_at) ≤
/// budget × 3 600 000`.
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

/// The slash of one defaulter (G4): its assignment's window value, capped by its stake.
pub fn slash_of(a: &Assignment, stake: u64, started_at_ms: u64, deadline_ms: u64) -> u64 {
    let value = window_value(a, started_at_ms, deadline_ms);
    u64::try_from(value.min(u128::from(stake))).unwrap_or(stake)
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
}
