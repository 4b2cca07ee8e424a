//! The committed blueprint against its Aiken sources.

use std::path::{Path, PathBuf};

use ganglion_contracts::blueprint::{Blueprint, Script};
use sha2::{Digest, Sha256};

use ganglion_contracts::test_utils::harness_v2::params;

fn aiken_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("aiken")
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    hex::encode(Sha256::digest(bytes))
}

fn sources_on_disk(dir: &Path, rel: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir.join(rel)).expect("source folder") {
        let entry = entry.expect("dir entry");
        let name = format!("{rel}/{}", entry.file_name().to_string_lossy());
        if entry.path().is_dir() {
            sources_on_disk(dir, &name, out);
        } else if name.ends_with(".ak") {
            out.push(name);
        }
    }
}

/// Fails when an Aiken source, aiken.toml or plutus.json changed without `build.sh`.
#[test]
fn sources_match_committed_checksums() {
    let dir = aiken_dir();
    let listed = std::fs::read_to_string(dir.join("sources.sha256")).expect("sources.sha256");
    let mut names = Vec::new();
    for line in listed.lines() {
        let (sum, name) = line.split_once("  ").expect("sha256sum format");
        assert_eq!(
            sha256_hex(&dir.join(name)),
            sum,
            "{name} changed since plutus.json was built: run contracts/aiken/build.sh"
        );
        names.push(name.to_string());
    }
    let mut on_disk = vec!["aiken.toml".to_string(), "plutus.json".to_string()];
    sources_on_disk(&dir, "lib", &mut on_disk);
    sources_on_disk(&dir, "validators", &mut on_disk);
    on_disk.sort();
    names.sort();
    assert_eq!(
        names, on_disk,
        "source files added or removed since the last build.sh"
    );
}

#[test]
fn blueprint_hash_is_the_hash_of_its_compiled_code() {
    let b = Blueprint::committed().expect("committed blueprint parses");
    assert_eq!(b.plutus_version, "v3");
    assert!(b.compiler.contains("1.1.24"), "built by {}", b.compiler);
    assert_eq!(Script::new(b.compiled_code.clone()).hash, b.hash);
}

#[test]
fn the_blueprint_holds_the_ganglion_v2_validator_only() {
    let doc: serde_json::Value =
        serde_json::from_str(ganglion_contracts::blueprint::PLUTUS_JSON).expect("json");
    let titles: Vec<&str> = doc["validators"]
        .as_array()
        .expect("validators")
        .iter()
        .filter_map(|v| v["title"].as_str())
        .collect();
    assert!(!titles.is_empty());
    assert!(
        titles
            .iter()
            .all(|t| t.starts_with("ganglion_v2.ganglion_v2.")),
        "{titles:?}"
    );
    assert_eq!(
        Blueprint::committed().expect("committed").hash,
        ganglion_contracts::v2::blueprint().expect("v2").hash
    );
}

#[test]
fn applying_parameters_changes_the_hash_deterministically() {
    let b = Blueprint::committed().expect("blueprint");
    let s1 = b.apply(&params()).expect("apply");
    let s2 = b.apply(&params()).expect("apply again");
    assert_eq!(s1, s2);
    assert_ne!(s1.hash, b.hash);
    let mut other = params();
    other.claim_window_ms += 1;
    assert_ne!(b.apply(&other).expect("apply").hash, s1.hash);
}

#[test]
fn a_broken_blueprint_is_a_typed_error() {
    for doc in [
        "",
        "{}",
        r#"{"preamble":{},"validators":[]}"#,
        r#"{"preamble":{},"validators":[{"title":"ganglion_v2.ganglion_v2.spend","compiledCode":"zz","hash":"00"}]}"#,
    ] {
        let err = Blueprint::parse(doc).expect_err("must not parse");
        assert!(
            matches!(err, ganglion_contracts::Error::Blueprint(_)),
            "{err}"
        );
    }
}

/// Rebuilds the validator with the installed aiken and compares the compiled code.
#[test]
fn aiken_rebuild_reproduces_plutus_json() {
    let version = std::process::Command::new("aiken")
        .arg("--version")
        .output();
    let required = std::env::var("GANGLION_REQUIRE_AIKEN").is_ok_and(|v| v == "1");
    let Ok(version) = version else {
        assert!(
            !required,
            "GANGLION_REQUIRE_AIKEN=1 but `aiken` is not on PATH (cargo install aiken@1.1.24 --locked)"
        );
        eprintln!(
            "SKIPPED aiken_rebuild_reproduces_plutus_json: `aiken` is not installed (cargo install aiken@1.1.24 --locked); the checksum test still guards the sources"
        );
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    if !version.contains("1.1.24") {
        assert!(
            !required,
            "GANGLION_REQUIRE_AIKEN=1 but the installed aiken is {version}, not 1.1.24"
        );
        eprintln!(
            "SKIPPED aiken_rebuild_reproduces_plutus_json: found {version}, need aiken 1.1.24"
        );
        return;
    }
    let tmp = std::env::temp_dir().join(format!("ganglion-aiken-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(aiken_dir())
        .arg(&tmp)
        .status()
        .expect("cp");
    assert!(status.success());
    let _ = std::fs::remove_dir_all(tmp.join("build"));
    let out = std::process::Command::new("aiken")
        .args(["build", "--trace-level", "silent"])
        .current_dir(&tmp)
        .output()
        .expect("aiken build runs");
    assert!(
        out.status.success(),
        "aiken build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rebuilt_json =
        std::fs::read_to_string(tmp.join("plutus.json")).expect("rebuilt plutus.json");
    let _ = std::fs::remove_dir_all(&tmp);
    let title = ganglion_contracts::v2::VALIDATOR;
    let rebuilt = Blueprint::parse_validator(&rebuilt_json, title).expect("parses");
    let committed = Blueprint::committed().expect("committed");
    assert_eq!(
        rebuilt.compiled_code, committed.compiled_code,
        "{title} in plutus.json is stale: run contracts/aiken/build.sh"
    );
}
