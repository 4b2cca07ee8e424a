//! Every set of `shared/fixtures/filecoin/commp-vectors.json`, and the deal-ready record.

use ganglion_storage::block::{RAW, cid_v1};
use ganglion_storage::commp::{self, CommP, Piece};
use ganglion_storage::deal;
use ganglion_storage::test_utils::{Generated, fixture_json, sha512_chain};
use sha2::{Digest, Sha256};

use crate::car::export_vector;

fn set(id: &str) -> Vec<serde_json::Value> {
    let all = fixture_json("filecoin/commp-vectors.json");
    let set = all["sets"]
        .as_array()
        .expect("sets")
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("set {id} missing"))
        .clone();
    set["vectors"].as_array().expect("vectors").clone()
}

fn check(piece: &Piece, v: &serde_json::Value, what: &str) {
    assert_eq!(
        hex::encode(piece.commp),
        v["commp_hex"].as_str().expect("commp_hex"),
        "{what}"
    );
    assert_eq!(
        piece.cid_v1().to_string(),
        v["piece_cid"].as_str().expect("piece_cid"),
        "{what}"
    );
    assert_eq!(
        Some(piece.padded_bytes),
        v["padded_piece_size"].as_u64(),
        "{what}"
    );
    if let Some(v2) = v["piece_cid_v2"].as_str() {
        assert_eq!(piece.cid_v2().to_string(), v2, "{what} v2");
    }
}

fn stream(mut input: impl std::io::Read) -> Piece {
    let mut h = CommP::new();
    std::io::copy(&mut input, &mut h).expect("generated input");
    h.finish().expect("piece")
}

#[test]
fn hashhash_zero_set() {
    let vectors = set("hashhash-zero");
    assert_eq!(vectors.len(), 18);
    for v in vectors {
        let n = v["payload_size"].as_u64().expect("payload_size");
        check(
            &stream(Generated::cyclic(&[0], n)),
            &v,
            &format!("zero {n}"),
        );
    }
}

#[test]
fn data_segment_sha512_chain_set() {
    let vectors = set("data-segment-sha512-chain");
    assert_eq!(vectors.len(), 83);
    for v in vectors {
        let n = v["payload_size"].as_u64().expect("payload_size") as usize;
        let payload = sha512_chain(n);
        assert_eq!(
            cid_v1(RAW, &payload).to_string(),
            v["payload_raw_cid"].as_str().expect("payload_raw_cid"),
            "generator for {n}"
        );
        check(
            &commp::piece_of(&payload).expect("piece"),
            &v,
            &format!("chain {n}"),
        );
    }
}

#[test]
fn zero_piece_commitments_set() {
    let vectors = set("zero-piece-commitments");
    assert_eq!(vectors.len(), 35);
    for v in vectors {
        let padded = v["padded_piece_size"].as_u64().expect("padded");
        let unpadded = v["unpadded_piece_size"].as_u64().expect("unpadded");
        assert_eq!(unpadded, padded / 128 * 127);
        let root = commp::zero_piece_commitment(padded);
        assert_eq!(
            hex::encode(root),
            v["commp_hex"].as_str().expect("hex"),
            "{padded}"
        );
        // Stream the small ones for real: the hasher must agree with the closed form.
        if padded <= 8 << 20 {
            check(
                &stream(Generated::cyclic(&[0], unpadded)),
                &v,
                &format!("zeros {padded}"),
            );
        }
    }
}

#[test]
fn commp_utils_cat_set() {
    for v in set("commp-utils-cat") {
        let mut payload = b"i am the biggest cat, what do you think about that".to_vec();
        assert_eq!(payload.len(), 50);
        payload.resize(127, 0);
        check(&commp::piece_of(&payload).expect("piece"), &v, "cat");
    }
}

#[tokio::test]
async fn project_ipfs_fixtures_set_and_deal_records() {
    let ipfs = fixture_json("ipfs/kubo-cids.json");
    let vectors = set("project-ipfs-fixtures");
    assert_eq!(vectors.len(), 16);
    for v in vectors {
        let name = v["ipfs_vector"].as_str().expect("ipfs_vector");
        let source = ipfs["vectors"]
            .as_array()
            .expect("vectors")
            .iter()
            .find(|x| x["name"] == name)
            .expect("ipfs vector")
            .clone();
        match v["input"].as_str() {
            Some("car") => {
                let variant = v["variant"].as_str().expect("variant");
                let (store, root, car) = export_vector(&source, variant);
                assert_eq!(
                    hex::encode(Sha256::digest(&car)),
                    v["payload_sha256"].as_str().expect("sha")
                );
                check(
                    &commp::piece_of(&car).expect("piece"),
                    &v,
                    &format!("{name} {variant}"),
                );
                // The deal-ready record computed while exporting agrees.
                let mut sink = Vec::new();
                let ready = deal::prepare(&store, &root, &mut sink)
                    .await
                    .expect("prepare");
                assert!(sink == car, "prepare wrote the same CAR");
                assert_eq!(
                    ready.piece_cid.to_string(),
                    v["piece_cid"].as_str().expect("cid")
                );
                assert_eq!(
                    Some(ready.padded_piece_bytes),
                    v["padded_piece_size"].as_u64()
                );
                assert_eq!(
                    ready.payload_cid.to_string(),
                    v["root"].as_str().expect("root")
                );
                assert_eq!(Some(ready.car_bytes), v["payload_size"].as_u64());
            }
            Some("raw_file") => {
                let input = crate::unixfs::input_of(&source);
                check(&stream(input), &v, &format!("{name} raw"));
            }
            other => panic!("unknown input kind {other:?}"),
        }
    }
}
