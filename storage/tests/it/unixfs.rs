//! Every file vector of `kubo-cids.json`, in every profile it lists.

use ganglion_storage::blockstore::MemoryBlockstore;
use ganglion_storage::test_utils::{Generated, fixture_json, sha256_hex};
use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};

/// The import options of each variant named in `kubo-cids.json` `variants`.
pub(crate) fn options_for(variant: &str) -> ImportOptions {
    match variant {
        "kubo_default" => ImportOptions::kubo_default(),
        "cidv1" => ImportOptions::cid_v1(),
        "cidv1_no_raw_leaves" => ImportOptions {
            raw_leaves: false,
            ..ImportOptions::cid_v1()
        },
        "cidv0_raw_leaves" => ImportOptions {
            raw_leaves: true,
            ..ImportOptions::kubo_default()
        },
        "unixfs_v1_2025" => ImportOptions::unixfs_v1_2025(),
        other => panic!("variant {other} has no options here: add it"),
    }
}

fn file_vectors() -> Vec<serde_json::Value> {
    fixture_json("ipfs/kubo-cids.json")["vectors"]
        .as_array()
        .expect("vectors array")
        .iter()
        .filter(|v| v["kind"] == "file")
        .cloned()
        .collect()
}

pub(crate) fn input_of(vector: &serde_json::Value) -> Generated {
    Generated::new(
        vector["generator"].as_str().expect("generator"),
        vector["size"].as_u64().expect("size"),
    )
}

fn check_variant(variant: &str) {
    let vectors = file_vectors();
    assert!(vectors.len() >= 11, "fixture lost vectors");
    for v in &vectors {
        let name = v["name"].as_str().expect("name");
        let want = v["cids"][variant]
            .as_str()
            .expect("every vector lists every variant");
        let got = unixfs::import_file(input_of(v), &options_for(variant), HashOnly::default())
            .expect("import");
        assert_eq!(got.root.to_string(), want, "{name} in {variant}");
        assert_eq!(
            got.content_bytes,
            v["size"].as_u64().expect("size"),
            "{name}"
        );
        if variant == "kubo_default" {
            let dag = &v["kubo_default_dag"];
            assert_eq!(
                Some(got.cumulative_size),
                dag["cumulative_size"].as_u64(),
                "{name}: Tsize (the Size `ipfs add` prints)"
            );
        }
    }
}

#[test]
fn generator_matches_fixture_sha256() {
    for v in file_vectors() {
        assert_eq!(
            sha256_hex(input_of(&v)),
            v["sha256"].as_str().expect("sha256"),
            "{}",
            v["name"]
        );
    }
}

#[test]
fn kubo_default_cids() {
    check_variant("kubo_default");
}

#[test]
fn cidv1_raw_leaves_cids() {
    check_variant("cidv1");
}

#[test]
fn cidv1_no_raw_leaves_cids() {
    check_variant("cidv1_no_raw_leaves");
}

#[test]
fn cidv0_raw_leaves_cids() {
    check_variant("cidv0_raw_leaves");
}

#[test]
fn unixfs_v1_2025_cids() {
    check_variant("unixfs_v1_2025");
}

#[test]
fn default_options_are_cidv1_raw_leaves() {
    assert_eq!(ImportOptions::default(), options_for("cidv1"));
}

#[test]
fn unique_blocks_match_kubo_dag() {
    // The blockstore dedups: a 175-chunk file has 175 leaves + 2 parents + root = 178 blocks.
    for v in file_vectors() {
        let store = MemoryBlockstore::new();
        let imported = unixfs::import_file(input_of(&v), &ImportOptions::kubo_default(), &store)
            .expect("import");
        use ganglion_storage::blockstore::Blockstore;
        assert_eq!(
            Some(store.block_count().expect("count")),
            v["kubo_default_dag"]["unique_blocks"].as_u64(),
            "{}",
            v["name"]
        );
        let root = store
            .get(&imported.root)
            .expect("get")
            .expect("root stored");
        assert_eq!(
            Some(root.len() as u64),
            v["kubo_default_dag"]["root_block_bytes"].as_u64(),
            "{}",
            v["name"]
        );
    }
}

#[test]
fn cat_returns_the_imported_bytes() {
    for (generator, size) in [("pat251", 2_621_457u64), ("zero", 1_048_576), ("pat251", 0)] {
        for variant in ["kubo_default", "cidv1"] {
            let store = MemoryBlockstore::new();
            let input = Generated::new(generator, size);
            let imported =
                unixfs::import_file(input.clone(), &options_for(variant), &store).expect("import");
            let mut out = Vec::new();
            let n = unixfs::cat(&store, &imported.root, &mut out).expect("cat");
            assert_eq!(n, size);
            assert_eq!(out, input.to_vec(), "{generator}-{size} {variant}");
        }
    }
}

/// Import streams: a 2 GiB input goes through in a child process whose address space is capped
/// at 512 MiB (`ulimit -v`), so buffering the file would abort it.
#[test]
fn import_of_input_larger_than_memory_limit_is_streaming() {
    const SIZE: u64 = 2 << 30;
    if std::env::var_os("GANGLION_BOUNDED_CHILD").is_some() {
        let got = unixfs::import_file(
            Generated::new("zero", SIZE),
            &ImportOptions::cid_v1(),
            HashOnly::default(),
        )
        .expect("import under the memory cap");
        assert_eq!(got.content_bytes, SIZE);
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 524288 && exec "$0" --exact unixfs::import_of_input_larger_than_memory_limit_is_streaming --nocapture --test-threads=1"#)
        .arg(exe)
        .env("GANGLION_BOUNDED_CHILD", "1")
        .status()
        .expect("spawn child");
    assert!(
        status.success(),
        "child importing 2 GiB under a 512 MiB cap failed: {status}"
    );
}
