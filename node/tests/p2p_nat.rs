//! Runs `tests/p2p_nat.sh`: two nodes, each behind its own NAT (network namespace,
//! veth, iptables MASQUERADE, unsolicited inbound dropped), meet through a relay node on the
//! "public" bridge, then DCUtR tries to upgrade them to a direct connection.
//!
//! Needs root (namespaces, iptables). Not root: skipped loudly. Root but `ip`/`iptables`
//! missing or `ip netns` unusable: fails, naming what is missing (CI runs as root). The nodes
//! are the `p2p_peer` example, which `cargo test` / `cargo nextest run` build with the tests;
//! when it is missing (a run filtered to this test only) the test fails and says how to build
//! it. The relayed path must work; the direct upgrade is reported (`RESULT relayed=… direct=…`)
//! and asserted too, as the kernel here supports it.
//!
//! A binary of its own, apart from `tests/it` (the one integration binary): it needs root and
//! changes the host's network (namespaces, iptables), so it runs, or is skipped, on its own.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn tool_works(cmd: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(cmd).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{cmd} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "`{cmd}` not runnable: {e} (apt-get install iproute2 iptables)"
        )),
    }
}

/// `target/<profile>/examples/p2p_peer`, next to this test's `deps/` directory.
fn peer_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples/p2p_peer"))
        .expect("test executable lives in target/<profile>/deps")
}

#[test]
fn p2p_nat_relay_then_dcutr_between_two_natted_namespaces() {
    if !is_root() {
        eprintln!(
            "\n*** SKIPPED: the NAT test needs root (ip netns, iptables); run as root to include it\n"
        );
        return;
    }
    for (cmd, args) in [
        ("ip", &["netns", "list"][..]),
        ("iptables", &["-t", "nat", "-L", "-n"][..]),
    ] {
        if let Err(why) = tool_works(cmd, args) {
            panic!("running as root but the NAT test cannot run: {why}");
        }
    }
    let bin = peer_binary();
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p ganglion-node --example p2p_peer` \
         (cargo test builds it with the tests)",
        bin.display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/p2p_nat.sh");
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("90")
        .arg("bash")
        .arg(&script)
        .env("BIN", &bin)
        .output()
        .expect("bash runs");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or("RESULT missing")
        .to_owned();
    eprintln!("{result} (in {elapsed:?})");
    assert!(
        out.status.success() && result.contains("relayed=yes"),
        "the relayed connection failed ({result}):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        result.contains("direct=yes"),
        "relayed, but DCUtR did not upgrade to a direct connection:\n{stdout}"
    );
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
}
