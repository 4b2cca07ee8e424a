//! An inference service through the job engine on the devnet (issue #24): a `kind: service`
//! spec is locked, matched to two providers (one replica each), assigned, and each provider
//! runs the real embedding model (`scripts/build-embed-image.sh`) as a long-lived container;
//! the orchestrator's node routes `/<service>/…` to both over libp2p (the daemon's
//! `[gateway]`, `ganglion_node::daemon::services`); a provider lets only the job's
//! orchestrator reach its replica; `job stop` ends the service and each provider is paid its
//! receipted GPU time at its rate, to the base unit. Needs a running Docker Engine (CI:
//! `scripts/ensure-docker.sh`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ganglion_gateway::p2p::{self as service_streams, Target};
use ganglion_gateway::server::Gateway;
use ganglion_indexer::JobStatus as ChainStatus;
use ganglion_market::Ensemble;
use ganglion_node::daemon::services::{self, Replicas};
use ganglion_node::job::JobControl as _;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use super::support::{self, Chain, ProviderIdent, RATE, World, wait_for};

/// The embedding image, built when absent (about half a minute once the torch image exists).
pub(crate) fn embed_image() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-embed-image.sh");
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

/// [`service_spec`] with `replicas` and `scale` replaced, its budget for `replicas.max`.
fn scaled_spec(
    image: &str,
    deadline_in_ms: u64,
    replicas: serde_json::Value,
    scale: serde_json::Value,
) -> Ensemble {
    let mut spec = serde_json::to_value(service_spec(image, deadline_in_ms)).expect("JSON");
    // Every replica at RATE (one base unit per GPU-ms) for the whole window, and more.
    let most = replicas["max"].as_u64().expect("replicas.max");
    spec["budget_ntx"] = (most * deadline_in_ms + 10_000).into();
    spec["replicas"] = replicas;
    spec["scale"] = scale;
    Ensemble::from_json_str(&spec.to_string()).expect("spec parses")
}

/// Two replicas of one GPU each, health checked every second, until `deadline_in_ms` from now.
pub(crate) fn service_spec(image: &str, deadline_in_ms: u64) -> Ensemble {
    let fits_s =
        deadline_in_ms.saturating_sub(ganglion_node::job::terms::SETTLE_MARGIN_MS + 1_000) / 1000;
    let json = serde_json::json!({
        "kind": "service",
        "image": { "local": image },
        "command": ["python3", "/workloads/embed_server.py"],
        "env": { "PORT": "8000" },
        "gpus": { "count": 1 },
        "serve": {
            "port": 8000,
            "protocol": "http",
            "health": { "path": "/health", "interval_s": 1, "timeout_s": 1 },
            "retry_post": true,
        },
        "replicas": { "min": 2, "max": 2 },
        "limits": { "max_duration_s": fits_s, "max_rate_ntx_per_gpu_hour": RATE },
        // Two replicas at RATE (one base unit per GPU-ms) for the whole window, and more.
        "budget_ntx": 2 * deadline_in_ms + 10_000,
        "deadline_ms": ganglion_p2p::now_ms() + deadline_in_ms,
    });
    Ensemble::from_json_str(&json.to_string()).expect("spec parses")
}

/// One HTTP/1.1 exchange (`Connection: close`): status, headers (lower-case names), body.
pub(crate) async fn call(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the gateway accepts");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.expect("sent");
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.expect("answer");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, raw[split + 4..].to_vec())
}

/// Removes, when dropped (the test passed or not), every container and network of `job`
/// left on this Docker Engine: replicas of a provider node the test killed, or of a service
/// still running when a test fails (an engine's stop leaves containers to its next start's
/// recovery, which a test never runs; leaked networks exhaust Docker's address pools).
pub(crate) struct Cleanup(String);

impl Cleanup {
    pub(crate) fn of(job: &ganglion_contracts::v2::datum::JobId) -> Self {
        // Executor ids and their network names start with the job id's first 40 hex digits.
        Self(hex::encode(job.0)[..40].to_string())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "docker ps -aq --filter name={0} | xargs -r docker rm -f; \
                 docker network ls -q --filter name={0} | xargs -r docker network rm",
                self.0
            ))
            .output();
    }
}

/// What `node run` does for services: each provider's node carries `/ganglion/service/1`
/// into its replicas, and the orchestrator's node routes its services at a gateway
/// ([`gateway_on`]). Returns the gateway and its address.
pub(crate) async fn serving(
    orch: &support::Node<ganglion_node::job::NoExecutor>,
    providers: &[&support::Node<support::Exec>],
    stop: &CancellationToken,
) -> (Arc<Gateway>, std::net::SocketAddr) {
    for p in providers {
        let incoming = service_streams::accept(&mut p.p2p.streams()).expect("protocol free");
        let replicas = Replicas::new(
            p.engine.store().clone(),
            Arc::clone(p.executor.as_ref().expect("executor")),
        );
        tokio::spawn(service_streams::serve(incoming, replicas, stop.clone()));
    }
    gateway_on(orch, stop).await
}

/// `node`'s `[gateway] listen` on a free loopback port, routing the services it orchestrates
/// and those naming it in `serve.gateways`. Returns the gateway and its address.
pub(crate) async fn gateway_on(
    node: &support::Node<ganglion_node::job::NoExecutor>,
    stop: &CancellationToken,
) -> (Arc<Gateway>, std::net::SocketAddr) {
    let gateway = Gateway::with_streams(Some(node.p2p.streams()));
    let addr = ganglion_gateway::listen(
        "127.0.0.1:0".parse().expect("addr"),
        Arc::clone(&gateway),
        stop.clone(),
    )
    .await
    .expect("gateway listens")
    .addr;
    tokio::spawn(services::route(
        Arc::clone(&gateway),
        node.engine.store().clone(),
        node.indexer.clone(),
        0,
        Arc::new(node.engine.handle()),
        node.peer(),
        stop.clone(),
    ));
    (gateway, addr)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Two replicas behind the orchestrator's gateway and behind a third node's that the spec
/// names (`serve.gateways`): the same answers as the model run directly; a node not named is
/// refused; the receipts carry the orchestrator's gateway's usage, signed, which the providers
/// attest and the audit checks; `job stop` pays each its receipted GPU time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_service_runs_on_two_providers_behind_the_orchestrators_gateway_and_is_paid_by_gpu_time()
{
    let image = embed_image();
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let stop = CancellationToken::new();
    let (gateway, addr) = serving(&orch, &[&pa, &pb], &stop).await;
    // A node that neither orchestrates nor provides (seed 5), named by the spec as a gateway:
    // it routes the service too, from the chain.
    let gw = support::plain_node(
        &chain,
        5,
        &chain.dir.path().join("gw"),
        support::engine_config(&chain),
    )
    .await;
    support::connect_market(&gw, &[&pa, &pb], 2).await;
    let (gw_gateway, gw_addr) = gateway_on(&gw, &stop).await;

    let mut spec = service_spec(&image, 900_000);
    if let Some(serve) = spec.serve.as_mut() {
        serve.gateways = vec![gw.peer().to_string()];
    }
    let job = orch
        .engine
        .submit(&spec)
        .await
        .expect("a service is locked");
    let _cleanup = Cleanup::of(&job);
    let name = services::service_name(&job);
    for p in [&pa, &pb] {
        wait_for("the replica running", || async {
            let r = p.engine.provider_record(&job).expect("store")?;
            (r.state == ProviderState::Running).then_some(())
        })
        .await;
    }
    // Both replicas pass their health checks through their providers' nodes.
    wait_for("both replicas healthy at the gateway", || async {
        let (status, _, body) = call(addr, "GET", "/_gateway/services", "").await;
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let replicas = v[&name]["replicas"].as_array()?.clone();
        (status == 200 && replicas.len() == 2 && replicas.iter().all(|r| r["health"] == "healthy"))
            .then_some(())
    })
    .await;

    // The same texts through the gateway and through the model run directly.
    let texts = ["A man is eating food.", "A man is eating a piece of bread."];
    let body = serde_json::json!({ "texts": texts }).to_string();
    let mut served_by = std::collections::BTreeSet::new();
    let mut first: Option<serde_json::Value> = None;
    // Eight at once: each goes to the replica with the fewest outstanding, so both serve.
    let path = format!("/{name}/embed");
    let answers = futures::future::join_all((0..8).map(|_| call(addr, "POST", &path, &body))).await;
    let answered_bytes: u64 = answers.iter().map(|(_, _, got)| got.len() as u64).sum();
    for (status, headers, got) in answers {
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
        served_by.insert(header(&headers, "x-ganglion-replica").map(str::to_string));
        let v: serde_json::Value = serde_json::from_slice(&got).expect("JSON");
        match &first {
            None => first = Some(v),
            Some(f) => assert_eq!(f["embeddings"], v["embeddings"], "replicas agree"),
        }
    }
    let through = first.expect("answered");
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
    let out = Command::new("docker")
        .args(&direct_args)
        .output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let direct: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(through["dim"], 384);
    assert_eq!(
        through["embeddings"], direct["embeddings"],
        "gateway and direct run differ"
    );
    assert_eq!(
        served_by.len(),
        2,
        "both replicas served concurrent requests: {served_by:?}"
    );

    // Another peer (provider B's node) is refused provider A's replica, naming why.
    let a_peer = match pa.addr.iter().last() {
        Some(libp2p::multiaddr::Protocol::P2p(peer)) => peer,
        _ => panic!("provider A's address ends in its peer id: {}", pa.addr),
    };
    let refused = service_streams::open(
        &mut pb.p2p.streams(),
        a_peer,
        Target {
            job: job.0,
            rank: 0,
        },
    )
    .await
    .map(|_| ())
    .expect_err("only the orchestrator may");
    assert!(
        refused.to_string().contains("only the job's orchestrator"),
        "{refused}"
    );

    // The gateway the spec names serves the same service: the same embeddings, from both
    // replicas (its own health checks, its own routes read from the chain).
    wait_for("both replicas healthy at the named gateway", || async {
        (healthy(gw_addr, &name).await.len() == 2).then_some(())
    })
    .await;
    let mut gw_served_by = std::collections::BTreeSet::new();
    let answers =
        futures::future::join_all((0..4).map(|_| call(gw_addr, "POST", &path, &body))).await;
    for (status, headers, got) in answers {
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
        gw_served_by.insert(header(&headers, "x-ganglion-replica").map(str::to_string));
        let v: serde_json::Value = serde_json::from_slice(&got).expect("JSON");
        assert_eq!(
            v["embeddings"], through["embeddings"],
            "the named gateway agrees"
        );
    }
    assert_eq!(gw_served_by.len(), 2, "{gw_served_by:?}");

    // Pay by use: the next receipts carry what each replica served through the gateway,
    // signed by the orchestrator; each provider keeps it with its best receipt. Together they
    // count the orchestrator's gateway's eight requests (not the named gateway's four: only
    // the orchestrator signs receipts), their bodies and the answers' bodies to the byte.
    let held = || {
        [&pa, &pb].map(|p| {
            p.engine
                .store()
                .receipt(&job)
                .expect("store")
                .and_then(|r| r.usage)
                .map(|u| u.usage)
                .unwrap_or_default()
        })
    };
    wait_for("the eight requests signed with the receipts", || async {
        (held().iter().map(|u| u.requests).sum::<u64>() == 8).then_some(())
    })
    .await;
    let usage = held();
    assert!(
        usage.iter().all(|u| u.requests > 0),
        "both served: {usage:?}"
    );
    assert_eq!(usage.iter().map(|u| u.failed).sum::<u64>(), 0, "{usage:?}");
    assert_eq!(
        usage.iter().map(|u| u.bytes_in).sum::<u64>(),
        8 * body.len() as u64,
        "{usage:?}"
    );
    assert_eq!(
        usage.iter().map(|u| u.bytes_out).sum::<u64>(),
        answered_bytes,
        "{usage:?}"
    );
    // The orchestrator's own record of what it signed agrees.
    for (i, u) in usage.iter().enumerate() {
        assert_eq!(
            orch.engine
                .handle()
                .usage_signed(&job, i as u64)
                .expect("store"),
            Some(*u),
            "replica {i}"
        );
    }

    // `job stop` ends the service: each provider stops its replica and claims.
    let before = [chain.ntx_of(&pa.key_hash), chain.ntx_of(&pb.key_hash)];
    orch.engine.handle().stop(&job).await.expect("stopped");
    wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert_ne!(r.state, OrchestratorState::Expired, "{r:?}");
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.status, ChainStatus::Claimed);
    assert!(view.defaulters().is_empty(), "nobody defaulted");
    for (i, (p, before)) in [&pa, &pb].into_iter().zip(before).enumerate() {
        let claim = view.claims[i].expect("claimed");
        assert!(claim.gpu_ms > 0, "replica {i} ran");
        // One base unit per GPU-ms at RATE: the pay is the receipted GPU time exactly.
        assert_eq!(claim.paid, claim.gpu_ms * RATE / 3_600_000, "replica {i}");
        assert_eq!(view.assignments[i].rate, RATE);
        assert_eq!(
            chain.ntx_of(&p.key_hash),
            before + claim.paid,
            "replica {i}: the pay arrives whole (fees are paid in ADA)"
        );
    }
    // `audit verify` passes every check of the settled service, as of a batch job (the
    // escrow covers `replicas.max`; the assign placed `replicas.min`).
    let evidence = ganglion_node::audit::evidence::gather(
        &orch.indexer,
        orch.blocks.as_ref() as &dyn ganglion_storage::blockstore::Blockstore,
        Some(&orch.p2p),
        &job,
    )
    .await
    .expect("evidence gathered");
    let report = ganglion_node::audit::checks::check(&evidence);
    assert!(report.pass, "{report:#?}");
    assert!(
        report.checks.iter().any(|c| c.name == "payment[1]"),
        "{report:#?}"
    );
    // Each provider keeps what it attested past its claim (its receipt is dropped then).
    for (i, (p, u)) in [&pa, &pb].into_iter().zip(&usage).enumerate() {
        let kept = wait_for("the provider's record with its attested usage", || async {
            p.engine.provider_record(&job).expect("store")?.detail.usage
        })
        .await;
        assert_eq!(kept.usage, *u, "replica {i}");
    }
    // Each provider attested the orchestrator's signed usage in its log: the audit finds it,
    // checks the signature and reads the price per request.
    for (i, u) in usage.iter().enumerate() {
        let check = report
            .checks
            .iter()
            .find(|c| c.name == format!("usage[{i}]"))
            .unwrap_or_else(|| panic!("usage[{i}] audited: {report:#?}"));
        assert!(
            check
                .detail
                .contains(&format!("{} requests answered", u.requests)),
            "{check:?}"
        );
        assert!(check.detail.contains("per request"), "{check:?}");
    }
    // The ended service is no longer routed, by either gateway.
    wait_for("the service unrouted", || async {
        (gateway.service(&name).is_none() && gw_gateway.service(&name).is_none()).then_some(())
    })
    .await;
    stop.cancel();
    gw.cancel.cancel();
    gw.shutdown().await;
    support::shutdown(chain, orch, vec![pa, pb]).await;
}

/// The replicas `/_gateway/services` shows healthy for `name`, by id.
pub(crate) async fn healthy(addr: std::net::SocketAddr, name: &str) -> Vec<String> {
    let (_, _, body) = call(addr, "GET", "/_gateway/services", "").await;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    v[name]["replicas"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter(|r| r["health"] == "healthy")
                .filter_map(|r| r["replica"]["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Load on the service: `clients` clients posting embeddings back to back until `stop`;
/// returns how many answers were not 200.
fn drive(
    addr: std::net::SocketAddr,
    path: String,
    clients: usize,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let body = serde_json::json!({ "texts": ["A man is eating food."] }).to_string();
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (path, body, stop) = (path.clone(), body.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut failed = 0;
                    while !stop.is_cancelled() {
                        let (status, _, got) = call(addr, "POST", &path, &body).await;
                        if status != 200 {
                            if failed == 0 {
                                eprintln!("under load: {status} {}", String::from_utf8_lossy(&got));
                            }
                            failed += 1;
                        }
                    }
                    failed
                })
            })
            .collect();
        let mut failed = 0;
        for t in tasks {
            failed += t.await.unwrap_or(1);
        }
        failed
    })
}

/// The whole loop on the devnet, on four providers: two replicas from the assign; load above
/// the spec's target makes the gateway's autoscaler ask the engine for a third, which a
/// `Rescale` adds (a provider assigned under the same escrow); idle, the newest replica is
/// released (its provider stops at its new `until`, claims and is paid its receipted GPU time
/// at its rate); then, while a client keeps posting, the node of one of the two left is
/// killed: no request is lost (in flight ones are retried on the other replica, `retry_post`),
/// its replica is given up as lost, released and replaced by the provider never used yet, and
/// the service is back at two replicas. Bounds are upper bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_service_grows_with_load_shrinks_when_idle_and_replaces_a_lost_provider() {
    let image = embed_image();
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    // The genesis funds keys 0..=3; the fourth provider (key 4) is paid its ADA and stake.
    support::fund(&chain, &support::dev_key(3), &support::dev_key(4)).await;
    let mut idents = Vec::new();
    for seed in 1..=4 {
        idents.push(ProviderIdent::bonded(&chain, seed).await);
    }
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let mut providers = Vec::new();
    for (i, id) in idents.iter().enumerate() {
        providers.push(support::provider(&chain, id, &root.join(format!("p{i}"))).await);
    }
    support::connect_market(&orch, &providers.iter().collect::<Vec<_>>(), 4).await;
    let stop = CancellationToken::new();
    let (_gateway, addr) = serving(&orch, &providers.iter().collect::<Vec<_>>(), &stop).await;
    let spec = scaled_spec(
        &image,
        900_000,
        serde_json::json!({ "min": 2, "max": 3 }),
        serde_json::json!({ "target_in_flight_per_replica": 1, "up_after_s": 2, "down_after_s": 5 }),
    );
    let job = orch.engine.submit(&spec).await.expect("locked");
    let _cleanup = Cleanup::of(&job);
    let name = services::service_name(&job);
    let path = format!("/{name}/embed");
    wait_for("two replicas healthy", || async {
        (healthy(addr, &name).await.len() == 2).then_some(())
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.assignments.len(), 2, "assigned with replicas.min");
    assert_eq!(view.gpus, 3, "the escrow covers replicas.max");

    // Load above the target: a third provider is added by a rescale and serves.
    let load = CancellationToken::new();
    let loaded_at = std::time::Instant::now();
    let driving = drive(addr, path.clone(), 8, load.clone());
    wait_for("a third replica healthy", || async {
        (healthy(addr, &name).await.len() == 3).then_some(())
    })
    .await;
    let grew_after = loaded_at.elapsed();
    load.cancel();
    assert_eq!(
        driving.await.expect("load"),
        0,
        "every request under load answered 200"
    );
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.assignments.len(), 3, "one provider added");
    assert!(
        view.assignments[2].started_at_ms > view.assignments[0].started_at_ms,
        "the added provider's window starts at its rescale"
    );
    assert!(
        grew_after < Duration::from_secs(60),
        "third replica answering {grew_after:?} after the load began"
    );

    // Idle: the newest replica is released; its provider stops and is paid its receipted time.
    let third = view.assignments[2].provider;
    let p3 = providers
        .iter()
        .find(|p| p.key_hash == third)
        .expect("the added provider");
    let idle_at = std::time::Instant::now();
    let released = wait_for("the third replica released and paid", || async {
        let v = orch.indexer.job(&job, 0).expect("q")?.value;
        (v.assignments[2].until_ms < v.deadline_ms && v.has_claimed(2)).then_some(v)
    })
    .await;
    let shrank_after = idle_at.elapsed();
    let claim = released.claims[2].expect("claimed");
    assert!(claim.gpu_ms > 0);
    assert_eq!(claim.paid, claim.gpu_ms * RATE / 3_600_000);
    let a = &released.assignments[2];
    assert!(
        claim.gpu_ms <= a.gpus * (a.until_ms - a.started_at_ms),
        "paid within its own window"
    );
    wait_for("the released provider's record paid", || async {
        let r = p3.engine.provider_record(&job).expect("store")?;
        (r.state == ProviderState::Paid).then_some(())
    })
    .await;
    assert_eq!(healthy(addr, &name).await.len(), 2, "out of rotation");

    // A client keeps posting (one request at a time: at the target, so no scale-up) while the
    // first provider's node dies: its replica is given up as lost and replaced by the fourth
    // provider's, and no request is lost meanwhile.
    let first = released.assignments[0].provider;
    let survivor = released.assignments[1].provider;
    let at = providers
        .iter()
        .position(|p| p.key_hash == first)
        .expect("the first provider");
    let client = CancellationToken::new();
    let posting = drive(addr, path.clone(), 1, client.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let dead = providers.remove(at);
    let killed_at = std::time::Instant::now();
    dead.shutdown().await;
    let replaced = wait_for("a replacement replica healthy", || async {
        let v = orch.indexer.job(&job, 0).expect("q")?.value;
        (v.assignments.len() == 4 && healthy(addr, &name).await == ["replica-1", "replica-3"])
            .then_some(v)
    })
    .await;
    let recovered_after = killed_at.elapsed();
    client.cancel();
    assert_eq!(
        posting.await.expect("client"),
        0,
        "no request lost while a provider's node died"
    );
    assert!(
        replaced.assignments[0].until_ms < replaced.deadline_ms,
        "the lost provider released: paid no further"
    );
    let fourth = replaced.assignments[3].provider;
    assert!(
        ![first, survivor, third].contains(&fourth),
        "the replacement is the provider never used yet"
    );
    assert!(
        recovered_after < Duration::from_secs(120),
        "two replicas again {recovered_after:?} after the provider's node died"
    );
    eprintln!(
        "service timings: third replica answering {grew_after:?} after the load began; back \
         to two {shrank_after:?} after it stopped; two replicas again {recovered_after:?} \
         after a provider's node died"
    );
    // Healthy at the gateway, the replacement is acknowledged: its receipts (with its usage)
    // begin.
    let p4 = providers
        .iter()
        .find(|p| p.key_hash == fourth)
        .expect("the replacement");
    wait_for(
        "the replacement's first receipt, with its usage",
        || async {
            let held = p4.engine.store().receipt(&job).expect("store")?;
            held.usage.map(|_| ())
        },
    )
    .await;
    // Ended: the survivor and the replacement stop and claim (the dead node's share waits
    // for its node).
    orch.engine.handle().stop(&job).await.expect("stopped");
    wait_for("the survivor and the replacement paid", || async {
        let v = orch.indexer.job(&job, 0).expect("q")?.value;
        (v.has_claimed(1) && v.has_claimed(3)).then_some(())
    })
    .await;
    // `audit verify` re-derives the rescaled escrow from the chain: G6 replayed at the assign
    // and each rescale, each provider's acceptance (the assign's, then each rescale's), each
    // claim bounded by its own window and paid at its rate, each served replica's signed
    // usage. Only the dead node's share is still open (it claims when its node comes back, or
    // is slashed at the expire).
    let evidence = ganglion_node::audit::evidence::gather(
        &orch.indexer,
        orch.blocks.as_ref() as &dyn ganglion_storage::blockstore::Blockstore,
        Some(&orch.p2p),
        &job,
    )
    .await
    .expect("evidence gathered");
    let report = ganglion_node::audit::checks::check(&evidence);
    let failed: Vec<&str> = (report.checks.iter())
        .filter(|c| !c.pass)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failed, ["status", "default[0]"], "{report:#?}");
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    for n in [
        "budget",
        "acceptance[2]",
        "acceptance[3]",
        "claim_bound[1]",
        "claim_bound[2]",
        "claim_bound[3]",
        "payment[1]",
        "payment[2]",
        "payment[3]",
        "usage[1]",
        "usage[2]",
        "usage[3]",
    ] {
        assert!(names.contains(&n), "check {n} missing from {names:?}");
    }
    stop.cancel();
    support::shutdown(chain, orch, providers).await;
}

/// A replica that never passes its health check is never routed to and never paid beyond
/// one receipt interval: the orchestrator's gateway never sees it healthy, so the
/// orchestrator answers its heartbeats `NotHealthy` (no receipt); the provider keeps it up
/// within the starting grace, and when the service ends it claims without a receipt — at
/// most one interval of GPU time (G1).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_that_never_passes_its_health_check_is_never_routed_to_and_paid_at_most_one_interval()
 {
    let image = embed_image();
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let stop = CancellationToken::new();
    let (_gateway, addr) = serving(&orch, &[&pa, &pb], &stop).await;
    let mut spec = service_spec(&image, 900_000);
    spec.replicas = Some(ganglion_market::service::Replicas {
        min: 1,
        max: 1,
        share_providers: false,
    });
    if let Some(serve) = spec.serve.as_mut() {
        // The model serves, but this path is not its health check: every probe gets 404.
        serve.health.path = "/not-a-health-check".into();
    }
    let job = orch.engine.submit(&spec).await.expect("locked");
    let _cleanup = Cleanup::of(&job);
    let name = services::service_name(&job);
    let replica = wait_for("the replica running", || async {
        for p in [&pa, &pb] {
            if let Some(r) = p.engine.provider_record(&job).expect("store")
                && r.state == ProviderState::Running
            {
                return Some(p);
            }
        }
        None
    })
    .await;
    // Five receipt intervals and more after its start: every request is refused at the
    // gateway (no replica healthy), none reaches the replica, and no receipt was given.
    let path = format!("/{name}/embed");
    let until = std::time::Instant::now() + Duration::from_millis(5 * chain.receipt_interval_ms);
    let mut refused = 0;
    while std::time::Instant::now() < until {
        let (status, headers, got) = call(addr, "POST", &path, r#"{"texts": ["x"]}"#).await;
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&got));
        assert_eq!(header(&headers, "x-ganglion-replica"), None);
        refused += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(refused > 10, "{refused}");
    assert_eq!(
        replica.engine.store().receipt(&job).expect("store"),
        None,
        "no receipt for a replica never healthy"
    );
    let record = replica
        .engine
        .provider_record(&job)
        .expect("store")
        .expect("record");
    assert_eq!(
        record.state,
        ProviderState::Running,
        "kept up within the starting grace"
    );

    orch.engine.handle().stop(&job).await.expect("stopped");
    wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    let claim = view.claims[0].expect("claimed");
    assert_eq!(
        claim.acknowledged_until_ms, None,
        "claimed without a receipt"
    );
    assert!(
        claim.gpu_ms <= chain.receipt_interval_ms,
        "paid at most one interval: {} GPU-ms, interval {} ms",
        claim.gpu_ms,
        chain.receipt_interval_ms
    );
    stop.cancel();
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
