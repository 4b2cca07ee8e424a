//! The real blocks in `shared/fixtures/cardano/` go through the same decoding and scanning,
//! and through the same live sync loop, served as a cardano-node's socket serves them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ganglion_indexer::follow::Source;
use ganglion_indexer::store::MemoryKv;
use ganglion_indexer::sync::{self, SyncConfig};
use ganglion_indexer::{Indexer, Point};
use pallas_network::facades::NodeServer;
use pallas_network::miniprotocols::Point as WirePoint;
use pallas_network::miniprotocols::chainsync::{BlockContent, ClientRequest, Tip};
use pallas_traverse::MultiEraBlock;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use crate::scenario::run;

#[test]
fn real_blocks_are_scanned_without_events() {
    let watch = run().watch;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/cardano");
    // (file, transactions) from the fixtures' README.
    let expected = [
        ("conway1.block", 1),
        ("conway2.block", 1),
        ("conway3.block", 1),
        ("conway4.block", 1),
        ("babbage1.block", 1),
        ("babbage7.block", 4),
        ("babbage9.block", 47),
    ];
    for (file, txs) in expected {
        let hex_text = std::fs::read_to_string(dir.join(file)).expect("fixture");
        let bytes = hex::decode(hex_text.trim()).expect("hex");
        // The fixtures do not chain: a fresh indexer for each.
        let ix = Indexer::new(MemoryKv::new(), watch.clone(), 10);
        let applied = ix
            .apply_block(&bytes)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(applied.tx_count, txs, "{file}: every transaction seen");
        assert!(applied.records.is_empty(), "{file}: no Ganglion events");
        assert_eq!(
            ix.tip().expect("tip").map(|t| t.height),
            Some(applied.point.height)
        );
    }
}

/// A node's N2C chainsync answering as cardano-node does for a chain whose only block is
/// `wrapped` (HFC-wrapped `[era, block]`, the fixtures' bytes): the intersection is found at
/// origin, the first `RequestNext` rolls back to it, the next rolls forward with the block,
/// then the server has nothing more (`AwaitReply`) until the client leaves.
async fn serve_one_block(listener: UnixListener, magic: u64, wrapped: Vec<u8>, tip: Tip) {
    let Ok(mut server) = NodeServer::accept(&listener, magic).await else {
        return;
    };
    let cs = server.chainsync();
    let mut sent = 0;
    while let Ok(Some(req)) = cs.recv_while_idle().await {
        let ok = match req {
            ClientRequest::Intersect(_) => {
                cs.send_intersect_found(WirePoint::Origin, tip.clone())
                    .await
            }
            ClientRequest::RequestNext => {
                sent += 1;
                match sent {
                    1 => cs.send_roll_backward(WirePoint::Origin, tip.clone()).await,
                    2 => {
                        cs.send_roll_forward(BlockContent(wrapped.clone()), tip.clone())
                            .await
                    }
                    _ => cs.send_await_reply().await,
                }
            }
        };
        if ok.is_err() {
            return;
        }
    }
}

/// Follow a real node's chain as it is: each real block is served over N2C chainsync (the
/// way a cardano-node's socket serves it) and taken in by `sync::run`, the loop the
/// indexer binary and the node run live — connect, handshake, intersect, roll back to
/// origin, roll forward, `Indexer::apply_block` — with no path of its own for fixtures. The
/// fixtures are single blocks of three networks that do not chain to each other, so each is
/// one chain of one block, followed by a fresh indexer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_blocks_are_followed_over_n2c_by_the_live_sync_loop() {
    let watch = run().watch;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/cardano");
    let sockets = tempfile::tempdir().expect("tempdir");
    let magic = 4; // any: the handshake only has to agree with the client
    for (file, txs) in [
        ("conway1.block", 1),
        ("conway2.block", 1),
        ("conway3.block", 1),
        ("conway4.block", 1),
        ("babbage1.block", 1),
        ("babbage7.block", 4),
        ("babbage9.block", 47),
    ] {
        let hex_text = std::fs::read_to_string(dir.join(file)).expect("fixture");
        let bytes = hex::decode(hex_text.trim()).expect("hex");
        let block = MultiEraBlock::decode(&bytes).expect("decodes");
        let expected = Point {
            slot: block.slot(),
            hash: *block.hash(),
            height: block.number(),
        };
        assert_eq!(block.tx_count(), txs, "{file}");
        let tip = Tip(
            WirePoint::Specific(expected.slot, expected.hash.to_vec()),
            expected.height,
        );
        let socket = sockets.path().join(format!("{file}.socket"));
        let listener = UnixListener::bind(&socket).expect("bind");
        let server = tokio::spawn(serve_one_block(listener, magic, bytes.clone(), tip));

        let ix = Arc::new(Indexer::new(MemoryKv::new(), watch.clone(), 10));
        let cancel = CancellationToken::new();
        let sync = tokio::spawn(sync::run(
            ix.clone(),
            SyncConfig::new(Source::N2cUnix { socket, magic }),
            cancel.clone(),
        ));
        let followed = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if ix.tip().expect("tip") == Some(expected) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        cancel.cancel();
        sync.await.expect("sync task").expect("sync ends cleanly");
        server.abort();
        assert!(followed.is_ok(), "{file}: the indexer reached the block");
        assert!(
            ix.recent_points().expect("points").contains(&expected),
            "{file}: applied with its undo record"
        );
    }
}
