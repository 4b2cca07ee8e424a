//! `ganglion job validate` (the real binary, offline): every spec of `examples/ensembles/`
//! passes and reports its terms; every spec of `examples/ensembles/invalid/` fails naming the
//! field its `# expect:` line gives; a spec that parses but whose terms cannot be met (a budget
//! below the window, a run longer than the deadline allows) fails naming the rule.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ensembles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ensembles")
}

fn validate(spec: &Path, json: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ganglion"));
    c.args(["job", "validate"]);
    if json {
        c.arg("--json");
    }
    c.arg(spec).output().expect("the ganglion binary runs")
}

fn specs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_example_spec_is_valid_and_its_window_fits_its_budget() {
    let all = specs(&ensembles());
    assert!(all.len() >= 5, "{all:?}");
    for spec in all {
        let out = validate(&spec, true);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", spec.display());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let (cost, budget) = (
            v["window_cost"].as_u64().expect("window_cost"),
            v["budget"].as_u64().expect("budget"),
        );
        assert!(cost <= budget, "{}: {v}", spec.display());
        assert!(v["gpus"].as_u64().expect("gpus") > 0, "{v}");
        // A service reports its replicas, and the escrow's GPUs are its most replicas'.
        let text = std::fs::read_to_string(&spec).expect("read");
        if text.lines().any(|l| l.trim() == "kind: service") {
            let max = v["service"]["max_replicas"]
                .as_u64()
                .expect("a service's replicas");
            let per = v["service"]["gpus_per_replica"]
                .as_u64()
                .expect("per replica");
            assert_eq!(v["gpus"].as_u64(), Some(max * per), "{v}");
        } else {
            assert!(v.get("service").is_none(), "{v}");
        }
    }
}

#[test]
fn every_invalid_example_fails_naming_its_field() {
    let all = specs(&ensembles().join("invalid"));
    assert!(all.len() >= 10, "{all:?}");
    for spec in all {
        let text = std::fs::read_to_string(&spec).expect("read");
        let field = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: no `# expect:` line", spec.display()))
            .trim()
            .to_string();
        let out = validate(&spec, false);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{} passed", spec.display());
        assert!(stderr.contains(&field), "{}: {stderr}", spec.display());
    }
}

#[test]
fn terms_that_cannot_be_met_fail_before_anything_is_paid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::read_to_string(ensembles().join("single-gpu-1.yaml")).expect("example");
    let mut spec: serde_norway::Value = serde_norway::from_str(&base).expect("YAML");
    // One GPU at the highest rate for the whole run costs rate × duration / 3600: one base unit
    // less than that cannot pay the window.
    let rate = spec["limits"]["max_rate_ntx_per_gpu_hour"]
        .as_u64()
        .expect("rate");
    let duration = spec["limits"]["max_duration_s"].as_u64().expect("duration");
    let gpus = spec["gpus"]["count"].as_u64().expect("count");
    let window = gpus * rate * duration / 3600;
    spec["budget_ntx"] = serde_norway::Value::from(window - 1);
    let short = dir.path().join("short.yaml");
    std::fs::write(&short, serde_norway::to_string(&spec).expect("YAML")).expect("write");
    let out = validate(&short, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a short budget passed");
    assert!(stderr.contains("terms that cannot be met"), "{stderr}");
    assert!(stderr.contains("budget"), "{stderr}");

    // Paying every GPU at the highest rate until the deadline (written as two hours ten minutes
    // from now) passes: the escrow pays each assignment for its whole window.
    spec["deadline"] = serde_norway::Value::from("+2h10m");
    // (rounded up, as the validator does: `terms::deadline_window_cost`)
    spec["budget_ntx"] = serde_norway::Value::from((gpus * rate * 7_800_000).div_ceil(3_600_000));
    std::fs::write(&short, serde_norway::to_string(&spec).expect("YAML")).expect("write");
    assert!(validate(&short, false).status.success());

    // A run that cannot end before the deadline: the deadline one minute from now.
    let now_ms = ganglion_p2p::now_ms();
    spec["deadline"] = serde_norway::Value::Null;
    spec["deadline_ms"] = serde_norway::Value::from(now_ms + 60_000);
    std::fs::write(&short, serde_norway::to_string(&spec).expect("YAML")).expect("write");
    let out = validate(&short, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a run past the deadline passed");
    assert!(stderr.contains("deadline"), "{stderr}");
}

#[test]
fn a_service_spec_goes_to_the_node_as_a_batch_job_does() {
    let home = tempfile::tempdir().expect("tempdir");
    for verb in ["submit", "quote"] {
        let out = Command::new(env!("CARGO_BIN_EXE_ganglion"))
            .args(["job", verb])
            .arg(ensembles().join("embeddings-service.yaml"))
            .env("HOME", home.path())
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{verb}: no node runs here");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Parsed and checked, then sent: the only complaint is that no node answers.
        assert!(stderr.contains("no running node"), "{verb}: {stderr}");
    }
}
