//! How this node's own transactions reach the chain: each new one leaves with a durable
//! [`TxIntent`] in the job store, is re-submitted while pending ([`nudge`]) and given up once
//! past its validity ([`lapsed`]); the drivers read the intent after a restart instead of
//! building the transaction again.
//!
//! Two orders: [`intent_first`] for a transaction nobody else races for (lock, assign,
//! cancel, expire: written, flushed, then submitted, so a crash in between re-submits the same
//! bytes), [`ledger_first`] for one that may lose a race for its inputs (a claim, against the
//! other providers' claims of the same escrow: only a transaction the ledger took is recorded,
//! and a refused one is simply built again on the next UTxO).

use ganglion_dispatch::executor::Executor;
use ganglion_indexer::store::Kv;

use super::chain::SignedTx;
use super::engine::{Ctx, EngineError};
use super::store::{Role, TxIntent, TxKind};
use ganglion_contracts::v2::datum::JobId;

/// Writes `tx`'s intent for `job` in role `R` and marks it submitted at `now` (so [`nudge`]
/// waits a re-submission interval from here).
fn record<R: Role, S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    kind: TxKind,
    tx: &SignedTx,
    now: u64,
    valid_until_slot: Option<u64>,
) -> Result<(), EngineError> {
    ctx.store.record_intent::<R>(
        job,
        TxIntent {
            kind,
            tx_hash: tx.hash,
            signed: tx.bytes.clone(),
            written_ms: now,
            valid_until_slot,
        },
    )?;
    ctx.submitted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(tx.hash, now);
    Ok(())
}

/// Submits a new transaction of `kind` for `job` in role `R`: intent first (flushed), then
/// the ledger.
///
/// # Errors
/// [`EngineError`] from the job store (nothing submitted) or from the submission (the intent
/// stays, and [`nudge`] re-submits it).
pub(crate) async fn intent_first<R: Role, S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    kind: TxKind,
    tx: SignedTx,
    valid_until_slot: Option<u64>,
) -> Result<(), EngineError> {
    let now = ctx.now();
    record::<R, S, E>(ctx, job, kind, &tx, now, valid_until_slot)?;
    ctx.chain.submit(&tx, now).await?;
    tracing::info!(job = %job, ?kind, tx = %hex::encode(tx.hash), "submitted");
    Ok(())
}

/// Submits a new transaction of `kind` for `job` in role `R`, and records its intent only
/// once the ledger took it.
///
/// # Errors
/// [`EngineError`] from the submission (nothing recorded: the caller builds it again) or from
/// the job store (the transaction is out; the chain refuses a second one of the same kind).
pub(crate) async fn ledger_first<R: Role, S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
    kind: TxKind,
    tx: SignedTx,
    valid_until_slot: Option<u64>,
) -> Result<(), EngineError> {
    let now = ctx.now();
    ctx.chain.submit(&tx, now).await?;
    record::<R, S, E>(ctx, job, kind, &tx, now, valid_until_slot)?;
    tracing::info!(job = %job, ?kind, tx = %hex::encode(tx.hash), "submitted");
    Ok(())
}

/// Re-submits a pending intent's bytes when due; ledger refusals are logged (the chain
/// decides: a transaction already in a block or with spent inputs is refused).
pub(crate) async fn nudge<S: Kv, E: Executor>(ctx: &Ctx<S, E>, intent: &TxIntent) {
    if ctx.due(&intent.tx_hash, intent.written_ms) {
        match ctx.chain.resubmit(&intent.signed).await {
            Ok(()) => {
                tracing::info!(kind = ?intent.kind, tx = %hex::encode(intent.tx_hash), "re-submitted")
            }
            Err(e) => tracing::debug!(kind = ?intent.kind, error = %e, "re-submission refused"),
        }
    }
}

/// Whether an intent can no longer land: past its validity.
pub(crate) fn lapsed<S: Kv, E: Executor>(ctx: &Ctx<S, E>, intent: &TxIntent) -> bool {
    intent
        .valid_until_slot
        .is_some_and(|u| ctx.chain.slot_at(ctx.now()) >= u)
}
