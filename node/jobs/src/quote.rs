//! A quote: could today's market place this spec, on whom, and what would it cost at worst?
//! Nothing is locked or pinned (`ganglion job quote`, JSON-RPC `job_quote`; issue "check before
//! paying"). The same terms check as a submit ([`super::terms::check`]), then the same matcher
//! on the same market snapshot (offers and the latency matrix of their links) as the
//! orchestrator's match step.

use ganglion_contracts::params::KeyHash;
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::store::Kv;
use ganglion_market::matching::{Requirements, match_gang};
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
}

/// What a quote found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quote {
    /// The market can place the spec now, on these providers (the matcher's pick: fewest
    /// machines, then lowest latency and price). `worst_case` is what the escrow could pay
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
                let nodes: Vec<QuotedNode> = plan
                    .nodes
                    .iter()
                    .map(|n| QuotedNode {
                        provider: n.provider,
                        gpus: u64::from(n.gpus),
                        rate: n.rate,
                    })
                    .collect();
                let worst_case = super::terms::deadline_window_cost(
                    nodes.iter().map(|n| (n.gpus, n.rate)),
                    spec.deadline_ms,
                    now,
                );
                Quote::Placeable { nodes, worst_case }
            }
            Err(no_fit) => Quote::NotPlaceable {
                reason: no_fit.to_string(),
            },
        },
    )
}
