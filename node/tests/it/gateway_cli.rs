//! `ganglion gateway` (the real binary) in front of two real HTTP servers (Python's
//! `http.server` over a folder each, standing in for a service's replicas): requests reach a
//! replica, the status route lists both, and a replica stopped mid-way loses no request. A
//! batch spec and a malformed replica are refused with the reason.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ensembles")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `python3 -m http.server` over a folder holding `health` and `whoami` (its name).
fn replica(dir: &Path, name: &str) -> (Killed, SocketAddr) {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(root.join("health"), "ok").expect("write");
    std::fs::write(root.join("whoami"), name).expect("write");
    let port = free_port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs (scripts/setup.sh installs it)");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let started = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (Killed(child), addr)
}

async fn get(url: &str) -> (u16, String) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<Bytes>>();
    let response = client
        .get(url.parse().expect("url"))
        .await
        .expect("the gateway answers");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn the_gateway_command_serves_named_replicas_and_survives_losing_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, a_addr) = replica(dir.path(), "a");
    let (_b, b_addr) = replica(dir.path(), "b");
    // A host name is resolved once, at start.
    let b_named = format!("localhost:{}", b_addr.port());
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gateway = Killed(
        Command::new(env!("CARGO_BIN_EXE_ganglion"))
            .args(["gateway", "--spec"])
            .arg(examples().join("embeddings-service.yaml"))
            .args(["--name", "embed", "--listen", &listen])
            .args(["--replica", &format!("a={a_addr}")])
            .args(["--replica", &format!("b={b_named}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the ganglion binary runs"),
    );
    let mut first = String::new();
    BufReader::new(gateway.0.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a line");
    assert!(
        first.contains(&format!("serving /embed/ on http://{listen}")),
        "{first}"
    );

    // Both replicas pass their first health check, then requests flow.
    let started = Instant::now();
    loop {
        let (status, body) = get(&format!("http://{listen}/_gateway/services")).await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        if v["embed"]["load"]["healthy"] == 2 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, who) = get(&format!("http://{listen}/embed/whoami")).await;
    assert_eq!(status, 200);
    assert!(who == "a" || who == "b", "{who}");

    // One replica stops: every request is still answered, by the other.
    drop(a);
    for _ in 0..20 {
        let (status, who) = get(&format!("http://{listen}/embed/whoami")).await;
        assert_eq!((status, who.as_str()), (200, "b"));
    }

    // SIGTERM: the gateway stops accepting, finishes what is in flight and exits 0.
    let pid = gateway.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = gateway.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn a_batch_spec_or_a_malformed_replica_is_refused_with_the_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["gateway", "--spec"])
        .arg(examples().join("single-gpu-1.yaml"))
        .args(["--replica", "a=127.0.0.1:9"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a `kind: service` spec"), "{stderr}");

    for (replicas, says) in [
        (&["127.0.0.1:9"][..], "is not NAME=HOST:PORT"),
        (&["a b=127.0.0.1:9"][..], "a replica's name is"),
        (&["a=127.0.0.1:0"][..], "port 0"),
        (&["a=127.0.0.1:9", "a=127.0.0.1:10"][..], "named twice"),
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ganglion"));
        c.args(["gateway", "--spec"])
            .arg(examples().join("embeddings-service.yaml"));
        for r in replicas {
            c.args(["--replica", r]);
        }
        let out = c.output().expect("runs");
        assert!(!out.status.success(), "{replicas:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{replicas:?}: {stderr}");
    }
}
