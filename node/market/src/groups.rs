//! The grouped search: `placement.groups` with two or more latency groups
//! ([`GroupRequirements`]); one group is a flat plan with the groups' RTT bound.
//!
//! A plan is `k` whole nodes split into `G` groups, each holding exactly `N` GPUs of the plan,
//! every pair of nodes inside a group within the groups' bound `T` and, when
//! `placement.max_rtt_ms` is set, every pair across groups within it (`L ≥ T`, so every pair
//! of the plan is then within `L`). Every other rule is the flat plan's. Groups are numbered
//! in order of their lowest-ranked node (their *anchor*), so a partition has exactly one form:
//! anchors ascend, and each group's other members rank above its anchor.
//!
//! For `k = G, G+1, …` up to `max_nodes` (fewest machines first), a depth-first search builds
//! the groups in that order. Group 0's anchor walks the eligible providers in rank order; a
//! group's members come from its anchor's later neighbours within `T` (collected once per
//! anchor, only when the group grows past its anchor); a group may close as soon as its nodes
//! hold exactly `N` GPUs — filled like a flat plan, minimums first and then in rank order,
//! which is optimal for a fixed partition — and may also grow; the next group's anchor walks
//! the later providers (with `L`: group 0's anchor's later neighbours within `L`). Every node
//! not chosen yet ranks above the current anchor and so costs at least its price: these lower
//! bounds cut a walk as soon as it cannot beat the best plan, never cutting an equal one.
//! Plans are compared in the objective's total order (then by their group assignment), so the
//! result does not depend on the order they are met. [`MAX_SEARCH_STEPS`] bounds the search as
//! for flat plans ([`Plan::exhaustive`] = false when it cut).

use super::matching::{Cost, Ctx, GroupRequirements, MAX_SEARCH_STEPS, Plan};
use super::snapshot::RTT_MASK;

/// The best grouped plan under `ctx` (whose requirements have two or more groups); `cap`
/// bounds one node's eligible GPUs. `Err` carries the step count when the budget ran out.
pub(crate) fn search(ctx: &Ctx<'_>, cache: &mut [u32], cap: u32) -> Result<Plan, Option<u64>> {
    let req = ctx.req;
    let Some(groups) = req.groups else {
        return Err(None);
    };
    let g = groups.count as usize;
    let mut s = GroupSearch {
        ctx,
        cache,
        groups,
        k: 0,
        cap,
        chosen: Vec::new(),
        starts: Vec::with_capacity(g),
        gpus: Vec::new(),
        closed: Cost::default(),
        cands: vec![Vec::new(); g],
        collected: vec![false; g],
        across: Vec::new(),
        scratch: Vec::new(),
        best: None,
        steps: 0,
    };
    for k in groups.count..=req.max_nodes {
        if u64::from(k) * u64::from(req.min_gpus_per_node) > u64::from(req.count) {
            break;
        }
        if u64::from(k) * u64::from(cap) < u64::from(req.count) {
            continue;
        }
        s.k = k;
        s.anchors();
        if let Some(best) = s.best.take() {
            return Ok(ctx.plan_of(&best.nodes, best.cost, s.steps <= MAX_SEARCH_STEPS));
        }
        if s.steps > MAX_SEARCH_STEPS {
            break;
        }
    }
    Err((s.steps > MAX_SEARCH_STEPS).then_some(s.steps))
}

/// The best plan so far.
struct GroupBest {
    /// (rank, GPUs, group) per node.
    nodes: Vec<(u32, u32, u32)>,
    cost: Cost,
    /// The nodes' ranks, ascending, then their groups in that order (the last tie-breaks).
    order: Vec<u32>,
}

struct GroupSearch<'a, 'c> {
    ctx: &'a Ctx<'c>,
    /// [`Ctx::eligible_cached`] per rank for this decision.
    cache: &'a mut [u32],
    groups: GroupRequirements,
    /// Nodes of the plans searched now.
    k: u32,
    /// Upper bound on one node's eligible GPUs.
    cap: u32,
    /// Chosen (rank, eligible) in choice order: each group's anchor, then its members by rank.
    chosen: Vec<(u32, u32)>,
    /// `starts[g]`: group `g`'s anchor's index in `chosen`.
    starts: Vec<usize>,
    /// GPUs of the closed groups' nodes (`chosen[..gpus.len()]`).
    gpus: Vec<u32>,
    /// Cost of the closed groups.
    closed: Cost,
    /// `cands[g]`: group `g`'s anchor's member candidates (rank, eligible), ascending rank.
    cands: Vec<Vec<(u32, u32)>>,
    /// Whether `cands[g]` is collected for the current anchor of group `g`.
    collected: Vec<bool>,
    /// With a bound across groups: group 0's anchor's later neighbours within it that may join
    /// (rank, eligible), ascending rank. Every other node of the plan is one of them.
    across: Vec<(u32, u32)>,
    /// Reused allocation buffer.
    scratch: Vec<u32>,
    best: Option<GroupBest>,
    steps: u64,
}

impl GroupSearch<'_, '_> {
    /// Whether the step budget says stop (as the flat search's).
    fn out_of_steps(&self) -> bool {
        (self.steps > MAX_SEARCH_STEPS && self.best.is_some())
            || self.steps > MAX_SEARCH_STEPS.saturating_mul(2)
    }

    /// Fewest eligible GPUs the anchor of group `g` needs: `N` less what the group's other
    /// nodes (at most the nodes left after every later group has one) can bring.
    fn anchor_need(&self, g: usize) -> u32 {
        let left = (self.k as usize).saturating_sub(self.chosen.len());
        let later = self.groups.count as usize - g - 1;
        let most = left.saturating_sub(later).max(1) as u32;
        let others = (most - 1).saturating_mul(self.cap.min(self.groups.gpus));
        self.groups
            .gpus
            .saturating_sub(others)
            .max(self.ctx.req.min_gpus_per_node)
    }

    /// Whether `rank` is already in the plan.
    fn used(&self, rank: u32) -> bool {
        self.chosen.iter().any(|c| c.0 == rank)
    }

    /// Whether `x` may join as a node of another group than those of `chosen[..upto]`: within
    /// the bound across groups (if any) and fast enough with each.
    fn fits_across(&self, upto: usize, x: u32) -> bool {
        let ctx = self.ctx;
        self.chosen[..upto]
            .iter()
            .all(|&(c, _)| match ctx.rtt_bound {
                Some(bound) => ctx.pair_ok(c, x, bound),
                None => ctx.pair_fast(c, x),
            })
    }

    /// Group 0's anchors: the providers with enough free GPUs, or each eligible model's rank
    /// list in turn, whichever is shorter (as the flat search's anchors; a provider met in an
    /// earlier eligible model's list is skipped there). Plans are compared in a total order, so
    /// the order the anchors come in does not change the plan.
    fn anchors(&mut self) {
        let ctx = self.ctx;
        let need = self.anchor_need(0);
        let wide = ctx.market.with_free(need);
        let by_model: usize = (ctx.market.model_ranks.iter().zip(ctx.model_ok))
            .filter(|(_, ok)| **ok)
            .map(|(l, _)| l.len())
            .sum();
        if wide.len() <= by_model {
            self.anchors_from(wide, None, need);
            return;
        }
        for (model, list) in ctx.market.model_ranks.iter().enumerate() {
            if !ctx.model_ok[model] {
                continue;
            }
            let earlier = if model < 63 {
                ctx.mask & ((1u64 << model) - 1)
            } else {
                0
            };
            self.anchors_from(list, Some(earlier), need);
            if self.out_of_steps() {
                return;
            }
        }
    }

    /// Tries each provider of `list` (ascending rank) as group 0's anchor; `earlier`: the list
    /// is one model's, and providers with a model of that mask were tried already.
    fn anchors_from(&mut self, list: &[u32], earlier: Option<u64>, need: u32) {
        let ctx = self.ctx;
        let count = u128::from(ctx.req.count);
        for &x in list {
            self.steps += 1;
            if self.out_of_steps() {
                return;
            }
            let mm = ctx.market.model_masks[x as usize];
            let skip = match earlier {
                None => mm & ctx.mask == 0,
                Some(earlier) => mm & earlier != 0,
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
            if p.free_total.min(p.bond_gpus) < need || !ctx.joins_multi(x, self.k) {
                continue;
            }
            let e = ctx.eligible_cached(self.cache, x);
            if e < need {
                continue;
            }
            if let Some(bound) = ctx.rtt_bound {
                self.collect_across(x, bound);
                // Every later group's nodes are among them; with `L ≥ T` (a valid spec) group
                // 0's members too.
                let others = if bound >= self.groups.max_rtt_us {
                    self.k - 1
                } else {
                    self.groups.count - 1
                };
                if self.across.len() < others as usize {
                    continue;
                }
            }
            self.open(0, x, e);
        }
    }

    /// Collects `anchor`'s later neighbours within `bound` µs that may join ([`Self::across`]).
    fn collect_across(&mut self, anchor: u32, bound: u32) {
        let ctx = self.ctx;
        let list = &ctx.market.neighbours[anchor as usize];
        let start = list.partition_point(|n| n.0 <= anchor);
        self.across.clear();
        for &(r, entry) in &list[start..] {
            if entry & RTT_MASK > bound
                || ctx.market.model_masks[r as usize] & ctx.mask == 0
                || !ctx.joins_multi(r, self.k)
                || !ctx.pair_fast_entry(anchor, r, entry)
            {
                continue;
            }
            let e = ctx.eligible_cached(self.cache, r);
            if e > 0 {
                self.across.push((r, e));
            }
        }
    }

    /// Opens group `g` with anchor `x` (eligible `e`) and searches its completions.
    fn open(&mut self, g: usize, x: u32, e: u32) {
        self.chosen.push((x, e));
        self.starts.push(self.chosen.len() - 1);
        self.collected[g] = false;
        self.grow(g, 0);
        self.starts.pop();
        self.chosen.pop();
    }

    /// Group `g` as chosen so far: closes it here if it can, then tries each further member
    /// from `cands[g][from..]`.
    fn grow(&mut self, g: usize, from: usize) {
        let ctx = self.ctx;
        let req = ctx.req;
        let (m, per) = (req.min_gpus_per_node, self.groups.gpus);
        let start = self.starts[g];
        let members = (self.chosen.len() - start) as u32;
        let later = self.groups.count as usize - g - 1;
        let used = self.chosen.len();
        let k = self.k as usize;
        if (later == 0 && used == k) || (later > 0 && used + later <= k) {
            self.close(g);
        }
        if self.out_of_steps() || used + later >= k || (members + 1) * m > per {
            return;
        }
        if !self.collected[g] {
            self.collect_members(g);
        }
        let price = |r: u32| u128::from(ctx.market.providers[r as usize].price);
        let anchor_price = price(self.chosen[start].0);
        // Lower bound: closed groups exactly; this group's nodes and the new one at their
        // minimum each; every other GPU on a node ranked at or above this group's anchor.
        let open_min: u128 = (self.chosen[start..].iter())
            .map(|c| u128::from(m) * price(c.0))
            .sum();
        let rest = u128::from(req.count - g as u32 * per - (members + 1) * m);
        let fixed = self.closed.price + open_min + rest * anchor_price;
        let bound = self.groups.max_rtt_us;
        for i in from..self.cands[g].len() {
            let (x, e) = self.cands[g][i];
            self.steps += 1;
            if self.out_of_steps() {
                return;
            }
            if let Some(best) = &self.best
                && fixed + u128::from(m) * price(x) > best.cost.price
            {
                break;
            }
            // The anchor's pair was checked when `x` became a candidate.
            if !self.chosen[start + 1..]
                .iter()
                .all(|&(c, _)| ctx.pair_ok(c, x, bound))
            {
                continue;
            }
            self.chosen.push((x, e));
            self.grow(g, i + 1);
            self.chosen.pop();
        }
    }

    /// Collects the member candidates of group `g`'s anchor: later neighbours within the
    /// groups' bound that may join, are not in the plan yet, and fit with the closed groups.
    fn collect_members(&mut self, g: usize) {
        let ctx = self.ctx;
        let start = self.starts[g];
        let anchor = self.chosen[start].0;
        let list = &ctx.market.neighbours[anchor as usize];
        let first = list.partition_point(|n| n.0 <= anchor);
        let mut cands = std::mem::take(&mut self.cands[g]);
        cands.clear();
        for &(r, entry) in &list[first..] {
            if entry & RTT_MASK > self.groups.max_rtt_us
                || ctx.market.model_masks[r as usize] & ctx.mask == 0
            {
                continue;
            }
            if !ctx.joins_multi(r, self.k)
                || self.used(r)
                || !ctx.pair_fast_entry(anchor, r, entry)
                || !self.fits_across(start, r)
            {
                continue;
            }
            let e = ctx.eligible_cached(self.cache, r);
            if e > 0 {
                cands.push((r, e));
            }
        }
        self.cands[g] = cands;
        self.collected[g] = true;
    }

    /// Closes group `g` (its nodes `chosen[starts[g]..]`, ascending rank) if they hold exactly
    /// `N` GPUs, and goes on to the next group or scores the plan.
    fn close(&mut self, g: usize) {
        let start = self.starts[g];
        let Some(cost) =
            self.ctx
                .allocate(&self.chosen[start..], self.groups.gpus, &mut self.scratch)
        else {
            return;
        };
        let before = self.gpus.len();
        self.gpus.extend_from_slice(&self.scratch);
        self.closed.plus(&cost);
        if g + 1 == self.groups.count as usize {
            self.consider();
        } else {
            self.next_anchor(g + 1);
        }
        self.closed.sub(&cost);
        self.gpus.truncate(before);
    }

    /// Group `g`'s anchors (g ≥ 1): providers ranked above group `g − 1`'s anchor, from
    /// [`Self::across`] with a bound across groups, else from the whole market.
    fn next_anchor(&mut self, g: usize) {
        let ctx = self.ctx;
        let prev = self.chosen[self.starts[g - 1]].0;
        let need = self.anchor_need(g);
        // Every GPU of groups g.. sits on a node ranked at or above the anchor.
        let rest = u128::from(ctx.req.count - g as u32 * self.groups.gpus);
        let price = |r: u32| u128::from(ctx.market.providers[r as usize].price);
        let beaten = |s: &Self, x: u32| {
            s.best
                .as_ref()
                .is_some_and(|b| s.closed.price + rest * price(x) > b.cost.price)
        };
        if ctx.rtt_bound.is_some() {
            let from = self.across.partition_point(|c| c.0 <= prev);
            for i in from..self.across.len() {
                let (x, e) = self.across[i];
                self.steps += 1;
                if self.out_of_steps() || beaten(self, x) {
                    return;
                }
                if e >= need && !self.used(x) && self.fits_across(self.chosen.len(), x) {
                    self.open(g, x, e);
                }
            }
            return;
        }
        let list = ctx.market.with_free(need);
        let from = list.partition_point(|&r| r <= prev);
        for &x in &list[from..] {
            self.steps += 1;
            if self.out_of_steps() || beaten(self, x) {
                return;
            }
            if ctx.market.model_masks[x as usize] & ctx.mask == 0 || self.used(x) {
                continue;
            }
            let p = &ctx.market.providers[x as usize];
            if p.free_total.min(p.bond_gpus) < need || !ctx.joins_multi(x, self.k) {
                continue;
            }
            let e = ctx.eligible_cached(self.cache, x);
            if e >= need && self.fits_across(self.chosen.len(), x) {
                self.open(g, x, e);
            }
        }
    }

    /// Scores the complete plan and keeps it if it beats the best so far.
    fn consider(&mut self) {
        let cost = self.closed;
        let mut nodes: Vec<(u32, u32, u32)> = Vec::with_capacity(self.chosen.len());
        for (g, &start) in self.starts.iter().enumerate() {
            let end = self.starts.get(g + 1).copied().unwrap_or(self.chosen.len());
            for i in start..end {
                nodes.push((self.chosen[i].0, self.gpus[i], g as u32));
            }
        }
        nodes.sort_unstable_by_key(|n| n.0);
        let order: Vec<u32> = (nodes.iter().map(|n| n.0))
            .chain(nodes.iter().map(|n| n.2))
            .collect();
        let better = self
            .best
            .as_ref()
            .is_none_or(|b| (cost.key(), &order) < (b.cost.key(), &b.order));
        if better {
            self.best = Some(GroupBest { nodes, cost, order });
        }
    }
}
