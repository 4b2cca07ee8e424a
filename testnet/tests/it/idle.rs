//! `idle_block_slots`: an idle devnet keeps forging empty blocks on its slot clock, so a node
//! waiting for a confirmation is never held up by the lack of other traffic; without it an
//! idle devnet forges nothing.

use std::time::Duration;

use ganglion_testnet::chain::ChainEvent;
use ganglion_testnet::devnet::{self, DevnetConfig};

use super::common::{self, SLOT_MS, TIMEOUT};

#[tokio::test]
async fn an_idle_devnet_forges_empty_blocks_only_when_asked() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut config = DevnetConfig::new(common::genesis(), dir.path().join("idle"));
    config.idle_block_slots = Some(3);
    let h = devnet::start(config).await.expect("devnet starts");
    let mut events = h.events();
    let mut blocks = Vec::new();
    while blocks.len() < 2 {
        match tokio::time::timeout(TIMEOUT, events.recv()).await {
            Ok(Ok(ChainEvent::BlockForged { block, txs })) => {
                assert!(txs.is_empty(), "nothing was submitted");
                blocks.push(block);
            }
            Ok(Ok(_)) => {}
            other => panic!("no empty block within {TIMEOUT:?}: {other:?}"),
        }
    }
    assert!(
        blocks[0].slot >= 3,
        "{blocks:?}: the first idle block waits 3 slots after genesis too"
    );
    assert_eq!(blocks[1].number, blocks[0].number + 1);
    assert!(
        blocks[1].slot >= blocks[0].slot + 3,
        "{blocks:?}: at most one per 3 idle slots"
    );
    h.shutdown().await;

    // The default: an idle devnet forges nothing.
    let quiet = common::start(&dir.path().join("quiet"), common::genesis()).await;
    let mut events = quiet.events();
    let waited = tokio::time::timeout(
        Duration::from_millis(u64::from(SLOT_MS) * 20),
        events.recv(),
    )
    .await;
    assert!(waited.is_err(), "an unexpected event: {waited:?}");
    assert!(quiet.chain().tip().is_none());
    quiet.shutdown().await;
}
