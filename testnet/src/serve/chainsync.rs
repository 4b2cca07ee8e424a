//! Chainsync server logic shared by N2N (headers) and N2C (whole blocks): intersect,
//! roll forward block by block, await at the tip, and roll back to the last common point
//! when the chain was rolled back under the follower.

use std::collections::VecDeque;
use std::sync::Arc;

use pallas_codec::Fragment;
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::chainsync::Message;
use pallas_network::miniprotocols::chainsync::{self, ClientRequest, Tip};
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;
use crate::serve::ServeError;
use crate::store::{BlockRef, StoredBlock};

/// The chainsync tip message for a chain tip.
pub fn tip_of(tip: Option<BlockRef>) -> Tip {
    match tip {
        None => Tip(Point::Origin, 0),
        Some(t) => Tip(point_of(&t), t.number),
    }
}

/// The Ouroboros point of a block.
pub fn point_of(b: &BlockRef) -> Point {
    Point::Specific(b.slot, b.hash.to_vec())
}

/// Is `b` still on the chain?
fn on_chain(chain: &Chain, b: &BlockRef) -> Result<bool, ServeError> {
    Ok(chain.store().number_of(b.hash.as_ref())? == Some(b.number))
}

/// Resolve a client point to a block on our chain (`Ok(None)` = origin; `Err(())` inside
/// = not on chain).
pub fn resolve_point(chain: &Chain, p: &Point) -> Result<Option<Option<BlockRef>>, ServeError> {
    match p {
        Point::Origin => Ok(Some(None)),
        Point::Specific(slot, hash) => match chain.store().number_of(hash)? {
            Some(n) => match chain.store().block(n)? {
                Some(b) if b.at.slot == *slot => Ok(Some(Some(b.at))),
                _ => Ok(None),
            },
            None => Ok(None),
        },
    }
}

/// The tip as the store has it. The server reads blocks from the store, so the tip it
/// announces comes from the same place: the chain's tip watch is updated just after the store,
/// and a message built between the two would pair a rolled-back cursor with the old tip.
fn store_tip(chain: &Chain) -> Result<Tip, ServeError> {
    Ok(tip_of(chain.store().tip()?))
}

/// The last `k` blocks of our chain up to and including `at`: blocks the client holds once it
/// intersected at `at` (a header hash commits to its whole ancestry). They are the candidate
/// fork points when a later rollback goes deeper than what this session forwarded; without
/// them a rollback below the intersection would be announced as a rollback to origin.
fn known_ancestors(
    chain: &Chain,
    at: Option<BlockRef>,
    k: usize,
) -> Result<VecDeque<BlockRef>, ServeError> {
    let mut history = VecDeque::with_capacity(k);
    let Some(at) = at else {
        return Ok(history);
    };
    let from = at.number.saturating_sub(k as u64 - 1).max(1);
    for n in from..at.number {
        if let Some(b) = chain.store().block(n)? {
            history.push_back(b.at);
        }
    }
    history.push_back(at);
    Ok(history)
}

/// Serve one chainsync client until it sends `Done`, the connection breaks or `cancel`.
///
/// # Errors
/// [`ServeError`] on protocol or store errors.
pub async fn serve<C>(
    server: &mut chainsync::Server<C>,
    chain: Arc<Chain>,
    content: fn(&StoredBlock) -> C,
    cancel: CancellationToken,
) -> Result<(), ServeError>
where
    Message<C>: Fragment,
{
    let mut tip_rx = chain.subscribe_tip();
    let k = chain.k() as usize + 1;
    let mut cursor: Option<BlockRef> = None;
    let mut history: VecDeque<BlockRef> = VecDeque::new();
    let mut pending_rollback: Option<Point> = None;
    loop {
        let req = tokio::select! {
            r = server.recv_while_idle() => r?,
            _ = cancel.cancelled() => return Ok(()),
        };
        match req {
            None => return Ok(()),
            Some(ClientRequest::Intersect(points)) => {
                let tip = store_tip(&chain)?;
                let mut found = None;
                for p in &points {
                    if let Some(b) = resolve_point(&chain, p)? {
                        found = Some((p.clone(), b));
                        break;
                    }
                }
                match found {
                    Some((p, b)) => {
                        cursor = b;
                        history = known_ancestors(&chain, b, k)?;
                        pending_rollback = Some(p.clone());
                        server.send_intersect_found(p, tip).await?;
                    }
                    None => server.send_intersect_not_found(tip).await?,
                }
            }
            Some(ClientRequest::RequestNext) => {
                if let Some(p) = pending_rollback.take() {
                    server.send_roll_backward(p, store_tip(&chain)?).await?;
                    continue;
                }
                let mut awaiting = false;
                loop {
                    tip_rx.borrow_and_update();
                    let next_no = cursor.map_or(1, |c| c.number + 1);
                    let next = chain.store().block(next_no)?;
                    let cursor_ok = match &cursor {
                        None => true,
                        Some(c) => on_chain(&chain, c)?,
                    };
                    if !cursor_ok {
                        while let Some(h) = history.back() {
                            if on_chain(&chain, h)? {
                                break;
                            }
                            history.pop_back();
                        }
                        cursor = history.back().copied();
                        let point = cursor.as_ref().map_or(Point::Origin, point_of);
                        server.send_roll_backward(point, store_tip(&chain)?).await?;
                        break;
                    }
                    if let Some(b) = next {
                        cursor = Some(b.at);
                        history.push_back(b.at);
                        if history.len() > k {
                            history.pop_front();
                        }
                        server
                            .send_roll_forward(content(&b), store_tip(&chain)?)
                            .await?;
                        break;
                    }
                    if !awaiting {
                        server.send_await_reply().await?;
                        awaiting = true;
                    }
                    tokio::select! {
                        r = tip_rx.changed() => if r.is_err() { return Ok(()) },
                        _ = cancel.cancelled() => return Ok(()),
                    }
                }
            }
        }
    }
}
