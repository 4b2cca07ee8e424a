//! `ganglion node info --wait` as a user runs it after `ganglion node run &`: a node still
//! starting is waited for, a start that failed or a process that died ends the wait at once
//! with the reason, a data dir where no node ever started is not waited on for long.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn ganglion(data_dir: &std::path::Path, n2c: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ganglion"));
    c.env("GANGLION_NETWORK", "devnet")
        .env("GANGLION_DATA_DIR", data_dir)
        .env("GANGLION_N2C", n2c)
        .env("GANGLION_RPC_LISTEN", "127.0.0.1:0")
        .env_remove("GANGLION_CONFIG");
    c
}

fn info(data_dir: &std::path::Path, wait_s: u32) -> (Output, Duration) {
    let began = Instant::now();
    let o = ganglion(data_dir, "127.0.0.1:9")
        .args(["node", "info", "--wait", &wait_s.to_string()])
        .output()
        .expect("runs");
    (o, began.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn node_info_wait_tells_a_starting_node_from_a_failed_or_dead_one() {
    let t = tempfile::tempdir().expect("tempdir");

    // Nothing ever started here: refused after the short grace, not after the whole wait.
    let (o, took) = info(&t.path().join("empty"), 60);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no node started there"),
        "{}",
        stderr(&o)
    );
    assert!(took < Duration::from_secs(30), "waited {took:?}");

    // A start that fails (no payment key): the wait ends at once, naming the error.
    let failed = t.path().join("failed");
    let run = ganglion(&failed, "127.0.0.1:9")
        .args(["node", "run"])
        .output()
        .expect("runs");
    assert!(!run.status.success(), "a node without a payment key runs");
    let (o, took) = info(&failed, 60);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("failed: no payment key"), "{e}");
    assert!(took < Duration::from_secs(30), "waited {took:?}");

    // A start that hangs on a chain endpoint that accepts and never answers: "still
    // starting"; once its process is killed, "died", at once.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let n2c = silent.local_addr().expect("addr").to_string();
    let hung = t.path().join("hung");
    let made = ganglion(&hung, &n2c)
        .args(["wallet", "new", "--devnet-seed", "1"])
        .output()
        .expect("runs");
    assert!(made.status.success(), "{}", stderr(&made));
    let mut node = ganglion(&hung, &n2c)
        .args(["node", "run"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns");
    let (o, _) = info(&hung, 3);
    let still = stderr(&o);
    let exited = node.try_wait().expect("wait");
    assert!(exited.is_none(), "the node stopped: {exited:?}");
    assert!(!o.status.success());
    assert!(
        still.contains(&format!("(pid {}) is still starting", node.id())),
        "{still}"
    );
    node.kill().expect("kill");
    node.wait().expect("reaped");
    let (o, took) = info(&hung, 60);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("died without a word"), "{e}");
    assert!(took < Duration::from_secs(30), "waited {took:?}");
    drop(silent);
}
