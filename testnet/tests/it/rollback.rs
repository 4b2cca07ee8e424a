//! An injected rollback is seen by followers (N2N and N2C) as `RollBackward`.

use ganglion_testnet::chain::ChainEvent;
use pallas_network::facades::{NodeClient, PeerClient};
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::chainsync::NextResponse;
use pallas_traverse::MultiEraHeader;

use crate::common::*;

async fn blocks(h: &ganglion_testnet::devnet::DevnetHandle, n: u32) {
    let mut events = h.events();
    for i in 0..n {
        let (tx, _) = payment(h, i % 4, (i + 1) % 4, 2_000_000);
        let id = h.submit(tx).await.expect("accepted");
        wait_included(&mut events, id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_see_an_injected_rollback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    blocks(&h, 3).await;
    let tip = h.tip().expect("tip");

    let mut peer = PeerClient::connect(h.n2n_addr(), h.magic())
        .await
        .expect("n2n");
    let mut node = NodeClient::connect(h.n2c_socket().expect("socket"), h.magic())
        .await
        .expect("n2c");
    peer.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    node.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    // Both follow to the tip.
    let mut block2 = None;
    tokio::time::timeout(TIMEOUT, async {
        let mut n = 0;
        while n < tip.number {
            if let NextResponse::RollForward(hd, _) =
                peer.chainsync().request_next().await.expect("next")
            {
                let hdr = MultiEraHeader::decode(hd.variant, None, &hd.cbor).expect("header");
                n = hdr.number();
                if n == tip.number - 1 {
                    block2 = Some(Point::Specific(hdr.slot(), hdr.hash().to_vec()));
                }
            }
        }
        let mut n = 0;
        while n < tip.number {
            if let NextResponse::RollForward(b, _) =
                node.chainsync().request_next().await.expect("next")
            {
                n = pallas_traverse::MultiEraBlock::decode(&b.0)
                    .expect("block")
                    .number();
            }
        }
    })
    .await
    .expect("followed in time");

    // Both wait at the tip; inject a rollback of one block through the control socket.
    let peer_task = tokio::spawn(async move {
        loop {
            match peer
                .chainsync()
                .request_or_await_next()
                .await
                .expect("next")
            {
                NextResponse::Await => continue,
                NextResponse::RollBackward(p, t) => return (p, t),
                NextResponse::RollForward(..) => panic!("forward before rollback"),
            }
        }
    });
    let node_task = tokio::spawn(async move {
        loop {
            match node
                .chainsync()
                .request_or_await_next()
                .await
                .expect("next")
            {
                NextResponse::Await => continue,
                NextResponse::RollBackward(p, t) => return (p, t),
                NextResponse::RollForward(..) => panic!("forward before rollback"),
            }
        }
    });
    let mut events = h.events();
    let reply =
        ganglion_testnet::control::request(h.control_socket().expect("control"), "rollback 1")
            .await
            .expect("control reply");
    assert_eq!(reply["ok"], serde_json::json!(true), "{reply}");
    match tokio::time::timeout(TIMEOUT, events.recv())
        .await
        .expect("event")
        .expect("recv")
    {
        ChainEvent::RolledBack {
            blocks,
            tip: new_tip,
        } => {
            assert_eq!(blocks, 1);
            assert_eq!(new_tip.map(|t| t.number), Some(tip.number - 1));
        }
        other => panic!("unexpected event {other:?}"),
    }
    let expected = block2.expect("second-to-last block seen");
    let (p, t) = tokio::time::timeout(TIMEOUT, peer_task)
        .await
        .expect("in time")
        .expect("task");
    assert_eq!(p, expected);
    assert_eq!(t.1, tip.number - 1);
    let (p, _) = tokio::time::timeout(TIMEOUT, node_task)
        .await
        .expect("in time")
        .expect("task");
    assert_eq!(p, expected);

    // The rolled-back payment's input is spendable again and the chain grows on.
    blocks(&h, 1).await;
    assert_eq!(h.tip().map(|t| t.number), Some(tip.number));
    assert_ne!(h.tip().map(|t| t.hash), Some(tip.hash));

    // Too deep a rollback is refused with a reason.
    let reply =
        ganglion_testnet::control::request(h.control_socket().expect("control"), "rollback 99")
            .await
            .expect("control reply");
    assert_eq!(reply["ok"], serde_json::json!(false));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_revalidates_the_mempool() {
    use ganglion_testnet::devnet::{self, DevnetConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = DevnetConfig::new(genesis(), dir.path());
    config.auto_forge = false;
    let h = devnet::start(config).await.expect("devnet");
    // Block 1: key 1 pays key 2.
    let (tx, _) = payment(&h, 1, 2, 9_000_000);
    h.submit(tx).await.expect("accepted");
    let b1 = h.forge_now().await.expect("forge").expect("block 1");
    // Pending: one spend of block 1's change (depends on block 1) and one independent spend.
    let (dependent, _) = payment(&h, 1, 3, 4_000_000);
    let dependent_id = h.submit(dependent).await.expect("accepted");
    let (independent, _) = payment(&h, 0, 3, 4_000_000);
    let independent_id = h.submit(independent).await.expect("accepted");
    let mut events = h.events();
    assert_eq!(h.rollback(1).await.expect("rollback"), None);
    let mut dropped = Vec::new();
    tokio::time::timeout(TIMEOUT, async {
        loop {
            match events.recv().await.expect("event") {
                ChainEvent::TxDropped { tx, rejection } => dropped.push((tx, rejection.rule())),
                ChainEvent::RolledBack { .. } => break,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("events in time");
    assert_eq!(dropped, vec![(dependent_id, "BadInputsUTxO")]);
    assert_eq!(h.chain().mempool_len(), 1);
    let b = h.forge_now().await.expect("forge").expect("a new block 1");
    assert_eq!(b.number, 1);
    assert_ne!(b.hash, b1.hash);
    let block = h.chain().store().block(1).expect("read").expect("block");
    let m = pallas_traverse::MultiEraBlock::decode(&block.wrapped).expect("decodes");
    assert_eq!(
        m.txs().iter().map(|t| t.hash()).collect::<Vec<_>>(),
        vec![independent_id]
    );
    h.shutdown().await;
}
