//! A service replica in a container without a network of its own is still reached by its
//! node: `overlay::netns::connect_in` connects from inside the container's namespace (as a
//! pod's workload shares its sandbox's), so the node can serve `/ganglion/service/1` streams
//! to it. Needs root and the real engine.

use std::process::Command;
use std::time::{Duration, Instant};

use ganglion_dispatch::overlay::netns::connect_in;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::torch_image;

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("the docker CLI runs");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Removed(String);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

#[tokio::test]
async fn a_replica_with_no_network_is_reached_from_inside_its_namespace() {
    let image = torch_image();
    let name = format!("ganglion-pod-connect-{}", std::process::id());
    docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "none",
        "--read-only",
        "--user",
        "65534:65534",
        "--workdir",
        "/",
        &image,
        "python3",
        "-m",
        "http.server",
        "8000",
        "--bind",
        "127.0.0.1",
    ]);
    let _removed = Removed(name.clone());
    // No address the host could route to: the namespace is the only way in.
    assert_eq!(
        docker(&["inspect", "-f", "{{.NetworkSettings.IPAddress}}", &name]),
        ""
    );
    let pid = docker(&["inspect", "-f", "{{.State.Pid}}", &name]);
    let netns = std::path::PathBuf::from(format!("/proc/{pid}/ns/net"));
    let addr = "127.0.0.1:8000".parse().expect("addr");
    let started = Instant::now();
    let mut stream = loop {
        match connect_in(&netns, addr, Duration::from_secs(1)).await {
            Ok(s) => break s,
            Err(e) => {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "never listened: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    stream
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    // A port nothing listens on is refused, with the cause.
    let refused = connect_in(
        &netns,
        "127.0.0.1:8001".parse().expect("addr"),
        Duration::from_secs(1),
    )
    .await;
    let err = refused.expect_err("nothing listens on 8001").to_string();
    assert!(err.contains("connect inside the pod"), "{err}");
}
