//! A running service's replicas on the orchestrator's side (`kind: service`, issue #24): how
//! many it wants ([`Scaling`], set by the gateway's autoscaler through
//! [`crate::EngineHandle::scale`] and [`crate::EngineHandle::replica_lost`]) and the step that
//! makes the escrow's running assignments match it, one `Rescale` at a time
//! (`docs/escrow-v2.md`, Rescale): lost replicas and replicas above the wanted count are
//! released (paid up to one receipt interval after the rescale can land, then they stop and
//! claim), and below it one more provider is matched, asked and added.
//!
//! An assignment *runs* while it has not claimed and has not been released (its `until` is
//! still the deadline); each is one replica on its own provider
//! ([`ganglion_market::matching::Requirements::for_replicas`]).

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::build::{self, RescaleRequest};
use ganglion_indexer::JobView;
use ganglion_indexer::store::Kv;
use ganglion_market::matching::{Requirements, match_gang};
use serde::{Deserialize, Serialize};

use super::engine::{Ctx, EngineError, OrchestratorRecord, OrchestratorRole};
use super::orchestrator::{self, ACCEPT_WINDOW_MS, Chosen, Excluded, Exclusion, ask};
use super::store::TxKind;
use super::submit::{lapsed, nudge};
use ganglion_dispatch::executor::Executor;

/// What the orchestrator wants of a service's replicas.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scaling {
    /// Replicas wanted, within `replicas.min..=replicas.max`; `None` = `replicas.min`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wanted: Option<u32>,
    /// Assignment indices given up as lost (unhealthy too long, or their provider gone): each
    /// is released at the next rescale and no longer counts as a replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<u64>,
}

impl Scaling {
    /// The replicas wanted for `spec`: [`Scaling::wanted`] within its `replicas` bounds.
    pub fn wanted_of(&self, spec: &ganglion_market::Ensemble) -> u32 {
        let (min, max) = spec.replicas.map_or((1, 1), |r| (r.min, r.max.max(r.min)));
        self.wanted.unwrap_or(min).clamp(min, max)
    }
}

/// What one rescale does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Assignment indices to release.
    pub release: Vec<u64>,
    /// Whether to add one provider.
    pub add: bool,
}

impl Plan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.release.is_empty() && !self.add
    }
}

/// The assignments of `view` that run: not claimed, not released.
pub fn running(view: &JobView) -> Vec<u64> {
    (0..view.assignments.len())
        .filter(|&i| !view.has_claimed(i) && view.assignments[i].until_ms >= view.deadline_ms)
        .map(|i| i as u64)
        .collect()
}

/// The assignments of `view` that serve: [`running`] and not given up as lost in `scaling`
/// (what the gateway routes to and the autoscaler counts).
pub fn serving(view: &JobView, scaling: &Scaling) -> Vec<u64> {
    running(view)
        .into_iter()
        .filter(|i| !scaling.lost.contains(i))
        .collect()
}

/// The next rescale for `running` assignments (in index order), of which `lost` are given
/// up, when `wanted` replicas are wanted: release the lost ones, then the newest above
/// `wanted`; add one when fewer than `wanted` are left.
pub fn plan(running: &[u64], lost: &[u64], wanted: u32) -> Plan {
    let mut release: Vec<u64> = running
        .iter()
        .copied()
        .filter(|i| lost.contains(i))
        .collect();
    let mut kept: Vec<u64> = running
        .iter()
        .copied()
        .filter(|i| !release.contains(i))
        .collect();
    let wanted = wanted as usize;
    while kept.len() > wanted {
        if let Some(newest) = kept.pop() {
            release.push(newest);
        }
    }
    Plan {
        release,
        add: kept.len() < wanted,
    }
}

/// The rescale step of an assigned service `r` whose escrow is `view`: waits for a rescale in
/// flight, else submits the next one ([`plan`]) when there is one.
///
/// # Errors
/// [`EngineError`] from the chain, the indexer, the matcher or the store.
pub(crate) async fn step<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    view: &JobView,
) -> Result<(), EngineError> {
    if r.detail.stopped_at_ms.is_some() {
        return Ok(());
    }
    if let Some(i) = r.intent(TxKind::Rescale)
        && !view.history.iter().any(|h| h.meta.tx_hash == i.tx_hash)
        && !lapsed(ctx, i)
    {
        nudge(ctx, i).await;
        return Ok(());
    }
    let wanted = r.detail.scaling.wanted_of(&r.detail.spec);
    let plan = plan(&running(view), &r.detail.scaling.lost, wanted);
    if plan.is_empty() {
        return Ok(());
    }
    let now = ctx.now();
    let now_slot = ctx.chain.slot_at(now);
    let accept_by_ms = (now + ACCEPT_WINDOW_MS).min(view.deadline_ms.saturating_sub(1));
    let mut until_slot = now_slot + ctx.config.validity_slots;
    let mut added = Vec::new();
    let mut acceptances = Vec::new();
    let mut bond_refs = Vec::new();
    if plan.add {
        match one_more(ctx, r, view).await? {
            Some(c) => match ask(ctx, &r.job_id, &c, view, accept_by_ms).await? {
                Ok(accepted) => {
                    added.push(accepted.assignment);
                    acceptances.push(accepted.signature);
                    bond_refs.push(accepted.bond);
                    until_slot = until_slot.min(ctx.chain.slot_at(accept_by_ms));
                }
                Err((why, exclusion)) => exclude(ctx, r, &c, why, exclusion)?,
            },
            // Nobody to add on today's market: said in the record (`job status`), once.
            None => {
                let why = format!(
                    "{wanted} replicas wanted, {} running: no provider on the market can take \
                     one more",
                    running(view).len().saturating_sub(plan.release.len())
                );
                if r.detail.last_error.as_deref() != Some(why.as_str()) {
                    let mut d = r.detail.clone();
                    d.last_error = Some(why);
                    ctx.store.set_detail::<OrchestratorRole>(&r.job_id, d)?;
                }
            }
        }
    }
    // A release pays one receipt interval after the latest moment the rescale can land.
    let release_until = ctx.chain.slot_start_ms(until_slot) + view.receipts.interval_ms.max(1);
    let releases: Vec<(u64, u64)> = if release_until < view.deadline_ms {
        plan.release.iter().map(|&i| (i, release_until)).collect()
    } else {
        Vec::new()
    };
    if added.is_empty() && releases.is_empty() {
        return Ok(());
    }
    let escrow_at = orchestrator::escrow_ref(view).ok_or_else(|| EngineError::State {
        job: r.job_id,
        reason: "no escrow".into(),
    })?;
    let mut refs = vec![escrow_at];
    refs.extend(bond_refs);
    let utxos = ctx.chain.script_utxos(&refs).await?;
    let draft = build::rescale(
        ctx.chain.deployment(),
        ctx.chain.env(),
        &RescaleRequest {
            escrow: utxos[0].clone(),
            added,
            acceptances,
            bonds: utxos[1..].to_vec(),
            releases: releases.clone(),
            valid_from_slot: now_slot,
            valid_until_slot: until_slot,
        },
    )
    .map_err(super::chain::ChainError::from)?;
    let tx = ctx.chain.build(draft, ctx.now()).await?;
    tracing::info!(job = %r.job_id, wanted, released = ?releases, adding = plan.add, "rescaling the service");
    super::submit::intent_first::<OrchestratorRole, S, E>(
        ctx,
        &r.job_id,
        TxKind::Rescale,
        tx,
        Some(until_slot),
    )
    .await
}

/// One more provider for a replica of `r`'s service: matched on the live market among those
/// not in the escrow (a provider appears once per escrow) and not left out of the job.
async fn one_more<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    view: &JobView,
) -> Result<Option<Chosen>, EngineError> {
    let now = ctx.now();
    let taken: Vec<KeyHash> = view
        .assignments
        .iter()
        .map(|a| a.provider)
        .chain(
            r.detail
                .excluded
                .iter()
                .filter(|x| x.applies(now))
                .map(|x| x.chosen.provider),
        )
        .collect();
    let market = ctx.p2p.market().await?;
    let offers: Vec<_> = market
        .iter()
        .filter(|o| !taken.contains(&o.body.market.provider))
        .collect();
    let (snapshot, _) = orchestrator::market_snapshot(ctx, offers.iter().copied())?;
    let Ok(plan) = match_gang(&Requirements::for_replicas(&r.detail.spec, 1), &snapshot) else {
        return Ok(None);
    };
    Ok(plan.nodes.first().and_then(|n| Chosen::placed(n, &offers)))
}

/// Leaves `c` out of the service's matching after its refusal (`exclusion` says how long).
fn exclude<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    r: &OrchestratorRecord,
    c: &Chosen,
    why: String,
    exclusion: Exclusion,
) -> Result<(), EngineError> {
    tracing::info!(job = %r.job_id, provider = %hex::encode(c.provider), %why, "one more replica: provider left out");
    let mut d = r.detail.clone();
    d.excluded.push(Excluded {
        chosen: c.clone(),
        reason: why.clone(),
        until_ms: exclusion.until(ctx),
    });
    d.last_error = Some(why);
    ctx.store.set_detail::<OrchestratorRole>(&r.job_id, d)?;
    Ok(())
}

/// Sets the replicas wanted for the service `job` (clamped to its `replicas` bounds); returns
/// the count now wanted.
///
/// # Errors
/// [`EngineError::State`]: an unknown job, or not a service.
pub(crate) fn scale<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &ganglion_contracts::v2::datum::JobId,
    wanted: u32,
) -> Result<u32, EngineError> {
    update(ctx, job, |s, spec| {
        s.wanted = Some(wanted);
        s.wanted_of(spec)
    })
}

/// Gives up assignment `index` of the service `job` as lost: released at the next rescale
/// and, below the wanted count, replaced. Returns the replicas wanted.
///
/// # Errors
/// [`EngineError::State`]: an unknown job, or not a service.
pub(crate) fn lost<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &ganglion_contracts::v2::datum::JobId,
    index: u64,
) -> Result<u32, EngineError> {
    update(ctx, job, |s, spec| {
        if !s.lost.contains(&index) {
            s.lost.push(index);
        }
        s.wanted_of(spec)
    })
}

fn update<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &ganglion_contracts::v2::datum::JobId,
    change: impl FnOnce(&mut Scaling, &ganglion_market::Ensemble) -> u32,
) -> Result<u32, EngineError> {
    let state = |reason: &str| EngineError::State {
        job: *job,
        reason: reason.into(),
    };
    let r = ctx
        .store
        .get::<OrchestratorRole>(job)?
        .ok_or_else(|| state("no such job"))?;
    if r.detail.spec.kind != ganglion_market::JobKind::Service {
        return Err(state("not a service"));
    }
    let mut d = r.detail.clone();
    let wanted = change(&mut d.scaling, &r.detail.spec);
    if d.scaling != r.detail.scaling {
        ctx.store.set_detail::<OrchestratorRole>(job, d)?;
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_replicas_go_and_are_replaced_one_at_a_time() {
        // Two running, wanted two, replica 0 lost: release it and add one.
        assert_eq!(
            plan(&[0, 1], &[0], 2),
            Plan {
                release: vec![0],
                add: true
            }
        );
        // The replacement landed (index 2): nothing more.
        assert!(plan(&[1, 2], &[0], 2).is_empty());
    }

    #[test]
    fn above_the_wanted_count_the_newest_go_below_it_one_is_added() {
        assert_eq!(
            plan(&[0, 1, 2], &[], 2),
            Plan {
                release: vec![2],
                add: false
            }
        );
        assert_eq!(
            plan(&[0, 1, 2, 3], &[1], 2),
            Plan {
                release: vec![1, 3],
                add: false
            }
        );
        assert_eq!(
            plan(&[0, 1], &[], 3),
            Plan {
                release: vec![],
                add: true
            }
        );
        assert!(plan(&[0, 1], &[], 2).is_empty());
    }

    #[test]
    fn the_wanted_count_stays_within_the_specs_replicas() {
        let spec = ganglion_market::Ensemble::parse(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../examples/ensembles/embeddings-service.yaml"),
            )
            .expect("example"),
            1_767_225_600_000,
        )
        .expect("parses");
        let with = |wanted| Scaling {
            wanted,
            lost: vec![],
        };
        assert_eq!(with(None).wanted_of(&spec), 2);
        assert_eq!(with(Some(3)).wanted_of(&spec), 3);
        assert_eq!(with(Some(9)).wanted_of(&spec), 3);
        assert_eq!(with(Some(0)).wanted_of(&spec), 2);
    }
}
