//! The npm client (`node/tests/npm-client/`): Blaze, a third-party Cardano library, with its
//! stock Blockfrost provider pointed at the devnet's HTTP API, run by Node.js. Installed by
//! that folder's `setup.sh` into a cache folder (npm registry needed the first time).
//!
//! When it cannot run (no Node.js or npm, no registry) the test says so loudly and goes on
//! without it, unless `GANGLION_REQUIRE_INTEROP=1` (CI), where it fails.

use std::path::PathBuf;
use std::time::Duration;

fn folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/npm-client")
}

fn unavailable(why: &str) {
    if std::env::var_os("GANGLION_REQUIRE_INTEROP").is_some_and(|v| v == "1") {
        panic!("the npm client is required but cannot run: {why}");
    }
    eprintln!("\n*** SKIPPED: the npm client (Blaze over the devnet's Blockfrost API): {why}");
    eprintln!("*** run node/tests/npm-client/setup.sh (needs Node.js, npm and the registry)\n");
}

/// Runs `client.mjs` with `args`; its JSON output, or `None` when it cannot run (said loudly).
///
/// # Panics
/// When the client runs and fails (its stderr in the message), or prints no JSON.
pub(crate) async fn run(args: &[String]) -> Option<serde_json::Value> {
    let setup = tokio::process::Command::new("bash")
        .arg(folder().join("setup.sh"))
        .output()
        .await;
    let dir = match setup {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => {
            unavailable(&format!(
                "setup.sh failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            return None;
        }
        Err(e) => {
            unavailable(&format!("cannot run bash: {e}"));
            return None;
        }
    };
    let child = tokio::process::Command::new("node")
        .arg(folder().join("client.mjs"))
        .args(args)
        .env("GANGLION_NPM_CLIENT_DIR", &dir)
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(Duration::from_secs(180), child).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            unavailable(&format!("cannot run node: {e}"));
            return None;
        }
        Err(_) => panic!("the npm client did not finish within 180 s"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the npm client failed:\n{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    Some(
        serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("the npm client printed no JSON ({e}): {stdout}\n{stderr}")),
    )
}
