//! The gang matcher: a pure, deterministic function from requirements and a market snapshot to
//! a placement plan, or to a no-fit report that says which constraint excluded how much.
//!
//! # Objective
//! Among plans that satisfy every constraint, the matcher returns the one with the smallest key
//! 1. number of nodes (one machine first, then the fewest machines),
//! 2. total price, NTX base units per hour (Σ gpus × rate),
//! 3. GPU-weighted score, highest first (Σ gpus × score),
//! 4. the ranks of the chosen providers, ascending, compared lexicographically (a provider's
//!    rank is its position in the snapshot's order: price ↑, score ↓, direct-capable first,
//!    key hash ↑) — so among otherwise equal plans the one with providers reachable without a
//!    relay wins (the matcher prefers direct-capable providers).
//!
//! Key 4 makes the answer a function of the inputs alone, so every node computes the same plan.
//!
//! # Constraints
//! Provider: live bond (`bond_gpus > 0`), below its `max_concurrent_jobs`, price ≤ `max_rate`, accepts the duration, and for a
//! multi-node plan: uplink ≥ `min_bandwidth_mbps`, accepts that many nodes, and pairwise
//! measured RTT ≤ `max_rtt_ms` (an unmeasured pair is out of bound). Per GPU: vendor, VRAM
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
//! order above (key 4 included), so the result does not depend on the order sets are met.
//! For a fixed set, filling each node's minimum and then the cheapest (then best-scoring) nodes
//! first is optimal for keys 2–3 (exchange argument). The search is exact; [`MAX_SEARCH_STEPS`]
//! bounds pathological markets, and a plan found after the budget ran out says so
//! ([`Plan::exhaustive`] = false).

use std::fmt;

use serde::Serialize;

use super::glob;
use super::nofit;
pub use super::nofit::{Binding, Excluded, NoFit};
use super::snapshot::{GpuModel, Group, MarketSnapshot, NOT_MIG, ProviderId};
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
    /// Pairwise RTT bound, µs.
    pub max_rtt_us: Option<u32>,
    /// Minimum uplink of every node of a multi-node plan, Mbit/s.
    pub min_bandwidth_mbps: Option<u32>,
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
            max_rate: spec.limits.max_rate_ntx_per_gpu_hour,
            max_duration_s: spec.limits.max_duration_s,
            collective: g.count > 1 && spec.distributed.framework != Framework::None,
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
    /// Enough eligible GPUs, but they need more machines than `placement.max_nodes`.
    MaxNodes,
    /// Multi-node plans only: providers whose uplink is below `placement.min_bandwidth_mbps`.
    MinBandwidth,
    /// Multi-node plans only: providers whose own `max_job_nodes` is below the plan's nodes.
    ProviderMaxJobNodes,
    /// No set of enough eligible providers is pairwise within `placement.max_rtt_ms`.
    MaxRtt,
    /// The search hit [`MAX_SEARCH_STEPS`] before it found a plan.
    SearchBudget,
}

impl Constraint {
    /// Every constraint, in declaration (and report) order: `ALL[c as usize] == c`.
    pub const ALL: [Constraint; 21] = [
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
        Self::MaxNodes,
        Self::MinBandwidth,
        Self::ProviderMaxJobNodes,
        Self::MaxRtt,
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
            Self::MaxNodes => "placement.max_nodes",
            Self::MinBandwidth => "placement.min_bandwidth_mbps",
            Self::ProviderMaxJobNodes => "provider max_job_nodes",
            Self::MaxRtt => "placement.max_rtt_ms",
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
    if req.interconnect_group.is_none() {
        return match_models(req, market, &model_ok)
            .map_err(|cut| nofit::diagnose(req, market, &model_ok, cut));
    }
    // An interconnect group: one search per fabric (name order), each over that fabric's GPUs
    // only; the best plan in the objective's order wins.
    let mut fabrics: Vec<&str> = (market.models.iter().zip(&model_ok))
        .filter(|(_, ok)| **ok)
        .filter_map(|(m, _)| m.fabric.as_deref())
        .collect();
    fabrics.sort_unstable();
    fabrics.dedup();
    let (mut best, mut cut): (Option<Plan>, Option<u64>) = (None, None);
    for fabric in fabrics {
        let on_fabric: Vec<bool> = (market.models.iter().zip(&model_ok))
            .map(|(m, ok)| *ok && m.fabric.as_deref() == Some(fabric))
            .collect();
        match match_models(req, market, &on_fabric) {
            Ok(plan) => {
                if best.as_ref().is_none_or(|b| plan_key(&plan) < plan_key(b)) {
                    best = Some(plan);
                }
            }
            Err(c) => cut = cut.or(c),
        }
    }
    best.ok_or_else(|| nofit::diagnose(req, market, &model_ok, cut))
}

/// The objective's total order on plans (module docs): nodes, price, score (higher first),
/// ranks.
fn plan_key(p: &Plan) -> (usize, u128, std::cmp::Reverse<u64>, Vec<u32>) {
    (
        p.nodes.len(),
        p.price_per_hour,
        std::cmp::Reverse(p.score),
        p.nodes.iter().map(|n| n.rank).collect(),
    )
}

/// [`match_gang`] over the models with `model_ok`; `Err` carries the step count when the
/// search ran out of budget.
fn match_models(
    req: &Requirements,
    market: &MarketSnapshot,
    model_ok: &[bool],
) -> Result<Plan, Option<u64>> {
    let mask = model_ok
        .iter()
        .enumerate()
        .filter(|(_, ok)| **ok)
        .fold(0u64, |m, (i, _)| m | 1 << i.min(63));
    let ctx = Ctx {
        req,
        market,
        model_ok,
        mask,
    };
    // One machine.
    if let Some(rank) = ctx.first_single() {
        let p = &market.providers[rank as usize];
        return Ok(Plan {
            nodes: vec![NodePlan {
                provider: p.id,
                gpus: req.count,
                rate: p.price,
                score: p.score,
                rank,
            }],
            price_per_hour: u128::from(req.count) * u128::from(p.price),
            score: u64::from(req.count) * u64::from(p.score),
            exhaustive: true,
        });
    }
    // Fewest machines.
    let mut cache = vec![UNKNOWN; market.len()];
    let cap = ctx.max_eligible(&mut cache);
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
            return Ok(ctx.plan(&best.set, search.steps <= MAX_SEARCH_STEPS));
        }
        if search.steps > MAX_SEARCH_STEPS {
            break;
        }
    }
    Err((search.steps > MAX_SEARCH_STEPS).then_some(search.steps))
}

struct Ctx<'a> {
    req: &'a Requirements,
    market: &'a MarketSnapshot,
    model_ok: &'a [bool],
    /// Bit `min(model, 63)` for each eligible model: a provider whose mask misses it has none.
    mask: u64,
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
    fn eligible_cached(&self, cache: &mut [u32], rank: u32) -> u32 {
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

    /// Whether `rank` may be one of `k ≥ 2` nodes.
    fn joins_multi(&self, rank: u32, k: u32) -> bool {
        let p = &self.market.providers[rank as usize];
        p.max_job_nodes >= k
            && self
                .req
                .min_bandwidth_mbps
                .is_none_or(|b| p.uplink_mbps >= b)
    }

    /// Greedy allocation over `set` (ascending rank, each with its eligible count): minimum
    /// first, then cheapest first. Returns (gpus per node, cost, score) or `None` if short.
    fn allocate(&self, set: &[(u32, u32)], out: &mut Vec<u32>) -> Option<(u128, u64)> {
        let m = self.req.min_gpus_per_node;
        let mut left = self.req.count.checked_sub(m * set.len() as u32)?;
        out.clear();
        let (mut cost, mut score) = (0u128, 0u64);
        for &(rank, e) in set {
            let extra = left.min(e - m);
            left -= extra;
            let g = m + extra;
            let p = &self.market.providers[rank as usize];
            cost += u128::from(g) * u128::from(p.price);
            score += u64::from(g) * u64::from(p.score);
            out.push(g);
        }
        (left == 0).then_some((cost, score))
    }

    fn plan(&self, set: &[(u32, u32)], exhaustive: bool) -> Plan {
        let mut gpus = Vec::with_capacity(set.len());
        let (price_per_hour, score) = self.allocate(set, &mut gpus).unwrap_or((0, 0));
        let nodes = set
            .iter()
            .zip(gpus)
            .map(|(&(rank, _), g)| {
                let p = &self.market.providers[rank as usize];
                NodePlan {
                    provider: p.id,
                    gpus: g,
                    rate: p.price,
                    score: p.score,
                    rank,
                }
            })
            .collect();
        Plan {
            nodes,
            price_per_hour,
            score,
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
const UNKNOWN: u32 = u32::MAX;

struct Best {
    set: Vec<(u32, u32)>,
    cost: u128,
    score: u64,
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
    /// order of the module docs (cost, then score, then ranks), whatever order sets come in.
    fn consider(&mut self) {
        let Some((cost, score)) = self.ctx.allocate(&self.chosen, &mut self.scratch) else {
            return;
        };
        let better = self.best.as_ref().is_none_or(|b| {
            (cost, std::cmp::Reverse(score))
                .cmp(&(b.cost, std::cmp::Reverse(b.score)))
                .then_with(|| {
                    self.chosen
                        .iter()
                        .map(|c| c.0)
                        .cmp(b.set.iter().map(|c| c.0))
                })
                == std::cmp::Ordering::Less
        });
        if better {
            self.best = Some(Best {
                set: self.chosen.clone(),
                cost,
                score,
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
                && count * u128::from(p.price) > best.cost
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
            match req.max_rtt_us {
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
                && fixed + at_x * u128::from(px) > best.cost
            {
                break;
            }
            let e = ctx.eligible_cached(self.cache, x);
            if e == 0
                || !ctx.joins_multi(x, self.k)
                || !self.can_reach(have, e, rem_after, self.cap)
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
            if u128::from(g) * pa + u128::from(req.count - g) * pn > best.cost {
                return;
            }
        }
        self.cands.clear();
        for &(r, rtt) in &list[start..] {
            if rtt > bound
                || ctx.market.model_masks[r as usize] & ctx.mask == 0
                || !ctx.joins_multi(r, self.k)
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
                && fixed + at_x * u128::from(px) > best.cost
            {
                break;
            }
            if !self.can_reach(have, e, rem_after, self.suffix_cap[i + 1]) {
                continue;
            }
            if self
                .chosen
                .iter()
                .skip(1)
                .any(|&(c, _)| ctx.market.rtt_us(c, x).is_none_or(|r| r > bound))
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
