//! The devnet's blocks as the demo sees them forged: each block's number, slot, the wall-clock
//! time it was forged (POSIX ms, when its event arrived) and its transactions, so the summary
//! can give every transaction its block, slot and fee, and time steps from blocks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ganglion_testnet::chain::ChainEvent;
use ganglion_testnet::devnet::DevnetHandle;
use tokio::task::JoinHandle;

/// Where a transaction landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landed {
    /// Block number (height).
    pub block: u64,
    /// Slot.
    pub slot: u64,
    /// When the demo saw the block forged, POSIX ms.
    pub seen_ms: u64,
}

/// Records forged blocks from the moment it starts until dropped.
pub struct ChainLog {
    txs: Arc<Mutex<HashMap<[u8; 32], Landed>>>,
    task: JoinHandle<()>,
}

impl ChainLog {
    /// Starts listening to `handle`'s chain events.
    pub fn start(handle: &DevnetHandle) -> Self {
        let txs: Arc<Mutex<HashMap<[u8; 32], Landed>>> = Arc::default();
        let mut events = handle.events();
        let sink = txs.clone();
        let task = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(ChainEvent::BlockForged { block, txs }) => {
                        let seen_ms = ganglion_p2p::now_ms();
                        let mut map = sink.lock().unwrap_or_else(|p| p.into_inner());
                        for tx in txs {
                            map.insert(
                                *tx,
                                Landed {
                                    block: block.number,
                                    slot: block.slot,
                                    seen_ms,
                                },
                            );
                        }
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Self { txs, task }
    }

    /// Where transaction `tx_id` (hex) landed, if the demo saw it.
    pub fn landed(&self, tx_id: &str) -> Option<Landed> {
        let id: [u8; 32] = hex::decode(tx_id).ok()?.try_into().ok()?;
        self.txs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .copied()
    }
}

impl Drop for ChainLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The fee of transaction `tx_id` (hex) in block `block` of `handle`'s chain, lovelace.
pub fn fee_of(handle: &DevnetHandle, block: u64, tx_id: &str) -> Option<u64> {
    let stored = handle.chain().store().block(block).ok()??;
    let decoded = pallas_traverse::MultiEraBlock::decode(&stored.wrapped).ok()?;
    decoded
        .txs()
        .iter()
        .find(|t| hex::encode(t.hash()) == tx_id)
        .and_then(pallas_traverse::MultiEraTx::fee)
}
