//! A quote: could today's market place this spec, on whom, and what would it cost at worst?
//! Nothing is locked or pinned (`ganglion job quote`, JSON-RPC `job_quote`). The same terms
//! check as a submit ([`super::terms::check`]), then the same matcher on the same market
//! snapshot (offers and the latency matrix of their links) as the orchestrator's match step.

use ganglion_contracts::params::KeyHash;
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::store::Kv;
use ganglion_market::PairFailure;
use ganglion_market::matching::{Plan, Requirements, match_gang};
use ganglion_market::spec::Ensemble;

use super::engine::{Ctx, EngineError, SpecError};

/// One provider of a placement: the GPUs it would run at its rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotedNode {
    /// Its payment key hash.
    pub provider: KeyHash,
    /// GPUs placed on it.
    pub gpus: u64,
    /// Its rate, NTX base units per GPU-hour.
    pub rate: u64,
    /// Its latency group (`placement.groups`), 0-based; `None` without groups.
    pub group: Option<u32>,
}

/// What a quote found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quote {
    /// The market can place the spec now, on these providers (the matcher's pick: fewest
    /// machines, then lowest latency and price), in the order the orchestrator would assign
    /// them: group by group with `placement.groups`. `worst_case` is what the escrow could pay
    /// them at most: every GPU at its rate until the deadline (NTX base units, never above the
    /// budget, which the terms check guarantees).
    Placeable {
        /// The providers.
        nodes: Vec<QuotedNode>,
        /// NTX base units.
        worst_case: u64,
    },
    /// Nothing in today's market fits: the matcher's reason (e.g. too few GPUs with that
    /// much VRAM, or none under the rate ceiling). The market may change.
    NotPlaceable {
        /// Why.
        reason: String,
        /// With a pairwise limit binding: its closest failing pair (full key hashes).
        pair: Option<PairFailure>,
    },
}

/// Quotes `spec` at `ctx.now()` against the live market.
///
/// # Errors
/// [`EngineError::Terms`] (the budget or the deadline cannot work, as for a submit),
/// [`EngineError::Spec`], [`EngineError::P2p`] (the market could not be read).
pub(crate) async fn quote<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    spec: &Ensemble,
) -> Result<Quote, EngineError> {
    let now = ctx.now();
    spec.validate(now).map_err(SpecError::from)?;
    super::terms::check(spec, now)?;
    let market = ctx.p2p.market().await?;
    let (snapshot, _) = super::orchestrator::market_snapshot(ctx, &market)?;
    Ok(
        match match_gang(&Requirements::from_ensemble(spec), &snapshot) {
            Ok(plan) => {
                let nodes = quoted_nodes(&plan);
                let worst_case = super::terms::deadline_window_cost(
                    nodes.iter().map(|n| (n.gpus, n.rate)),
                    spec.deadline_ms,
                    now,
                );
                Quote::Placeable { nodes, worst_case }
            }
            Err(no_fit) => Quote::NotPlaceable {
                reason: no_fit.to_string(),
                pair: no_fit.pair.map(|p| *p),
            },
        },
    )
}

/// The plan's nodes in assignment order: group by group (stable: rank order inside a group),
/// as the orchestrator's match step lists them.
fn quoted_nodes(plan: &Plan) -> Vec<QuotedNode> {
    let mut nodes: Vec<QuotedNode> = (plan.nodes.iter())
        .map(|n| QuotedNode {
            provider: n.provider,
            gpus: u64::from(n.gpus),
            rate: n.rate,
            group: n.group,
        })
        .collect();
    nodes.sort_by_key(|n| n.group);
    nodes
}

#[cfg(test)]
mod tests {
    use ganglion_market::matching::NodePlan;

    use super::*;

    fn node(provider: u8, group: Option<u32>, rank: u32) -> NodePlan {
        NodePlan {
            provider: [provider; 28],
            gpus: 1,
            rate: 10,
            score: 1,
            measured: false,
            group,
            rank,
        }
    }

    /// A grouped plan is quoted group by group, each node with its group, as it would be
    /// assigned; an ungrouped one in plan order, without groups.
    #[test]
    fn quoted_nodes_carry_their_group_in_assignment_order() {
        let plan = |nodes| Plan {
            nodes,
            price_per_hour: 40,
            score: 4,
            exhaustive: true,
        };
        let grouped = plan(vec![
            node(1, Some(0), 0),
            node(2, Some(1), 1),
            node(3, Some(0), 2),
            node(4, Some(1), 3),
        ]);
        let got: Vec<(u8, Option<u32>)> = (quoted_nodes(&grouped).iter())
            .map(|n| (n.provider[0], n.group))
            .collect();
        assert_eq!(
            got,
            [(1, Some(0)), (3, Some(0)), (2, Some(1)), (4, Some(1))]
        );
        let flat = plan(vec![node(2, None, 0), node(1, None, 1)]);
        let got: Vec<(u8, Option<u32>)> = (quoted_nodes(&flat).iter())
            .map(|n| (n.provider[0], n.group))
            .collect();
        assert_eq!(got, [(2, None), (1, None)]);
    }
}
