//! Directory import. `kubo-cids.json` has no directory CIDs (its README: the generator knows
//! `dir-small` but its vector is not in the file), so this checks the structure Kubo builds: a
//! dag-pb Directory whose links are the entries in name order, each pointing at the CID the file
//! vectors give, and `Tsize` = child's cumulative size. Directory *CIDs* are compared with Kubo's
//! own core in `kubo_core.rs`.

use ganglion_storage::blockstore::{Blockstore, MemoryBlockstore};
use ganglion_storage::dagpb::{self, UnixFsType};
use ganglion_storage::test_utils::{Generated, fixture_json};
use ganglion_storage::unixfs::{self, ImportOptions};

use crate::unixfs::options_for;

fn file_cid(name: &str, variant: &str) -> String {
    fixture_json("ipfs/kubo-cids.json")["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["cids"][variant].as_str())
        .expect("vector")
        .to_owned()
}

#[test]
fn dir_small_has_kubo_structure() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root_dir = tmp.path().join("dir-small");
    std::fs::create_dir_all(root_dir.join("sub")).expect("mkdir");
    std::fs::write(
        root_dir.join("b.bin"),
        Generated::new("pat251", 262_145).to_vec(),
    )
    .expect("b");
    std::fs::write(
        root_dir.join("a.bin"),
        Generated::new("pat251", 1000).to_vec(),
    )
    .expect("a");
    std::fs::write(root_dir.join("sub/c.txt"), b"hello world\n").expect("c");

    for variant in ["kubo_default", "cidv1"] {
        let store = MemoryBlockstore::new();
        let imported =
            unixfs::import_dir(&root_dir, &options_for(variant), &store).expect("import dir");
        assert_eq!(imported.content_bytes, 1000 + 262_145 + 12);
        let want_version = if variant == "kubo_default" {
            cid::Version::V0
        } else {
            cid::Version::V1
        };
        assert_eq!(imported.root.version(), want_version, "{variant}");
        let root =
            dagpb::decode(&store.get(&imported.root).expect("get").expect("root")).expect("pb");
        assert_eq!(root.unixfs_type, Some(UnixFsType::Directory));
        let names: Vec<_> = root.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a.bin", "b.bin", "sub"], "{variant}");
        assert_eq!(
            root.links[0].cid.to_string(),
            file_cid("pat251-1000.bin", variant)
        );
        assert_eq!(
            root.links[1].cid.to_string(),
            file_cid("pat251-262145.bin", variant)
        );
        let sub =
            dagpb::decode(&store.get(&root.links[2].cid).expect("get").expect("sub")).expect("pb");
        assert_eq!(sub.links.len(), 1);
        assert_eq!(sub.links[0].name, "c.txt");
        assert_eq!(
            sub.links[0].cid.to_string(),
            file_cid("hello-world.txt", variant)
        );
        // Tsize of a file link is the file's cumulative size; the root's total adds up.
        let sum: u64 = root.links.iter().map(|l| l.tsize).sum();
        let root_len = store.get(&imported.root).expect("get").expect("root").len() as u64;
        assert_eq!(imported.cumulative_size, sum + root_len);
    }
}

#[test]
fn empty_directory_and_special_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let imported = unixfs::import_dir(
        &empty,
        &ImportOptions::kubo_default(),
        &MemoryBlockstore::new(),
    )
    .expect("empty dir");
    // Kubo's empty directory: `ipfs add -r` of an empty folder, the well-known unixfs-dir CID.
    assert_eq!(
        imported.root.to_string(),
        "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"
    );

    // A socket is neither file, directory nor symlink: refused by path, as Kubo refuses it.
    let with_fifo = tmp.path().join("special");
    std::fs::create_dir(&with_fifo).expect("mkdir");
    let fifo = with_fifo.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&fifo).expect("bind socket");
    let err = unixfs::import_dir(
        &with_fifo,
        &ImportOptions::default(),
        &MemoryBlockstore::new(),
    )
    .expect_err("socket");
    assert!(
        matches!(&err, unixfs::Error::UnsupportedFileType(p) if *p == fifo),
        "{err}"
    );
}
