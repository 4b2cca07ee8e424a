//! pallas `PeerClient` (N2N) and `NodeClient` (N2C) follow the devnet from origin.

use ganglion_testnet::producer::body_hash;
use pallas_crypto::hash::Hash;
use pallas_network::facades::{NodeClient, PeerClient};
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::chainsync::NextResponse;
use pallas_traverse::{MultiEraBlock, MultiEraHeader};

use crate::common::*;

/// Produce `n` blocks, each with one payment (chained through the change outputs).
async fn produce_blocks(h: &ganglion_testnet::devnet::DevnetHandle, n: usize) {
    let mut events = h.events();
    for i in 0..n {
        let (tx, _) = payment(h, (i % 4) as u32, ((i + 1) % 4) as u32, 2_000_000);
        let id = h.submit(tx).await.expect("accepted");
        wait_included(&mut events, id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_client_follows_headers_and_fetches_blocks_from_origin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    produce_blocks(&h, 4).await;
    let tip = h.tip().expect("tip");

    let mut peer = PeerClient::connect(h.n2n_addr(), h.magic())
        .await
        .expect("n2n connect");
    let (found, _) = peer
        .chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    assert_eq!(found, Some(Point::Origin));
    let mut prev: Option<Hash<32>> = None;
    let mut seen = 0u64;
    tokio::time::timeout(TIMEOUT, async {
        while seen < tip.number {
            match peer.chainsync().request_next().await.expect("next") {
                NextResponse::RollForward(header, _tip) => {
                    let hdr = MultiEraHeader::decode(header.variant, None, &header.cbor)
                        .expect("header decodes");
                    assert_eq!(hdr.previous_hash(), prev, "headers chain");
                    let point = Point::Specific(hdr.slot(), hdr.hash().to_vec());
                    let body = peer.blockfetch().fetch_single(point).await.expect("fetch");
                    let block = MultiEraBlock::decode(&body).expect("block decodes");
                    assert_eq!(block.hash(), hdr.hash());
                    let declared = block
                        .as_conway()
                        .expect("conway")
                        .header
                        .header_body
                        .block_body_hash;
                    assert_eq!(
                        body_hash(
                            &ganglion_testnet::producer::raw_body_segments(&body)
                                .expect("segments")
                        ),
                        declared,
                        "body hash verifies"
                    );
                    assert_eq!(block.tx_count(), 1);
                    prev = Some(hdr.hash());
                    seen += 1;
                }
                NextResponse::RollBackward(p, _) => assert_eq!(p, Point::Origin),
                NextResponse::Await => panic!("awaited before reaching the tip"),
            }
        }
    })
    .await
    .expect("followed to the tip in time");
    assert_eq!(prev, Some(tip.hash));

    // At the tip the server makes the client wait, then delivers the next block.
    let follower = tokio::spawn(async move {
        loop {
            match peer
                .chainsync()
                .request_or_await_next()
                .await
                .expect("next")
            {
                NextResponse::Await => continue,
                NextResponse::RollForward(header, _) => {
                    let hdr =
                        MultiEraHeader::decode(header.variant, None, &header.cbor).expect("header");
                    return hdr.number();
                }
                NextResponse::RollBackward(..) => panic!("unexpected rollback"),
            }
        }
    });
    produce_blocks(&h, 1).await;
    let n = tokio::time::timeout(TIMEOUT, follower)
        .await
        .expect("in time")
        .expect("task");
    assert_eq!(n, tip.number + 1);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_client_follows_whole_blocks_over_the_unix_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    produce_blocks(&h, 3).await;
    let tip = h.tip().expect("tip");
    let mut node = NodeClient::connect(h.n2c_socket().expect("socket"), h.magic())
        .await
        .expect("n2c connect");
    node.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    let mut prev = None;
    let mut count = 0;
    tokio::time::timeout(TIMEOUT, async {
        while count < tip.number {
            match node.chainsync().request_next().await.expect("next") {
                NextResponse::RollForward(content, _) => {
                    let block = MultiEraBlock::decode(&content.0).expect("block decodes");
                    assert_eq!(block.header().previous_hash(), prev);
                    prev = Some(block.hash());
                    count += 1;
                }
                NextResponse::RollBackward(p, _) => assert_eq!(p, Point::Origin),
                NextResponse::Await => panic!("awaited before the tip"),
            }
        }
    })
    .await
    .expect("in time");
    assert_eq!(prev, Some(tip.hash));
    node.abort().await;
    h.shutdown().await;
}
