//! Bad params for every served method, one table: each answers a JSON-RPC error with the
//! expected code (never a panic or a dropped connection), and every mutating method refuses a
//! call without the bearer token before looking at anything else (alone or inside a batch:
//! the server's middleware decides, from `auth::MUTATING`). The table must name every
//! method the server serves, so a new method cannot skip it.

use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::error as codes;
use jsonrpsee::core::client::{ClientT, Error as ClientError, SubscriptionClientT};
use jsonrpsee::core::params::ArrayParams;
use jsonrpsee::http_client::{HeaderMap, HeaderValue};
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::{WsClient, WsClientBuilder};
use serde_json::{Value, json};

const TOKEN: &str = "params-test-token";
/// A well-formed CID (Kubo's empty file, CIDv1).
const CID: &str = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku";

async fn ws(addr: std::net::SocketAddr, token: Option<&str>) -> WsClient {
    let mut h = HeaderMap::new();
    if let Some(t) = token {
        h.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {t}")).expect("header"),
        );
    }
    WsClientBuilder::default()
        .set_headers(h)
        .build(format!("ws://{addr}"))
        .await
        .expect("ws client")
}

fn params(v: &[Value]) -> ArrayParams {
    let mut p = ArrayParams::new();
    for x in v {
        p.insert(x).expect("param");
    }
    p
}

/// The code of a call's error; `None` when it succeeded.
async fn call(c: &WsClient, method: &str, p: &[Value]) -> Option<i32> {
    let r = if method.ends_with("_subscribe") {
        c.subscribe::<Value, _>(method, params(p), "job_unsubscribe")
            .await
            .map(|_| ())
    } else {
        c.request::<Value, _>(method, params(p)).await.map(|_| ())
    };
    match r {
        Ok(()) => None,
        Err(ClientError::Call(o)) => Some(o.code()),
        Err(other) => panic!("{method}: expected a JSON-RPC error object, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_refuses_bad_params_with_a_code_and_mutations_need_the_token() {
    let t = tempfile::tempdir().expect("tempdir");
    let s = Settings::from_toml(&format!(
        "network = \"devnet\"\ndata_dir = \"{}\"",
        t.path().display()
    ))
    .expect("settings");
    // The namespaces `node run` attaches, the audit ones over an empty index and store.
    let module = super::support::with_offline_namespaces(Api::new(s).expect("api"))
        .into_module()
        .expect("the namespaces merge");
    let served: Vec<&str> = ganglion_rpc::server::method_names(&module);
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), TOKEN, module)
        .await
        .expect("serves");
    let c = ws(running.addr, Some(TOKEN)).await;
    let anon = ws(running.addr, None).await;
    let bad = codes::INVALID_PARAMS;
    let spec = json!({ "image": { "local": "x" } });
    // (method, bad params, code). Methods without params ignore extra ones (jsonrpsee):
    // they answer as usual, here without a key or a chain (`None`: a result).
    let table: Vec<(&str, Vec<Value>, Option<i32>)> = vec![
        ("node_info", vec![json!(1)], None),
        ("node_tip", vec![json!("x")], Some(codes::CHAIN_UNAVAILABLE)),
        // Detection needs no params and no chain: it answers (0 GPUs here is a report too).
        ("node_gpus", vec![json!(1)], None),
        ("wallet_address", vec![json!([])], Some(codes::WALLET)),
        ("wallet_balance", vec![json!({})], Some(codes::WALLET)),
        ("wallet_send", vec![json!("addr"), json!("ten")], Some(bad)),
        ("wallet_send", vec![json!(1), json!(1)], Some(bad)),
        ("job_submit", vec![json!("not an object")], Some(bad)),
        ("job_submit", vec![spec.clone()], Some(bad)),
        ("job_status", vec![json!("xyz")], Some(bad)),
        ("job_status", vec![json!(42)], Some(bad)),
        ("job_list", vec![json!(42)], Some(bad)),
        ("job_list", vec![json!("bogus")], Some(bad)),
        ("job_quote", vec![json!("not an object")], Some(bad)),
        ("job_quote", vec![spec.clone()], Some(bad)),
        // Well-formed, but this server runs no job engine.
        ("job_list", vec![json!("running")], Some(codes::JOB)),
        ("job_cancel", vec![json!("00")], Some(bad)),
        ("job_stop", vec![json!("00")], Some(bad)),
        ("job_stop", vec![json!(["x"])], Some(bad)),
        // Storage: paths must be absolute, CIDs and options valid, before anything else.
        ("storage_add", vec![json!("relative/path")], Some(bad)),
        (
            "storage_add",
            vec![json!("/tmp"), json!({ "cid_version": 2 })],
            Some(bad),
        ),
        (
            "storage_add",
            vec![json!("/tmp"), json!({ "chunker": "rabin" })],
            Some(bad),
        ),
        // Well-formed, but this server holds no blockstore.
        (
            "storage_add",
            vec![json!("/tmp")],
            Some(codes::CHAIN_UNAVAILABLE),
        ),
        ("storage_cat", vec![json!(CID), json!("rel")], Some(bad)),
        (
            "storage_cat",
            vec![json!("not-a-cid"), json!("/tmp/x")],
            Some(bad),
        ),
        (
            "storage_exportCar",
            vec![json!(CID), json!("rel")],
            Some(bad),
        ),
        (
            "storage_pieceCid",
            vec![json!("x"), json!("/tmp/x.car")],
            Some(bad),
        ),
        ("storage_pin", vec![json!("x")], Some(bad)),
        (
            "storage_unpin",
            vec![json!(CID)],
            Some(codes::CHAIN_UNAVAILABLE),
        ),
        (
            "storage_pins",
            vec![json!(1)],
            Some(codes::CHAIN_UNAVAILABLE),
        ),
        ("storage_gc", vec![], Some(codes::CHAIN_UNAVAILABLE)),
        ("job_buildLock", vec![spec.clone()], Some(bad)),
        ("job_buildLock", vec![json!({}), json!(7)], Some(bad)),
        ("tx_submit", vec![json!("zz"), json!("a0")], Some(bad)),
        ("tx_submit", vec![json!("84")], Some(bad)),
        ("job_subscribe", vec![json!("nothex")], Some(bad)),
        ("job_subscribe", vec![], Some(bad)),
        ("audit_job", vec![json!("00")], Some(bad)),
        ("audit_job", vec![json!("ab".repeat(32))], Some(codes::JOB)),
        ("audit_provider", vec![json!("not-a-key")], Some(bad)),
        ("audit_verify", vec![json!("xyz")], Some(bad)),
        ("audit_cid", vec![json!("not a cid")], Some(bad)),
        ("audit_cid", vec![json!(7)], Some(bad)),
        // A CID no lock or claim names (an empty index): an empty answer, not an error.
        (
            "audit_cid",
            vec![json!(
                "bafkreiffglgk4cxuwoiwrhizmzy2w6gizci7waw42jjmxdbd3kwp4v3afm"
            )],
            None,
        ),
        // No swarm attached, no provider key: typed errors, not panics.
        ("market_offers", vec![json!(1)], Some(codes::INTERNAL)),
        ("market_matrix", vec![json!(1)], Some(codes::INTERNAL)),
        ("provider_bond", vec![json!("x")], Some(codes::WALLET)),
        ("provider_offers", vec![], Some(codes::WALLET)),
        ("provider_unbond", vec![json!("nothex#0")], Some(bad)),
        ("provider_unbond", vec![json!(["a"])], Some(bad)),
        // An empty index: this node has no bond to spend.
        ("provider_unbond", vec![], Some(codes::JOB)),
        (
            "provider_withdraw",
            vec![json!(format!("{}#x", "ab".repeat(32)))],
            Some(bad),
        ),
        (
            "provider_withdraw",
            vec![json!(format!("{}#0", "ab".repeat(32)))],
            Some(codes::JOB),
        ),
        ("provider_post", vec![json!("-1")], Some(bad)),
        (
            "provider_post",
            vec![json!("1000"), json!("two")],
            Some(bad),
        ),
        // Well-formed, but this server is no provider: it has no keys to bond.
        ("provider_post", vec![json!("1000")], Some(codes::JOB)),
        ("provider_topUp", vec![json!("x")], Some(bad)),
        (
            "provider_topUp",
            vec![json!("1"), json!("nothex#0")],
            Some(bad),
        ),
        // An empty index: no active bond to top up.
        ("provider_topUp", vec![json!("1")], Some(codes::JOB)),
        ("job_logs", vec![json!("xyz")], Some(bad)),
        ("job_logs", vec![json!(7)], Some(bad)),
        ("job_logs", vec![json!("ab".repeat(32))], Some(codes::JOB)),
        ("job_liveLogs", vec![json!("xyz")], Some(bad)),
        ("job_liveLogs", vec![json!(7)], Some(bad)),
        // Well-formed, but this server runs no job engine.
        (
            "job_liveLogs",
            vec![json!("ab".repeat(32))],
            Some(codes::JOB),
        ),
        ("job_outputs", vec![json!("nothex")], Some(bad)),
        (
            "job_outputs",
            vec![json!("ab".repeat(32)), json!("relative/dir")],
            Some(bad),
        ),
        (
            "job_outputs",
            vec![json!("ab".repeat(32))],
            Some(codes::JOB),
        ),
        // An unknown subscription id is not an error: the answer is `false`.
        ("job_unsubscribe", vec![json!({"a": 1})], None),
    ];
    for (method, p, want) in &table {
        assert_eq!(
            call(&c, method, p).await,
            *want,
            "{method} {p:?} answers {want:?}"
        );
    }
    let mut named: Vec<&str> = table.iter().map(|(m, _, _)| *m).collect();
    named.sort_unstable();
    named.dedup();
    assert_eq!(named, served, "the table covers every served method");

    // Mutating methods without the token: refused first, whatever the params.
    for m in ganglion_rpc::auth::MUTATING {
        assert!(served.contains(m), "{m} is served");
        let p: Vec<Value> = match *m {
            "wallet_send" => vec![json!("addr_test1"), json!(1_000_000)],
            "job_submit" => vec![spec.clone()],
            "job_cancel" | "job_stop" => vec![json!(hex::encode([1u8; 32]))],
            "storage_add" => vec![json!("/tmp")],
            "storage_cat" | "storage_exportCar" | "storage_pieceCid" => {
                vec![json!(CID), json!("/tmp/ganglion-unauthorized")]
            }
            "storage_pin" | "storage_unpin" => vec![json!(CID)],
            "storage_gc" => vec![],
            "job_buildLock" => vec![spec.clone(), json!("addr_test1")],
            "tx_submit" => vec![json!("84"), json!("a0")],
            "job_outputs" => vec![json!(hex::encode([1u8; 32])), json!("/tmp")],
            "provider_unbond" | "provider_withdraw" => vec![],
            "provider_post" | "provider_topUp" => vec![json!("1")],
            other => panic!("no unauthorized case for {other}"),
        };
        assert_eq!(
            call(&anon, m, &p).await,
            Some(codes::UNAUTHORIZED),
            "{m} without a token"
        );
    }
    // Every other method needs no token: `auth::MUTATING` is the whole table.
    for (method, p, _) in table
        .iter()
        .filter(|(m, _, _)| !ganglion_rpc::auth::MUTATING.contains(m))
    {
        assert_ne!(
            call(&anon, method, p).await,
            Some(codes::UNAUTHORIZED),
            "{method} needs no token"
        );
    }
    // In a batch too: the mutating call is refused in place, the read beside it answered.
    let mut batch = jsonrpsee::core::params::BatchRequestBuilder::new();
    batch.insert("node_info", rpc_params![]).expect("param");
    batch
        .insert("job_cancel", rpc_params![hex::encode([1u8; 32])])
        .expect("param");
    let answers = anon
        .batch_request::<Value>(batch)
        .await
        .expect("the batch is answered");
    let answers: Vec<_> = answers.into_iter().collect();
    assert_eq!(answers.len(), 2);
    assert!(answers[0].is_ok(), "node_info answered: {:?}", answers[0]);
    assert_eq!(
        answers[1].as_ref().map_err(|e| e.code()).err(),
        Some(codes::UNAUTHORIZED),
        "job_cancel inside a batch without a token"
    );
    // Reads need no token, and the connection survived every refusal above.
    let info: Value = anon
        .request("node_info", rpc_params![])
        .await
        .expect("info");
    assert_eq!(info["network"], "devnet");
    running.handle.stop().expect("stop");
}
