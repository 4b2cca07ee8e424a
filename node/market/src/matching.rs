//! The gang matcher: a pure, deterministic function from requirements and a market snapshot to
//! a placement plan, or to a no-fit report that says which constraint excluded how much.
//!
//! # Objective
//! Among plans that satisfy every constraint, the matcher returns the one with the smallest key
//! 1. number of nodes (one machine first, then the fewest machines),
//! 2. total price, NTX base units per hour (Σ gpus × rate),
//! 3. GPUs on nodes whose score is unmeasured ([`super::snapshot::Compute`]), fewest first — at
//!    equal price a plan on benchmarked offers wins, whatever the declared scores,
//! 4. GPU-weighted score, highest first (Σ gpus × score),
//! 5. the ranks of the chosen providers, ascending, compared lexicographically (a provider's
//!    rank is its position in the snapshot's order: price ↑, measured first, score ↓,
//!    direct-capable first, key hash ↑) — so among otherwise equal plans the one with providers
//!    reachable without a relay wins (the matcher prefers direct-capable providers).
//!
//! Key 5 makes the answer a function of the inputs alone, so every node computes the same plan.
//!
//! # Constraints
//! Provider: live bond (`bond_gpus > 0`), below its `max_concurrent_jobs`, price ≤ `max_rate`, accepts the duration, and for a
//! multi-node plan: accepts that many nodes, and every pair of nodes meets
//! `min_bandwidth_mbps` (its measured throughput where the snapshot has one, else both ends'
//! uplinks; a node whose uplink is below the floor and that has no measured pair above it is
//! out) and has a measured RTT ≤ `max_rtt_ms` (an unmeasured pair is out of bound). With
//! latency groups ([`GroupRequirements`]) the nodes split into groups of whole nodes holding
//! exactly `gpus` GPUs each, pairwise within the groups' bound inside a group and within
//! `max_rtt_ms` (when set) across groups (the grouped search, `groups.rs`). Per GPU: vendor, VRAM
//! class ([`super::vram`]), compute capability or gfx target, model globs or words, per-model
//! class pairs, form factor, an RDMA fabric when an interconnect group is asked, interconnect.
//! Per node: `min_gpus_per_node ≤ gpus ≤ min(eligible free, bond_gpus, max_gpus_per_node)`;
//! with an interconnect requirement a node's GPUs come from a single fabric domain (one offered
//! group); a collective job counts MIG slices of one card once (`node_share`). Nodes ≤
//! `max_nodes`. With an interconnect group the search runs once per RDMA fabric, so every node
//! of the plan is on the same one. When nothing fits, [`NoFit`] names the binding limit.
//!
//! # Search
//! One node: the first provider in rank order with enough eligible GPUs is optimal (early exit);
//! it is looked for in the snapshot's free-GPU level or in the eligible models' rank lists,
//! whichever is shorter.
//!
//! k nodes (k = 2, 3, … up to `max_nodes`): a depth-first search over sets in ascending rank.
//! The first member (the *anchor*) comes from the eligible models' rank lists or from the
//! providers with at least the GPUs the other k−1 cannot bring; with an RTT bound the others
//! come from the anchor's *candidates* (its later neighbours within the bound that are eligible
//! and join a k-node job), collected once per anchor, and an anchor whose candidates cannot
//! reach the count is dropped before any search. Eligibility is computed at most once per
//! provider and decision (a cache), and the largest eligible count (a bound used to skip
//! hopeless k) comes from per-model lists sorted by free GPUs, read only down to that count.
//! Price lower bounds (the members after the current one cost at least its price; an anchor's
//! partners cost at least its first later neighbour's price) cut a level or an anchor as soon
//! as it cannot beat the best plan, never cutting an equal one. Plans are compared in the total
//! order above (key 5 included), so the result does not depend on the order sets are met.
//! For a fixed set, filling each node's minimum and then the nodes in rank order (cheapest, then
//! measured, then best-scoring) first is optimal for keys 2–4 (exchange argument: the key is
//! linear in each node's GPUs). With a throughput floor and measured pair throughputs in the
//! snapshot, each pair is checked as it is formed; a neighbour entry flags a measured pair, so
//! the others cost no look-up. Latency groups (two or more) have their own search, bounded the
//! same way (`groups.rs`); a single group is a flat plan with the groups' RTT bound. The search
//! is exact; [`MAX_SEARCH_STEPS`] bounds pathological markets, and a plan found after the
//! budget ran out says so ([`Plan::exhaustive`] = false).

use std::fmt;

use serde::Serialize;

use super::glob;
use super::groups;
use super::nofit;
pub use super::nofit::{Binding, Excluded, NoFit, PairBound, PairFailure};
use super::snapshot::{GpuModel, Group, MBPS_FLAG, MarketSnapshot, NOT_MIG, ProviderId, RTT_MASK};
use super::spec::{
    ComputeCapability, Ensemble, FormFactor, Framework, Interconnect, PerModel, Vendor,
};
use super::vram;

/// Candidate visits after which the multi-node search stops and returns the best plan so far.
/// Deterministic (a count, not a clock). Synthetic 10 000-provider markets need < 10 000.
pub const MAX_SEARCH_STEPS: u64 = 2_000_000;

/// What the matcher needs from an [`Ensemble`], in the snapshot's units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirements {
    /// GPUs in total (≥ 1).
    pub count: u32,
    /// Vendor filter.
    pub vendor: Vendor,
    /// Minimum marketed VRAM class per GPU, GiB (`gpus.min_vram_gib`; 0 = none), compared by
    /// [`super::vram::meets_class`], not as `vram_mib ≥ gib × 1024`.
    pub min_vram_gib: u32,
    /// Minimum CUDA compute capability.
    pub min_compute_capability: Option<ComputeCapability>,
    /// Accepted gfx targets; empty = any.
    pub rocm_arch: Vec<String>,
    /// Model-name globs; empty = any.
    pub models: Vec<String>,
    /// Per-model memory: a GPU must match one entry (model and exact class); empty = none.
    pub per_model: Vec<PerModel>,
    /// Fabric between a node's GPUs.
    pub interconnect: Interconnect,
    /// Module form factor; `None` = either.
    pub form_factor: Option<FormFactor>,
    /// An RDMA fabric is needed (`gpus.interconnect_group`): GPUs with a declared
    /// [`GpuModel::fabric`] only, every node of a plan on the same fabric.
    pub interconnect_group: Option<String>,
    /// Fewest GPUs on one node (≥ 1).
    pub min_gpus_per_node: u32,
    /// Most GPUs on one node.
    pub max_gpus_per_node: Option<u32>,
    /// Most nodes (≥ 1).
    pub max_nodes: u32,
    /// Pairwise RTT bound, µs; with [`Requirements::groups`] the bound across groups.
    pub max_rtt_us: Option<u32>,
    /// Minimum throughput of every pair of nodes of a multi-node plan, Mbit/s: the pair's
    /// measured throughput ([`super::RttSample::mbps`]) where known, else both ends' uplinks.
    pub min_bandwidth_mbps: Option<u32>,
    /// Latency groups (`placement.groups`); `None` = one flat gang.
    pub groups: Option<GroupRequirements>,
    /// Highest rate, NTX base units per GPU-hour.
    pub max_rate: u64,
    /// Job length the provider must accept, seconds.
    pub max_duration_s: u64,
    /// The ranks talk through collectives (NCCL/RCCL): `distributed.framework` is not `none`
    /// and the job has more than one GPU. Such a job never gets two MIG slices of one card on a
    /// node (no peer path between slices, [`GpuModel::mig_parent`]).
    pub collective: bool,
}

impl Requirements {
    /// The requirements of a validated spec.
    pub fn from_ensemble(spec: &Ensemble) -> Self {
        if let (crate::JobKind::Service, Some(r)) = (spec.kind, spec.replicas) {
            return Self::for_replicas(spec, r.min);
        }
        Self::for_gang(spec)
    }

    /// A batch job's gang: `gpus` and `placement` as written.
    fn for_gang(spec: &Ensemble) -> Self {
        let (g, p) = (&spec.gpus, &spec.placement);
        Self {
            count: g.count,
            vendor: g.vendor,
            min_vram_gib: g.min_vram_gib,
            min_compute_capability: g.min_compute_capability,
            rocm_arch: g.rocm_arch.clone(),
            models: g.models.clone(),
            per_model: g.per_model.clone(),
            interconnect: g.interconnect,
            form_factor: g.form_factor,
            interconnect_group: g.interconnect_group.clone(),
            min_gpus_per_node: p.min_gpus_per_node,
            max_gpus_per_node: p.max_gpus_per_node,
            max_nodes: p.max_nodes_or_default(g.count),
            max_rtt_us: p.max_rtt_ms.map(|ms| ms.saturating_mul(1000)),
            min_bandwidth_mbps: p.min_bandwidth_mbps,
            groups: p.groups.map(|g| GroupRequirements {
                count: g.count,
                gpus: g.gpus,
                max_rtt_us: g.max_rtt_ms.saturating_mul(1000),
            }),
            max_rate: spec.limits.max_rate_ntx_per_gpu_hour,
            max_duration_s: spec.limits.max_duration_s,
            collective: g.count > 1 && spec.distributed.framework != Framework::None,
        }
    }

    /// What `replicas` replicas of a `kind: service` spec need: each replica `gpus.count` GPUs on
    /// one provider machine, one replica per machine (a machine holds exactly `gpus.count` of
    /// them), no pairwise RTT or bandwidth bound (replicas do not talk to each other) and no
    /// collective. [`Requirements::from_ensemble`] asks this for `replicas.min` of a service.
    pub fn for_replicas(spec: &Ensemble, replicas: u32) -> Self {
        let per_replica = spec.gpus.count;
        Self {
            count: per_replica.saturating_mul(replicas.max(1)),
            min_gpus_per_node: per_replica,
            max_gpus_per_node: Some(per_replica),
            max_nodes: replicas.max(1),
            max_rtt_us: None,
            min_bandwidth_mbps: None,
            groups: None,
            collective: false,
            // The per-GPU rules, price and duration as for a gang.
            ..Self::for_gang(spec)
        }
    }

    /// The first per-GPU constraint that `model` fails, or `None` when it is eligible.
    pub fn rejects_model(&self, model: &GpuModel) -> Option<Constraint> {
        Constraint::first(self.model_failures(model))
    }

    /// Every per-GPU constraint `model` fails, as a set of bits `1 << (c as usize)`.
    pub(crate) fn model_failures(&self, model: &GpuModel) -> u64 {
        let mut fails = 0u64;
        let mut fail = |c: Constraint, bad: bool| {
            if bad {
                fails |= c.bit();
            }
        };
        fail(
            Constraint::Vendor,
            self.vendor != Vendor::Any && model.vendor != self.vendor,
        );
        fail(
            Constraint::Vram,
            !vram::meets_class(model.vram_total_bytes(), self.min_vram_gib),
        );
        fail(
            Constraint::ComputeCapability,
            self.min_compute_capability
                .is_some_and(|min| model.compute_capability.is_none_or(|cc| cc < min)),
        );
        fail(
            Constraint::RocmArch,
            !self.rocm_arch.is_empty()
                && !model
                    .gfx_target
                    .as_ref()
                    .is_some_and(|t| self.rocm_arch.iter().any(|a| a.eq_ignore_ascii_case(t))),
        );
        fail(
            Constraint::Model,
            !self.models.is_empty()
                && !self
                    .models
                    .iter()
                    .any(|p| glob::matches_model(p, &model.name)),
        );
        fail(
            Constraint::PerModel,
            !self.per_model.is_empty()
                && !self.per_model.iter().any(|pm| {
                    glob::matches_model(&pm.model, &model.name)
                        && pm
                            .vram_class_gib
                            .is_none_or(|c| vram::is_class(model.vram_total_bytes(), c))
                }),
        );
        fail(
            Constraint::FormFactor,
            self.form_factor
                .is_some_and(|f| model.form_factor() != Some(f)),
        );
        fail(
            Constraint::InterconnectGroup,
            self.interconnect_group.is_some() && model.fabric.is_none(),
        );
        fail(
            Constraint::Interconnect,
            self.interconnect != Interconnect::Any && model.interconnect != self.interconnect,
        );
        fails
    }
}

/// Latency groups (`placement.groups`): `count` groups of whole nodes, each holding exactly
/// `gpus` GPUs of the plan, every pair of nodes inside a group within `max_rtt_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRequirements {
    /// Number of groups (≥ 1).
    pub count: u32,
    /// GPUs per group (≥ 1); `count × gpus` = [`Requirements::count`].
    pub gpus: u32,
    /// RTT bound between two nodes of one group, µs.
    pub max_rtt_us: u32,
}

impl GroupRequirements {
    /// Whether the groups can hold a job of `count` GPUs at all: `count` groups × `gpus` =
    /// `count`, both ≥ 1. A validated spec always gives consistent groups.
    pub fn is_consistent(&self, count: u32) -> bool {
        self.count >= 1
            && self.gpus >= 1
            && u64::from(self.count) * u64::from(self.gpus) == u64::from(count)
    }
}

/// A constraint, as named in a no-fit report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Constraint {
    /// The provider has no live bond.
    NoBond,
    /// The provider already runs its `max_concurrent_jobs`.
    ConcurrentJobs,
    /// The provider's price is above `limits.max_rate_ntx_per_gpu_hour`.
    MaxRate,
    /// The provider refuses jobs as long as `limits.max_duration_s`.
    Duration,
    /// `gpus.vendor`.
    Vendor,
    /// `gpus.min_vram_gib`.
    Vram,
    /// `gpus.min_compute_capability`.
    ComputeCapability,
    /// `gpus.rocm_arch`.
    RocmArch,
    /// `gpus.models`.
    Model,
    /// `gpus.per_model` (model and exact VRAM class pairs).
    PerModel,
    /// `gpus.form_factor`.
    FormFactor,
    /// `gpus.interconnect_group`: GPUs without an RDMA fabric, or a fabric too small.
    InterconnectGroup,
    /// `gpus.interconnect` (including GPUs outside a node's largest fabric domain).
    Interconnect,
    /// A collective job's second and further MIG slices of one card (no peer path between
    /// slices of one GPU).
    MigSlices,
    /// Free GPUs beyond what the provider's bond covers.
    BondSize,
    /// A provider with fewer eligible GPUs than `placement.min_gpus_per_node`.
    MinGpusPerNode,
    /// `placement.groups`: fewer eligible machines than `placement.groups.count` (a machine
    /// serves one group), whatever the latency between them.
    GroupMachines,
    /// Enough eligible GPUs, but they need more machines than `placement.max_nodes`.
    MaxNodes,
    /// Multi-node plans only: providers whose uplink is below `placement.min_bandwidth_mbps`.
    MinBandwidth,
    /// Multi-node plans only: providers whose own `max_job_nodes` is below the plan's nodes.
    ProviderMaxJobNodes,
    /// No set of enough eligible providers is pairwise within `placement.max_rtt_ms` (with
    /// groups: across groups).
    MaxRtt,
    /// `placement.groups`: the latency groups cannot be formed, each node set pairwise within
    /// `placement.groups.max_rtt_ms` and holding exactly its GPUs.
    GroupMaxRtt,
    /// The search hit [`MAX_SEARCH_STEPS`] before it found a plan.
    SearchBudget,
}

impl Constraint {
    /// Every constraint, in declaration (and report) order: `ALL[c as usize] == c`.
    pub const ALL: [Constraint; 23] = [
        Self::NoBond,
        Self::ConcurrentJobs,
        Self::MaxRate,
        Self::Duration,
        Self::Vendor,
        Self::Vram,
        Self::ComputeCapability,
        Self::RocmArch,
        Self::Model,
        Self::PerModel,
        Self::FormFactor,
        Self::InterconnectGroup,
        Self::Interconnect,
        Self::MigSlices,
        Self::BondSize,
        Self::MinGpusPerNode,
        Self::GroupMachines,
        Self::MaxNodes,
        Self::MinBandwidth,
        Self::ProviderMaxJobNodes,
        Self::MaxRtt,
        Self::GroupMaxRtt,
        Self::SearchBudget,
    ];

    /// This constraint's bit in a failure set.
    pub(crate) const fn bit(self) -> u64 {
        1 << self as u64
    }

    /// The first constraint (in declaration order) of a failure set.
    pub(crate) fn first(fails: u64) -> Option<Self> {
        (fails != 0).then(|| Self::ALL[fails.trailing_zeros() as usize])
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoBond => "no live bond",
            Self::ConcurrentJobs => "provider at its max_concurrent_jobs",
            Self::MaxRate => "price above limits.max_rate_ntx_per_gpu_hour",
            Self::Duration => "provider refuses limits.max_duration_s",
            Self::Vendor => "gpus.vendor",
            Self::Vram => "gpus.min_vram_gib",
            Self::ComputeCapability => "gpus.min_compute_capability",
            Self::RocmArch => "gpus.rocm_arch",
            Self::Model => "gpus.models",
            Self::PerModel => "gpus.per_model",
            Self::FormFactor => "gpus.form_factor",
            Self::InterconnectGroup => "gpus.interconnect_group",
            Self::Interconnect => "gpus.interconnect",
            Self::MigSlices => "one MIG slice per card for a collective job",
            Self::BondSize => "bond too small",
            Self::MinGpusPerNode => "placement.min_gpus_per_node",
            Self::GroupMachines => "placement.groups.count",
            Self::MaxNodes => "placement.max_nodes",
            Self::MinBandwidth => "placement.min_bandwidth_mbps",
            Self::ProviderMaxJobNodes => "provider max_job_nodes",
            Self::MaxRtt => "placement.max_rtt_ms",
            Self::GroupMaxRtt => "placement.groups.max_rtt_ms",
            Self::SearchBudget => "search step budget",
        })
    }
}

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodePlan {
    /// The provider.
    #[serde(with = "hex::serde")]
    pub provider: ProviderId,
    /// GPUs placed on it.
    pub gpus: u32,
    /// Its rate, NTX base units per GPU-hour (the assignment's `rate`).
    pub rate: u64,
    /// Its score per GPU.
    pub score: u32,
    /// The score is measured (the node's own onboarding benchmark,
    /// [`super::snapshot::Compute::Measured`]).
    pub measured: bool,
    /// Its latency group, 0-based, groups numbered in order of their lowest-ranked node;
    /// `None` without `placement.groups`.
    pub group: Option<u32>,
    /// Its rank in the snapshot (tie-break key).
    pub rank: u32,
}

/// A placement: nodes in rank order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The nodes, ascending rank.
    pub nodes: Vec<NodePlan>,
    /// Σ gpus × rate, NTX base units per hour.
    pub price_per_hour: u128,
    /// Σ gpus × score.
    pub score: u64,
    /// False when [`MAX_SEARCH_STEPS`] cut the search (the plan is valid, maybe not optimal).
    pub exhaustive: bool,
}

impl Plan {
    /// GPUs placed in total.
    pub fn gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    /// GPUs placed on nodes whose score is unmeasured (objective key 3).
    pub fn unmeasured_gpus(&self) -> u32 {
        self.nodes
            .iter()
            .filter(|n| !n.measured)
            .map(|n| n.gpus)
            .sum()
    }
}

/// A plan's (or a partial plan's) place in objective keys 2–4: price, unmeasured GPUs, score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cost {
    /// Σ gpus × rate, NTX base units per hour.
    pub(crate) price: u128,
    /// GPUs on unmeasured nodes.
    pub(crate) unmeasured: u32,
    /// Σ gpus × score.
    pub(crate) score: u64,
}

impl Cost {
    /// The order of keys 2–4 (smaller is better).
    pub(crate) fn key(&self) -> (u128, u32, std::cmp::Reverse<u64>) {
        (self.price, self.unmeasured, std::cmp::Reverse(self.score))
    }

    /// `self` plus `gpus` GPUs on provider `p`.
    pub(crate) fn add(&mut self, gpus: u32, p: &super::snapshot::Provider) {
        self.price += u128::from(gpus) * u128::from(p.price);
        self.unmeasured += if p.measured { 0 } else { gpus };
        self.score += u64::from(gpus) * u64::from(p.score);
    }

    /// `self` minus what [`Cost::add`] added.
    pub(crate) fn sub(&mut self, other: &Cost) {
        self.price -= other.price;
        self.unmeasured -= other.unmeasured;
        self.score -= other.score;
    }

    /// `self` plus another cost.
    pub(crate) fn plus(&mut self, other: &Cost) {
        self.price += other.price;
        self.unmeasured += other.unmeasured;
        self.score += other.score;
    }
}

/// Finds the best plan for `req` in `market` (see the module docs for the order and rules).
///
/// Pure and deterministic: the same inputs give the same plan on every machine.
///
/// # Errors
/// [`NoFit`] when no plan satisfies every constraint.
pub fn match_gang(req: &Requirements, market: &MarketSnapshot) -> Result<Plan, NoFit> {
    let model_ok: Vec<bool> = market
        .models
        .iter()
        .map(|m| req.rejects_model(m).is_none())
        .collect();
    if req.count == 0 || req.min_gpus_per_node == 0 {
        return Err(nofit::diagnose(req, market, &model_ok, None));
    }
    search(req, market, &model_ok, 0).map_err(|cut| nofit::diagnose(req, market, &model_ok, cut))
}

/// The search behind [`match_gang`], with the pairwise limits in `lift` (a set of
/// [`Constraint`] bits: [`Constraint::MaxRtt`], [`Constraint::MinBandwidth`]'s pair rule)
/// ignored — the no-fit report asks which one binds. `Err` carries the step count when the
/// search ran out of budget.
pub(crate) fn search(
    req: &Requirements,
    market: &MarketSnapshot,
    model_ok: &[bool],
    lift: u64,
) -> Result<Plan, Option<u64>> {
    if req.groups.is_some_and(|g| !g.is_consistent(req.count)) {
        return Err(None);
    }
    if req.interconnect_group.is_none() {
        return match_models(req, market, model_ok, lift);
    }
    // An interconnect group: one search per fabric (name order), each over that fabric's GPUs
    // only; the best plan in the objective's order wins.
    let mut fabrics: Vec<&str> = (market.models.iter().zip(model_ok))
        .filter(|(_, ok)| **ok)
        .filter_map(|(m, _)| m.fabric.as_deref())
        .collect();
    fabrics.sort_unstable();
    fabrics.dedup();
    let (mut best, mut cut): (Option<Plan>, Option<u64>) = (None, None);
    for fabric in fabrics {
        let on_fabric: Vec<bool> = (market.models.iter().zip(model_ok))
            .map(|(m, ok)| *ok && m.fabric.as_deref() == Some(fabric))
            .collect();
        match match_models(req, market, &on_fabric, lift) {
            Ok(plan) => {
                if best.as_ref().is_none_or(|b| plan_key(&plan) < plan_key(b)) {
                    best = Some(plan);
                }
            }
            Err(c) => cut = cut.or(c),
        }
    }
    best.ok_or(cut)
}

/// The objective's total order on plans (module docs): nodes, price, unmeasured GPUs, score
/// (higher first), ranks.
type PlanKey = (usize, u128, u32, std::cmp::Reverse<u64>, Vec<u32>);

fn plan_key(p: &Plan) -> PlanKey {
    (
        p.nodes.len(),
        p.price_per_hour,
        p.unmeasured_gpus(),
        std::cmp::Reverse(p.score),
        p.nodes.iter().map(|n| n.rank).collect(),
    )
}

/// [`search`] over the models with `model_ok`.
fn match_models(
    req: &Requirements,
    market: &MarketSnapshot,
    model_ok: &[bool],
    lift: u64,
) -> Result<Plan, Option<u64>> {
    let ctx = Ctx::new(req, market, model_ok, lift);
    let groups = req.groups.map_or(1, |g| g.count);
    // One machine (one group at most).
    if groups == 1
        && let Some(rank) = ctx.first_single()
    {
        let p = &market.providers[rank as usize];
        let mut cost = Cost::default();
        cost.add(req.count, p);
        return Ok(ctx.plan_of(&[(rank, req.count, 0)], cost, true));
    }
    let mut cache = vec![UNKNOWN; market.len()];
    let cap = ctx.max_eligible(&mut cache);
    if groups > 1 {
        return groups::search(&ctx, &mut cache, cap);
    }
    // Fewest machines.
    let mut search = Search {
        ctx: &ctx,
        cache: &mut cache,
        k: 0,
        cap,
        chosen: Vec::new(),
        cands: Vec::new(),
        suffix_cap: Vec::new(),
        scratch: Vec::new(),
        best: None,
        steps: 0,
    };
    for k in 2..=req.max_nodes {
        if u64::from(k) * u64::from(req.min_gpus_per_node) > u64::from(req.count) {
            break;
        }
        if u64::from(k) * u64::from(cap) < u64::from(req.count) {
            continue;
        }
        search.k = k;
        search.anchors();
        if let Some(best) = search.best.take() {
            let nodes: Vec<(u32, u32, u32)> = (best.set.iter().zip(&best.gpus))
                .map(|(&(rank, _), &g)| (rank, g, 0))
                .collect();
            return Ok(ctx.plan_of(&nodes, best.cost, search.steps <= MAX_SEARCH_STEPS));
        }
        if search.steps > MAX_SEARCH_STEPS {
            break;
        }
    }
    Err((search.steps > MAX_SEARCH_STEPS).then_some(search.steps))
}

/// One decision's view of the requirements and the market.
pub(crate) struct Ctx<'a> {
    pub(crate) req: &'a Requirements,
    pub(crate) market: &'a MarketSnapshot,
    pub(crate) model_ok: &'a [bool],
    /// Bit `min(model, 63)` for each eligible model: a provider whose mask misses it has none.
    pub(crate) mask: u64,
    /// The RTT bound every pair of a flat plan meets, µs: `max_rtt_us`, or with a single
    /// latency group the group's bound; with several groups the bound across groups.
    pub(crate) rtt_bound: Option<u32>,
    /// The throughput floor pairs are checked against, Mbit/s: only when the snapshot has
    /// measured pairs (else the per-node uplink filter of [`Ctx::joins_multi`] decides alone).
    pub(crate) pair_mbps: Option<u32>,
}

impl<'a> Ctx<'a> {
    fn new(
        req: &'a Requirements,
        market: &'a MarketSnapshot,
        model_ok: &'a [bool],
        lift: u64,
    ) -> Self {
        let mask = model_ok
            .iter()
            .enumerate()
            .filter(|(_, ok)| **ok)
            .fold(0u64, |m, (i, _)| m | 1 << i.min(63));
        let lifted = |c: Constraint| lift & c.bit() != 0;
        let across = req.max_rtt_us.filter(|_| !lifted(Constraint::MaxRtt));
        let rtt_bound = match req.groups {
            Some(g) if g.count == 1 && !lifted(Constraint::GroupMaxRtt) => {
                Some(across.map_or(g.max_rtt_us, |a| a.min(g.max_rtt_us)))
            }
            _ => across,
        };
        let pair_mbps = req
            .min_bandwidth_mbps
            .filter(|_| market.has_pair_mbps() && !lifted(Constraint::MinBandwidth));
        Self {
            req,
            market,
            model_ok,
            mask,
            rtt_bound,
            pair_mbps,
        }
    }
}

impl Ctx<'_> {
    /// GPUs `rank` can contribute to one node, 0 if below `min_gpus_per_node` or refused.
    fn eligible(&self, rank: u32) -> u32 {
        let req = self.req;
        let p = &self.market.providers[rank as usize];
        if p.bond_gpus == 0
            || p.jobs_full
            || p.price > req.max_rate
            || p.max_job_duration_s < req.max_duration_s
            || p.free_total < req.min_gpus_per_node
        {
            return 0;
        }
        let groups = &self.market.groups[p.groups.0 as usize..p.groups.1 as usize];
        let ok = groups.iter().filter(|g| self.model_ok[g.model as usize]);
        let e = if req.collective && self.market.has_mig {
            node_share(self.market, ok, req.interconnect, true)
        } else if req.interconnect == Interconnect::Any {
            ok.fold(0u32, |s, g| s.saturating_add(g.free))
        } else {
            ok.map(|g| g.free).max().unwrap_or(0)
        };
        let e = e
            .min(p.bond_gpus)
            .min(req.max_gpus_per_node.unwrap_or(u32::MAX));
        if e < req.min_gpus_per_node { 0 } else { e }
    }

    /// The first provider in rank order with `count` eligible GPUs. Walks whichever is shorter:
    /// the providers with enough free GPUs, or the rank lists of the eligible models (a provider
    /// with eligible GPUs offers an eligible model, so the first hit over all lists is the
    /// first in rank order).
    fn first_single(&self) -> Option<u32> {
        let (req, market) = (self.req, self.market);
        let wide = market.with_free(req.count);
        let by_model: usize = (market.model_ranks.iter().zip(self.model_ok))
            .filter(|(_, ok)| **ok)
            .map(|(l, _)| l.len())
            .sum();
        let fits = |r: u32| {
            market.providers[r as usize].free_total >= req.count && self.eligible(r) >= req.count
        };
        if wide.len() <= by_model {
            return wide
                .iter()
                .copied()
                .find(|&r| market.model_masks[r as usize] & self.mask != 0 && fits(r));
        }
        let mut first: Option<u32> = None;
        for (list, _) in (market.model_ranks.iter().zip(self.model_ok)).filter(|(_, ok)| **ok) {
            let hit = list
                .iter()
                .copied()
                .take_while(|&r| first.is_none_or(|f| r < f))
                .find(|&r| fits(r));
            first = hit.or(first);
        }
        first
    }

    /// [`Ctx::eligible`] through a per-decision cache (`UNKNOWN` = not computed yet).
    pub(crate) fn eligible_cached(&self, cache: &mut [u32], rank: u32) -> u32 {
        let slot = &mut cache[rank as usize];
        if *slot == UNKNOWN {
            *slot = self.eligible(rank).min(UNKNOWN - 1);
        }
        *slot
    }

    /// The largest [`Ctx::eligible`] of any provider. Walks each eligible model's providers in
    /// descending free-GPU order and stops once no provider further down can have more
    /// (eligible ≤ free), so only the top of each list is evaluated.
    fn max_eligible(&self, cache: &mut [u32]) -> u32 {
        let mut c = 0;
        for (model, list) in self.market.by_model.iter().enumerate() {
            if !self.model_ok[model] {
                continue;
            }
            for &r in list {
                if self.market.providers[r as usize].free_total <= c {
                    break;
                }
                c = c.max(self.eligible_cached(cache, r));
            }
        }
        c
    }

    /// Whether `rank` may be one of `k ≥ 2` nodes: it accepts that many, and with a throughput
    /// floor its uplink meets it, or (its unmeasured pairs then fall back to its slow uplink)
    /// it has a measured pair that fast, within the RTT bound, for each of the k − 1 others.
    /// Its pairs are then checked one by one ([`Ctx::pair_fast`]).
    pub(crate) fn joins_multi(&self, rank: u32, k: u32) -> bool {
        let p = &self.market.providers[rank as usize];
        p.max_job_nodes >= k
            && self.req.min_bandwidth_mbps.is_none_or(|b| {
                p.uplink_mbps >= b
                    || (p.best_pair_mbps >= b
                        && self.rtt_bound.is_none_or(|t| p.min_pair_rtt_us <= t)
                        && self.market.fast_pairs(rank, b, self.rtt_bound) + 1 >= k as usize)
            })
    }

    /// Whether the pair `a`–`b` meets the throughput floor: its measured throughput, else both
    /// ends' uplinks (always, without measured pairs: [`Ctx::joins_multi`] then checked both
    /// uplinks).
    pub(crate) fn pair_fast(&self, a: u32, b: u32) -> bool {
        let Some(min) = self.pair_mbps else {
            return true;
        };
        match self.market.pair_mbps(a, b) {
            Some(mbps) => mbps >= min,
            None => self.uplinks_meet(a, b, min),
        }
    }

    /// [`Ctx::pair_fast`] given the pair's neighbour entry (`entry`: RTT and [`MBPS_FLAG`]):
    /// the throughput is looked up only when the flag says it was measured.
    pub(crate) fn pair_fast_entry(&self, a: u32, b: u32, entry: u32) -> bool {
        let Some(min) = self.pair_mbps else {
            return true;
        };
        if entry & MBPS_FLAG != 0 {
            self.market.pair_mbps(a, b).is_some_and(|m| m >= min)
        } else {
            self.uplinks_meet(a, b, min)
        }
    }

    /// Whether both ends' advertised uplinks reach `min` Mbit/s.
    fn uplinks_meet(&self, a: u32, b: u32, min: u32) -> bool {
        let up = |r: u32| self.market.providers[r as usize].uplink_mbps;
        up(a) >= min && up(b) >= min
    }

    /// Whether the pair `a`–`b` has a measured RTT within `bound` µs and meets the throughput
    /// floor (one look-up of its neighbour entry).
    pub(crate) fn pair_ok(&self, a: u32, b: u32, bound: u32) -> bool {
        self.market
            .rtt_entry(a, b)
            .is_some_and(|e| e & RTT_MASK <= bound && self.pair_fast_entry(a, b, e))
    }

    /// Greedy allocation of `count` GPUs over `set` (ascending rank, each with its eligible
    /// count): minimum first, then in rank order (cheapest, measured, best-scoring first).
    /// Writes the GPUs per node to `out`; `None` if the set cannot hold `count`.
    pub(crate) fn allocate(
        &self,
        set: &[(u32, u32)],
        count: u32,
        out: &mut Vec<u32>,
    ) -> Option<Cost> {
        let m = self.req.min_gpus_per_node;
        let mut left = count.checked_sub(m.checked_mul(set.len() as u32)?)?;
        out.clear();
        let mut cost = Cost::default();
        for &(rank, e) in set {
            let extra = left.min(e.saturating_sub(m));
            left -= extra;
            let g = m + extra;
            cost.add(g, &self.market.providers[rank as usize]);
            out.push(g);
        }
        (left == 0).then_some(cost)
    }

    /// The plan of `nodes` (rank, GPUs, group; any order; groups only with
    /// [`Requirements::groups`]) at `cost`.
    pub(crate) fn plan_of(&self, nodes: &[(u32, u32, u32)], cost: Cost, exhaustive: bool) -> Plan {
        let grouped = self.req.groups.is_some();
        let mut nodes: Vec<NodePlan> = nodes
            .iter()
            .map(|&(rank, gpus, group)| {
                let p = &self.market.providers[rank as usize];
                NodePlan {
                    provider: p.id,
                    gpus,
                    rate: p.price,
                    score: p.score,
                    measured: p.measured,
                    group: grouped.then_some(group),
                    rank,
                }
            })
            .collect();
        nodes.sort_unstable_by_key(|n| n.rank);
        Plan {
            nodes,
            price_per_hour: cost.price,
            score: cost.score,
            exhaustive,
        }
    }
}

/// GPUs one node can give from its eligible `groups`: all of them, or with a fabric
/// requirement (`interconnect` ≠ any) the largest single group; with `one_slice_per_card`, MIG
/// slices of one card count once (the card's best slice group in the fabric case).
pub(crate) fn node_share<'g>(
    market: &MarketSnapshot,
    groups: impl Iterator<Item = &'g Group>,
    interconnect: Interconnect,
    one_slice_per_card: bool,
) -> u32 {
    let mut whole: Vec<u32> = Vec::new();
    let mut cards: Vec<u32> = Vec::new();
    for g in groups {
        let card = market.mig_card[g.model as usize];
        if one_slice_per_card && card != NOT_MIG {
            if g.free > 0 {
                cards.push(card);
            }
        } else {
            whole.push(g.free);
        }
    }
    cards.sort_unstable();
    cards.dedup();
    if interconnect == Interconnect::Any {
        whole
            .iter()
            .fold(cards.len() as u32, |s, &f| s.saturating_add(f))
    } else {
        let one = u32::from(!cards.is_empty());
        whole.iter().copied().max().unwrap_or(0).max(one)
    }
}

/// Where anchors come from.
#[derive(Clone, Copy)]
enum AnchorList {
    /// Providers with enough free GPUs, any model: skip those without an eligible model.
    Wide,
    /// One eligible model's providers: skip those also offering an eligible model whose list
    /// came earlier (mask `earlier`), as they were tried there.
    Model { earlier: u64 },
}

/// Marks a provider whose eligibility this decision has not computed yet.
pub(crate) const UNKNOWN: u32 = u32::MAX;

struct Best {
    set: Vec<(u32, u32)>,
    /// GPUs per node of `set`.
    gpus: Vec<u32>,
    cost: Cost,
}

/// Depth-first search for the best `k`-node plan, one pass per `k`.
///
/// Without an RTT bound every level walks the snapshot's providers in rank order. With one, the
/// first member (the *anchor*) does, and the others come from the anchor's *candidates*: its
/// later neighbours within the bound that are eligible and join a `k`-node job, collected once
/// per anchor. Exploration order, pruning and tie-breaks are those of a rank-ordered walk, so
/// the plan is the same; the candidate list only avoids re-reading the neighbour list and
/// re-checking eligibility at every depth.
struct Search<'a, 'c> {
    ctx: &'a Ctx<'c>,
    /// [`Ctx::eligible`] per rank for this decision.
    cache: &'a mut [u32],
    k: u32,
    /// Upper bound on one node's eligible GPUs.
    cap: u32,
    /// Chosen (rank, eligible) pairs, ascending rank.
    chosen: Vec<(u32, u32)>,
    /// The current anchor's candidates (rank, eligible), ascending rank.
    cands: Vec<(u32, u32)>,
    /// `suffix_cap[i]`: the largest eligible count among `cands[i..]` (0 past the end).
    suffix_cap: Vec<u32>,
    /// Reused buffer (allocation, capacity bound).
    scratch: Vec<u32>,
    best: Option<Best>,
    steps: u64,
}

impl Search<'_, '_> {
    /// Whether the step budget says stop.
    fn out_of_steps(&self) -> bool {
        (self.steps > MAX_SEARCH_STEPS && self.best.is_some())
            || self.steps > MAX_SEARCH_STEPS.saturating_mul(2)
    }

    /// Lower-bound pieces independent of the next member x (all later members cost ≥ p_x):
    /// the chosen members' minimums plus the cheapest fill of their extras (`fixed`), the GPUs
    /// that must be bought at p_x or more (`at_x`), and the chosen members' eligible total.
    fn bound_parts(&self) -> (u128, u128, u64) {
        let ctx = self.ctx;
        let req = ctx.req;
        let m = req.min_gpus_per_node;
        let d = self.chosen.len() as u32;
        let mut fixed = 0u128;
        let mut fill_left = req.count - self.k * m;
        let mut have = 0u64;
        for &(rank, e) in &self.chosen {
            let price = u128::from(ctx.market.providers[rank as usize].price);
            let extra = fill_left.min(e - m);
            fill_left -= extra;
            fixed += u128::from(m + extra) * price;
            have += u64::from(e);
        }
        let at_x = u128::from(req.count - d * m - (req.count - self.k * m - fill_left));
        (fixed, at_x, have)
    }

    /// Whether `have + e` plus `rem_after` more members of at most `cap` each can reach the count.
    fn can_reach(&self, have: u64, e: u32, rem_after: u32, cap: u32) -> bool {
        have + u64::from(e) + u64::from(rem_after) * u64::from(cap) >= u64::from(self.ctx.req.count)
    }

    /// Scores the complete set `chosen` and keeps it if it beats the best so far in the total
    /// order of the module docs (price, unmeasured GPUs, score, then ranks), whatever order
    /// sets come in.
    fn consider(&mut self) {
        let count = self.ctx.req.count;
        let Some(cost) = self.ctx.allocate(&self.chosen, count, &mut self.scratch) else {
            return;
        };
        let better = self.best.as_ref().is_none_or(|b| {
            cost.key().cmp(&b.cost.key()).then_with(|| {
                self.chosen
                    .iter()
                    .map(|c| c.0)
                    .cmp(b.set.iter().map(|c| c.0))
            }) == std::cmp::Ordering::Less
        });
        if better {
            self.best = Some(Best {
                set: self.chosen.clone(),
                gpus: self.scratch.clone(),
                cost,
            });
        }
    }

    /// The first member (the anchor, lowest rank of the set). Candidates come from whichever is
    /// shorter: the providers with at least `need` free GPUs, or each eligible model's rank list
    /// in turn (where a provider already met in an earlier eligible model's list is skipped;
    /// models past 63 share a mask bit, so such a provider may be tried twice: harmless,
    /// [`Search::consider`] orders plans totally). The anchor order does not change the plan.
    fn anchors(&mut self) {
        let ctx = self.ctx;
        let req = ctx.req;
        let rem_after = self.k - 1;
        // An anchor must bring what k-1 members of at most `cap` GPUs cannot.
        let need = req
            .count
            .saturating_sub(rem_after.saturating_mul(self.cap))
            .max(req.min_gpus_per_node);
        let wide = ctx.market.with_free(need);
        let by_model: usize = (ctx.market.model_ranks.iter().zip(ctx.model_ok))
            .filter(|(_, ok)| **ok)
            .map(|(l, _)| l.len())
            .sum();
        if wide.len() <= by_model {
            self.anchors_from(wide, AnchorList::Wide, need);
            return;
        }
        for (model, list) in ctx.market.model_ranks.iter().enumerate() {
            if !ctx.model_ok[model] {
                continue;
            }
            // Providers with an eligible model listed earlier: already tried.
            let earlier = if model < 63 {
                ctx.mask & ((1u64 << model) - 1)
            } else {
                0
            };
            self.anchors_from(list, AnchorList::Model { earlier }, need);
            if self.out_of_steps() {
                return;
            }
        }
    }

    /// Tries each provider of `list` (ascending rank) as the anchor.
    fn anchors_from(&mut self, list: &[u32], kind: AnchorList, need: u32) {
        let ctx = self.ctx;
        let req = ctx.req;
        let rem_after = self.k - 1;
        let count = u128::from(req.count);
        for &x in list {
            self.steps += 1;
            if self.out_of_steps() {
                return;
            }
            let mm = ctx.market.model_masks[x as usize];
            let skip = match kind {
                AnchorList::Wide => mm & ctx.mask == 0,
                AnchorList::Model { earlier } => mm & earlier != 0,
            };
            if skip {
                continue;
            }
            let p = &ctx.market.providers[x as usize];
            if let Some(best) = &self.best
                && count * u128::from(p.price) > best.cost.price
            {
                break;
            }
            // Cheap provider-level checks first: eligible ≤ free GPUs and ≤ bond.
            if p.free_total.min(p.bond_gpus) < need || !ctx.joins_multi(x, self.k) {
                continue;
            }
            let e = ctx.eligible_cached(self.cache, x);
            if e == 0 || !self.can_reach(0, e, rem_after, self.cap) {
                continue;
            }
            self.chosen.push((x, e));
            match ctx.rtt_bound {
                Some(bound) => self.anchored(x, e, bound),
                None => self.level(),
            }
            self.chosen.pop();
        }
    }

    /// A level after the anchor without an RTT bound: walks the snapshot in rank order.
    fn level(&mut self) {
        let ctx = self.ctx;
        let req = ctx.req;
        let d = self.chosen.len() as u32;
        let rem_after = self.k - d - 1;
        let (fixed, at_x, have) = self.bound_parts();
        let last = self.chosen.last().map(|c| c.0);
        let pool = ctx.market.with_free(req.min_gpus_per_node);
        let mut next = pool.partition_point(|&r| last.is_some_and(|l| r <= l));
        while let Some(&x) = pool.get(next) {
            next += 1;
            self.steps += 1;
            if self.out_of_steps() {
                return;
            }
            if ctx.market.model_masks[x as usize] & ctx.mask == 0 {
                continue;
            }
            let px = ctx.market.providers[x as usize].price;
            if let Some(best) = &self.best
                && fixed + at_x * u128::from(px) > best.cost.price
            {
                break;
            }
            if !ctx.joins_multi(x, self.k) {
                continue;
            }
            let e = ctx.eligible_cached(self.cache, x);
            if e == 0
                || !self.can_reach(have, e, rem_after, self.cap)
                || !self.chosen.iter().all(|&(c, _)| ctx.pair_fast(c, x))
            {
                continue;
            }
            self.chosen.push((x, e));
            if rem_after == 0 {
                self.consider();
            } else {
                self.level();
            }
            self.chosen.pop();
        }
    }

    /// Collects the candidates of `anchor` (already chosen, eligible `e`) and searches them.
    fn anchored(&mut self, anchor: u32, e: u32, bound: u32) {
        let ctx = self.ctx;
        let list = &ctx.market.neighbours[anchor as usize];
        let start = list.partition_point(|n| n.0 <= anchor);
        // Every other member is a later neighbour, so costs at least the first one's price, and
        // the anchor itself takes at most `g` GPUs.
        let Some(&(first, _)) = list.get(start) else {
            return;
        };
        if let Some(best) = &self.best {
            let req = ctx.req;
            let g = e.min(req.count - (self.k - 1) * req.min_gpus_per_node);
            let pa = u128::from(ctx.market.providers[anchor as usize].price);
            let pn = u128::from(ctx.market.providers[first as usize].price);
            if u128::from(g) * pa + u128::from(req.count - g) * pn > best.cost.price {
                return;
            }
        }
        self.cands.clear();
        for &(r, entry) in &list[start..] {
            if entry & RTT_MASK > bound
                || ctx.market.model_masks[r as usize] & ctx.mask == 0
                || !ctx.joins_multi(r, self.k)
                || !ctx.pair_fast_entry(anchor, r, entry)
            {
                continue;
            }
            let er = ctx.eligible_cached(self.cache, r);
            if er > 0 {
                self.cands.push((r, er));
            }
        }
        // The anchor and its k-1 largest candidates must reach the count.
        let need = (self.k - 1) as usize;
        if self.cands.len() < need {
            return;
        }
        self.scratch.clear();
        self.scratch.extend(self.cands.iter().map(|c| c.1));
        if need < self.scratch.len() {
            self.scratch
                .select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
        }
        let top: u64 = self.scratch[..need].iter().map(|&x| u64::from(x)).sum();
        if top + u64::from(e) < u64::from(ctx.req.count) {
            return;
        }
        self.suffix_cap.clear();
        self.suffix_cap.resize(self.cands.len() + 1, 0);
        for i in (0..self.cands.len()).rev() {
            self.suffix_cap[i] = self.suffix_cap[i + 1].max(self.cands[i].1);
        }
        self.deep(0, bound);
    }

    /// A level after the anchor: walks `cands[from..]`.
    fn deep(&mut self, from: usize, bound: u32) {
        let ctx = self.ctx;
        let d = self.chosen.len() as u32;
        let rem_after = self.k - d - 1;
        let (fixed, at_x, have) = self.bound_parts();
        for i in from..self.cands.len() {
            let (x, e) = self.cands[i];
            self.steps += 1;
            if self.out_of_steps() {
                return;
            }
            let px = ctx.market.providers[x as usize].price;
            if let Some(best) = &self.best
                && fixed + at_x * u128::from(px) > best.cost.price
            {
                break;
            }
            if !self.can_reach(have, e, rem_after, self.suffix_cap[i + 1]) {
                continue;
            }
            // The anchor's pair was checked when `x` became a candidate.
            if !self
                .chosen
                .iter()
                .skip(1)
                .all(|&(c, _)| ctx.pair_ok(c, x, bound))
            {
                continue;
            }
            self.chosen.push((x, e));
            if rem_after == 0 {
                self.consider();
            } else {
                self.deep(i + 1, bound);
            }
            self.chosen.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Constraint;

    #[test]
    fn constraint_all_is_in_declaration_order() {
        for (i, c) in Constraint::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?}");
        }
        assert!(Constraint::ALL.is_sorted());
    }
}
