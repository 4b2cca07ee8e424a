//! Per-job addressing: one subnet per job from a configurable pool, one address per container
//! with rank 0 first, and the hostnames/`extra_hosts` every container gets (DESIGN §6).
//!
//! The subnet is a pure function of the job id and the subnets already held by running jobs:
//! slot `SHA-256(job id)[..8] mod slots`, probing upwards past held slots. The node that
//! places rank 0 picks it and announces it with the job's keys, so every node of the job uses
//! the same plan.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::OverlayError;
use crate::executor::plan::RunId;

/// Ranges Docker hands out by default (the `bridge` network, `default-address-pools` and swarm
/// overlays): an overlay pool must not overlap them, or routes inside a pod would be ambiguous.
pub const DOCKER_RANGES: [Ipv4Net; 3] = [
    Ipv4Net::new_assert(Ipv4Addr::new(172, 16, 0, 0), 12),
    Ipv4Net::new_assert(Ipv4Addr::new(192, 168, 0, 0), 16),
    Ipv4Net::new_assert(Ipv4Addr::new(10, 0, 0, 0), 8),
];

/// Carrier-grade NAT space (RFC 6598); every pool must lie inside it.
pub const SHARED_ADDRESS_SPACE: Ipv4Net = Ipv4Net::new_assert(Ipv4Addr::new(100, 64, 0, 0), 10);

/// The pool job subnets are cut from (config `[overlay]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlayPool {
    /// The whole pool, e.g. `100.96.0.0/12`.
    pub pool: Ipv4Net,
    /// Prefix length of one job's subnet, e.g. `24` (253 containers).
    pub job_prefix: u8,
}

impl Default for OverlayPool {
    /// `100.96.0.0/12` cut into `/24`s: 4096 concurrent jobs of up to 253 containers.
    fn default() -> Self {
        Self {
            pool: Ipv4Net::new_assert(Ipv4Addr::new(100, 96, 0, 0), 12),
            job_prefix: 24,
        }
    }
}

impl OverlayPool {
    /// Checks the pool: inside 100.64.0.0/10, no overlap with [`DOCKER_RANGES`], and a job
    /// prefix between the pool's own and /30.
    ///
    /// # Errors
    /// [`OverlayError::Pool`] naming the broken rule.
    pub fn validate(&self) -> Result<(), OverlayError> {
        let fail = |reason: &str| {
            Err(OverlayError::Pool {
                pool: self.pool,
                reason: reason.into(),
            })
        };
        if self.pool.trunc() != self.pool {
            return fail("has host bits set");
        }
        if !SHARED_ADDRESS_SPACE.contains(&self.pool) {
            return fail("must lie inside 100.64.0.0/10 (RFC 6598)");
        }
        if DOCKER_RANGES
            .iter()
            .any(|d| d.contains(&self.pool) || self.pool.contains(d))
        {
            return fail("overlaps a Docker default range");
        }
        if self.job_prefix < self.pool.prefix_len() || self.job_prefix > 30 {
            return fail("job prefix must lie between the pool's prefix and /30");
        }
        Ok(())
    }

    /// How many job subnets the pool holds.
    pub fn slots(&self) -> u64 {
        1u64 << (self.job_prefix - self.pool.prefix_len())
    }

    /// The `slot`-th job subnet (no bounds check beyond the pool's).
    fn subnet(&self, slot: u64) -> Ipv4Net {
        let size = 1u64 << (32 - self.job_prefix);
        let base = u64::from(u32::from(self.pool.network()));
        // slot < slots() keeps this inside the pool, hence inside u32.
        let network = Ipv4Addr::from(u32::try_from(base + slot * size).unwrap_or(u32::MAX));
        Ipv4Net::new_assert(network, self.job_prefix)
    }

    /// Plans `job`'s overlay for `world` containers, avoiding the subnets in `held` (those of
    /// the jobs running now). Deterministic in `(job, world, held)`.
    ///
    /// # Errors
    /// [`OverlayError::Pool`] for an invalid pool, [`OverlayError::WorldTooLarge`] when the
    /// containers do not fit a job subnet, [`OverlayError::PoolExhausted`] when every subnet
    /// is held.
    pub fn plan(
        &self,
        job: &RunId,
        world: u32,
        held: &BTreeSet<Ipv4Net>,
    ) -> Result<JobOverlay, OverlayError> {
        self.validate()?;
        let capacity = (1u64 << (32 - self.job_prefix)) - 2;
        if world == 0 || u64::from(world) > capacity {
            return Err(OverlayError::WorldTooLarge {
                world,
                prefix: self.job_prefix,
                capacity,
            });
        }
        let digest = Sha256::digest(job.as_str().as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        let slots = self.slots();
        let start = u64::from_be_bytes(first) % slots;
        let subnet = (0..slots)
            .map(|i| self.subnet((start + i) % slots))
            .find(|s| !held.contains(s))
            .ok_or(OverlayError::PoolExhausted {
                pool: self.pool,
                subnets: slots,
            })?;
        let hosts: Vec<Ipv4Addr> = subnet.hosts().take(world as usize).collect();
        Ok(JobOverlay {
            subnet,
            addresses: hosts,
        })
    }
}

/// One job's overlay plan: its subnet and the address of every container, by rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOverlay {
    /// The job's subnet (the route inside every pod).
    pub subnet: Ipv4Net,
    /// `addresses[rank]`: the container of node rank `rank`; rank 0 has the first host address.
    pub addresses: Vec<Ipv4Addr>,
}

impl JobOverlay {
    /// The overlay address of node rank `rank`, if the job has it.
    pub fn address(&self, rank: u32) -> Option<Ipv4Addr> {
        self.addresses.get(rank as usize).copied()
    }

    /// The hostname of node rank `rank` (the same as the single-host bridge uses).
    pub fn hostname(rank: u32) -> String {
        format!("rank-{rank}")
    }

    /// `HostConfig.ExtraHosts` for every rank: `rank-<n>:<address>`.
    pub fn extra_hosts(&self) -> Vec<String> {
        self.addresses
            .iter()
            .enumerate()
            .map(|(rank, ip)| format!("rank-{rank}:{ip}"))
            .collect()
    }

    /// The interface address of `rank`: its address with the job subnet's prefix length.
    pub fn interface_net(&self, rank: u32) -> Option<Ipv4Net> {
        let ip = self.address(rank)?;
        Ipv4Net::new(ip, self.subnet.prefix_len()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job(id: &str) -> RunId {
        RunId::new(id).expect("valid job id")
    }

    #[test]
    fn default_pool_is_valid_and_avoids_docker() {
        let pool = OverlayPool::default();
        pool.validate().expect("default pool");
        assert_eq!(pool.slots(), 4096);
    }

    #[test]
    fn bad_pools_are_refused() {
        let docker = OverlayPool {
            pool: "172.17.0.0/16".parse().expect("net"),
            job_prefix: 24,
        };
        assert!(matches!(docker.validate(), Err(OverlayError::Pool { .. })));
        let outside = OverlayPool {
            pool: "100.0.0.0/12".parse().expect("net"),
            job_prefix: 24,
        };
        assert!(outside.validate().is_err());
        let prefix = OverlayPool {
            pool: "100.96.0.0/12".parse().expect("net"),
            job_prefix: 31,
        };
        assert!(prefix.validate().is_err());
        let host_bits = OverlayPool {
            pool: "100.96.0.1/12".parse().expect("net"),
            job_prefix: 24,
        };
        assert!(host_bits.validate().is_err());
    }

    #[test]
    fn rank_zero_gets_the_first_host_address() {
        let plan = OverlayPool::default()
            .plan(&job("job-a"), 3, &BTreeSet::new())
            .expect("plan");
        let first = plan.subnet.hosts().next().expect("host");
        assert_eq!(plan.address(0), Some(first));
        assert_eq!(plan.addresses.len(), 3);
        assert_eq!(
            plan.extra_hosts()[2],
            format!("rank-2:{}", plan.addresses[2])
        );
        assert_eq!(plan.address(3), None);
        assert_eq!(
            plan.interface_net(1).map(|n| n.prefix_len()),
            Some(plan.subnet.prefix_len())
        );
    }

    #[test]
    fn world_must_fit_and_pool_can_run_out() {
        let small = OverlayPool {
            pool: "100.64.0.0/29".parse().expect("net"),
            job_prefix: 30,
        };
        assert!(matches!(
            small.plan(&job("j"), 3, &BTreeSet::new()),
            Err(OverlayError::WorldTooLarge { capacity: 2, .. })
        ));
        assert!(small.plan(&job("j"), 0, &BTreeSet::new()).is_err());
        let a = small.plan(&job("a"), 2, &BTreeSet::new()).expect("a");
        let b = small
            .plan(&job("b"), 2, &BTreeSet::from([a.subnet]))
            .expect("b");
        assert_ne!(a.subnet, b.subnet);
        assert!(matches!(
            small.plan(&job("c"), 2, &BTreeSet::from([a.subnet, b.subnet])),
            Err(OverlayError::PoolExhausted { subnets: 2, .. })
        ));
    }

    proptest! {
        /// Jobs planned one after another (each seeing the others as held) never overlap,
        /// stay inside the pool, and re-planning with the same inputs gives the same plan.
        #[test]
        fn concurrent_jobs_never_overlap(
            ids in proptest::collection::btree_set("[a-z0-9]{1,12}", 1..40),
            world in 1u32..=14,
        ) {
            let pool = OverlayPool { pool: "100.100.0.0/22".parse().expect("net"), job_prefix: 28 };
            let mut held = BTreeSet::new();
            for id in &ids {
                let plan = pool.plan(&job(id), world, &held).expect("fits: 64 slots");
                prop_assert!(pool.pool.contains(&plan.subnet));
                prop_assert!(held.iter().all(|h: &Ipv4Net| !h.contains(&plan.subnet) && !plan.subnet.contains(h)));
                prop_assert_eq!(plan.addresses.len(), world as usize);
                prop_assert!(plan.addresses.iter().all(|a| plan.subnet.contains(a)
                    && *a != plan.subnet.network() && *a != plan.subnet.broadcast()));
                prop_assert_eq!(&pool.plan(&job(id), world, &held).expect("again"), &plan);
                held.insert(plan.subnet);
            }
        }
    }
}
