//! The provider side of `accept`: capacity, price and limits, GPU reservations with a TTL, and
//! the signed acceptance the escrow's `Assign` checks.

use std::collections::HashMap;

use ed25519_dalek::SigningKey;
use ganglion_contracts::datum::JobId;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::signed::{Acceptance, sign};
use ganglion_contracts::tx::TxoRef;

use super::protocols::{AcceptRequest, AcceptResponse, RefusalReason};

/// What a provider node accepts. Units in the field names.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The live bond this node offers under.
    pub bond: TxoRef,
    /// Payment key hash (the bond's `provider`).
    pub provider: KeyHash,
    /// The bond's attest key (signs offers, acceptances and attestations).
    pub attest: SigningKey,
    /// GPUs this node can give to jobs.
    pub gpus: u64,
    /// Lowest rate accepted, NTX base units per GPU-hour.
    pub min_rate: u64,
    /// How long GPUs stay reserved after an acceptance, ms: the orchestrator must assign on
    /// chain before then.
    pub reservation_ttl_ms: u64,
    /// Furthest deadline accepted, ms from now.
    pub max_deadline_ahead_ms: u64,
    /// Jobs held at once, reserved or running (`[provider] max_concurrent_jobs`, ≥ 1).
    pub max_concurrent_jobs: u32,
}

#[derive(Debug, Clone, Copy)]
struct Reservation {
    gpus: u64,
    until_ms: u64,
}

/// Reservations held by a provider. At most one per job, each of ≥ 1 GPU, so never more entries
/// than the provider has GPUs.
#[derive(Debug)]
pub struct Provider {
    config: ProviderConfig,
    reservations: HashMap<JobId, Reservation>,
    /// GPUs held by assigned, unfinished jobs (set by the job engine, [`Provider::sync`]).
    busy: u64,
    /// Assigned, unfinished jobs (set by the job engine, [`Provider::sync`]).
    running: u32,
}

impl Provider {
    /// A provider with no reservation.
    pub fn new(config: ProviderConfig) -> Self {
        Self {
            config,
            reservations: HashMap::new(),
            busy: 0,
            running: 0,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// GPUs neither busy with an assigned job nor held by an unexpired reservation at `now_ms`
    /// (POSIX ms).
    pub fn free_gpus(&mut self, now_ms: u64) -> u64 {
        self.reservations.retain(|_, r| r.until_ms > now_ms);
        let reserved: u64 = self.reservations.values().map(|r| r.gpus).sum();
        self.config
            .gpus
            .saturating_sub(self.busy)
            .saturating_sub(reserved)
    }

    /// The job engine's view: `running` assigned, unfinished jobs holding `busy` GPUs; the
    /// reservations of `tracked` jobs (assigned, hence counted in `running`, or ended) are
    /// released.
    pub fn sync(&mut self, busy: u64, running: u32, tracked: &[JobId]) {
        self.busy = busy;
        self.running = running;
        for job in tracked {
            self.reservations.remove(job);
        }
    }

    /// Releases a job's reservation (refused by the orchestrator, or turned into an assignment
    /// the dispatcher now tracks).
    pub fn release(&mut self, job: &JobId) {
        self.reservations.remove(job);
    }

    /// Answers an accept request: checks, reserves, signs.
    pub fn handle(&mut self, req: &AcceptRequest, now_ms: u64) -> AcceptResponse {
        use AcceptResponse::Refused;
        if req.bond != self.config.bond {
            return Refused(RefusalReason::UnknownBond);
        }
        if req.gpus == 0 {
            return Refused(RefusalReason::ZeroGpus);
        }
        if req.rate < self.config.min_rate {
            return Refused(RefusalReason::RateTooLow {
                price: self.config.min_rate,
            });
        }
        if req.deadline_ms <= now_ms || req.deadline_ms - now_ms > self.config.max_deadline_ahead_ms
        {
            return Refused(RefusalReason::Deadline);
        }
        // A repeated request for the same job replaces its own reservation.
        let previous = self.reservations.remove(&req.job_id);
        let free = self.free_gpus(now_ms);
        let active = self
            .running
            .saturating_add(u32::try_from(self.reservations.len()).unwrap_or(u32::MAX));
        if active >= self.config.max_concurrent_jobs {
            if let Some(p) = previous {
                self.reservations.insert(req.job_id, p);
            }
            return Refused(RefusalReason::TooManyJobs {
                active,
                max: self.config.max_concurrent_jobs,
            });
        }
        if req.gpus > free {
            if let Some(p) = previous {
                self.reservations.insert(req.job_id, p);
            }
            return Refused(RefusalReason::NoCapacity { free });
        }
        let until_ms = now_ms.saturating_add(self.config.reservation_ttl_ms);
        self.reservations.insert(
            req.job_id,
            Reservation {
                gpus: req.gpus,
                until_ms,
            },
        );
        let msg = Acceptance {
            job_id: req.job_id,
            gpus: req.gpus,
            rate: req.rate,
            deadline_ms: req.deadline_ms,
        }
        .signed_bytes();
        AcceptResponse::Accepted {
            signature: sign(&self.config.attest, &msg),
            attest_key: self.config.attest.verifying_key().to_bytes(),
            provider: self.config.provider,
            reserved_until_ms: until_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_converts_a_reservation_into_busy_and_frees_it_when_the_job_ends() {
        let mut p = provider();
        let job = JobId([7; 32]);
        p.reservations.insert(
            job,
            Reservation {
                gpus: 3,
                until_ms: 10_000,
            },
        );
        assert_eq!(p.free_gpus(0), 1);
        // Assigned: the engine counts the job's 3 GPUs as busy, the reservation goes.
        p.sync(3, 1, &[job]);
        assert!(p.reservations.is_empty());
        assert_eq!(p.free_gpus(0), 1);
        // Ended: nothing busy, all free again before the reservation's TTL would have run out.
        p.sync(0, 0, &[job]);
        assert_eq!(p.free_gpus(0), 4);
    }

    fn provider() -> Provider {
        Provider::new(ProviderConfig {
            bond: TxoRef {
                tx_hash: [1; 32],
                index: 0,
            },
            provider: [2; 28],
            attest: SigningKey::from_bytes(&[3; 32]),
            gpus: 4,
            min_rate: 100,
            reservation_ttl_ms: 1_000,
            max_deadline_ahead_ms: 10_000,
            max_concurrent_jobs: 2,
        })
    }

    fn req(job: u8, gpus: u64) -> AcceptRequest {
        AcceptRequest {
            job_id: JobId([job; 32]),
            bond: TxoRef {
                tx_hash: [1; 32],
                index: 0,
            },
            gpus,
            rate: 100,
            deadline_ms: 5_000,
        }
    }

    #[test]
    fn accepts_signs_and_reserves_until_the_ttl() {
        let mut p = provider();
        let r = p.handle(&req(1, 3), 0);
        let AcceptResponse::Accepted {
            signature,
            attest_key,
            ..
        } = r
        else {
            panic!("refused: {r:?}")
        };
        let msg = Acceptance {
            job_id: JobId([1; 32]),
            gpus: 3,
            rate: 100,
            deadline_ms: 5_000,
        }
        .signed_bytes();
        ganglion_contracts::signed::verify(&attest_key, &msg, &signature).unwrap();
        assert_eq!(
            p.handle(&req(2, 2), 10),
            AcceptResponse::Refused(RefusalReason::NoCapacity { free: 1 })
        );
        // After the TTL the reservation lapses.
        assert!(matches!(
            p.handle(&req(2, 2), 1_001),
            AcceptResponse::Accepted { .. }
        ));
    }

    #[test]
    fn refuses_beyond_max_concurrent_jobs_counting_reservations_and_running_jobs() {
        let mut p = provider();
        assert!(matches!(
            p.handle(&req(1, 1), 0),
            AcceptResponse::Accepted { .. }
        ));
        // One reserved + one running = the maximum of 2.
        p.sync(1, 1, &[]);
        assert_eq!(
            p.handle(&req(2, 1), 0),
            AcceptResponse::Refused(RefusalReason::TooManyJobs { active: 2, max: 2 })
        );
        // Asking again for the job it already holds is not a new job.
        assert!(matches!(
            p.handle(&req(1, 1), 0),
            AcceptResponse::Accepted { .. }
        ));
        // The running job ended.
        p.sync(0, 0, &[]);
        assert!(matches!(
            p.handle(&req(2, 1), 0),
            AcceptResponse::Accepted { .. }
        ));
    }

    #[test]
    fn refuses_by_rule() {
        let mut p = provider();
        let mut r = req(1, 1);
        r.rate = 99;
        assert_eq!(
            p.handle(&r, 0),
            AcceptResponse::Refused(RefusalReason::RateTooLow { price: 100 })
        );
        let mut r = req(1, 1);
        r.deadline_ms = 20_000;
        assert_eq!(
            p.handle(&r, 0),
            AcceptResponse::Refused(RefusalReason::Deadline)
        );
        assert_eq!(
            p.handle(&req(1, 1), 5_000),
            AcceptResponse::Refused(RefusalReason::Deadline)
        );
        assert_eq!(
            p.handle(&req(1, 0), 0),
            AcceptResponse::Refused(RefusalReason::ZeroGpus)
        );
        let mut r = req(1, 1);
        r.bond.index = 9;
        assert_eq!(
            p.handle(&r, 0),
            AcceptResponse::Refused(RefusalReason::UnknownBond)
        );
    }
}
