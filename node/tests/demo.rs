//! `ganglion devnet demo` as a user runs it (the README's main command): the real binary
//! starts a devnet, deploys the validator, starts an orchestrator and three provider node
//! processes, and a 4-GPU job (2 GPUs on each of 2 nodes) runs from lock to settlement.
//! Docker is required (the providers run the probe container).

use std::process::Command;

#[test]
fn the_devnet_demo_settles_a_job_across_two_providers() {
    let dir = tempfile::Builder::new()
        .prefix("ganglion-demo-test-")
        .tempdir_in("/var/tmp")
        .expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["devnet", "demo", "--json", "--run-s", "2", "--dir"])
        .arg(dir.path().join("demo"))
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the ganglion binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the demo failed:\n{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON summary");
    assert_eq!(s["state"], "settled", "{s}");
    let kinds: Vec<&str> = s["txs"]
        .as_array()
        .expect("txs")
        .iter()
        .filter_map(|t| t["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["lock", "assign", "settle"], "one transaction each");
    let payments = s["payments"].as_array().expect("payments");
    assert_eq!(payments.len(), 3, "{s}");
    let paid: Vec<(&str, u64, u64)> = payments
        .iter()
        .map(|p| {
            (
                p["provider"].as_str().expect("name"),
                p["gpus"].as_u64().expect("gpus"),
                p["paid_ntx"].as_u64().expect("paid"),
            )
        })
        .collect();
    // Two GPUs per node on two nodes: the two 2-GPU providers or one of them with the
    // 4-GPU one (which can offer only 2 GPUs per node to this job) — exactly two are paid.
    assert_eq!(
        paid.iter().filter(|(_, _, p)| *p > 0).count(),
        2,
        "exactly two providers paid: {paid:?}"
    );
    // Each paid provider ran 2 GPUs for about 2 s at 1000 NTX base units per GPU-second.
    for (name, _, p) in paid.iter().filter(|(_, _, p)| *p > 0) {
        assert!(
            (2_000..=20_000).contains(p),
            "{name} paid {p}, not about 2 GPUs x 2 s x 1000"
        );
    }
    for step in [
        "devnet up",
        "validator deployed",
        "orchestrator: assigned",
        "orchestrator: settled",
    ] {
        assert!(
            stderr.contains(step),
            "no '{step}' in the progress:\n{stderr}"
        );
    }
}
