//! `ganglion gpus` on this machine: runs the real binary. Without a GPU (the CI machine) it must
//! say so in a note and still list the declared inventory; with `--json` it prints one JSON
//! document with the inventory.

use std::process::Command;

const CONFIG: &str = r#"
network = "devnet"
[[gpus.declared]]
name = "NVIDIA A100-SXM4-80GB"
vendor = "nvidia"
vram_gib = 80
compute_capability = "8.0"
count = 2
"#;

fn ganglion(args: &[&str], config: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("GANGLION_CONFIG")
        .output()
        .expect("the ganglion binary runs")
}

fn config() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(f.path(), CONFIG).expect("write config");
    f
}

#[test]
fn gpus_table_lists_declared_gpus_and_explains_missing_sources() {
    let cfg = config();
    let out = ganglion(&["gpus"], cfg.path());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert_eq!(
        stdout.matches("A100-SXM4-80GB").count(),
        2,
        "both declared GPUs listed:\n{stdout}"
    );
    assert!(stdout.contains("declared"), "marked declared:\n{stdout}");
    let detected = std::path::Path::new("/dev/nvidiactl").exists();
    if detected {
        eprintln!(
            "SKIPPED part: this machine has an NVIDIA device; the no-GPU note is not checked"
        );
    } else {
        assert!(
            stderr.contains("note: NVML:"),
            "a one-line NVML note on a machine without the driver:\n{stderr}"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn gpus_json_is_one_document_with_the_inventory() {
    let cfg = config();
    let out = ganglion(&["gpus", "--json"], cfg.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let gpus = v["inventory"]["gpus"].as_array().expect("inventory.gpus");
    let declared: Vec<_> = gpus.iter().filter(|g| g["source"] == "declared").collect();
    assert_eq!(declared.len(), 2, "{v}");
    assert_eq!(declared[0]["vram_total_mib"], 80 * 1024);
    assert!(v["inventory"]["notes"].is_array(), "{v}");
}

#[test]
fn gpus_with_declared_gpus_on_mainnet_warns() {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(f.path(), CONFIG.replace("devnet", "mainnet")).expect("write");
    let out = ganglion(&["gpus"], f.path());
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot be offered as real hardware on mainnet"),
        "{stderr}"
    );
}

/// One config file serves every command: the daemon sections (`data_dir`, `[chain]`, `[rpc]`)
/// beside the node ones are accepted by `gpus` too.
#[test]
fn gpus_reads_the_same_full_config_as_the_other_commands() {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    let full = format!(
        "data_dir = \"/tmp/ganglion-gpus-test\"\n{CONFIG}\n[chain]\nn2c = \"127.0.0.1:1\"\n\n[rpc]\nlisten = \"127.0.0.1:7070\"\n"
    );
    std::fs::write(f.path(), full).expect("write");
    let out = ganglion(&["gpus", "--json"], f.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["inventory"]["gpus"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
}

/// NVML start-up state "no driver" (shared/fixtures/field/README.md): 0 NVIDIA GPUs, the
/// README's reason, exit 0. Skipped on a machine with the driver.
#[test]
fn gpus_without_the_nvidia_driver_names_the_missing_library_and_exits_0() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("SKIPPED: this machine has the NVIDIA driver");
        return;
    }
    let cfg = config();
    let out = ganglion(&["gpus", "--json"], cfg.path());
    assert!(out.status.success(), "exit 0 without the driver");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let nvml = v["inventory"]["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .filter(|g| g["source"] == "nvml")
        .count();
    assert_eq!(nvml, 0, "{v}");
    let notes = v["inventory"]["notes"].to_string();
    assert!(
        notes.contains("NVIDIA driver library (libnvidia-ml.so.1) not found"),
        "{notes}"
    );
}

/// NVML start-up state "only `libnvidia-ml.so.1` present (no unversioned symlink): load it".
/// A directory holding only a file of that name (a copy of the C math library: a real shared
/// object, but not NVML) is put on `LD_LIBRARY_PATH`: the node must open it — and then say it is
/// not NVML — rather than report the library missing, which a lookup of the unversioned
/// `libnvidia-ml.so` would.
#[test]
fn gpus_loads_the_versioned_libnvidia_ml_so_1() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("SKIPPED: this machine has the NVIDIA driver");
        return;
    }
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("a libm.so.6 on this machine");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(libm, dir.path().join("libnvidia-ml.so.1")).expect("copy");
    let cfg = config();
    let out = Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["gpus", "--config"])
        .arg(cfg.path())
        .env_remove("GANGLION_CONFIG")
        .env("LD_LIBRARY_PATH", dir.path())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("libnvidia-ml.so.1 was loaded but is not a usable NVML"),
        "the versioned name was opened:\n{stderr}"
    );
}
