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

/// [`CONFIG`] with a `[provider]` section: `--offer` previews the offer of the two declared
/// GPUs.
fn provider_config() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    let text = format!("{CONFIG}\n[provider]\nprice_ntx_per_gpu_hour = 1000000\n");
    std::fs::write(f.path(), text).expect("write config");
    f
}

/// Declared GPUs are never benchmarked: the preview says `unmeasured` next to the score in
/// text, and writes `compute` in JSON even then, with the uplink it advertises.
#[test]
fn gpus_offer_says_the_declared_offer_is_unmeasured_in_text_and_json() {
    let cfg = provider_config();
    let out = ganglion(&["gpus", "--offer"], cfg.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = (stdout.lines())
        .find(|l| l.starts_with("offer "))
        .unwrap_or_else(|| panic!("an offer line:\n{stdout}"));
    assert!(line.contains("score 100 unmeasured, "), "{line}");
    assert!(line.contains("uplink 1000 Mbit/s"), "{line}");
    let out = ganglion(&["gpus", "--offer", "--json"], cfg.path());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(
        v["offer"]["compute"],
        serde_json::json!({"kind": "unmeasured"}),
        "{v}"
    );
    assert_eq!(v["offer"]["uplink_mbps"], 1000, "{v}");
}

/// `ganglion gpus --offer --json | head`: the reader is gone before the output is written;
/// the command ends quietly (no panic, no "Broken pipe" message), as `println!` did not.
#[test]
fn gpus_into_a_closed_pipe_exits_quietly() {
    let cfg = provider_config();
    for args in [&["gpus", "--offer", "--json"][..], &["gpus", "--offer"][..]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_ganglion"))
            .args(args)
            .arg("--config")
            .arg(cfg.path())
            .env_remove("GANGLION_CONFIG")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("the ganglion binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
    }
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

/// The field README's NVML cases end to end, through a **test double of the NVML library**
/// (`fake_nvml.c`, loaded by the real binary as `libnvidia-ml.so.1`; this machine has no GPU),
/// and the Docker-GPU case on this machine's real engine, which has no NVIDIA Container Toolkit
/// (field host H1, or H3 on an engine that could take CDI).
mod field {
    use std::process::Command;

    use serde_json::Value;

    use crate::fake_nvml::{self, FakeNvml};

    const A100: &str = "GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078";
    /// The README's MIG devices: UUID, profile, MiB (from the MIG handle), MIG index.
    const SLICES: [(&str, &str, u64, u64); 3] = [
        (
            "MIG-23de08f7-6fcc-5be3-9094-cc3b4162f0bb",
            "3g.20gb",
            19_968,
            0,
        ),
        (
            "MIG-9d822d55-dc61-5acb-8c24-544828b47b03",
            "2g.10gb",
            9_856,
            1,
        ),
        (
            "MIG-5f16849a-8ae9-571a-bc2c-486916c4a324",
            "1g.5gb",
            4_864,
            2,
        ),
    ];

    fn skip() -> bool {
        if fake_nvml::real_driver_here() {
            eprintln!("SKIPPED: this machine has the NVIDIA driver");
            return true;
        }
        false
    }

    /// The smoke container's image, built (cached) as `node run` expects it.
    fn probe_image() {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scripts/build-probe-image.sh");
        let out = Command::new("bash").arg(script).output().expect("runs");
        assert!(
            out.status.success(),
            "build-probe-image.sh (needs a running Docker Engine): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `ganglion <args>` on a devnet config with no declared GPU, NVML being `nvml`.
    fn run(nvml: &FakeNvml, args: &[&str]) -> (std::process::Output, String) {
        let cfg = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(cfg.path(), "network = \"devnet\"\n").expect("config");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ganglion"));
        cmd.args(args)
            .arg("--config")
            .arg(cfg.path())
            .env_remove("GANGLION_CONFIG");
        let out = nvml.apply(&mut cmd).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out, stderr)
    }

    fn nvml_gpus(v: &Value) -> Vec<&Value> {
        v["inventory"]["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .filter(|g| g["source"] == "nvml")
            .collect()
    }

    /// The engine here cannot give containers a GPU: the check ran, on exactly `granted`, and
    /// named the reason with its fix.
    fn not_usable_here(v: &Value, granted: &[&str]) -> String {
        let c = &v["containers"];
        assert_eq!(
            c["request"]["device_ids"],
            serde_json::json!(granted),
            "{c}"
        );
        assert_eq!(c["access"]["path"], "missing", "{c}");
        assert!(
            c["access"]["reason"] == "toolkit_missing" || c["access"]["reason"] == "cdi_disabled",
            "{c}"
        );
        let missing = c["access"]["missing"].as_str().expect("reason").to_string();
        assert!(missing.contains("fix: "), "{missing}");
        missing
    }

    /// "NVIDIA MIG with sparse indices": three MIG devices (indices 3–6 NotFound, skipped
    /// silently; 7 is a bound), each with its own UUID and the memory of its MIG handle, the
    /// parent listed but not offered whole; the start-up check asks for the three slices by
    /// UUID (never the parent, never all GPUs) and, on this engine, finds them not usable in
    /// containers and says why.
    #[test]
    fn gpus_lists_the_three_mig_slices_of_the_nvml_double_and_not_the_parent() {
        if skip() {
            return;
        }
        probe_image();
        let nvml = FakeNvml::build("mig-a100");
        let (out, stderr) = run(&nvml, &["gpus", "--json"]);
        assert!(out.status.success(), "{stderr}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let gpus = nvml_gpus(&v);
        assert_eq!(gpus.len(), 4, "the parent and three MIG devices: {v}");
        assert_eq!(gpus[0]["uuid"], A100);
        assert_eq!(gpus[0]["mig_enabled"], true);
        assert_eq!(
            gpus[0]["not_offered"],
            serde_json::json!({"why": "mig_parent", "slices": 3})
        );
        for (g, (uuid, profile, mib, slot)) in gpus[1..].iter().zip(SLICES) {
            assert_eq!(g["uuid"], uuid, "{g}");
            assert_eq!(g["vram_total_mib"], mib, "its own memory: {g}");
            assert_eq!(g["mig"]["slot"], slot, "{g}");
            assert_eq!(g["mig"]["parent_uuid"], A100, "{g}");
            assert_eq!(g["mig"]["profile"], profile, "{g}");
            assert_eq!(g["not_offered"]["why"], "not_usable_in_containers", "{g}");
        }
        assert!(
            !v["inventory"]["notes"]
                .to_string()
                .contains("MigDeviceHandleByIndex"),
            "NotFound is no error: {v}"
        );
        let missing = not_usable_here(&v, &SLICES.map(|s| s.0));
        assert!(
            stderr.contains(&format!(
                "warning: NVIDIA GPUs present but not usable in containers: {missing}"
            )),
            "{stderr}"
        );
    }

    /// "NVML start-up states": a device whose name and memory could not be read is listed as
    /// unidentified with the failing queries and never offered (nor smoked); the table says so.
    #[test]
    fn gpus_lists_the_unidentified_device_of_the_nvml_double_and_never_offers_it() {
        if skip() {
            return;
        }
        probe_image();
        let nvml = FakeNvml::build("unidentified");
        let (out, stderr) = run(&nvml, &["gpus", "--json"]);
        assert!(out.status.success(), "{stderr}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let gpus = nvml_gpus(&v);
        assert_eq!(gpus.len(), 2, "both listed: {v}");
        assert_eq!(gpus[1]["name"], "");
        assert_eq!(
            gpus[1]["not_offered"],
            serde_json::json!({
                "why": "unidentified",
                "query": "nvmlDeviceGetName returned an empty name; \
                          nvmlDeviceGetMemoryInfo reported 0 bytes"
            })
        );
        // Only the L4 is a candidate for containers.
        not_usable_here(&v, &[gpus[0]["uuid"].as_str().expect("the L4's UUID")]);

        let (out, stderr) = run(&nvml, &["gpus"]);
        assert!(out.status.success(), "{stderr}");
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(
            table.lines().any(|l| l.contains("(unidentified)")
                && l.ends_with(
                    "not offered: unidentified (nvmlDeviceGetName returned an empty name; \
                     nvmlDeviceGetMemoryInfo reported 0 bytes)"
                )),
            "{table}"
        );
    }

    /// "NVML start-up states": `nvmlInit` answers RM version mismatch: no GPU listed, the note
    /// names the mismatch and the fix, exit 0, and no container check (nothing to offer).
    #[test]
    fn gpus_with_an_rm_version_mismatch_names_the_fix_and_offers_nothing() {
        if skip() {
            return;
        }
        let nvml = FakeNvml::build("rm-mismatch");
        let (out, stderr) = run(&nvml, &["gpus", "--json"]);
        assert!(out.status.success(), "exit 0: {stderr}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(nvml_gpus(&v).is_empty(), "{v}");
        assert!(v["containers"].is_null(), "{v}");
        let notes = v["inventory"]["notes"].to_string();
        for words in [
            "NVML: NVIDIA driver/library version mismatch",
            "reboot",
            "reload the nvidia kernel module",
        ] {
            assert!(notes.contains(words), "{words}: {notes}");
        }
    }

    /// Field host H1 (or H3) through `doctor`: the `gpu-runtime` check, confirmed by a smoke
    /// container for the double's L4, says the GPUs are present but not usable in containers,
    /// why, and the fix.
    #[test]
    fn doctor_says_the_nvml_doubles_gpu_is_not_usable_in_containers_here() {
        if skip() {
            return;
        }
        probe_image();
        let nvml = FakeNvml::build("l4");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ganglion"));
        cmd.args(["doctor", "--json"])
            .env("GANGLION_NETWORK", "devnet")
            .env("GANGLION_DATA_DIR", dir.path())
            .env("GANGLION_N2C", "127.0.0.1:1")
            .env("GANGLION_RPC_LISTEN", "127.0.0.1:0")
            .env_remove("GANGLION_CONFIG");
        let out = nvml.apply(&mut cmd).output().expect("runs");
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        let c = v["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["name"] == "gpu-runtime")
            .expect("a gpu-runtime check");
        assert_eq!(c["verdict"], "warn", "{c}");
        let detail = c["detail"].as_str().expect("detail");
        assert!(
            detail.starts_with("NVIDIA GPUs present but not usable in containers: ")
                && (detail.contains("NVIDIA Container Toolkit missing")
                    || detail.contains("CDI is disabled")),
            "{detail}"
        );
        assert!(c["fix"].as_str().is_some_and(|f| !f.is_empty()), "{c}");
    }
}
