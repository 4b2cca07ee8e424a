//! `ganglion job import-sdl` on the seven Akash SDL GPU fragments of
//! `shared/fixtures/field/akash-sdl/` (runs the real binary), compared with `expected.yaml`;
//! then the imported specs against the matcher (the D rule: H100 80GB or A100 40GB, never an
//! A100 80GB).
//!
//! `expected.yaml` writes Akash's `interface: sxm` as `gpus.interconnect: sxm`; in the ensemble
//! spec `gpus.interconnect` is the fabric between a node's GPUs (`any|nvlink|xgmi`), so the form
//! factor has its own field, `gpus.form_factor`, and the comparison maps the one to the other.

use std::path::PathBuf;
use std::process::Command;

use ganglion_market::spec::{ComputeCapability, Interconnect, Vendor};
use ganglion_market::{
    Constraint, Ensemble, GpuModel, MarketSnapshot, Requirements, SnapshotOptions, match_gang,
};
use serde_norway::{Mapping, Value};

use ganglion_market::test_utils::offer;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/field/akash-sdl")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fragments, by id, each as its own YAML text.
fn fragments() -> Vec<(String, String)> {
    let text = fixture("sdl-gpu-fragments.yaml");
    let mut out = Vec::new();
    for doc in text.split("\n---\n").skip(1) {
        let v: Value = serde_norway::from_str(doc).expect("a YAML fragment");
        let id = v["id"].as_str().expect("an id").to_string();
        out.push((id, doc.to_string()));
    }
    out
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn import(doc: &str, json: bool) -> Run {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(f.path(), doc).expect("write fragment");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ganglion"));
    cmd.args(["job", "import-sdl"])
        .arg(f.path())
        .env_remove("GANGLION_CONFIG");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("the ganglion binary runs");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn key(k: &str) -> Value {
    Value::String(k.into())
}

/// `expected.gpus` with `interconnect: sxm|pcie` written as `form_factor` (see module docs).
fn expected_gpus(e: &Mapping) -> Mapping {
    let mut m = Mapping::new();
    for (k, v) in e {
        if k.as_str() == Some("interconnect") && matches!(v.as_str(), Some("sxm" | "pcie")) {
            m.insert(key("form_factor"), v.clone());
        } else {
            m.insert(k.clone(), v.clone());
        }
    }
    m
}

#[test]
fn every_fragment_imports_as_expected() {
    let expected: Value = serde_norway::from_str(&fixture("expected.yaml")).expect("YAML");
    let frags = fragments();
    let ids: Vec<&str> = frags.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(ids, ["A", "B", "C", "D", "E", "F", "G"]);
    for (id, doc) in &frags {
        let want = &expected[id.as_str()];
        let run = import(doc, false);
        if let Some(error) = want["error"].as_str() {
            assert!(!run.ok, "{id}: must be refused, printed {}", run.stdout);
            assert!(
                run.stderr.contains(error),
                "{id}: stderr must say `{error}`, got {}",
                run.stderr
            );
            continue;
        }
        assert!(run.ok, "{id}: {}", run.stderr);
        let got: Value = serde_norway::from_str(&run.stdout).expect("YAML on stdout");
        let gpus = got["gpus"].as_mapping().expect("gpus");
        let want_gpus = expected_gpus(want["gpus"].as_mapping().expect("expected gpus"));
        for (k, v) in &want_gpus {
            assert_eq!(gpus.get(k), Some(v), "{id}: gpus.{k:?}");
        }
        // Nothing beyond what was expected, except the exact-class pairs of a single model
        // with `ram` and the interconnect group.
        for (k, v) in gpus {
            if want_gpus.contains_key(k) {
                continue;
            }
            match k.as_str() {
                Some("interconnect_group") => assert!(
                    !want["interconnect_group"].is_null(),
                    "{id}: an interconnect group nobody asked for"
                ),
                Some("per_model") if want["per_model"].is_null() => {
                    // One model with `ram`: the same pair as models + min_vram_gib.
                    let pairs = v.as_sequence().expect("a list");
                    assert_eq!(pairs.len(), 1, "{id}");
                    assert_eq!(pairs[0]["model"], want_gpus[&key("models")][0], "{id}");
                    assert_eq!(
                        pairs[0]["vram_class_gib"],
                        want_gpus[&key("min_vram_gib")],
                        "{id}"
                    );
                }
                Some("per_model") => {}
                _ => panic!("{id}: unexpected gpus.{k:?} = {v:?}"),
            }
        }
        if let Some(pairs) = want["per_model"].as_sequence() {
            assert_eq!(
                gpus.get("per_model"),
                Some(&Value::Sequence(pairs.clone())),
                "{id}"
            );
        }
        if !want["interconnect_group"].is_null() {
            assert_eq!(
                gpus["interconnect_group"],
                key("pair1"),
                "{id}: never dropped"
            );
        }
        if let Some(p) = want["placement"].as_mapping() {
            for (k, v) in p {
                assert_eq!(got["placement"].get(k), Some(v), "{id}: placement.{k:?}");
            }
        }
        // JSON says the same.
        let json = import(doc, true);
        assert!(json.ok, "{id}: {}", json.stderr);
        let j: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON on stdout");
        assert_eq!(
            j["gpus"]["count"].as_u64(),
            gpus["count"].as_u64(),
            "{id}: JSON and YAML agree"
        );
    }
}

/// The imported fields completed into a full spec, as the matcher's requirements.
fn requirements(fragment_id: &str) -> Requirements {
    let doc = fragments()
        .into_iter()
        .find(|f| f.0 == fragment_id)
        .expect("fragment")
        .1;
    let run = import(&doc, false);
    assert!(run.ok, "{}", run.stderr);
    let text = format!(
        "{}image: {{ local: \"img\" }}\ncommand: [\"run\"]\n\
         limits: {{ max_duration_s: 60, max_rate_ntx_per_gpu_hour: 100 }}\n\
         budget_ntx: 1\ndeadline_ms: 99999999999999\n",
        run.stdout
    );
    let spec = Ensemble::parse(&text, 1).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Requirements::from_ensemble(&spec)
}

fn card(name: &str, mib: u64) -> GpuModel {
    GpuModel {
        vendor: Vendor::Nvidia,
        name: name.into(),
        vram_mib: mib,
        compute_capability: Some(ComputeCapability { major: 8, minor: 0 }),
        interconnect: Interconnect::Any,
        ..GpuModel::default()
    }
}

fn fits(r: &Requirements, model: GpuModel, free: u32) -> Result<(), Constraint> {
    let m = MarketSnapshot::build(
        &[offer(1, model, free, 10)],
        &[],
        SnapshotOptions::default(),
    )
    .expect("one provider");
    match_gang(r, &m)
        .map(|_| ())
        .map_err(|no| no.binding.constraint())
}

#[test]
fn per_model_memory_is_kept_never_widened() {
    let d = requirements("D");
    assert_eq!(fits(&d, card("NVIDIA H100 80GB HBM3", 81_559), 2), Ok(()));
    assert_eq!(fits(&d, card("NVIDIA A100-PCIE-40GB", 40_960), 2), Ok(()));
    assert_eq!(
        fits(&d, card("NVIDIA A100-SXM4-80GB", 81_920), 2),
        Err(Constraint::PerModel),
        "an A100 80GB is not `a100 ram 40Gi`"
    );
    assert_eq!(
        fits(&d, card("NVIDIA H100 80GB HBM3", 81_559), 1),
        Err(Constraint::MinGpusPerNode),
        "units: 2 on one node"
    );
}

#[test]
fn form_factor_and_interconnect_group_are_honoured() {
    let a = requirements("A");
    let sxm = card("NVIDIA A100-SXM4-80GB", 81_920);
    let on_fabric = GpuModel {
        fabric: Some("ib-pod-7".into()),
        ..sxm.clone()
    };
    assert_eq!(fits(&a, on_fabric.clone(), 8), Ok(()));
    assert_eq!(
        fits(&a, sxm, 8),
        Err(Constraint::InterconnectGroup),
        "no RDMA fabric declared"
    );
    let pcie = GpuModel {
        name: "NVIDIA A100 80GB PCIe".into(),
        ..on_fabric.clone()
    };
    assert_eq!(fits(&a, pcie, 8), Err(Constraint::FormFactor));
    assert_eq!(fits(&a, on_fabric, 7), Err(Constraint::MinGpusPerNode));
}

#[test]
fn t4_by_its_bare_model_name() {
    let c = requirements("C");
    assert_eq!(fits(&c, card("NVIDIA T4", 15_360), 1), Ok(()));
    assert_eq!(
        fits(&c, card("NVIDIA L4", 23_034), 1),
        Err(Constraint::Model)
    );
}
