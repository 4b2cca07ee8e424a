//! Symlinks and dot-files in a directory import, against Kubo's own answers
//! (`shared/fixtures/field/README.md`, "Symlinks and dot-files"; the `planets` tree is Kubo's
//! sharness `t0040-add-and-cat.sh`). The trees are built by hand in a tempdir; every text file
//! ends with one newline.

use std::os::unix::fs::symlink;
use std::path::Path;

use ganglion_storage::blockstore::{Blockstore, MemoryBlockstore};
use ganglion_storage::dagpb::{self, UnixFsType};
use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};

/// `files/foo/baz` = "some text\n", `files/bar/baz` → `files/foo/baz`, `files/bad` →
/// `files/does/not/exist` (dangling).
fn files_tree(at: &Path) -> std::path::PathBuf {
    let files = at.join("files");
    std::fs::create_dir_all(files.join("foo")).expect("mkdir foo");
    std::fs::create_dir_all(files.join("bar")).expect("mkdir bar");
    std::fs::write(files.join("foo/baz"), "some text\n").expect("write baz");
    symlink("files/foo/baz", files.join("bar/baz")).expect("symlink bar/baz");
    symlink("files/does/not/exist", files.join("bad")).expect("symlink bad");
    files
}

#[tokio::test]
async fn symlinks_are_symlink_nodes_with_kubos_cids() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = files_tree(tmp.path());
    let store = MemoryBlockstore::new();
    let imported =
        unixfs::import_dir(&files, &ImportOptions::kubo_default(), &store).expect("import files");
    assert_eq!(
        imported.root.to_string(),
        "QmWdiHKoeSW8G1u7ATCgpx4yMoUhYaJBQGkyPLkS9goYZ8"
    );

    // Each link alone (the link itself, not its target; the dangling one too).
    for (path, want) in [
        ("bar/baz", "QmdocmZeF7qwPT9Z8SiVhMSyKA2KKoA2J7jToW6z6WBmxR"),
        ("bad", "QmWYN8SEXCgNT2PSjB6BnxAx6NJQtazWoBkTRH9GRfPFFQ"),
    ] {
        let alone = unixfs::import_path(
            &files.join(path),
            &ImportOptions::kubo_default(),
            HashOnly::default(),
        )
        .expect("import link");
        assert_eq!(alone.root.to_string(), want, "{path}");
        assert_eq!(alone.blocks, 1, "{path}");
    }

    // The node is a UnixFS Symlink whose data is the target text, and the directory links it.
    let root = dagpb::decode(&store.get(&imported.root).expect("get").expect("root")).expect("pb");
    let names: Vec<_> = root.links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["bad", "bar", "foo"]);
    let bad =
        dagpb::decode(&store.get(&root.links[0].cid).expect("get").expect("bad")).expect("pb");
    assert_eq!(bad.unixfs_type, Some(UnixFsType::Symlink));
    assert_eq!(bad.data, b"files/does/not/exist");
    assert!(bad.links.is_empty());

    // The CAR of `files` holds 6 blocks: 3 directories, 2 symlinks, 1 file.
    let mut car = Vec::new();
    let summary = ganglion_storage::car::export(&store, &imported.root, &mut car)
        .await
        .expect("export");
    assert_eq!(summary.blocks, 6);
    assert_eq!(imported.blocks, 6);
}

#[test]
fn symlink_under_cid_v1_is_a_dag_pb_node() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = files_tree(tmp.path());
    // `raw_leaves` does not apply to symlinks: still dag-pb, same bytes as the CIDv0 node.
    let v1 = unixfs::import_path(
        &files.join("bad"),
        &ImportOptions::cid_v1(),
        HashOnly::default(),
    )
    .expect("import");
    assert_eq!(v1.root.version(), cid::Version::V1);
    assert_eq!(v1.root.codec(), ganglion_storage::block::DAG_PB);
    let v0: cid::Cid = "QmWYN8SEXCgNT2PSjB6BnxAx6NJQtazWoBkTRH9GRfPFFQ"
        .parse()
        .expect("cid");
    assert_eq!(v1.root.hash(), v0.hash());
}

fn planets_tree(at: &Path) -> std::path::PathBuf {
    let planets = at.join("planets");
    std::fs::create_dir_all(planets.join(".asteroids")).expect("mkdir");
    for (path, text) in [
        ("mars.txt", "Hello Mars\n"),
        ("venus.txt", "Hello Venus\n"),
        (".pluto.txt", "Hello Pluto\n"),
        (".charon.txt", "Hello Charon\n"),
        (".asteroids/ceres.txt", "Hello Ceres\n"),
        (".asteroids/pallas.txt", "Hello Pallas\n"),
    ] {
        std::fs::write(planets.join(path), text).expect("write");
    }
    planets
}

#[test]
fn dot_entries_follow_kubos_hidden_flag() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let planets = planets_tree(tmp.path());
    // Kubo's default: `ipfs add -r` leaves dot entries out.
    assert!(!ImportOptions::kubo_default().hidden);
    let without = unixfs::import_dir(
        &planets,
        &ImportOptions::kubo_default(),
        HashOnly::default(),
    )
    .expect("import");
    assert_eq!(
        without.root.to_string(),
        "QmR8nD1Vzk5twWVC6oShTHvv7mMYkVh6dApCByBJyV2oj3"
    );
    assert_eq!(without.content_bytes, 11 + 12);
    let hidden = ImportOptions {
        hidden: true,
        ..ImportOptions::kubo_default()
    };
    let with = unixfs::import_dir(&planets, &hidden, HashOnly::default()).expect("import");
    assert_eq!(
        with.root.to_string(),
        "QmetajtFdmzhWYodAsZoVZSiqpeJDAiaw2NwbM3xcWcpDj"
    );

    // A root whose own name begins with `.` is still taken (only entries are filtered).
    let dotted = tmp.path().join(".planets");
    std::fs::rename(&planets, &dotted).expect("rename");
    let again = unixfs::import_dir(&dotted, &ImportOptions::kubo_default(), HashOnly::default())
        .expect("import");
    assert_eq!(again.root, without.root);
}
