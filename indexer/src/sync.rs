//! The sync loop: follow a source, feed the indexer, reconnect with backoff.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::apply::Indexer;
use crate::error::Result;
use crate::follow::{ChainEvent, FollowError, Follower, Source};
use crate::store::Kv;

/// Where a fresh indexer (no cursor yet) starts; one with a cursor always resumes from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Start {
    /// From the first block (everything the deployment ever did).
    #[default]
    Origin,
    /// From the peer's tip at the time of connecting (only what happens from now on).
    Tip,
    /// From the block after this point: slot and header hash, e.g. the block before the
    /// deployment's first transaction.
    Point(u64, [u8; 32]),
}

/// How to follow.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// The chain source.
    pub source: Source,
    /// Where to start when the store is empty.
    pub start: Start,
    /// First reconnect delay; doubles up to `backoff_max`.
    pub backoff_min: Duration,
    /// Longest reconnect delay.
    pub backoff_max: Duration,
}

impl SyncConfig {
    /// Defaults: 100 ms doubling to 10 s.
    pub fn new(source: Source) -> Self {
        Self {
            source,
            start: Start::Origin,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
        }
    }
}

/// Follows `config.source` into `indexer` until `cancel` fires. Connection and protocol
/// failures are logged and retried with exponential backoff; on reconnect the follower
/// intersects at the newest block the indexer still knows (rolling back to it if the peer
/// switched forks meanwhile). Store errors end the loop (the operator must act).
///
/// Store writes run on the calling task: one small batch per block.
///
/// # Errors
/// Store errors from the indexer.
pub async fn run<S: Kv>(
    indexer: Arc<Indexer<S>>,
    config: SyncConfig,
    cancel: CancellationToken,
) -> Result<()> {
    let mut delay = config.backoff_min;
    loop {
        let outcome = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            r = session(&indexer, &config.source, config.start) => r,
        };
        match outcome {
            Ok(()) => return Ok(()),
            Err(SessionError::Store(e)) => {
                tracing::error!(error = %e, "indexer store failed; sync stops");
                return Err(e);
            }
            Err(SessionError::Follow(e, progressed)) => {
                if progressed {
                    delay = config.backoff_min;
                }
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "chain follower disconnected");
                tokio::select! {
                    () = cancel.cancelled() => return Ok(()),
                    () = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(config.backoff_max);
            }
        }
    }
}

enum SessionError {
    Store(crate::Error),
    /// The follower failed; `true` when it had applied something first.
    Follow(FollowError, bool),
}

async fn session<S: Kv>(
    indexer: &Indexer<S>,
    source: &Source,
    start: Start,
) -> std::result::Result<(), SessionError> {
    let mut follower = Follower::connect(source)
        .await
        .map_err(|e| SessionError::Follow(e, false))?;
    let known: Vec<Option<(u64, [u8; 32])>> = indexer
        .recent_points()
        .map_err(SessionError::Store)?
        .into_iter()
        .map(|p| Some((p.slot, p.hash)))
        .collect();
    let from = if known.is_empty() {
        match start {
            Start::Origin => follower.intersect(&[]).await,
            Start::Point(slot, hash) => follower.intersect(&[Some((slot, hash))]).await,
            Start::Tip => follower.intersect_tip().await,
        }
    } else {
        follower.intersect(&known).await
    }
    .map_err(|e| SessionError::Follow(e, false))?;
    if !known.is_empty() {
        // The peer may have switched forks while we were away: undo what it no longer has.
        indexer.roll_back_to(from).map_err(SessionError::Store)?;
    }
    tracing::info!(from = ?from.map(|p| p.0), "following the chain");
    indexer.notify(crate::apply::Notification::Intersected { at: from });
    let mut progressed = false;
    loop {
        match follower
            .next()
            .await
            .map_err(|e| SessionError::Follow(e, progressed))?
        {
            ChainEvent::RollForward(block) => match indexer.apply_block(&block) {
                Ok(_) => progressed = true,
                Err(crate::Error::NotNext { .. }) => {
                    // The peer skipped ahead of us: reconnect and intersect again.
                    return Err(SessionError::Follow(FollowError::NotNext, progressed));
                }
                Err(crate::Error::BlockDecode { reason, .. }) => {
                    return Err(SessionError::Follow(FollowError::Block(reason), progressed));
                }
                Err(e) => return Err(SessionError::Store(e)),
            },
            // A fresh indexer started at a point: the peer first rolls back to it.
            ChainEvent::RollBackward(point)
                if point == from && indexer.tip().map_err(SessionError::Store)?.is_none() => {}
            ChainEvent::RollBackward(point) => match indexer.roll_back_to(point) {
                Ok(_) => progressed = true,
                Err(
                    e @ (crate::Error::RollbackTooDeep { .. } | crate::Error::UnknownPoint { .. }),
                ) => {
                    return Err(SessionError::Store(e));
                }
                Err(e) => return Err(SessionError::Store(e)),
            },
        }
    }
}
