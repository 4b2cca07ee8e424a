//! `ganglion devnet demo` as a user runs it (the README's main command): the real binary
//! starts a devnet, deploys the validator, starts an orchestrator and three provider node
//! processes, and a 4-GPU job (2 GPUs on each of 2 nodes) runs from lock to settlement
//! (smoke and torch workloads), or to expiry when a provider is killed mid-job
//! (`--scenario provider-loss`); the service workload starts a fourth provider and runs its
//! own sequence. Docker is required (the providers run the containers); the
//! torch run needs root (the per-job overlay's TUNs) and builds the torch image on first use.
//! As root the torch and provider-loss runs put each provider in its own network namespace
//! behind its own NAT (the default `--network auto`); the smoke run stays on loopback.

use std::process::Command;

/// Runs the demo with `args` (plus `--json --dir <temp>`); returns the JSON summary and the
/// progress printed to stderr.
fn demo(args: &[&str]) -> (serde_json::Value, String) {
    let dir = tempfile::Builder::new()
        .prefix("ganglion-demo-test-")
        .tempdir_in("/var/tmp")
        .expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["devnet", "demo", "--json"])
        .args(args)
        .arg("--dir")
        .arg(dir.path().join("demo"))
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the ganglion binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the demo failed:\n{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON summary");
    (s, stderr)
}

fn kinds(s: &serde_json::Value) -> Vec<String> {
    s["txs"]
        .as_array()
        .expect("txs")
        .iter()
        .filter_map(|t| t["kind"].as_str().map(str::to_string))
        .collect()
}

/// (provider, paid NTX, killed) per provider.
fn paid(s: &serde_json::Value) -> Vec<(String, u64, bool)> {
    s["payments"]
        .as_array()
        .expect("payments")
        .iter()
        .map(|p| {
            (
                p["provider"].as_str().expect("name").to_string(),
                p["paid_ntx"].as_u64().expect("paid"),
                p["killed"].as_bool().expect("killed"),
            )
        })
        .collect()
}

/// `audit verify` of the job passed every check (and there are checks per provider).
fn audit_passes(s: &serde_json::Value) {
    audit_passes_with(s, 2);
}

/// `audit verify` of a job of `assignments` assignments passed every check, with each
/// assignment's claim or default checked.
fn audit_passes_with(s: &serde_json::Value, assignments: usize) {
    let checks = s["audit"]["checks"].as_array().expect("audit checks");
    let failed: Vec<_> = checks.iter().filter(|c| c["pass"] != true).collect();
    assert!(failed.is_empty(), "audit checks failed: {failed:?}");
    assert_eq!(s["audit"]["pass"], true, "{}", s["audit"]);
    for name in ["spec_cid", "assignment", "budget", "refund"] {
        assert!(
            checks.iter().any(|c| c["name"] == name),
            "no {name} check in {checks:?}"
        );
    }
    // Each assignment: its claim checked (signature, receipt, bound, payment), or its
    // default and slash (provider-loss).
    for i in 0..assignments {
        let has = |n: String| checks.iter().any(|c| c["name"] == n.as_str());
        assert!(
            (has(format!("attestation[{i}]"))
                && has(format!("claim_bound[{i}]"))
                && has(format!("payment[{i}]")))
                || (has(format!("default[{i}]")) && has(format!("slash[{i}]"))),
            "assignment {i} neither claimed nor defaulted in {checks:?}"
        );
    }
}

/// As root the providers ran behind their own NATs (the default `--network auto`), and the
/// demo deleted its namespaces when it ended.
fn ran_behind_nat_and_cleaned_up(s: &serde_json::Value) {
    let network = s["network"].as_str().expect("network");
    assert!(
        network.starts_with("NAT:"),
        "not behind NAT as root: {network}"
    );
    let slot = network
        .split("gdm")
        .nth(1)
        .and_then(|r| r.split('-').next())
        .expect("the namespaces' slot in the summary");
    let left = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(
        !left.contains(&format!("gdm{slot}-")),
        "namespaces left behind: {left}"
    );
}

/// Every transaction landed in a block with a fee, and the job's fees (lock, assign, each
/// provider's claim or the expire) stay within 1.6 ADA. The protocol's own cost is ≤ 1.5 ADA
/// (`cargo run -p ganglion-contracts --example fees`, with wallets that set a ≤ 5-ADA
/// collateral UTxO aside); the demo's devnet wallets hold one UTxO each, so every transaction
/// also carries a collateral return, and a cheating or expiring scenario adds an expire.
fn fees_within_target(s: &serde_json::Value) {
    let mut sum = 0;
    for t in s["txs"].as_array().expect("txs") {
        assert!(t["block"].as_u64().is_some(), "no block for {t}");
        sum += t["fee_lovelace"].as_u64().expect("fee");
    }
    assert_eq!(s["numbers"]["fees_lovelace"].as_u64(), Some(sum));
    assert!(
        sum > 0 && sum <= 1_600_000,
        "fees {sum} lovelace over 1.6 ADA"
    );
}

#[test]
fn the_devnet_demo_trains_torch_ddp_across_two_providers_and_settles() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIP the_devnet_demo_trains_torch_ddp_across_two_providers_and_settles: needs \
             root (the per-job overlay's TUN inside each pod needs CAP_NET_ADMIN)"
        );
        return;
    }
    let (s, stderr) = demo(&["--workload", "torch"]);
    assert_eq!(s["state"], "settled", "{s}");
    audit_passes(&s);
    ran_behind_nat_and_cleaned_up(&s);
    assert_eq!(kinds(&s), ["lock", "assign", "claim", "claim"]);
    let paid = paid(&s);
    assert_eq!(
        paid.iter().filter(|(_, p, _)| *p > 0).count(),
        2,
        "two providers paid: {paid:?}"
    );
    // Four ranks (2 + 2), one checksum each, all equal: DDP averaged across the overlay.
    let ranks = s["ranks"].as_array().expect("ranks");
    let got: Vec<u64> = ranks.iter().filter_map(|r| r["rank"].as_u64()).collect();
    assert_eq!(got, [0, 1, 2, 3], "{s}");
    let first = &ranks[0]["checksum"];
    assert!(ranks.iter().all(|r| &r["checksum"] == first), "{s}");
    assert_eq!(s["checksums_agree"], true);
    let providers: std::collections::BTreeSet<&str> = ranks
        .iter()
        .filter_map(|r| r["provider"].as_str())
        .collect();
    assert_eq!(providers.len(), 2, "ranks on two providers: {s}");
    // Each provider pinned its outputs (CAR + piece CID) and logs.
    let artifacts = s["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 2, "{s}");
    for a in artifacts {
        assert_eq!(a["exit_code"], 0, "{a}");
        for k in ["outputs_cid", "logs_cid", "piece_cid"] {
            assert!(
                a[k].as_str().is_some_and(|c| c.starts_with("ba")),
                "{k}: {a}"
            );
        }
    }
    fees_within_target(&s);
    let n = &s["numbers"];
    for k in [
        "lock_block_to_running_s",
        "job_wall_s",
        "last_attestation_to_end_block_s",
    ] {
        assert!(n[k].as_f64().is_some_and(|v| v >= 0.0), "{k}: {n}");
    }
    eprintln!("torch demo numbers: {n}");
    assert!(stderr.contains("orchestrator: settled"), "{stderr}");
}

#[test]
fn the_devnet_demo_provider_loss_expires_pays_the_attested_and_slashes_the_defaulter() {
    let (s, stderr) = demo(&[
        "--workload",
        "smoke",
        "--scenario",
        "provider-loss",
        "--run-s",
        "10",
    ]);
    assert_eq!(s["state"], "expired", "{s}");
    audit_passes(&s);
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        ran_behind_nat_and_cleaned_up(&s);
    }
    assert_eq!(kinds(&s), ["lock", "assign", "claim", "expire"]);
    let paid = paid(&s);
    let killed: Vec<_> = paid.iter().filter(|(_, _, k)| *k).collect();
    assert_eq!(killed.len(), 1, "one provider killed: {paid:?}");
    assert_eq!(killed[0].1, 0, "the defaulter is not paid: {paid:?}");
    let survivors: Vec<_> = paid.iter().filter(|(_, p, _)| *p > 0).collect();
    assert_eq!(
        survivors.len(),
        1,
        "the attested provider is paid: {paid:?}"
    );
    // 2 GPUs × about 10 s at 1000 NTX base units per GPU-second.
    assert!((10_000..=60_000).contains(&survivors[0].1), "{paid:?}");
    // The defaulter's slash is at most its assignment's value (2 GPUs × the job's window at
    // 1000 NTX base units per GPU-second, under its 5 NTX bond); the orchestrator recovers
    // from it at most what it paid (the survivor's pay), the rest is burnt (DESIGN §3.1 G4).
    assert_eq!(s["slashed_ntx"], survivors[0].1, "{s}");
    fees_within_target(&s);
    assert!(stderr.contains("killed (SIGKILL)"), "{stderr}");
}

#[test]
fn the_devnet_demo_settles_a_job_across_two_providers() {
    // Loopback on purpose: the NAT topology is covered by the two tests above.
    let (s, stderr) = demo(&[
        "--workload",
        "smoke",
        "--run-s",
        "2",
        "--network",
        "loopback",
        "--console",
    ]);
    assert_eq!(s["state"], "settled", "{s}");
    // `--console`: the orchestrator served its web console (its bound address, from node.json).
    assert!(
        stderr.contains("web console at http://127.0.0.1:")
            && stderr.contains("web console: http://"),
        "{stderr}"
    );
    assert!(
        s["network"]
            .as_str()
            .is_some_and(|n| n.starts_with("loopback")),
        "{}",
        s["network"]
    );
    audit_passes(&s);
    fees_within_target(&s);
    let kinds: Vec<&str> = s["txs"]
        .as_array()
        .expect("txs")
        .iter()
        .filter_map(|t| t["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["lock", "assign", "claim", "claim"],
        "one transaction each; each paid provider claims its own pay"
    );
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

#[test]
fn the_devnet_demo_silent_orchestrator_stops_the_providers_and_pays_what_was_acknowledged() {
    // Loopback: with the orchestrator gone, NATed providers would lose its relay too.
    let (s, stderr) = demo(&[
        "--workload",
        "smoke",
        "--scenario",
        "silent-orchestrator",
        "--network",
        "loopback",
    ]);
    assert_eq!(s["state"], "settled", "{s}");
    audit_passes(&s);
    let checks = s["audit"]["checks"].as_array().expect("checks");
    for i in 0..2 {
        assert!(
            checks
                .iter()
                .any(|c| c["name"] == format!("receipt[{i}]").as_str() && c["pass"] == true),
            "each claim carried the last receipt it was given: {checks:?}"
        );
    }
    assert_eq!(kinds(&s), ["lock", "assign", "claim", "claim"]);
    let paid = paid(&s);
    let earners: Vec<_> = paid.iter().filter(|(_, p, _)| *p > 0).collect();
    assert_eq!(earners.len(), 2, "both providers paid: {paid:?}");
    // The smoke containers would run 300 s: the providers stopped within the intervals
    // (3 × 10 s after their last receipt), so each is paid for far less (2 GPUs at 1000 NTX
    // base units per GPU-second).
    for (name, p, _) in earners {
        assert!(*p < 2 * 1000 * 120, "{name} paid {p}: not stopped in time");
    }
    assert!(stderr.contains("orchestrator killed (SIGKILL)"), "{stderr}");
    fees_within_target(&s);
}

#[test]
fn the_devnet_demo_cheating_provider_is_refused_by_the_validator_and_slashed() {
    let (s, stderr) = demo(&[
        "--workload",
        "smoke",
        "--scenario",
        "cheating-provider",
        "--network",
        "loopback",
    ]);
    assert_eq!(s["state"], "expired", "{s}");
    audit_passes(&s);
    // The cheater's doubled claim never reached the chain: the trail holds the honest
    // provider's claim only, then the expire.
    assert_eq!(kinds(&s), ["lock", "assign", "claim", "expire"]);
    let paid = paid(&s);
    let cheater = paid
        .iter()
        .find(|(name, _, _)| name == "provider-b")
        .expect("the cheater");
    assert_eq!(cheater.1, 0, "the cheater is paid nothing: {paid:?}");
    let honest = paid
        .iter()
        .find(|(name, _, _)| name == "provider-a")
        .expect("the honest provider");
    assert!(honest.1 > 0, "the honest provider is paid: {paid:?}");
    // The orchestrator recovers from the cheater's slash at most what it paid (G4).
    assert_eq!(s["slashed_ntx"], honest.1, "{s}");
    let checks = s["audit"]["checks"].as_array().expect("checks");
    assert!(
        checks.iter().any(
            |c| c["name"].as_str().is_some_and(|n| n.starts_with("slash[")) && c["pass"] == true
        ),
        "the cheater's slash is checked against G4: {checks:?}"
    );
    assert!(
        stderr.contains("provider-b: ")
            && stderr.contains("the validator refused the claim")
            && stderr.contains("above its bound"),
        "the cheater's refused claim is shown with the rule: {stderr}"
    );
    fees_within_target(&s);
}

/// `--workload service` (issue #24): two replicas answer through the orchestrator's gateway
/// from the assign, load adds a third by a `Rescale` and idle releases it, the provider of one
/// of the two left is killed and replaced by the fourth provider (never used before: the
/// escrow takes a provider once) so that two replicas answer again, `job stop` ends the
/// service, every provider that ran and claimed is paid its receipted GPU time, the killed
/// one is slashed at the expiry, and `audit verify` passes every check of the rescaled
/// escrow. Only the sequence is asserted, and timings by upper bounds.
#[test]
fn the_devnet_demo_service_scales_fails_over_and_pays_by_gpu_time() {
    let (s, stderr) = demo(&["--workload", "service"]);
    assert_eq!(s["state"], "expired", "{s}");
    // Four assignments: the assign's two, the scale-up's third, the replacement.
    audit_passes_with(&s, 4);
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        ran_behind_nat_and_cleaned_up(&s);
    }
    let kinds = kinds(&s);
    assert_eq!(kinds.first().map(String::as_str), Some("lock"), "{kinds:?}");
    assert_eq!(
        kinds.get(1).map(String::as_str),
        Some("assign"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("expire"),
        "{kinds:?}"
    );
    // Grown, shrunk, replaced (the replacement's rescale releases the lost replica and adds
    // the new one).
    assert!(
        kinds.iter().filter(|k| *k == "rescale").count() >= 3,
        "{kinds:?}"
    );
    // The released third, the assign's survivor and the replacement claim.
    assert_eq!(
        kinds.iter().filter(|k| *k == "claim").count(),
        3,
        "{kinds:?}"
    );

    // The sequence: 2 from the assign, 3 under load, 2 when idle, 2 again after the kill.
    let v = &s["service"];
    let replicas: Vec<u64> = v["replicas"]
        .as_array()
        .expect("replicas")
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    assert_eq!(replicas, [2, 3, 2, 2], "{v}");
    let before: Vec<&str> = v["providers_before_kill"]
        .as_array()
        .expect("providers before the kill")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    let distinct: std::collections::BTreeSet<&str> = before.iter().copied().collect();
    assert_eq!(
        (before.len(), distinct.len()),
        (3, 3),
        "three assignments on three providers before the kill: {v}"
    );
    // Which provider the matcher takes when is its choice; the one left for the replacement
    // is the one never used.
    let victim = v["killed"].as_str().expect("the killed provider");
    let replacement = v["replacement"].as_str().expect("the replacement");
    assert!(
        before[..2].contains(&victim),
        "the killed provider served one of the two replicas left (the third was released): {v}"
    );
    assert!(
        !before.contains(&replacement),
        "the replacement comes from the provider never used: {v}"
    );

    let paid = paid(&s);
    assert_eq!(paid.len(), 4, "four providers: {paid:?}");
    let killed: Vec<_> = paid.iter().filter(|(_, _, k)| *k).collect();
    assert_eq!(killed.len(), 1, "one provider killed: {paid:?}");
    assert_eq!(killed[0].0, victim, "{paid:?}");
    assert_eq!(killed[0].1, 0, "the defaulter is not paid: {paid:?}");
    let earners: Vec<_> = paid.iter().filter(|(_, p, _)| *p > 0).collect();
    assert_eq!(
        earners.len(),
        3,
        "the released, the surviving and the replacement providers are paid: {paid:?}"
    );
    assert!(earners.iter().any(|(n, _, _)| n == replacement), "{paid:?}");
    // One GPU each at 1000 NTX base units per GPU-second, within the job's window (110 s).
    for (name, p, _) in &earners {
        assert!(*p <= 1000 * 110, "{name} paid {p}: more than its window");
    }
    // The defaulter's slash (its own window, under its bond) went partly to the orchestrator
    // (at most what it paid, G4).
    let slashed = s["slashed_ntx"].as_u64().expect("slashed");
    let paid_total: u64 = earners.iter().map(|(_, p, _)| p).sum();
    assert!(slashed > 0 && slashed <= paid_total, "{s}");

    for n in ["scale_up_s", "scale_down_s", "failover_s"] {
        assert!(
            v[n].as_f64().is_some_and(|t| t > 0.0 && t < 90.0),
            "{n}: {v}"
        );
    }
    assert!(v["requests_ok"].as_u64().is_some_and(|n| n > 0), "{v}");
    // Pay by use: the receipts carried the replicas' usage, at most what was sent.
    let sent = v["requests_ok"].as_u64().unwrap_or(0) + v["requests_failed"].as_u64().unwrap_or(0);
    assert!(
        v["requests_signed"]
            .as_u64()
            .is_some_and(|n| n > 0 && n <= sent),
        "{v}"
    );
    assert!(v["cost_per_1k_requests"].as_u64().is_some(), "{v}");
    // The replacement (the fourth assignment) was stopped only after its first receipt: it is
    // paid its receipted time, not the one-interval allowance.
    let checks = s["audit"]["checks"].as_array().expect("checks");
    let receipt3 = checks
        .iter()
        .find(|c| c["name"] == "receipt[3]")
        .expect("the replacement's receipt check");
    assert!(
        receipt3["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("acknowledged until")),
        "{receipt3}"
    );
    // Each replica's artifacts under its rank in the job (its assignment's index).
    let mut ranks: Vec<u64> = s["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["node_rank"].as_u64())
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    assert!(ranks.len() >= 3, "{}", s["artifacts"]);
    assert!(stderr.contains("killed (SIGKILL)"), "{stderr}");
    eprintln!(
        "{stderr}\nservice demo numbers: scale-up {} s, scale-down {} s, failover {} s",
        v["scale_up_s"], v["scale_down_s"], v["failover_s"]
    );
}
