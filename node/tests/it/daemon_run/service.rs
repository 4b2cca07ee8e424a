//! `[gateway] listen` of a real `ganglion node run` (issue #24): the orchestrator's process
//! routes `/<service>/…` of the service it orchestrates to the replicas two provider
//! processes run (the embedding model, `scripts/build-embed-image.sh`), reached through
//! their nodes over libp2p; `job_stop` ends it and both providers are paid.

use std::time::Duration;

use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

use super::super::lifecycle::service::{Cleanup, call, embed_image, healthy, service_spec};
use super::Network;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_orchestrators_gateway_routes_its_service_to_replicas_on_provider_processes() {
    let image = embed_image();
    let net = Network::start_configured(None, "[gateway]\nlisten = \"127.0.0.1:0\"\n").await;
    let gateway = net
        .orch
        .gateway
        .expect("node.json names the gateway's address");
    let before = net.ntx();
    let id = net.submit_spec(&service_spec(&image, 600_000)).await;
    let job = ganglion_contracts::v2::datum::JobId(
        hex::decode(&id).expect("hex").try_into().expect("32 bytes"),
    );
    let _cleanup = Cleanup::of(&job);
    let name = id[..16].to_string();
    let t0 = std::time::Instant::now();
    super::support::wait_for("both replicas healthy at the node's gateway", || async {
        (healthy(gateway, &name).await.len() == 2).then_some(())
    })
    .await;
    eprintln!("service answering {:?} after its submission", t0.elapsed());
    let body = serde_json::json!({ "texts": ["A man is eating food."] }).to_string();
    let (status, headers, got) = call(gateway, "POST", &format!("/{name}/embed"), &body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
    assert!(
        headers.iter().any(|(k, _)| k == "x-ganglion-replica"),
        "{headers:?}"
    );
    let v: serde_json::Value = serde_json::from_slice(&got).expect("JSON");
    assert_eq!(v["dim"], 384);
    let (status, _, _) = call(gateway, "GET", "/no-such-service/x", "").await;
    assert_eq!(status, 404);

    // `job_status` shows the replicas, the gateway's load, the cost so far and the request
    // signed with the next receipt (with its cost per 1 000 requests).
    let (svc, nodes) = super::support::wait_for("job_status with a cost", || async {
        let o = net.orchestrator_status(&id).await?;
        let svc = o.service?;
        (svc.cost_so_far.get() > 0
            && svc.load.is_some_and(|l| l.requests_per_s > 0.0)
            && svc.requests == 1)
            .then_some((svc, o.nodes))
    })
    .await;
    assert!(svc.cost_per_1k_requests.is_some(), "{svc:?}");
    let served: Vec<u64> = nodes
        .iter()
        .map(|n| n.usage.map_or(0, |u| u.requests))
        .collect();
    assert_eq!(served.iter().sum::<u64>(), 1, "{nodes:?}");
    assert_eq!(svc.name, name);
    assert_eq!((svc.wanted, svc.running.as_slice()), (2, &[0, 1][..]));
    assert_eq!(svc.load.expect("routed here").healthy, 2);
    let out = std::process::Command::new(super::ganglion())
        .args(["job", "status", &id, "--config"])
        .arg(net.orch_node.data_dir.join("node.toml"))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "service /{name}/: 2 replicas running (2 wanted), cost so far"
        )),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 requests answered"), "{text}");
    assert!(text.contains("served 1 requests (0 failed)"), "{text}");

    // Some GPU time to pay, then `job_stop`: both providers claim it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _: ganglion_rpc::types::JobStatus = net
        .rpc
        .request("job_stop", rpc_params![id.clone()])
        .await
        .expect("job_stop");
    net.settled(&id).await;
    let after = net.ntx();
    for (b, a) in before.iter().zip(&after) {
        assert!(a > b, "each provider paid: {before:?} → {after:?}");
    }
    super::support::wait_for("the ended service no longer routed", || async {
        let (_, _, body) = call(gateway, "GET", "/_gateway/services", "").await;
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        v.get(&name).is_none().then_some(())
    })
    .await;
}
