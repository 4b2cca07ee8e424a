//! The real Conway blocks in `shared/fixtures/cardano/` go through the same serving code
//! paths (store → chainsync header / blockfetch / N2C chainsync) and arrive byte-identical,
//! so the serving side does not depend on our own block encoder.

use ganglion_testnet::chain::genesis_fingerprint;
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::ledger::utxo::UtxoDelta;
use ganglion_testnet::producer::ForgedBlock;
use ganglion_testnet::store::Store;
use pallas_codec::minicbor;
use pallas_network::facades::{NodeClient, PeerClient};
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::chainsync::NextResponse;
use pallas_traverse::{MultiEraBlock, MultiEraHeader};

use crate::common::*;

/// (file, block hash) from `shared/fixtures/cardano/README.md`.
const BLOCKS: [(&str, &str); 4] = [
    (
        "conway1.block",
        "9b51ccd4f161c08382a445684ff3eb788923608acbea283081fa5ccf663fef8d",
    ),
    (
        "conway2.block",
        "320ec30a40690a14b8f8eaac3d0b4774e5850b1dfb5bd7ab2477090573769496",
    ),
    (
        "conway3.block",
        "e58480b4e8fac2c75d2322543fcd2473fae351346e90a13b2233337aae34c529",
    ),
    (
        "conway4.block",
        "1240f59bd88d16f4f6e425ae60935926985478965e37b73b5b85276625bcbe82",
    ),
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../shared/fixtures/cardano/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    hex::decode(std::fs::read_to_string(path).expect("fixture").trim()).expect("hex")
}

fn header_bytes(wrapped: &[u8]) -> Vec<u8> {
    let mut d = minicbor::Decoder::new(wrapped);
    d.array().expect("wrapper");
    d.u16().expect("era");
    d.array().expect("block");
    let start = d.position();
    d.skip().expect("header");
    wrapped[start..d.position()].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_conway_blocks_are_served_byte_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let g = genesis();
    let raw: Vec<Vec<u8>> = BLOCKS.iter().map(|(f, _)| fixture(f)).collect();
    {
        let store = Store::open(&dir.path().join("chain")).expect("store");
        store
            .init(
                genesis_fingerprint(&g).expect("fp").as_ref(),
                &g.initial_utxos().expect("utxos"),
            )
            .expect("init");
        for (i, wrapped) in raw.iter().enumerate() {
            let m = MultiEraBlock::decode(wrapped).expect("fixture decodes");
            let block = ForgedBlock {
                number: i as u64 + 1,
                slot: m.slot(),
                hash: m.hash(),
                prev_hash: None,
                header: header_bytes(wrapped),
                wrapped: wrapped.clone(),
            };
            store
                .append(&block, &UtxoDelta::default(), 10)
                .expect("append");
        }
    }
    let mut config = DevnetConfig::new(g, dir.path());
    config.auto_forge = false;
    let h = devnet::start(config).await.expect("devnet");

    let mut peer = PeerClient::connect(h.n2n_addr(), h.magic())
        .await
        .expect("n2n");
    peer.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    let mut node = NodeClient::connect(h.n2c_socket().expect("socket"), h.magic())
        .await
        .expect("n2c");
    node.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    tokio::time::timeout(TIMEOUT, async {
        // After an intersection the server first rolls the client back to it.
        assert!(matches!(
            peer.chainsync().request_next().await.expect("next"),
            NextResponse::RollBackward(Point::Origin, _)
        ));
        assert!(matches!(
            node.chainsync().request_next().await.expect("next"),
            NextResponse::RollBackward(Point::Origin, _)
        ));
        for i in 0..BLOCKS.len() {
            let NextResponse::RollForward(hd, _) =
                peer.chainsync().request_next().await.expect("next")
            else {
                panic!("expected a header");
            };
            let hdr = MultiEraHeader::decode(hd.variant, None, &hd.cbor).expect("header decodes");
            assert_eq!(hdr.hash().to_string(), BLOCKS[i].1);
            let body = peer
                .blockfetch()
                .fetch_single(Point::Specific(hdr.slot(), hdr.hash().to_vec()))
                .await
                .expect("fetch");
            assert_eq!(body, raw[i], "blockfetch is byte-identical");
            let NextResponse::RollForward(b, _) =
                node.chainsync().request_next().await.expect("next")
            else {
                panic!("expected a block");
            };
            assert_eq!(b.0, raw[i], "N2C chainsync is byte-identical");
            assert_eq!(
                MultiEraBlock::decode(&b.0)
                    .expect("decodes")
                    .hash()
                    .to_string(),
                BLOCKS[i].1
            );
        }
    })
    .await
    .expect("served in time");
    h.shutdown().await;
}
