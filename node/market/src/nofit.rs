//! Why nothing fits: the no-fit report of [`super::match_gang`], naming the limit that bound
//! and the numbers behind it.
//!
//! Two parts. *Exclusions*: every free GPU is charged to the first constraint (in
//! [`Constraint`] order) that excludes it, per provider or per GPU. *The binding limit*
//! ([`Binding`]): when too few GPUs stay eligible, the exclusion that, lifted alone, gives back
//! enough GPUs (or else the most); when enough stay eligible, the first placement limit
//! that no plan can pass, checked in this order: `placement.groups.count` (fewer eligible
//! machines than groups, a machine serving one group), `placement.max_nodes` (the eligible nodes'
//! largest shares cannot reach the count in that many machines), `placement.min_bandwidth_mbps`
//! (per node: too few nodes have the uplink or a measured pair that fast), the providers' own
//! `max_job_nodes`, then the pairwise limits — `placement.groups.max_rtt_ms`,
//! `placement.max_rtt_ms`, `placement.min_bandwidth_mbps` per pair — of which the first that
//! still keeps every plan out with the later ones lifted binds (one extra search per lifted
//! step, only when several are set), and last the search budget. A pairwise limit names the
//! closest failing pair of candidate providers ([`PairFailure`]).
//! Pure, like the matcher; it runs only when no plan was found.

use std::fmt;

use serde::Serialize;

use super::matching::{Constraint, Requirements, node_share, search};
use super::snapshot::{MarketSnapshot, Provider, ProviderId, RTT_MASK};
use super::spec::{ComputeCapability, Interconnect};

/// GPUs and providers that one constraint excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Excluded {
    /// The constraint.
    pub constraint: Constraint,
    /// Providers it removed entirely.
    pub providers: u32,
    /// Free GPUs it removed.
    pub gpus: u64,
}

/// The limit that kept every plan out, with the numbers behind it.
///
/// `eligible_without` is the number of GPUs that would be eligible were this limit lifted alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Binding {
    /// `limits.max_rate_ntx_per_gpu_hour` is below the excluded providers' prices.
    MaxRate {
        /// The spec's rate ceiling, NTX base units per GPU-hour.
        max_rate: u64,
        /// The cheapest price it excluded, NTX base units per GPU-hour.
        cheapest_excluded: u64,
        /// GPUs eligible without the ceiling.
        eligible_without: u64,
    },
    /// `gpus.min_vram_gib` (the marketed class, [`super::vram::meets_class`]).
    Vram {
        /// The class asked, GiB.
        min_vram_gib: u32,
        /// The largest reported total among the GPUs it excluded, MiB.
        largest_excluded_mib: u64,
        /// GPUs eligible without the minimum.
        eligible_without: u64,
    },
    /// `gpus.min_compute_capability`.
    ComputeCapability {
        /// The minimum asked.
        min: ComputeCapability,
        /// The highest capability among the GPUs it excluded (`None`: none reported one).
        best_excluded: Option<ComputeCapability>,
        /// GPUs eligible without the minimum.
        eligible_without: u64,
    },
    /// A collective job (NCCL between its GPUs) takes at most one MIG slice of a card: slices
    /// of one GPU have no peer path.
    MigSlices {
        /// Further slices of cards already counted once.
        slices_excluded: u64,
        /// GPUs eligible were several slices of a card allowed.
        eligible_without: u64,
    },
    /// `placement.min_gpus_per_node`: providers with eligible GPUs, but fewer than that.
    MinGpusPerNode {
        /// The minimum per node.
        min_gpus_per_node: u32,
        /// The most eligible GPUs on one of the providers it excluded.
        largest_excluded_node: u32,
        /// GPUs eligible without the minimum.
        eligible_without: u64,
    },
    /// `gpus.interconnect_group`: enough eligible GPUs, but no one RDMA fabric has enough.
    InterconnectGroup {
        /// The spec's group label.
        group: String,
        /// Fabrics with eligible GPUs.
        fabrics: u32,
        /// Eligible GPUs on the largest of them.
        largest_fabric_gpus: u64,
    },
    /// `placement.groups.count`: fewer eligible machines than groups. A group is a set of
    /// whole machines and a machine serves one group, so no latency bound is to blame.
    GroupMachines {
        /// Groups asked (`placement.groups.count`): the fewest machines a plan needs.
        groups: u32,
        /// Eligible machines.
        machines: u32,
    },
    /// `placement.max_nodes`: the eligible GPUs need more machines.
    MaxNodes {
        /// The limit.
        max_nodes: u32,
        /// Fewest machines that hold the count (largest eligible shares first); `u32::MAX`
        /// when all of them together do not.
        nodes_needed: u32,
        /// The most eligible GPUs on one machine.
        largest_node: u32,
    },
    /// `placement.min_bandwidth_mbps`: without the slow providers the count is out of reach.
    MinBandwidth {
        /// The minimum uplink, Mbit/s.
        min_bandwidth_mbps: u32,
        /// Eligible providers below it.
        providers_below: u32,
        /// Their GPUs.
        gpus_below: u64,
        /// The fastest uplink among them, Mbit/s.
        fastest_below_mbps: u32,
    },
    /// The providers' own `max_job_nodes` (`[provider]` limits) refuse a plan that large.
    ProviderMaxJobNodes {
        /// Fewest machines a plan needs.
        nodes_needed: u32,
        /// Eligible providers whose `max_job_nodes` is below that.
        providers_refusing: u32,
    },
    /// `placement.max_rtt_ms`: no set of enough providers is pairwise within the bound.
    MaxRtt {
        /// The bound, ms.
        max_rtt_ms: u32,
        /// Fewest machines a plan needs.
        nodes_needed: u32,
        /// Pairs of candidate providers measured within the bound.
        pairs_within: u64,
        /// Pairs measured above it.
        pairs_over: u64,
        /// Pairs never measured (never within any bound).
        pairs_unmeasured: u64,
    },
    /// `placement.groups`: the latency groups cannot be formed — no `groups` disjoint sets of
    /// whole eligible machines, each pairwise within `placement.groups.max_rtt_ms` and holding
    /// exactly `gpus_per_group` GPUs.
    GroupMaxRtt {
        /// The groups' bound, ms.
        max_rtt_ms: u32,
        /// Groups asked.
        groups: u32,
        /// GPUs per group.
        gpus_per_group: u32,
        /// Eligible machines that may join a plan of that many nodes (at least `groups`: with
        /// fewer, [`Binding::GroupMachines`] or the limit that left them out binds).
        machines: u32,
        /// Pairs of candidate providers measured within the bound.
        pairs_within: u64,
        /// Pairs measured above it.
        pairs_over: u64,
        /// Pairs never measured.
        pairs_unmeasured: u64,
    },
    /// `placement.min_bandwidth_mbps`, pair by pair: enough providers are fast enough alone,
    /// but no set of them is pairwise (a pair's measured throughput, else both ends' uplinks).
    MinPairBandwidth {
        /// The floor, Mbit/s.
        min_bandwidth_mbps: u32,
        /// Fewest machines a plan needs.
        nodes_needed: u32,
        /// Pairs of candidate providers measured below the floor.
        pairs_below: u64,
        /// Candidate providers whose uplink is below the floor (their unmeasured pairs fail).
        slow_providers: u32,
    },
    /// The search stopped at [`super::matching::MAX_SEARCH_STEPS`] before it found a plan.
    SearchBudget {
        /// Candidate visits made.
        steps: u64,
    },
    /// Any other exclusion (bond, concurrent jobs, duration, vendor, arch, model, interconnect).
    Excluded {
        /// The constraint.
        constraint: Constraint,
        /// Free GPUs it excluded.
        gpus: u64,
        /// GPUs eligible without it.
        eligible_without: u64,
    },
}

impl Binding {
    /// The constraint this binding is about.
    pub fn constraint(&self) -> Constraint {
        match self {
            Self::MaxRate { .. } => Constraint::MaxRate,
            Self::Vram { .. } => Constraint::Vram,
            Self::ComputeCapability { .. } => Constraint::ComputeCapability,
            Self::MigSlices { .. } => Constraint::MigSlices,
            Self::MinGpusPerNode { .. } => Constraint::MinGpusPerNode,
            Self::InterconnectGroup { .. } => Constraint::InterconnectGroup,
            Self::GroupMachines { .. } => Constraint::GroupMachines,
            Self::MaxNodes { .. } => Constraint::MaxNodes,
            Self::MinBandwidth { .. } => Constraint::MinBandwidth,
            Self::ProviderMaxJobNodes { .. } => Constraint::ProviderMaxJobNodes,
            Self::MaxRtt { .. } => Constraint::MaxRtt,
            Self::GroupMaxRtt { .. } => Constraint::GroupMaxRtt,
            Self::MinPairBandwidth { .. } => Constraint::MinBandwidth,
            Self::SearchBudget { .. } => Constraint::SearchBudget,
            Self::Excluded { constraint, .. } => *constraint,
        }
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MaxRate {
                max_rate,
                cheapest_excluded,
                eligible_without,
            } => write!(
                f,
                "limits.max_rate_ntx_per_gpu_hour {max_rate} is below the cheapest excluded price \
                 {cheapest_excluded} ({eligible_without} GPUs eligible without it)"
            ),
            Self::Vram {
                min_vram_gib,
                largest_excluded_mib,
                eligible_without,
            } => write!(
                f,
                "gpus.min_vram_gib {min_vram_gib}: the largest excluded GPU reports \
                 {largest_excluded_mib} MiB, below the {min_vram_gib} GB class \
                 ({eligible_without} GPUs eligible without it)"
            ),
            Self::ComputeCapability {
                min,
                best_excluded,
                eligible_without,
            } => {
                write!(
                    f,
                    "gpus.min_compute_capability {min}: the best excluded GPU has "
                )?;
                match best_excluded {
                    Some(cc) => write!(f, "{cc}")?,
                    None => f.write_str("none")?,
                }
                write!(f, " ({eligible_without} GPUs eligible without it)")
            }
            Self::MigSlices {
                slices_excluded,
                eligible_without,
            } => write!(
                f,
                "MIG slices: a collective job (distributed.framework) gets at most one MIG slice \
                 per card, as slices of one GPU have no peer path for NCCL; {slices_excluded} \
                 further slices excluded ({eligible_without} GPUs eligible without this rule)"
            ),
            Self::MinGpusPerNode {
                min_gpus_per_node,
                largest_excluded_node,
                eligible_without,
            } => write!(
                f,
                "placement.min_gpus_per_node {min_gpus_per_node}: the excluded providers have at \
                 most {largest_excluded_node} eligible GPUs each ({eligible_without} GPUs \
                 eligible without it)"
            ),
            Self::InterconnectGroup {
                group,
                fabrics,
                largest_fabric_gpus,
            } => write!(
                f,
                "gpus.interconnect_group {group}: no RDMA fabric has enough eligible GPUs \
                 ({fabrics} fabrics, the largest with {largest_fabric_gpus})"
            ),
            Self::GroupMachines { groups, machines } => write!(
                f,
                "placement.groups.count {groups}: {groups} groups need {groups} machines (a \
                 machine serves one group), {machines} eligible"
            ),
            Self::MaxNodes {
                max_nodes,
                nodes_needed,
                largest_node,
            } if *nodes_needed == u32::MAX => write!(
                f,
                "placement.max_nodes {max_nodes}: all the eligible machines together cannot \
                 hold the GPUs asked (at most {largest_node} on one)"
            ),
            Self::MaxNodes {
                max_nodes,
                nodes_needed,
                largest_node,
            } => write!(
                f,
                "placement.max_nodes {max_nodes}: the eligible GPUs need at least {nodes_needed} \
                 machines (at most {largest_node} on one)"
            ),
            Self::MinBandwidth {
                min_bandwidth_mbps,
                providers_below,
                gpus_below,
                fastest_below_mbps,
            } => write!(
                f,
                "placement.min_bandwidth_mbps {min_bandwidth_mbps}: {providers_below} eligible \
                 providers ({gpus_below} GPUs) are below it, the fastest at \
                 {fastest_below_mbps} Mbit/s"
            ),
            Self::ProviderMaxJobNodes {
                nodes_needed,
                providers_refusing,
            } => write!(
                f,
                "provider max_job_nodes: {providers_refusing} eligible providers refuse a job of \
                 {nodes_needed} machines"
            ),
            Self::MaxRtt {
                max_rtt_ms,
                nodes_needed,
                pairs_within,
                pairs_over,
                pairs_unmeasured,
            } => write!(
                f,
                "placement.max_rtt_ms {max_rtt_ms}: no {nodes_needed} eligible providers are \
                 pairwise within it ({pairs_within} pairs within, {pairs_over} over, \
                 {pairs_unmeasured} unmeasured)"
            ),
            Self::GroupMaxRtt {
                max_rtt_ms,
                groups,
                gpus_per_group,
                machines,
                pairs_within,
                pairs_over,
                pairs_unmeasured,
            } => write!(
                f,
                "placement.groups.max_rtt_ms {max_rtt_ms}: no {groups} groups of {gpus_per_group} \
                 GPUs, each on whole machines pairwise within it, can be formed ({machines} \
                 eligible machines; {pairs_within} pairs within, {pairs_over} over, \
                 {pairs_unmeasured} unmeasured)"
            ),
            Self::MinPairBandwidth {
                min_bandwidth_mbps,
                nodes_needed,
                pairs_below,
                slow_providers,
            } => write!(
                f,
                "placement.min_bandwidth_mbps {min_bandwidth_mbps}: no {nodes_needed} eligible \
                 providers are pairwise at or above it ({pairs_below} pairs measured below, \
                 {slow_providers} providers with a slower uplink whose unmeasured pairs count \
                 as below)"
            ),
            Self::SearchBudget { steps } => write!(
                f,
                "the search stopped after {steps} steps (MAX_SEARCH_STEPS) without a plan"
            ),
            Self::Excluded {
                constraint,
                gpus,
                eligible_without,
            } => write!(
                f,
                "{constraint}: excluded {gpus} GPUs ({eligible_without} GPUs eligible without it)"
            ),
        }
    }
}

/// The bound a [`PairFailure`] misses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairBound {
    /// An RTT ceiling, µs (`placement.max_rtt_ms` or `placement.groups.max_rtt_ms`).
    MaxRttUs(u32),
    /// A throughput floor, Mbit/s (`placement.min_bandwidth_mbps`).
    MinMbps(u32),
}

/// The closest failing pair of a pairwise limit: two candidate providers (eligible, joining a
/// plan of that many nodes) whose pair misses the bound by the least — the measured pair
/// nearest the bound, else an unmeasured pair (lowest ranks first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PairFailure {
    /// The limit: [`Constraint::MaxRtt`], [`Constraint::GroupMaxRtt`] or
    /// [`Constraint::MinBandwidth`].
    pub constraint: Constraint,
    /// One end (the lower-ranked).
    #[serde(with = "hex::serde")]
    pub a: ProviderId,
    /// The other end.
    #[serde(with = "hex::serde")]
    pub b: ProviderId,
    /// The pair's measured RTT, µs; `None` = never measured.
    pub rtt_us: Option<u32>,
    /// The pair's measured throughput, Mbit/s; `None` = not measured.
    pub mbps: Option<u32>,
    /// The bound it misses.
    pub bound: PairBound,
}

/// A provider id in short hex: its first 4 bytes and an ellipsis.
fn short(id: &ProviderId) -> String {
    format!("{}…", hex::encode(&id[..4]))
}

/// µs as ms, with up to three decimals (`2 ms`, `2.35 ms`).
fn ms(us: u32) -> String {
    let (whole, frac) = (us / 1000, us % 1000);
    if frac == 0 {
        format!("{whole} ms")
    } else {
        let frac = format!("{frac:03}");
        format!("{whole}.{} ms", frac.trim_end_matches('0'))
    }
}

impl fmt::Display for PairFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: pair {}–{} ",
            self.constraint,
            short(&self.a),
            short(&self.b)
        )?;
        match (self.bound, self.rtt_us, self.mbps) {
            (PairBound::MaxRttUs(bound), Some(rtt), _) => {
                write!(f, "measured {}, bound {}", ms(rtt), ms(bound))
            }
            (PairBound::MaxRttUs(bound), None, _) => {
                write!(f, "unmeasured (never within a bound), bound {}", ms(bound))
            }
            (PairBound::MinMbps(bound), _, Some(mbps)) => {
                write!(f, "measured {mbps} Mbit/s, bound {bound} Mbit/s")
            }
            (PairBound::MinMbps(bound), _, None) => write!(
                f,
                "unmeasured (an end's uplink is below the bound), bound {bound} Mbit/s"
            ),
        }
    }
}

/// Why nothing fits: the binding limit, then each free GPU charged to the first constraint (in
/// [`Constraint`] order) that excludes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct NoFit {
    /// GPUs requested.
    pub requested: u32,
    /// Free GPUs in the snapshot.
    pub free_gpus: u64,
    /// Eligible GPUs left after every per-provider and per-GPU constraint.
    pub eligible_gpus: u64,
    /// Providers with eligible GPUs.
    pub eligible_providers: u32,
    /// The limit that bound, with its numbers.
    pub binding: Binding,
    /// With a pairwise limit binding (`placement.max_rtt_ms`, `placement.groups.max_rtt_ms`,
    /// `placement.min_bandwidth_mbps` per pair): its closest failing pair (boxed: the report
    /// stays small on the matcher's `Err` path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair: Option<Box<PairFailure>>,
    /// Exclusions with a non-zero count, in constraint order (a placement limit that bound is
    /// charged with every eligible GPU).
    pub excluded: Vec<Excluded>,
}

impl fmt::Display for NoFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no plan for {} GPUs: {}; {} of {} free GPUs eligible on {} providers",
            self.requested,
            self.binding,
            self.eligible_gpus,
            self.free_gpus,
            self.eligible_providers
        )?;
        if let Some(pair) = &self.pair {
            write!(f, "; closest failing {pair}")?;
        }
        for e in &self.excluded {
            write!(
                f,
                "; {}: {} GPUs ({} providers)",
                e.constraint, e.gpus, e.providers
            )?;
        }
        Ok(())
    }
}

/// The diagnosis pass: per-model failure sets and per-provider eligibility with one
/// constraint lifted.
struct Diag<'a> {
    req: &'a Requirements,
    market: &'a MarketSnapshot,
    /// Per model: its failure set ([`Requirements::model_failures`]).
    model_fails: Vec<u64>,
}

impl Diag<'_> {
    /// Provider-level constraints `p` fails.
    fn provider_fails(&self, p: &Provider) -> u64 {
        let req = self.req;
        let mut fails = 0;
        for (c, bad) in [
            (Constraint::NoBond, p.bond_gpus == 0),
            (Constraint::ConcurrentJobs, p.jobs_full),
            (Constraint::MaxRate, p.price > req.max_rate),
            (
                Constraint::Duration,
                p.max_job_duration_s < req.max_duration_s,
            ),
        ] {
            if bad {
                fails |= c.bit();
            }
        }
        fails
    }

    /// GPUs `p` gives one node with the constraints of `lift` ignored; 0 when refused. With
    /// `lift = 0` this is the matcher's own eligibility.
    fn eligible(&self, p: &Provider, lift: u64) -> u32 {
        self.eligible_on(p, lift, None)
    }

    /// [`Diag::eligible`] counting only GPUs on `fabric` when given.
    fn eligible_on(&self, p: &Provider, lift: u64, fabric: Option<&str>) -> u32 {
        let req = self.req;
        if self.provider_fails(p) & !lift != 0 {
            return 0;
        }
        let groups = &self.market.groups[p.groups.0 as usize..p.groups.1 as usize];
        let ok = groups.iter().filter(|g| {
            self.model_fails[g.model as usize] & !lift == 0
                && fabric.is_none_or(|f| {
                    self.market.models[g.model as usize].fabric.as_deref() == Some(f)
                })
        });
        let link = if lift & Constraint::Interconnect.bit() != 0 {
            Interconnect::Any
        } else {
            req.interconnect
        };
        let one_slice = req.collective && lift & Constraint::MigSlices.bit() == 0;
        let mut e = node_share(self.market, ok, link, one_slice);
        if lift & Constraint::BondSize.bit() == 0 {
            e = e.min(p.bond_gpus);
        }
        e = e.min(req.max_gpus_per_node.unwrap_or(u32::MAX));
        if e < req.min_gpus_per_node && lift & Constraint::MinGpusPerNode.bit() == 0 {
            0
        } else {
            e
        }
    }

    fn eligible_total(&self, lift: u64) -> u64 {
        (self.market.providers.iter())
            .map(|p| u64::from(self.eligible(p, lift)))
            .sum()
    }
}

/// Fewest of `shares` (any order) whose largest ones reach `count`; `None` if all cannot.
fn nodes_needed(shares: impl Iterator<Item = u32>, count: u32) -> Option<u32> {
    let mut v: Vec<u32> = shares.filter(|&e| e > 0).collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    let mut sum = 0u64;
    for (i, e) in v.iter().enumerate() {
        sum += u64::from(*e);
        if sum >= u64::from(count) {
            return Some(i as u32 + 1);
        }
    }
    None
}

/// [`nodes_needed`] for `groups` latency groups: at least one machine per group, as a machine
/// serves one group; `None` when the shares cannot hold the count or are fewer than `groups`.
fn nodes_needed_grouped(shares: impl Iterator<Item = u32>, count: u32, groups: u32) -> Option<u32> {
    let v: Vec<u32> = shares.filter(|&e| e > 0).collect();
    if v.len() < groups as usize {
        return None;
    }
    nodes_needed(v.into_iter(), count).map(|n| n.max(groups))
}

/// The no-fit report for `req` on `market` (`model_ok[m]`: model `m` passes every per-GPU
/// constraint; `cut`: the search's step count when it ran out of budget).
pub(super) fn diagnose(
    req: &Requirements,
    market: &MarketSnapshot,
    model_ok: &[bool],
    cut: Option<u64>,
) -> NoFit {
    let diag = Diag {
        req,
        market,
        model_fails: market
            .models
            .iter()
            .map(|m| req.model_failures(m))
            .collect(),
    };
    debug_assert!(
        (diag.model_fails.iter().zip(model_ok)).all(|(f, ok)| (*f == 0) == *ok),
        "per-GPU eligibility agrees with the matcher"
    );
    // (providers, GPUs) per constraint, indexed by its position in `Constraint::ALL`.
    let mut by: [Option<(u32, u64)>; Constraint::ALL.len()] = [None; Constraint::ALL.len()];
    let mut charge = |c: Constraint, whole: bool, gpus: u64| {
        if gpus > 0 {
            let e = by[c as usize].get_or_insert((0, 0));
            e.0 += u32::from(whole);
            e.1 += gpus;
        }
    };
    let (mut free_gpus, mut eligible_gpus, mut eligible_providers) = (0u64, 0u64, 0u32);
    // Eligible (rank, GPUs) pairs.
    let mut shares: Vec<(u32, u32)> = Vec::new();
    for (rank, p) in market.providers.iter().enumerate() {
        let free = u64::from(p.free_total);
        free_gpus += free;
        if let Some(c) = Constraint::first(diag.provider_fails(p)) {
            charge(c, true, free);
            continue;
        }
        let groups = &market.groups[p.groups.0 as usize..p.groups.1 as usize];
        let (mut ok_sum, mut ok_max) = (0u32, 0u32);
        for g in groups {
            match Constraint::first(diag.model_fails[g.model as usize]) {
                Some(c) => charge(c, false, u64::from(g.free)),
                None => {
                    ok_sum = ok_sum.saturating_add(g.free);
                    ok_max = ok_max.max(g.free);
                }
            }
        }
        let mut e = ok_sum;
        if req.interconnect != Interconnect::Any {
            charge(Constraint::Interconnect, false, u64::from(ok_sum - ok_max));
            e = ok_max;
        }
        if req.collective && market.has_mig {
            let ok = groups
                .iter()
                .filter(|g| diag.model_fails[g.model as usize] == 0);
            let one_slice = node_share(market, ok, req.interconnect, true);
            charge(Constraint::MigSlices, false, u64::from(e - one_slice));
            e = one_slice;
        }
        if e > p.bond_gpus {
            charge(Constraint::BondSize, false, u64::from(e - p.bond_gpus));
            e = p.bond_gpus;
        }
        let capped = e.min(req.max_gpus_per_node.unwrap_or(u32::MAX));
        if capped < req.min_gpus_per_node {
            charge(Constraint::MinGpusPerNode, true, u64::from(e));
            continue;
        }
        if e > 0 {
            eligible_gpus += u64::from(e);
            eligible_providers += 1;
            shares.push((rank as u32, capped));
        }
    }
    let (binding, pair) = if eligible_gpus < u64::from(req.count) {
        (excluded_binding(&diag, &by), None)
    } else {
        let (b, pair) = match fabric_binding(&diag) {
            Some(b) => (b, None),
            None => placement_binding(&diag, &shares, model_ok, cut),
        };
        by[b.constraint() as usize] = Some((eligible_providers, eligible_gpus));
        (b, pair)
    };
    NoFit {
        requested: req.count,
        free_gpus,
        eligible_gpus,
        eligible_providers,
        binding,
        pair: pair.map(Box::new),
        excluded: (Constraint::ALL.iter().zip(by))
            .filter_map(|(&constraint, e)| {
                e.map(|(providers, gpus)| Excluded {
                    constraint,
                    providers,
                    gpus,
                })
            })
            .collect(),
    }
}

/// Too few eligible GPUs: the exclusion that, lifted alone, reaches the count (the first in
/// constraint order), or else gives back the most.
fn excluded_binding(diag: &Diag<'_>, by: &[Option<(u32, u64)>]) -> Binding {
    let (req, market) = (diag.req, diag.market);
    let mut best: Option<(Constraint, u64, u64)> = None;
    for (&c, e) in Constraint::ALL.iter().zip(by) {
        let Some((_, gpus)) = *e else { continue };
        let without = diag.eligible_total(c.bit());
        let count = u64::from(req.count);
        // Keep the first that reaches the count; until one does, the one giving back most.
        let better = best.is_none_or(|(_, _, b)| b < count && (without >= count || without > b));
        if better {
            best = Some((c, gpus, without));
        }
    }
    let Some((c, gpus, eligible_without)) = best else {
        // Nothing free at all.
        return Binding::Excluded {
            constraint: Constraint::NoBond,
            gpus: 0,
            eligible_without: 0,
        };
    };
    let failing: Vec<&super::snapshot::GpuModel> = (market.models.iter())
        .zip(&diag.model_fails)
        .filter(|(_, f)| **f & c.bit() != 0)
        .map(|(m, _)| m)
        .collect();
    match c {
        Constraint::MaxRate => Binding::MaxRate {
            max_rate: req.max_rate,
            cheapest_excluded: (market.providers.iter())
                .filter(|p| p.price > req.max_rate && p.free_total > 0)
                .map(|p| p.price)
                .min()
                .unwrap_or(0),
            eligible_without,
        },
        Constraint::Vram => Binding::Vram {
            min_vram_gib: req.min_vram_gib,
            largest_excluded_mib: failing.iter().map(|m| m.vram_mib).max().unwrap_or(0),
            eligible_without,
        },
        Constraint::ComputeCapability => Binding::ComputeCapability {
            min: req
                .min_compute_capability
                .unwrap_or(ComputeCapability { major: 0, minor: 0 }),
            best_excluded: failing.iter().filter_map(|m| m.compute_capability).max(),
            eligible_without,
        },
        Constraint::MigSlices => Binding::MigSlices {
            slices_excluded: gpus,
            eligible_without,
        },
        Constraint::MinGpusPerNode => Binding::MinGpusPerNode {
            min_gpus_per_node: req.min_gpus_per_node,
            largest_excluded_node: (market.providers.iter())
                .map(|p| diag.eligible(p, c.bit()))
                .filter(|&e| e < req.min_gpus_per_node)
                .max()
                .unwrap_or(0),
            eligible_without,
        },
        _ => Binding::Excluded {
            constraint: c,
            gpus,
            eligible_without,
        },
    }
}

/// With an interconnect group: whether no single fabric has enough eligible GPUs.
fn fabric_binding(diag: &Diag<'_>) -> Option<Binding> {
    let (req, market) = (diag.req, diag.market);
    let group = req.interconnect_group.as_ref()?;
    let mut fabrics: Vec<&str> = (market.models.iter().zip(&diag.model_fails))
        .filter(|(_, f)| **f == 0)
        .filter_map(|(m, _)| m.fabric.as_deref())
        .collect();
    fabrics.sort_unstable();
    fabrics.dedup();
    let largest = (fabrics.iter())
        .map(|f| {
            (market.providers.iter())
                .map(|p| u64::from(diag.eligible_on(p, 0, Some(f))))
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0);
    (largest < u64::from(req.count)).then(|| Binding::InterconnectGroup {
        group: group.clone(),
        fabrics: fabrics.len() as u32,
        largest_fabric_gpus: largest,
    })
}

/// Enough eligible GPUs: the first placement limit no plan passes, and for a pairwise limit its
/// closest failing pair.
fn placement_binding(
    diag: &Diag<'_>,
    shares: &[(u32, u32)],
    model_ok: &[bool],
    cut: Option<u64>,
) -> (Binding, Option<PairFailure>) {
    let (req, market) = (diag.req, diag.market);
    let provider = |r: u32| &market.providers[r as usize];
    let groups = req.groups.map_or(1, |g| g.count);
    let largest_node = shares.iter().map(|s| s.1).max().unwrap_or(0);
    let machines = shares.iter().filter(|s| s.1 > 0).count() as u32;
    if machines < groups {
        return (Binding::GroupMachines { groups, machines }, None);
    }
    let needed =
        nodes_needed(shares.iter().map(|s| s.1), req.count).map_or(u32::MAX, |n| n.max(groups));
    if needed > req.max_nodes {
        let b = Binding::MaxNodes {
            max_nodes: req.max_nodes,
            nodes_needed: needed,
            largest_node,
        };
        return (b, None);
    }
    // Multi-node plans: the bandwidth floor first (a node passes with its uplink or with a
    // measured pair that fast; its pairs are checked below).
    let fast = |r: u32| {
        req.min_bandwidth_mbps
            .is_none_or(|b| provider(r).uplink_mbps >= b || provider(r).best_pair_mbps >= b)
    };
    let needed_fast = nodes_needed_grouped(
        shares.iter().filter(|s| fast(s.0)).map(|s| s.1),
        req.count,
        groups,
    );
    if let Some(b) = req.min_bandwidth_mbps
        && needed_fast.is_none_or(|k| k > req.max_nodes)
    {
        let slow: Vec<(u32, u32)> = shares.iter().copied().filter(|s| !fast(s.0)).collect();
        let b = Binding::MinBandwidth {
            min_bandwidth_mbps: b,
            providers_below: slow.len() as u32,
            gpus_below: slow.iter().map(|s| u64::from(s.1)).sum(),
            fastest_below_mbps: (slow.iter())
                .map(|s| provider(s.0).uplink_mbps)
                .max()
                .unwrap_or(0),
        };
        return (b, None);
    }
    let needed_fast = needed_fast.unwrap_or(needed);
    // Then the providers' own node limits: the first k whose willing providers reach the count.
    let joins = |r: u32, k: u32| fast(r) && provider(r).max_job_nodes >= k;
    let Some(k) = (needed_fast..=req.max_nodes).find(|&k| {
        nodes_needed_grouped(
            shares.iter().filter(|s| joins(s.0, k)).map(|s| s.1),
            req.count,
            groups,
        )
        .is_some_and(|n| n <= k)
    }) else {
        let b = Binding::ProviderMaxJobNodes {
            nodes_needed: needed_fast,
            providers_refusing: (shares.iter())
                .filter(|s| fast(s.0) && provider(s.0).max_job_nodes < needed_fast)
                .count() as u32,
        };
        return (b, None);
    };
    let members: Vec<u32> = (shares.iter())
        .filter(|s| joins(s.0, k))
        .map(|s| s.0)
        .collect();
    match pairwise_limit(req, market, model_ok) {
        Some(Constraint::GroupMaxRtt) => {
            let g = req
                .groups
                .map_or((1, req.count, 0), |g| (g.count, g.gpus, g.max_rtt_us));
            let pairs = rtt_pairs(market, &members, g.2);
            let b = Binding::GroupMaxRtt {
                max_rtt_ms: g.2 / 1000,
                groups: g.0,
                gpus_per_group: g.1,
                machines: members.len() as u32,
                pairs_within: pairs.within,
                pairs_over: pairs.over,
                pairs_unmeasured: pairs.unmeasured,
            };
            (b, pairs.failure(market, Constraint::GroupMaxRtt, g.2))
        }
        Some(Constraint::MaxRtt) => {
            let bound = req.max_rtt_us.unwrap_or(0);
            let pairs = rtt_pairs(market, &members, bound);
            let b = Binding::MaxRtt {
                max_rtt_ms: bound / 1000,
                nodes_needed: k,
                pairs_within: pairs.within,
                pairs_over: pairs.over,
                pairs_unmeasured: pairs.unmeasured,
            };
            (b, pairs.failure(market, Constraint::MaxRtt, bound))
        }
        Some(_) => {
            let floor = req.min_bandwidth_mbps.unwrap_or(0);
            let (b, pair) = bandwidth_pairs(market, &members, floor, k);
            (b, pair)
        }
        None => {
            let b = match cut {
                Some(steps) => Binding::SearchBudget { steps },
                // Every share was counted whole; what is left is the per-node minimum's
                // granularity (k nodes × min_gpus_per_node above the count).
                None => Binding::MinGpusPerNode {
                    min_gpus_per_node: req.min_gpus_per_node,
                    largest_excluded_node: largest_node,
                    eligible_without: diag.eligible_total(Constraint::MinGpusPerNode.bit()),
                },
            };
            (b, None)
        }
    }
}

/// The pairwise limit that binds: of those set — the groups' bound, `max_rtt_ms`, the
/// throughput floor per pair (only with measured pairs) — the first that keeps every plan out
/// with the later ones lifted (the last one set binds when every earlier one passes).
fn pairwise_limit(
    req: &Requirements,
    market: &MarketSnapshot,
    model_ok: &[bool],
) -> Option<Constraint> {
    let mut limits: Vec<Constraint> = Vec::with_capacity(3);
    if req.groups.is_some() {
        limits.push(Constraint::GroupMaxRtt);
    }
    if req.max_rtt_us.is_some() {
        limits.push(Constraint::MaxRtt);
    }
    if req.min_bandwidth_mbps.is_some() && market.has_pair_mbps() {
        limits.push(Constraint::MinBandwidth);
    }
    let last = limits.len().checked_sub(1)?;
    (0..last)
        .find(|&i| {
            let lift = limits[i + 1..].iter().fold(0u64, |l, c| l | c.bit());
            search(req, market, model_ok, lift).is_err()
        })
        .or(Some(last))
        .map(|i| limits[i])
}

/// Pairs of candidate providers against an RTT bound, and the closest failing one.
struct RttPairs {
    within: u64,
    over: u64,
    unmeasured: u64,
    /// The measured pair over the bound with the lowest RTT: (rank a, rank b, RTT µs).
    closest_over: Option<(u32, u32, u32)>,
    /// The first unmeasured pair in rank order, when no measured pair is over.
    first_unmeasured: Option<(u32, u32)>,
}

impl RttPairs {
    /// The closest failing pair, if any pair fails.
    fn failure(&self, market: &MarketSnapshot, c: Constraint, bound: u32) -> Option<PairFailure> {
        let (a, b, rtt) = match (self.closest_over, self.first_unmeasured) {
            (Some((a, b, rtt)), _) => (a, b, Some(rtt)),
            (None, Some((a, b))) => (a, b, None),
            (None, None) => return None,
        };
        Some(PairFailure {
            constraint: c,
            a: market.providers[a as usize].id,
            b: market.providers[b as usize].id,
            rtt_us: rtt,
            mbps: market.pair_mbps(a, b),
            bound: PairBound::MaxRttUs(bound),
        })
    }
}

/// Counts the pairs of `members` (ascending ranks) within, over and without a measured RTT
/// against `bound` µs, and finds the closest failing pair.
fn rtt_pairs(market: &MarketSnapshot, members: &[u32], bound: u32) -> RttPairs {
    let mut member = vec![false; market.providers.len()];
    for &r in members {
        member[r as usize] = true;
    }
    let mut p = RttPairs {
        within: 0,
        over: 0,
        unmeasured: 0,
        closest_over: None,
        first_unmeasured: None,
    };
    for &a in members {
        for &(b, entry) in &market.neighbours[a as usize] {
            if b <= a || !member[b as usize] {
                continue;
            }
            let rtt = entry & RTT_MASK;
            if rtt <= bound {
                p.within += 1;
            } else {
                p.over += 1;
                if p.closest_over.is_none_or(|c| rtt < c.2) {
                    p.closest_over = Some((a, b, rtt));
                }
            }
        }
    }
    let n = members.len() as u64;
    p.unmeasured = (n * n.saturating_sub(1) / 2).saturating_sub(p.within + p.over);
    if p.closest_over.is_none() && p.unmeasured > 0 {
        p.first_unmeasured = first_unmeasured(market, members);
    }
    p
}

/// The first pair of `members` (ascending ranks) in rank order without an RTT sample.
fn first_unmeasured(market: &MarketSnapshot, members: &[u32]) -> Option<(u32, u32)> {
    for (i, &a) in members.iter().enumerate() {
        let list = &market.neighbours[a as usize];
        let mut j = list.partition_point(|e| e.0 <= a);
        for &b in &members[i + 1..] {
            while list.get(j).is_some_and(|e| e.0 < b) {
                j += 1;
            }
            if list.get(j).is_none_or(|e| e.0 != b) {
                return Some((a, b));
            }
        }
    }
    None
}

/// The throughput floor pair by pair over `members` (ascending ranks): the binding with its
/// counts and the closest failing pair (the fastest measured pair below the floor, else an
/// unmeasured pair with a slow end).
fn bandwidth_pairs(
    market: &MarketSnapshot,
    members: &[u32],
    floor: u32,
    k: u32,
) -> (Binding, Option<PairFailure>) {
    let mut member = vec![false; market.providers.len()];
    for &r in members {
        member[r as usize] = true;
    }
    let (mut below, mut closest): (u64, Option<(u32, u32, u32)>) = (0, None);
    for &a in members {
        for &(b, mbps, _) in market.measured_pairs(a) {
            if b <= a || mbps >= floor || !member[b as usize] {
                continue;
            }
            below += 1;
            if closest.is_none_or(|c| mbps > c.2) {
                closest = Some((a, b, mbps));
            }
        }
    }
    let slow: Vec<u32> = (members.iter().copied())
        .filter(|&r| market.providers[r as usize].uplink_mbps < floor)
        .collect();
    let pair = match closest {
        Some((a, b, mbps)) => Some((a, b, Some(mbps))),
        None => slow.iter().find_map(|&s| {
            (members.iter())
                .find(|&&t| t != s && market.pair_mbps(s, t).is_none())
                .map(|&t| (s.min(t), s.max(t), None))
        }),
    };
    let binding = Binding::MinPairBandwidth {
        min_bandwidth_mbps: floor,
        nodes_needed: k,
        pairs_below: below,
        slow_providers: slow.len() as u32,
    };
    let failure = pair.map(|(a, b, mbps)| PairFailure {
        constraint: Constraint::MinBandwidth,
        a: market.providers[a as usize].id,
        b: market.providers[b as usize].id,
        rtt_us: market.rtt_us(a, b),
        mbps,
        bound: PairBound::MinMbps(floor),
    });
    (binding, failure)
}
