//! A provider's answer to an accept request, decided where its jobs are recorded.
//!
//! The decision (price, deadline, capacity, concurrent jobs) and its record are one step: an
//! acceptance is a `Reserved` [`ProviderRecord`] holding `reserved_gpus` until
//! `reserved_until_ms`, written (and flushed) before the signed acceptance leaves. Capacity is
//! read from the same records — GPUs of assigned, unfinished jobs are busy, unexpired
//! reservations of other jobs are held — so nothing has to be pushed back into the p2p layer,
//! a restart keeps every reservation, and an accepted job can never lack its record.

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::signed::{Acceptance, sign};
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::store::Kv;
use ganglion_market::limits::ProviderLimits;
use ganglion_market::spec::Ensemble;
use ganglion_p2p::protocols::{AcceptRequest, AcceptResponse, RefusalReason};
use libp2p::PeerId;

use super::engine::{Ctx, ProviderRecord, ProviderRole};
use super::provider::{ProviderDetail, ProviderSide, busy_gpus, holds_gpus};
use super::state::ProviderState;
use super::store::JobRecord;

/// What a provider node accepts. Units in the field names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptPolicy {
    /// GPUs this node can give to jobs.
    pub gpus: u64,
    /// Lowest rate accepted, NTX base units per GPU-hour.
    pub min_rate: u64,
    /// How long GPUs stay reserved after an acceptance, ms: the orchestrator must assign on
    /// chain before then.
    pub reservation_ttl_ms: u64,
    /// Furthest deadline accepted, ms from now.
    pub max_deadline_ahead_ms: u64,
    /// Jobs held at once, reserved or assigned and unfinished (`[provider]
    /// max_concurrent_jobs`, ≥ 1).
    pub max_concurrent_jobs: u32,
    /// Longest receipt interval accepted, ms: the work a silent orchestrator can leave unpaid
    /// is at most [`super::EngineConfig::missed_receipts`] such intervals (DESIGN §3.1 G2).
    pub max_receipt_interval_ms: u64,
    /// The `[provider]` limits the job's spec is admitted under before anything is reserved
    /// ([`ProviderLimits::admit_spec`]: its duration, the image policy); `None`: any spec.
    pub spec_limits: Option<ProviderLimits>,
}

/// Shortest receipt interval a provider accepts, ms: a heartbeat and its receipt must make
/// the round trip well inside one interval.
pub const MIN_RECEIPT_INTERVAL_MS: u64 = 2_000;

/// The outcome of [`decide`]: a reservation to record and sign, or a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Reserve `gpus` GPUs for the job until `until_ms` (POSIX ms).
    Reserve {
        /// GPUs reserved.
        gpus: u64,
        /// Reservation end.
        until_ms: u64,
    },
    /// Refuse, for this reason.
    Refuse(RefusalReason),
}

fn reserved(r: &ProviderRecord, now_ms: u64) -> bool {
    r.state == ProviderState::Reserved && r.detail.reserved_until_ms > now_ms
}

/// Decides an accept request at `now_ms` against this provider's `records`; pure.
///
/// A repeated request for a job still `Reserved` here replaces that reservation; a job this
/// provider tracks past its reservation (assigned, running, ended) is refused
/// ([`RefusalReason::AlreadyTracked`]).
///
/// `bond_free_gpus`: the GPUs the provider's bond can still be committed to (its `gpus` less
/// its live commitments, escrow v2 G5); an assign committing more would be refused on chain.
pub fn decide(
    policy: &AcceptPolicy,
    req: &AcceptRequest,
    now_ms: u64,
    records: &[ProviderRecord],
    bond_free_gpus: u64,
) -> Decision {
    use Decision::Refuse;
    if req.gpus == 0 {
        return Refuse(RefusalReason::ZeroGpus);
    }
    if req.rate < policy.min_rate {
        return Refuse(RefusalReason::RateTooLow {
            price: policy.min_rate,
        });
    }
    if req.deadline_ms <= now_ms || req.deadline_ms - now_ms > policy.max_deadline_ahead_ms {
        return Refuse(RefusalReason::Deadline);
    }
    // The GPUs stay reserved until accept-by: never past the provider's reservation limit.
    if req.accept_by_ms <= now_ms
        || req.accept_by_ms - now_ms > policy.reservation_ttl_ms
        || req.accept_by_ms >= req.deadline_ms
    {
        return Refuse(RefusalReason::AcceptBy {
            max_ms: policy.reservation_ttl_ms,
        });
    }
    if !(MIN_RECEIPT_INTERVAL_MS..=policy.max_receipt_interval_ms)
        .contains(&req.receipt_interval_ms)
    {
        return Refuse(RefusalReason::ReceiptInterval {
            min_ms: MIN_RECEIPT_INTERVAL_MS,
            max_ms: policy.max_receipt_interval_ms,
        });
    }
    if records
        .iter()
        .any(|r| r.job_id == req.job_id && r.state != ProviderState::Reserved)
    {
        return Refuse(RefusalReason::AlreadyTracked);
    }
    let others: Vec<&ProviderRecord> = records.iter().filter(|r| r.job_id != req.job_id).collect();
    let held: u64 = others
        .iter()
        .filter(|r| reserved(r, now_ms))
        .map(|r| r.detail.reserved_gpus)
        .sum();
    let active = others
        .iter()
        .filter(|r| reserved(r, now_ms) || holds_gpus(r.state))
        .count();
    let active = u32::try_from(active).unwrap_or(u32::MAX);
    if active >= policy.max_concurrent_jobs {
        return Refuse(RefusalReason::TooManyJobs {
            active,
            max: policy.max_concurrent_jobs,
        });
    }
    let free = policy
        .gpus
        .saturating_sub(busy_gpus(records))
        .saturating_sub(held);
    if req.gpus > free {
        return Refuse(RefusalReason::NoCapacity { free });
    }
    // Reservations of other jobs will commit the bond too.
    let bond_free = bond_free_gpus.saturating_sub(held);
    if req.gpus > bond_free {
        return Refuse(RefusalReason::NoCapacity { free: bond_free });
    }
    Decision::Reserve {
        gpus: req.gpus,
        until_ms: req.accept_by_ms,
    }
}

/// The signed acceptance of `req` (every term the escrow's `Assign` checks it against) for a
/// reservation ending at `until_ms`.
pub fn accepted<E>(
    side: &ProviderSide<E>,
    provider: KeyHash,
    req: &AcceptRequest,
    until_ms: u64,
) -> AcceptResponse {
    let msg = Acceptance {
        job_id: req.job_id,
        spec: req.spec.clone(),
        gpus: req.gpus,
        rate: req.rate,
        deadline_ms: req.deadline_ms,
        accept_by_ms: req.accept_by_ms,
        receipt_interval_ms: req.receipt_interval_ms,
    }
    .signed_bytes();
    AcceptResponse::Accepted {
        signature: sign(&side.attest, &msg),
        attest_key: side.attest.verifying_key().to_bytes(),
        provider,
        reserved_until_ms: until_ms,
    }
}

/// How long a provider waits for the spec an accept request names: the requester serves it,
/// and is connected (it just asked).
pub const SPEC_FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Answers an inbound accept request: the spec it names is fetched from the requester and
/// admitted ([`admit`]: the provider's limits and image policy, the image present), then
/// [`on_request`] decides and records, one request at a time (`Ctx::accepting`). The fetch
/// runs outside that lock, so a slow requester holds up no other decision.
pub(crate) async fn answer<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    req: &AcceptRequest,
) -> AcceptResponse {
    let Some(side) = &ctx.provider else {
        return AcceptResponse::Refused(RefusalReason::NotProvider);
    };
    let admitted = tokio::select! {
        () = ctx.stopping.cancelled() => Err(RefusalReason::RateLimited),
        a = admit(ctx, side, peer, req) => a,
    };
    if let Err(reason) = admitted {
        tracing::info!(job = %req.job_id, %peer, %reason, "accept request refused");
        return AcceptResponse::Refused(reason);
    }
    let _one_at_a_time = ctx.accepting.lock().await;
    on_request(ctx, peer, req)
}

/// The job's spec, fetched from `peer` (within [`SPEC_FETCH_TIMEOUT`]), against this
/// provider's limits ([`AcceptPolicy::spec_limits`]) and its engine's images: a local image
/// the engine lacks is refused here, before the job is assigned to this provider only to fail
/// at dispatch (images are never pulled).
///
/// # Errors
/// [`RefusalReason::SpecUnavailable`], [`RefusalReason::Limits`],
/// [`RefusalReason::ImageAbsent`]; [`RefusalReason::RateLimited`] when the engine cannot say.
async fn admit<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    side: &ProviderSide<E>,
    peer: PeerId,
    req: &AcceptRequest,
) -> Result<(), RefusalReason> {
    let unavailable = |reason: String| RefusalReason::SpecUnavailable { reason };
    let spec: Ensemble = tokio::time::timeout(
        SPEC_FETCH_TIMEOUT,
        super::provider::read_spec(ctx, peer, &req.spec),
    )
    .await
    .map_err(|_| unavailable(format!("not fetched within {SPEC_FETCH_TIMEOUT:?}")))?
    .map_err(|e| unavailable(e.to_string()))?;
    if let Some(limits) = &side.policy.spec_limits {
        limits
            .admit_spec(&spec)
            .map_err(|r| RefusalReason::Limits {
                reason: r.to_string(),
            })?;
    }
    if let Some(image) = &spec.image.local {
        match side.executor.has_image(image).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(RefusalReason::ImageAbsent {
                    image: image.clone(),
                });
            }
            Err(e) => {
                tracing::warn!(job = %req.job_id, error = %e, "cannot ask the engine for the image");
                return Err(RefusalReason::RateLimited);
            }
        }
    }
    Ok(())
}

/// Answers an inbound accept request: [`decide`], then (on acceptance) the `Reserved` record
/// is written — created, or its reservation renewed by the peer that made it — before the
/// signed answer. A store failure refuses (as rate-limited: the orchestrator may ask again).
fn on_request<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    req: &AcceptRequest,
) -> AcceptResponse {
    let Some(side) = &ctx.provider else {
        return AcceptResponse::Refused(RefusalReason::NotProvider);
    };
    let now = ctx.now();
    let records = match ctx.store.all::<ProviderRole>() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "job store unreadable; accept request refused");
            return AcceptResponse::Refused(RefusalReason::RateLimited);
        }
    };
    let me = ctx.chain.key_hash();
    let attest = side.attest.verifying_key().to_bytes();
    let bond_free = match ctx.live_bond(&me, Some(&attest)) {
        Ok(b) => b.map_or(0, |b| b.free_gpus),
        Err(e) => {
            tracing::error!(error = %e, "indexer unreadable; accept request refused");
            return AcceptResponse::Refused(RefusalReason::RateLimited);
        }
    };
    let (gpus, until_ms) = match decide(&side.policy, req, now, &records, bond_free) {
        Decision::Refuse(reason) => {
            tracing::info!(job = %req.job_id, %peer, %reason, "accept request refused");
            return AcceptResponse::Refused(reason);
        }
        Decision::Reserve { gpus, until_ms } => (gpus, until_ms),
    };
    match reserve(ctx, peer, req.job_id, gpus, until_ms, now, &records) {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(job = %req.job_id, %peer, "accept request refused: the job moved on, or another peer reserved it");
            return AcceptResponse::Refused(RefusalReason::AlreadyTracked);
        }
        Err(e) => {
            tracing::error!(job = %req.job_id, error = %e, "cannot record the reservation; refused");
            return AcceptResponse::Refused(RefusalReason::RateLimited);
        }
    }
    tracing::info!(job = %req.job_id, %peer, gpus, until_ms, "reserved");
    accepted(side, ctx.chain.key_hash(), req, until_ms)
}

/// Writes the reservation: a new `Reserved` record, or the renewal of the job's own — only
/// while it is still `Reserved` and only for the peer that reserved it (an atomic
/// compare-and-swap, so a renewal racing the driver's `AssignmentSeen` never overwrites what
/// the assignment wrote, and no other peer can redirect where the spec is fetched from and the
/// attestation sent). `Ok(false)`: not renewed.
fn reserve<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    peer: PeerId,
    job: JobId,
    gpus: u64,
    until_ms: u64,
    now_ms: u64,
    records: &[ProviderRecord],
) -> Result<bool, super::store::StoreError> {
    let peer_bytes = peer.to_bytes();
    if records.iter().any(|r| r.job_id == job) {
        return ctx.store.update_if::<ProviderRole>(
            &job,
            |r| r.state == ProviderState::Reserved && r.detail.orchestrator_peer == peer_bytes,
            |r| {
                r.detail.reserved_until_ms = until_ms;
                r.detail.reserved_gpus = gpus;
            },
        );
    }
    let detail = ProviderDetail {
        orchestrator_peer: peer_bytes.clone(),
        reserved_until_ms: until_ms,
        reserved_gpus: gpus,
        ..ProviderDetail::default()
    };
    match ctx.store.create::<ProviderRole>(&JobRecord::new(
        job,
        ProviderState::Reserved,
        detail,
        now_ms,
    )) {
        Ok(()) => Ok(true),
        // Created since the records were read (cannot happen: requests are answered one at
        // a time); treat as a renewal attempt.
        Err(super::store::StoreError::Exists { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_contracts::tx::TxoRef;

    const BOND: TxoRef = TxoRef {
        tx_hash: [1; 32],
        index: 0,
    };

    fn policy() -> AcceptPolicy {
        AcceptPolicy {
            gpus: 4,
            min_rate: 100,
            reservation_ttl_ms: 1_000,
            max_deadline_ahead_ms: 10_000,
            max_concurrent_jobs: 2,
            max_receipt_interval_ms: 60_000,
            spec_limits: None,
        }
    }

    fn req(job: u8, gpus: u64) -> AcceptRequest {
        AcceptRequest {
            job_id: JobId([job; 32]),
            bond: BOND,
            gpus,
            rate: 100,
            deadline_ms: 5_000,
            spec: vec![7; 36],
            accept_by_ms: 900,
            receipt_interval_ms: MIN_RECEIPT_INTERVAL_MS,
        }
    }

    fn record(job: u8, state: ProviderState, reserved_gpus: u64, until: u64) -> ProviderRecord {
        let mut r = JobRecord::new(
            JobId([job; 32]),
            state,
            ProviderDetail {
                reserved_gpus,
                reserved_until_ms: until,
                ..ProviderDetail::default()
            },
            0,
        );
        if state != ProviderState::Reserved {
            r.detail.index = Some(0);
            r.detail.assignments = vec![ganglion_contracts::v2::datum::Assignment {
                provider: [2; 28],
                attest_key: [3; 32],
                payout: ganglion_contracts::v2::payout::Payout::enterprise([2; 28]),
                gpus: reserved_gpus,
                rate: 100,
                accept_by_ms: 1_000,
                started_at_ms: 0,
                until_ms: 5_000,
            }];
        }
        r
    }

    #[test]
    fn reservations_and_assigned_jobs_take_capacity_until_they_lapse_or_end() {
        let p = policy();
        let held = [record(1, ProviderState::Reserved, 3, 2_000)];
        assert_eq!(
            decide(&p, &req(2, 2), 0, &held, 99),
            Decision::Refuse(RefusalReason::NoCapacity { free: 1 })
        );
        // The reservation lapsed: its GPUs are free again.
        let later = AcceptRequest {
            accept_by_ms: 2_500,
            ..req(2, 2)
        };
        assert!(matches!(
            decide(&p, &later, 2_000, &held, 99),
            Decision::Reserve { gpus: 2, .. }
        ));
        // Assigned and running: busy whatever the reservation said.
        let running = [record(1, ProviderState::Running, 3, 0)];
        assert_eq!(
            decide(&p, &req(2, 2), 100, &running, 99),
            Decision::Refuse(RefusalReason::NoCapacity { free: 1 })
        );
        // Ended: nothing held.
        let ended = [record(1, ProviderState::Paid, 3, 0)];
        assert!(matches!(
            decide(&p, &req(2, 4), 0, &ended, 99),
            Decision::Reserve { gpus: 4, .. }
        ));
    }

    #[test]
    fn a_repeated_request_renews_its_own_reservation_but_a_tracked_job_is_not_taken_twice() {
        let p = policy();
        let own = [record(1, ProviderState::Reserved, 4, 500)];
        assert_eq!(
            decide(&p, &req(1, 4), 100, &own, 99),
            Decision::Reserve {
                gpus: 4,
                until_ms: 900
            }
        );
        for state in [ProviderState::Running, ProviderState::Failed] {
            assert_eq!(
                decide(&p, &req(1, 1), 100, &[record(1, state, 1, 0)], 99),
                Decision::Refuse(RefusalReason::AlreadyTracked)
            );
        }
    }

    #[test]
    fn the_bond_backs_no_more_gpus_than_it_has_free() {
        let p = policy();
        assert_eq!(
            decide(&p, &req(1, 2), 0, &[], 1),
            Decision::Refuse(RefusalReason::NoCapacity { free: 1 })
        );
        // Another job's reservation will commit the bond too.
        let held = [record(2, ProviderState::Reserved, 1, 1_000)];
        assert_eq!(
            decide(&p, &req(1, 2), 0, &held, 2),
            Decision::Refuse(RefusalReason::NoCapacity { free: 1 })
        );
        assert!(matches!(
            decide(&p, &req(1, 2), 0, &held, 3),
            Decision::Reserve { gpus: 2, .. }
        ));
    }

    #[test]
    fn price_deadline_bond_and_job_count_are_checked() {
        let p = policy();
        let mut cheap = req(1, 1);
        cheap.rate = 99;
        assert_eq!(
            decide(&p, &cheap, 0, &[], 99),
            Decision::Refuse(RefusalReason::RateTooLow { price: 100 })
        );
        let mut far = req(1, 1);
        far.deadline_ms = 20_000;
        assert_eq!(
            decide(&p, &far, 0, &[], 99),
            Decision::Refuse(RefusalReason::Deadline)
        );
        // Accept-by in the past, past the reservation limit or at the deadline.
        for accept_by_ms in [0, 1_101, 5_000] {
            let r = AcceptRequest {
                accept_by_ms,
                ..req(1, 1)
            };
            assert_eq!(
                decide(&p, &r, 100, &[], 99),
                Decision::Refuse(RefusalReason::AcceptBy { max_ms: 1_000 }),
                "accept-by {accept_by_ms}"
            );
        }
        // Receipt intervals a heartbeat cannot keep, or that risk too much unpaid work.
        for receipt_interval_ms in [0, MIN_RECEIPT_INTERVAL_MS - 1, 60_001] {
            let r = AcceptRequest {
                receipt_interval_ms,
                ..req(1, 1)
            };
            assert_eq!(
                decide(&p, &r, 0, &[], 99),
                Decision::Refuse(RefusalReason::ReceiptInterval {
                    min_ms: MIN_RECEIPT_INTERVAL_MS,
                    max_ms: 60_000
                }),
                "interval {receipt_interval_ms}"
            );
        }
        let two = [
            record(2, ProviderState::Reserved, 1, 1_000),
            record(3, ProviderState::Running, 1, 0),
        ];
        assert_eq!(
            decide(&p, &req(1, 1), 0, &two, 99),
            Decision::Refuse(RefusalReason::TooManyJobs { active: 2, max: 2 })
        );
    }
}
