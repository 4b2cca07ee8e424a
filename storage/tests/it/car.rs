//! CAR v1: export byte-identical to the vectors, import verifies, round trip is identical.

use ganglion_storage::blockstore::{Blockstore, MemoryBlockstore};
use ganglion_storage::test_utils::fixture_json;
use ganglion_storage::{car, unixfs};
use sha2::{Digest, Sha256};

use crate::unixfs::{input_of, options_for};

/// `(vector, variant, car json)` for every CAR listed in `kubo-cids.json`.
pub(crate) fn car_vectors() -> Vec<(serde_json::Value, String, serde_json::Value)> {
    let mut out = Vec::new();
    for v in fixture_json("ipfs/kubo-cids.json")["vectors"]
        .as_array()
        .expect("vectors")
    {
        if let Some(cars) = v["car"].as_object() {
            for (variant, car) in cars {
                out.push((v.clone(), variant.clone(), car.clone()));
            }
        }
    }
    out
}

/// Imports the vector's input with the variant's options and exports its CAR.
pub(crate) fn export_vector(
    v: &serde_json::Value,
    variant: &str,
) -> (MemoryBlockstore, cid::Cid, Vec<u8>) {
    let store = MemoryBlockstore::new();
    let imported = unixfs::import_file(input_of(v), &options_for(variant), &store).expect("import");
    let mut bytes = Vec::new();
    // Its own thread and runtime, so sync and async tests can both call it.
    let summary = std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime")
                .block_on(car::export(&store, &imported.root, &mut bytes))
        })
        .join()
        .expect("export thread")
    })
    .expect("export");
    assert_eq!(summary.bytes, bytes.len() as u64);
    (store, imported.root, bytes)
}

#[test]
fn export_matches_every_car_vector() {
    let vectors = car_vectors();
    assert!(vectors.len() >= 12, "fixture lost CAR vectors");
    for (v, variant, want) in vectors {
        let name = v["name"].as_str().expect("name");
        let (_, root, bytes) = export_vector(&v, &variant);
        assert_eq!(
            root.to_string(),
            want["root"].as_str().expect("root"),
            "{name} {variant}"
        );
        assert_eq!(
            Some(bytes.len() as u64),
            want["bytes"].as_u64(),
            "{name} {variant} size"
        );
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            want["sha256"].as_str().expect("sha256"),
            "{name} {variant} bytes"
        );
    }
}

#[tokio::test]
async fn import_then_export_is_byte_identical() {
    for (v, variant, want) in car_vectors() {
        let (_, root, bytes) = export_vector(&v, &variant);
        let fresh = MemoryBlockstore::new();
        let summary = car::import(&fresh, bytes.as_slice()).await.expect("import");
        assert_eq!(summary.roots, vec![root]);
        assert_eq!(summary.bytes, bytes.len() as u64);
        assert_eq!(Some(summary.blocks), want["blocks"].as_u64());
        let mut again = Vec::new();
        car::export(&fresh, &root, &mut again)
            .await
            .expect("re-export");
        assert!(
            again == bytes,
            "{} {variant}: round trip changed bytes",
            v["name"]
        );
    }
}

#[tokio::test]
async fn zero_file_blocks_are_written_once() {
    // 4 identical 256 KiB chunks: the CAR holds the leaf once, the store one leaf + root.
    let v = serde_json::json!({"generator": "zero", "size": 1_048_576});
    let (store, _, bytes) = export_vector(&v, "kubo_default");
    assert_eq!(store.block_count().expect("count"), 2);
    let fresh = MemoryBlockstore::new();
    let summary = car::import(&fresh, bytes.as_slice()).await.expect("import");
    assert_eq!(summary.blocks, 2);
}
