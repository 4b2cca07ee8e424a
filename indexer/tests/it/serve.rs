//! `ganglion-indexer serve` beside a follower on PostgreSQL: one `follow` process and two
//! `serve` processes (the binaries) on a devnet; both answer the same queries as the chain
//! grows, and bad input gets a 4xx in Blockfrost's error shape.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::devnet::{Chain, deploy, dev_party, lock_small, spawn_indexer};

/// A child process killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn indexer(args: &[&str]) -> (Running, std::sync::mpsc::Receiver<String>) {
    let (child, rx) = spawn_indexer(args, Stdio::inherit());
    (Running(child), rx)
}

/// The address a `serve` process prints once it listens.
fn served_at(rx: &std::sync::mpsc::Receiver<String>) -> String {
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serve prints its address");
    line.strip_prefix("serving ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned()
}

async fn get(addr: &str, path: &str) -> (u16, Value) {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let uri = format!("http://{addr}{path}").parse().expect("uri");
    let res = client.get(uri).await.expect("an answer");
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    let json = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", String::from_utf8_lossy(&body)));
    (status, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_answer_alike_beside_a_follower() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = crate::postgres::cluster();
    let url = crate::postgres::database(&cluster);
    let chain = Chain::start(dir.path()).await;
    let (dep, watch) = deploy(&chain).await;
    let watch_file = dir.path().join("watch.json");
    std::fs::write(&watch_file, serde_json::to_string(&watch).expect("json")).expect("watch");
    let watch_arg = watch_file.display().to_string();
    let n2c = chain.handle.n2c_tcp_addr().expect("n2c").to_string();
    let magic = chain.handle.magic().to_string();
    let (_follower, _lines) = indexer(&[
        "follow",
        "--store",
        &url,
        "--watch",
        &watch_arg,
        "--n2c-tcp",
        &n2c,
        "--magic",
        &magic,
        "--k",
        "10",
    ]);
    let serve = [
        "serve",
        "--store",
        &url,
        "--watch",
        &watch_arg,
        "--listen",
        "127.0.0.1:0",
    ];
    let (_a, rx_a) = indexer(&serve);
    let (_b, rx_b) = indexer(&serve);
    let (a, b) = (served_at(&rx_a), served_at(&rx_b));

    let orch = dev_party(&chain.env, 2);
    let mut jobs = Vec::new();
    for round in 0..3 {
        for _ in 0..3 {
            jobs.push(lock_small(&chain, &dep, &orch).await);
        }
        // Both serve processes reach the chain's tip, then answer every query alike.
        let want = hex::encode(*chain.handle.tip().expect("tip").hash);
        let deadline = Instant::now() + Duration::from_secs(60);
        for addr in [&a, &b] {
            loop {
                let (status, tip) = get(addr, "/tip").await;
                if status == 200 && tip["hash"] == want.as_str() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: {addr} stuck at {tip}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let mut paths = vec![
            "/jobs".to_owned(),
            "/jobs?order=desc&count=2&page=2".to_owned(),
            format!("/providers/{}", hex::encode(orch.hash)),
            format!("/providers/{}/payments?count=5", hex::encode(orch.hash)),
        ];
        paths.extend(jobs.iter().map(|j| format!("/jobs/{j}")));
        for path in &paths {
            let (sa, va) = get(&a, path).await;
            let (sb, vb) = get(&b, path).await;
            assert_eq!((sa, sb), (200, 200), "{path}: {va} / {vb}");
            assert_eq!(va, vb, "{path}: both serve processes answer alike");
        }
        let (_, listed) = get(&a, "/jobs?count=100").await;
        assert_eq!(
            listed.as_array().map(Vec::len),
            Some(jobs.len()),
            "{listed}"
        );
        let (_, one) = get(&a, &format!("/jobs/{}", jobs[0])).await;
        assert_eq!(one["status"], "Locked");
        assert_eq!(one["job_id"], jobs[0].to_string());

        // Kupo's matches: the index's (the escrows and bonds it follows) are the chain's own
        // (the devnet's API over its whole UTxO set), match for match. By the validator's
        // tokens (every escrow holds its thread token), and by the validator's credential,
        // where the chain also shows the output holding the reference script itself.
        let chain_api = chain
            .handle
            .http_addr()
            .expect("the devnet's API")
            .to_string();
        let script = hex::encode(watch.script_hash);
        let by_token = format!("/matches/{script}.*?order=oldest_first");
        let (s_index, from_index) = get(&a, &by_token).await;
        let (s_chain, from_chain) = get(&chain_api, &by_token).await;
        assert_eq!(
            (s_index, s_chain),
            (200, 200),
            "{from_index} / {from_chain}"
        );
        assert_eq!(
            from_index.as_array().map(Vec::len),
            Some(jobs.len()),
            "every escrow: {from_index}"
        );
        assert_eq!(from_index, from_chain);
        let by_credential = format!("/matches/{script}/*");
        let (_, from_index) = get(&a, &by_credential).await;
        let (_, from_chain) = get(&chain_api, &by_credential).await;
        let without_scripts: Vec<&serde_json::Value> = from_chain
            .as_array()
            .expect("matches")
            .iter()
            .filter(|m| m["script_hash"].is_null())
            .collect();
        assert_eq!(
            from_index
                .as_array()
                .expect("matches")
                .iter()
                .collect::<Vec<_>>(),
            without_scripts
        );
        assert_eq!(from_chain.as_array().map(Vec::len), Some(jobs.len() + 1));
    }

    // Bad input: a 4xx with Blockfrost's error object, never a 5xx.
    for (path, want) in [
        ("/jobs/not-hex", 400),
        ("/jobs/00", 400),
        (&*format!("/jobs/{}", "ab".repeat(32)), 404),
        ("/jobs?page=99999999999", 400),
        ("/jobs?page=0", 400),
        ("/jobs?count=101", 400),
        ("/jobs?order=sideways", 400),
        ("/jobs?status=Dancing", 400),
        ("/providers/abc", 400),
        ("/providers/abc/payments", 400),
        (
            &*format!("/providers/{}/payments?order=asc", "ab".repeat(28)),
            400,
        ),
        (
            &*format!("/providers/{}/payments?count=0", "ab".repeat(28)),
            400,
        ),
        ("/no/such/route", 404),
        ("/matches/nonsense", 400),
        ("/matches/*?order=sideways", 400),
    ] {
        let (status, body) = get(&a, path).await;
        assert_eq!(status, want, "{path}: {body}");
        assert_eq!(body["status_code"], want, "{path}: {body}");
        assert!(
            body["error"].is_string() && body["message"].is_string(),
            "{path}: {body}"
        );
    }
    let (status, health) = get(&b, "/health").await;
    assert_eq!((status, &health["is_healthy"]), (200, &Value::Bool(true)));
    chain.handle.shutdown().await;
}
