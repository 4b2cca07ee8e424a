//! Blockfetch server: ranges of whole (HFC-wrapped) blocks by point.

use std::sync::Arc;

use pallas_network::miniprotocols::blockfetch::{BlockRequest, Server};
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;
use crate::serve::ServeError;
use crate::serve::chainsync::resolve_point;

/// Most blocks returned for one range request.
pub const MAX_RANGE_BLOCKS: u64 = 2000;

/// Serve one blockfetch client until `ClientDone`, a broken connection or `cancel`.
///
/// # Errors
/// [`ServeError`].
pub async fn serve(
    server: &mut Server,
    chain: Arc<Chain>,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    loop {
        let req = tokio::select! {
            r = server.recv_while_idle() => r?,
            _ = cancel.cancelled() => return Ok(()),
        };
        let Some(BlockRequest((from, to))) = req else {
            return Ok(());
        };
        let (Some(Some(a)), Some(Some(b))) =
            (resolve_point(&chain, &from)?, resolve_point(&chain, &to)?)
        else {
            server.send_block_range(vec![]).await?;
            continue;
        };
        if a.number > b.number || b.number - a.number >= MAX_RANGE_BLOCKS {
            server.send_block_range(vec![]).await?;
            continue;
        }
        let mut blocks = Vec::new();
        for n in a.number..=b.number {
            match chain.store().block(n)? {
                Some(blk) => blocks.push(blk.wrapped),
                None => {
                    blocks.clear();
                    break;
                }
            }
        }
        server.send_block_range(blocks).await?;
    }
}
