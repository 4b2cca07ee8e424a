//! A real Kubo-compatible RPC daemon for tests of the `kubo` pinner and of what fetches from
//! one (a provider's `[storage] kubo_rpc`): js-ipfs 0.66 (npm `ipfs`), installed by this
//! crate's `tests/setup-js-ipfs.sh` into a cache directory and run off-line on a free port.
//!
//! When it cannot run (no npm, no registry), tests that need it print why and return, unless
//! `GANGLION_REQUIRE_INTEROP=1`, where they fail.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running js-ipfs daemon; killed on drop.
pub struct JsIpfs {
    _child: Child,
    _repo: tempfile::TempDir,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
}

fn cache_dir() -> PathBuf {
    std::env::var_os("GANGLION_JS_IPFS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home =
                std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
            home.join(".cache/ganglion/js-ipfs")
        })
}

/// Skips (loudly) or fails, per `GANGLION_REQUIRE_INTEROP`.
///
/// # Panics
/// With `GANGLION_REQUIRE_INTEROP=1`: CI must not skip.
pub fn unavailable(why: &str) {
    if std::env::var_os("GANGLION_REQUIRE_INTEROP").is_some_and(|v| v == "1") {
        panic!("interop daemon required but unavailable: {why}");
    }
    eprintln!("\n*** SKIPPED: js-ipfs daemon unavailable: {why}");
    eprintln!("*** run storage/tests/setup-js-ipfs.sh (needs npm + registry) to enable it\n");
}

/// Installs (first time) and starts js-ipfs, or says why it cannot.
///
/// # Errors
/// Why it cannot run (no npm, no registry, the daemon did not listen within 90 s).
pub async fn start() -> Result<JsIpfs, String> {
    let dir = cache_dir();
    let launcher = dir.join("run-daemon.sh");
    if !launcher.exists() {
        let setup = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/setup-js-ipfs.sh");
        let out = Command::new("bash")
            .arg(&setup)
            .arg(&dir)
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", setup.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}",
                setup.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let repo = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut child = Command::new("bash")
        .arg(&launcher)
        .arg(repo.path().join("repo"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", launcher.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(Duration::from_secs(90), async {
        while let Ok(Some(line)) = lines.next_line().await {
            // "RPC API listening on /ip4/127.0.0.1/tcp/<port>/http"
            if line.contains("API listening on") {
                let port = line
                    .split("/tcp/")
                    .nth(1)
                    .and_then(|rest| rest.split('/').next())
                    .and_then(|p| p.parse::<u16>().ok());
                if let Some(port) = port {
                    return Ok(port);
                }
            }
        }
        Err("daemon exited before its API listened".to_owned())
    })
    .await
    .map_err(|_| "daemon did not listen within 90 s".to_owned())??;
    // Keep draining stdout so the daemon never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(JsIpfs {
        _child: child,
        _repo: repo,
        endpoint: format!("http://127.0.0.1:{port}"),
    })
}
