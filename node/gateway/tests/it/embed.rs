//! The gateway in front of the real example service: two containers of the embedding image
//! (`scripts/build-embed-image.sh`, all-MiniLM-L6-v2 on CPU) in the executor's sandbox on a
//! private bridge network. Needs a running Docker Engine: without one the test fails loudly
//! (CI starts it with `scripts/ensure-docker.sh`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ganglion_gateway::scale::BoxFuture;
use ganglion_gateway::{Autoscaler, Controller, Decision, Endpoint, Fleet, Pool, Replica};
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
        // Two intervals (a probe of a vanished address waits out its whole timeout), plus the
        // poll's 20 ms and scheduling.
        Duration::from_secs(2 * u64::from(serve.health.interval_s)) + Duration::from_millis(250),
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

/// Replicas as containers of the embedding image on one network: the test's [`Fleet`].
struct DockerFleet {
    image: String,
    network: String,
    tag: String,
    pool: Arc<Pool>,
    running: std::sync::Mutex<Vec<String>>,
    next: AtomicU32,
}

impl DockerFleet {
    fn names(&self) -> Vec<String> {
        self.running.lock().expect("lock").clone()
    }
}

impl Fleet for DockerFleet {
    fn wanted(&self) -> u32 {
        self.running.lock().expect("lock").len() as u32
    }

    fn add(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let name = format!("{}-{}", self.tag, self.next.fetch_add(1, Ordering::SeqCst));
            let (image, network, n) = (self.image.clone(), self.network.clone(), name.clone());
            let addr = tokio::task::spawn_blocking(move || start_replica(&image, &network, &n))
                .await
                .map_err(|e| e.to_string())?;
            self.pool.add(Replica {
                id: name.clone(),
                endpoint: Endpoint::Tcp(addr),
                rtt: None,
            });
            self.running.lock().expect("lock").push(name);
            Ok(())
        })
    }

    fn lost(&self, id: &str) -> BoxFuture<'_, Result<(), String>> {
        let id = id.to_string();
        Box::pin(async move {
            self.running.lock().expect("lock").retain(|n| *n != id);
            self.pool.remove(&id);
            tokio::task::spawn_blocking(move || docker(&["rm", "-f", &id]))
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        })
    }

    fn release(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let name = self
                .running
                .lock()
                .expect("lock")
                .pop()
                .ok_or("no replica to release")?;
            self.pool.remove(&name);
            tokio::task::spawn_blocking(move || docker(&["rm", "-f", &name]))
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_above_target_adds_a_replica_and_load_below_it_releases_one() {
    let image = embed_image();
    let tag = format!("gw-scale-{}", std::process::id());
    let network = format!("{tag}-net");
    docker(&["network", "create", &network]);
    let _cleanup = Cleanup(
        (0..4).map(|i| format!("{tag}-{i}")).collect(),
        network.clone(),
    );

    let serve = crate::support::serve(16, true);
    let (_gateway, pool, addr) = gateway_over("embed", &serve, &[]).await;
    let fleet = Arc::new(DockerFleet {
        image,
        network,
        tag,
        pool: Arc::clone(&pool),
        running: std::sync::Mutex::new(Vec::new()),
        next: AtomicU32::new(0),
    });
    // `replicas.min` is 2: the controller starts both at once (below min: no waiting).
    let replicas = Replicas {
        min: 2,
        max: 3,
        share_providers: false,
    };
    let scale = Scale {
        target_in_flight_per_replica: Some(2),
        target_p90_ms: None,
        up_after_s: 2,
        down_after_s: 3,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let controller = Controller {
        tick: Duration::from_millis(500),
        window: Duration::from_secs(2),
        replace_failing_after: Duration::from_secs(3),
        replace_starting_after: Duration::from_secs(60),
    };
    let _loop = controller.spawn(
        Arc::clone(&pool),
        Autoscaler::new(replicas, Some(&scale)),
        Arc::clone(&fleet) as Arc<dyn Fleet>,
        stop.clone(),
    );
    let healthy = |n: u32| {
        let pool = Arc::clone(&pool);
        move || pool.load(Duration::from_secs(1)).healthy == n
    };
    wait_until(Duration::from_secs(60), healthy(2)).await;
    assert_eq!(fleet.wanted(), 2);

    // Eight clients keep about eight requests in flight: above 2 per replica over 2 replicas.
    let loaded = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ok = Arc::new(AtomicU32::new(0));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (loaded, ok) = (Arc::clone(&loaded), Arc::clone(&ok));
            tokio::spawn(async move {
                let texts: Vec<String> = (0..8)
                    .map(|k| format!("client {i} sentence {k} about load"))
                    .collect();
                let body = serde_json::json!({ "texts": texts }).to_string();
                while loaded.load(Ordering::SeqCst) {
                    let (status, _, text) =
                        call("POST", &format!("http://{addr}/embed/embed"), &body).await;
                    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&text));
                    ok.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let load_started = Instant::now();
    // Upper bound: up_after_s, then a container start and a model load on a busy machine.
    let third = wait_until(Duration::from_secs(2 + 45), healthy(3)).await;
    assert_eq!(fleet.wanted(), 3, "never beyond replicas.max");
    eprintln!(
        "scale: above target → the third replica answering its health check: {:.1} s (up_after_s 2)",
        load_started.elapsed().as_secs_f64()
    );
    let _ = third;
    // It takes requests.
    let third_name = fleet.names().last().cloned().expect("three");
    wait_until(Duration::from_secs(10), || {
        pool.views()
            .iter()
            .any(|v| v.replica.id == third_name && v.usage.requests > 0)
    })
    .await;

    loaded.store(false, Ordering::SeqCst);
    for c in clients {
        c.await.expect("every request answered 200");
    }
    let idle = Instant::now();
    // Upper bound: the window drains (2 s), down_after_s (3 s), a tick.
    wait_until(Duration::from_secs(2 + 3 + 10), || {
        fleet.wanted() == 2 && pool.views().len() == 2
    })
    .await;
    eprintln!(
        "scale: idle → back to replicas.min: {:.1} s (down_after_s 3)",
        idle.elapsed().as_secs_f64()
    );
    // And never below min, however long it stays idle.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(fleet.wanted(), 2);
    assert!(ok.load(Ordering::SeqCst) > 0);

    // A replica's container dies: out of rotation within two health intervals, given up after
    // replace_failing_after, replaced at once (below min), and back to two healthy.
    let victim = fleet.names()[0].clone();
    docker(&["kill", &victim]);
    let lost = Instant::now();
    wait_until(
        // Two intervals (a probe of a vanished address waits out its whole timeout), plus the
        // poll's 20 ms and scheduling.
        Duration::from_secs(2 * u64::from(serve.health.interval_s)) + Duration::from_millis(250),
        || !crate::support::healthy(&pool, &victim),
    )
    .await;
    // Upper bound: two intervals, replace_failing_after (3 s), a tick, a container start and a
    // model load on a busy machine.
    wait_until(Duration::from_secs(2 + 3 + 45), || {
        fleet.wanted() == 2
            && !fleet.names().contains(&victim)
            && pool.load(Duration::from_secs(1)).healthy == 2
    })
    .await;
    eprintln!(
        "failover: replica lost → full capacity again: {:.1} s (replace_failing_after 3 s)",
        lost.elapsed().as_secs_f64()
    );
    let (status, _, _) = call(
        "POST",
        &format!("http://{addr}/embed/embed"),
        r#"{"texts":["back"]}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    stop.cancel();
}
