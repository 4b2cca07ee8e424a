//! `ganglion doctor` as an operator runs it: every check named, the chain check against a
//! live devnet and against a dead endpoint, exit status 1 only when something fails.

use std::process::Command;

use super::support::devnet;

fn doctor(data_dir: &std::path::Path, n2c: &str, rpc: &str) -> (i32, serde_json::Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["doctor", "--json"])
        .env("GANGLION_NETWORK", "devnet")
        .env("GANGLION_DATA_DIR", data_dir)
        .env("GANGLION_N2C", n2c)
        .env("GANGLION_RPC_LISTEN", rpc)
        .env_remove("GANGLION_CONFIG")
        .output()
        .expect("runs");
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON on stdout ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().expect("exit code"), v)
}

fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_each_check_and_fails_only_on_failures() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let n2c = h.n2c_tcp_addr().expect("tcp").to_string();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy_addr = busy.local_addr().expect("addr").to_string();

    let (code, report) = doctor(&t.path().join("node"), &n2c, &busy_addr);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "docker",
            "gpu-runtime",
            "gpus",
            "chain",
            "validator",
            "rpc-port",
            "disk",
            "overlay"
        ]
    );
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let overlay = check(&report, "overlay");
    let tun = std::path::Path::new("/dev/net/tun").exists();
    assert_eq!(
        overlay["verdict"],
        if root && tun { "pass" } else { "warn" },
        "{report}"
    );
    assert!(
        overlay["detail"]
            .as_str()
            .is_some_and(|d| d.contains("WireGuard")),
        "{report}"
    );
    assert_eq!(check(&report, "chain")["verdict"], "pass", "{report}");
    assert!(
        check(&report, "chain")["detail"]
            .as_str()
            .expect("detail")
            .contains("magic 42"),
        "{report}"
    );
    // Nothing is deployed on this devnet: the node would not start; the fix names the command.
    let validator = check(&report, "validator");
    assert_eq!(validator["verdict"], "fail", "{report}");
    assert!(
        validator["fix"]
            .as_str()
            .is_some_and(|f| f.contains("ganglion devnet deploy")),
        "{report}"
    );
    let port = check(&report, "rpc-port");
    assert_eq!(port["verdict"], "warn", "a port in use warns: {report}");
    assert!(port["fix"].as_str().is_some(), "{report}");
    // The engine is there exactly when the docker check says so (CI starts it).
    let docker_up = std::path::Path::new("/var/run/docker.sock").exists();
    let docker = check(&report, "docker");
    if !docker_up {
        assert_eq!(docker["verdict"], "fail", "{report}");
    }
    let failed = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .any(|c| c["verdict"] == "fail");
    assert_eq!(report["ok"], !failed);
    assert_eq!(code, i32::from(failed), "exit 1 exactly when a check fails");

    drop(busy);
    h.shutdown().await;
    let (code, report) = doctor(&t.path().join("node"), &n2c, "127.0.0.1:0");
    let chain = check(&report, "chain");
    assert_eq!(chain["verdict"], "fail", "{report}");
    assert!(
        chain["fix"].as_str().expect("fix").contains("n2c"),
        "{report}"
    );
    assert_eq!(check(&report, "rpc-port")["verdict"], "pass", "{report}");
    assert_eq!(code, 1);
    assert_eq!(report["ok"], false);
}
