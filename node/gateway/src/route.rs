//! The choice of replica for one request: pure, so the rule is tested on its own.
//!
//! Among the replicas that are healthy, not yet tried for this request and below their
//! in-flight limit: the fewest outstanding requests, then the lowest round-trip time, then
//! the smallest index (so equal replicas are chosen in a stable order).

use std::time::Duration;

/// What the rule needs to know of one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Whether the replica may take requests: it passed its last health check and no
    /// forwarded request has failed to reach it since.
    pub healthy: bool,
    /// Requests forwarded to it and not yet answered in full (streaming bodies included).
    pub outstanding: u32,
    /// Round-trip time from this gateway to the replica's node.
    pub rtt: Duration,
}

/// The rule's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Forward to the replica at this index.
    Replica(usize),
    /// Healthy replicas exist but each holds `limit` requests: back-pressure (`503` with
    /// `Retry-After`).
    AllFull,
    /// No replica that was not tried is healthy.
    NoneHealthy,
}

/// Chooses a replica among `candidates` for a request that already tried the indices in
/// `tried`; `limit` is the most outstanding requests one replica takes
/// (`serve.max_in_flight_per_replica`).
pub fn choose(candidates: &[Candidate], tried: &[usize], limit: u32) -> Choice {
    let mut any_healthy = false;
    let best = candidates
        .iter()
        .enumerate()
        .filter(|(i, c)| c.healthy && !tried.contains(i))
        .inspect(|_| any_healthy = true)
        .filter(|(_, c)| c.outstanding < limit)
        .min_by_key(|(i, c)| (c.outstanding, c.rtt, *i));
    match best {
        Some((i, _)) => Choice::Replica(i),
        None if any_healthy => Choice::AllFull,
        None => Choice::NoneHealthy,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn candidate() -> impl Strategy<Value = Candidate> {
        (any::<bool>(), 0u32..8, 0u64..50).prop_map(|(healthy, outstanding, rtt_ms)| Candidate {
            healthy,
            outstanding,
            rtt: Duration::from_millis(rtt_ms),
        })
    }

    #[test]
    fn fewest_outstanding_wins_then_lower_rtt() {
        let c = |outstanding, rtt_ms| Candidate {
            healthy: true,
            outstanding,
            rtt: Duration::from_millis(rtt_ms),
        };
        assert_eq!(
            choose(&[c(3, 1), c(1, 40), c(2, 1)], &[], 8),
            Choice::Replica(1)
        );
        assert_eq!(
            choose(&[c(1, 30), c(1, 5), c(1, 9)], &[], 8),
            Choice::Replica(1)
        );
        assert_eq!(choose(&[c(1, 30), c(1, 5)], &[1], 8), Choice::Replica(0));
        assert_eq!(choose(&[c(8, 1), c(8, 2)], &[], 8), Choice::AllFull);
        assert_eq!(choose(&[c(0, 1)], &[0], 8), Choice::NoneHealthy);
        assert_eq!(choose(&[], &[], 8), Choice::NoneHealthy);
    }

    proptest! {
        /// The chosen replica is healthy, untried and below the limit, and no other such
        /// replica has fewer outstanding requests, or as many and a lower RTT.
        #[test]
        fn the_choice_is_the_least_loaded_eligible_replica(
            cands in proptest::collection::vec(candidate(), 0..12),
            tried in proptest::collection::vec(0usize..12, 0..4),
            limit in 1u32..8,
        ) {
            let eligible = |i: usize, c: &Candidate| c.healthy && !tried.contains(&i) && c.outstanding < limit;
            match choose(&cands, &tried, limit) {
                Choice::Replica(i) => {
                    prop_assert!(eligible(i, &cands[i]));
                    for (j, c) in cands.iter().enumerate() {
                        if eligible(j, c) {
                            prop_assert!((cands[i].outstanding, cands[i].rtt) <= (c.outstanding, c.rtt));
                        }
                    }
                }
                Choice::AllFull => {
                    prop_assert!(cands.iter().enumerate().all(|(i, c)| !eligible(i, c)));
                    prop_assert!(cands.iter().enumerate().any(|(i, c)| c.healthy && !tried.contains(&i)));
                }
                Choice::NoneHealthy => {
                    prop_assert!(cands.iter().enumerate().all(|(i, c)| !c.healthy || tried.contains(&i)));
                }
            }
        }
    }
}
