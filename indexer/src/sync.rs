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

/// The default of [`SyncConfig::catch_up_run`]: mainnet blocks are at most 90 kB, so a run
/// holds at most about 9 MB.
pub const CATCH_UP_RUN: usize = 100;

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
    /// Most blocks applied in one store commit while catching up (the peer's tip is ahead
    /// of the block it sent); at least 1. Default [`CATCH_UP_RUN`].
    pub catch_up_run: usize,
}

impl SyncConfig {
    /// Defaults: 100 ms doubling to 10 s.
    pub fn new(source: Source) -> Self {
        Self {
            source,
            start: Start::Origin,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            catch_up_run: CATCH_UP_RUN,
        }
    }
}

/// Follows `config.source` into `indexer` until `cancel` fires. Connection and protocol
/// failures are logged and retried with exponential backoff; on reconnect the follower
/// intersects at the newest block the indexer still knows (rolling back to it if the peer
/// switched forks meanwhile). Store errors end the loop (the operator must act).
///
/// Store writes run on the calling task: one commit per block at the tip, one per run of up
/// to `config.catch_up_run` blocks while catching up.
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
            r = session(&indexer, &config) => r,
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
    config: &SyncConfig,
) -> std::result::Result<(), SessionError> {
    let mut follower = Follower::connect(&config.source)
        .await
        .map_err(|e| SessionError::Follow(e, false))?;
    let known: Vec<Option<(u64, [u8; 32])>> = indexer
        .recent_points()
        .map_err(SessionError::Store)?
        .into_iter()
        .map(|p| Some((p.slot, p.hash)))
        .collect();
    let from = if known.is_empty() {
        match config.start {
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
    // Blocks received while the peer has more ready, applied together (one store commit).
    let mut run: Vec<Vec<u8>> = Vec::new();
    loop {
        let event = match follower.next().await {
            Ok(event) => event,
            Err(e) => {
                progressed |= apply_run(indexer, &mut run, progressed)?;
                return Err(SessionError::Follow(e, progressed));
            }
        };
        match event {
            ChainEvent::RollForward { block, more } => {
                run.push(block);
                if !more || run.len() >= config.catch_up_run {
                    progressed |= apply_run(indexer, &mut run, progressed)?;
                }
            }
            // A fresh indexer started at a point: the peer first rolls back to it.
            ChainEvent::RollBackward(point)
                if run.is_empty()
                    && point == from
                    && indexer.tip().map_err(SessionError::Store)?.is_none() => {}
            ChainEvent::RollBackward(point) => {
                apply_run(indexer, &mut run, progressed)?;
                match indexer.roll_back_to(point) {
                    Ok(_) => progressed = true,
                    Err(e) => return Err(SessionError::Store(e)),
                }
            }
        }
    }
}

/// Applies and empties `run`; true when it held blocks. `progressed`: whether the session
/// applied anything before (kept in a follow error).
///
/// # Errors
/// A block the indexer cannot take ends the session (reconnect and intersect again: the
/// peer skipped ahead of us, or sent a block that does not decode); store errors.
fn apply_run<S: Kv>(
    indexer: &Indexer<S>,
    run: &mut Vec<Vec<u8>>,
    progressed: bool,
) -> std::result::Result<bool, SessionError> {
    if run.is_empty() {
        return Ok(false);
    }
    let blocks = std::mem::take(run);
    match indexer.apply_blocks(&blocks) {
        Ok(_) => Ok(true),
        Err(crate::Error::NotNext { .. }) => {
            Err(SessionError::Follow(FollowError::NotNext, progressed))
        }
        Err(crate::Error::BlockDecode { reason, .. }) => {
            Err(SessionError::Follow(FollowError::Block(reason), progressed))
        }
        Err(e) => Err(SessionError::Store(e)),
    }
}
