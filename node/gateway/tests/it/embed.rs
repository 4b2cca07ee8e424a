//! The gateway in front of the real example service: two containers of the embedding image
//! (`scripts/build-embed-image.sh`, all-MiniLM-L6-v2 on CPU) in the executor's sandbox on a
//! private bridge network. Needs a running Docker Engine: without one the test fails loudly
//! (CI starts it with `scripts/ensure-docker.sh`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ganglion_gateway::{Autoscaler, Decision, Endpoint, Replica};
use ganglion_market::service::{Replicas, Scale};
use http::StatusCode;

use crate::support::{call, gateway_over, wait_until};

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("these tests need the docker CLI and a running engine ({e}); start one with `bash scripts/ensure-docker.sh`"));
    assert!(
        out.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The embedding image (built when absent: about half a minute after the torch image).
fn embed_image() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-embed-image.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "scripts/build-embed-image.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("the tag")
        .to_string()
}

/// Containers and a network removed when the test ends, however it ends.
struct Cleanup(Vec<String>, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.0 {
            let _ = Command::new("docker").args(["rm", "-f", c]).output();
        }
        let _ = Command::new("docker")
            .args(["network", "rm", &self.1])
            .output();
    }
}

/// Starts a replica container as the executor would (read-only root, tmpfs /tmp, user 65534,
/// no capabilities) on `network`; returns its address on that network.
fn start_replica(image: &str, network: &str, name: &str) -> std::net::SocketAddr {
    docker(&[
        "run",
        "-d",
        "--name",
        name,
        "--network",
        network,
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--user",
        "65534:65534",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges:true",
        "--cpus",
        "1",
        "-e",
        &format!("GANGLION_REPLICA={name}"),
        image,
    ]);
    let ip = docker(&[
        "inspect",
        "-f",
        &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
        name,
    ]);
    format!("{ip}:8000").parse().expect("container address")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedding_service_answers_through_the_gateway_as_the_model_run_directly_and_survives_a_lost_replica()
 {
    let image = embed_image();
    let tag = format!("gw-test-{}", std::process::id());
    let network = format!("{tag}-net");
    docker(&["network", "create", &network]);
    let names = [format!("{tag}-a"), format!("{tag}-b")];
    let _cleanup = Cleanup(names.to_vec(), network.clone());
    let replicas: Vec<Replica> = names
        .iter()
        .map(|n| Replica {
            id: n.clone(),
            endpoint: Endpoint::Tcp(start_replica(&image, &network, n)),
            rtt: None,
        })
        .collect();

    let serve = crate::support::serve(16, true);
    let (_gateway, pool, addr) = gateway_over("embed", &serve, &replicas).await;
    wait_until(Duration::from_secs(60), || {
        pool.views()
            .iter()
            .all(|v| v.health == ganglion_gateway::Health::Healthy)
    })
    .await;

    // The same texts through the gateway and through the model run directly (the image's
    // command-line mode, in a container with no network at all).
    let texts = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
    ];
    let body = serde_json::json!({ "texts": texts }).to_string();
    let (status, headers, got) = call("POST", &format!("http://{addr}/embed/embed"), &body).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&got));
    assert!(
        names
            .iter()
            .any(|n| headers["x-ganglion-replica"] == n.as_str())
    );
    let through: serde_json::Value = serde_json::from_slice(&got).expect("JSON");
    let mut direct_args = vec![
        "run",
        "--rm",
        "--network",
        "none",
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--user",
        "65534:65534",
        image.as_str(),
        "python3",
        "/workloads/embed_server.py",
        "--embed",
    ];
    direct_args.extend(texts);
    let direct: serde_json::Value = serde_json::from_str(&docker(&direct_args)).expect("JSON");
    assert_eq!(through["dim"], 384);
    assert_eq!(
        through["embeddings"], direct["embeddings"],
        "gateway and direct run differ"
    );
    let e = through["embeddings"].as_array().expect("embeddings");
    let v = |i: usize| -> Vec<f64> {
        e[i].as_array()
            .expect("vector")
            .iter()
            .map(|x| x.as_f64().expect("float"))
            .collect()
    };
    let cos = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    assert!(
        cos(&v(0), &v(1)) > 0.6,
        "similar sentences: {}",
        cos(&v(0), &v(1))
    );
    assert!(
        cos(&v(0), &v(2)) < 0.3,
        "unrelated sentences: {}",
        cos(&v(0), &v(2))
    );

    // Load from 8 clients while one replica's container is killed: every request (a POST the
    // service declares safe to repeat) is answered 200.
    let ok = Arc::new(AtomicU32::new(0));
    let started = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let ok = Arc::clone(&ok);
            tokio::spawn(async move {
                let mut n = 0;
                while started.elapsed() < Duration::from_secs(6) {
                    let body =
                        serde_json::json!({ "texts": [format!("request {i} {n}")] }).to_string();
                    let (status, _, text) =
                        call("POST", &format!("http://{addr}/embed/embed"), &body).await;
                    assert_eq!(
                        status,
                        StatusCode::OK,
                        "request lost: {}",
                        String::from_utf8_lossy(&text)
                    );
                    ok.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    docker(&["kill", &names[0]]);
    for c in clients {
        c.await.expect("no client saw a failed request");
    }
    assert!(
        ok.load(Ordering::SeqCst) >= 16,
        "too few requests served: {ok:?}"
    );
    // The lost replica is out of rotation (within two health intervals at most) and the
    // autoscaler asks for a replacement at once: one below `replicas.min`.
    wait_until(
        Duration::from_secs(2 * u64::from(serve.health.interval_s)),
        || !crate::support::healthy(&pool, &names[0]),
    )
    .await;
    let load = pool.load(Duration::from_secs(10));
    assert_eq!(load.healthy, 1);
    let mut scaler = Autoscaler::new(
        Replicas {
            min: 2,
            max: 3,
            share_providers: false,
        },
        Some(&Scale {
            target_in_flight_per_replica: Some(4),
            target_p90_ms: None,
            up_after_s: 10,
            down_after_s: 30,
        }),
    );
    assert_eq!(
        scaler.decide(Instant::now(), &load, load.healthy),
        Decision::Add
    );
    let served: u64 = pool.views().iter().map(|v| v.usage.requests).sum();
    assert!(
        served >= u64::from(ok.load(Ordering::SeqCst)),
        "{:?}",
        pool.views()
    );
}
