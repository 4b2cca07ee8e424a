//! The JSON-RPC server over a real devnet: each method's happy path and bad-params path over
//! HTTP and WebSocket, the bearer token on mutating calls, and `docs/openrpc.json` against the
//! server's method list.

use ganglion_node::datadir::DataDir;
use ganglion_node::rpc::{self, Api};
use ganglion_node::wallet::Wallet;
use ganglion_rpc::error as codes;
use ganglion_rpc::types::{Balance, NodeInfo, Sent, Tip};
use jsonrpsee::core::client::{ClientT, Error as ClientError};
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::WsClientBuilder;

use crate::support::{devnet, settings};

fn http(addr: std::net::SocketAddr, token: Option<&str>) -> HttpClient {
    let mut h = HeaderMap::new();
    if let Some(t) = token {
        h.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {t}")).expect("header"),
        );
    }
    HttpClientBuilder::default()
        .set_headers(h)
        .build(format!("http://{addr}"))
        .expect("client")
}

fn code(e: ClientError) -> i32 {
    match e {
        ClientError::Call(o) => o.code(),
        other => panic!("expected a JSON-RPC error object, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_answers_and_bad_params_get_codes() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let mut s = settings(&h, &t.path().join("node"));
    s.apply_env(|k| (k == "GANGLION_RPC_LISTEN").then(|| "127.0.0.1:0".to_string()))
        .expect("listen");
    let w = Wallet::create(s.clone(), Some(1)).expect("wallet");
    let dest = Wallet::create(settings(&h, &t.path().join("dest")), None).expect("dest");
    let running = rpc::serve(s.clone()).await.expect("serves");
    let token = DataDir::open(s.data_dir().expect("dir"))
        .expect("dir")
        .read_rpc_cookie()
        .expect("cookie");
    let c = http(running.addr, Some(&token));

    let info: NodeInfo = c.request("node_info", rpc_params![]).await.expect("info");
    assert_eq!(info.network, "devnet");
    assert_eq!(info.magic, h.magic());
    assert_eq!(info.wallet_address.as_deref(), Some(w.address().as_str()));
    let tip: Option<Tip> = c.request("node_tip", rpc_params![]).await.expect("tip");
    assert_eq!(tip, None, "no block yet: the tip is the origin");
    // GPUs as this machine sees them: without the NVIDIA driver, the reason is in the notes; a
    // node that is not a provider ran no container check.
    let gpus: ganglion_rpc::types::GpuReport =
        c.request("node_gpus", rpc_params![]).await.expect("gpus");
    assert_eq!(gpus.containers, None, "{gpus:?}");
    if !std::path::Path::new("/dev/nvidiactl").exists() {
        assert!(
            gpus.notes
                .iter()
                .any(|n| n.contains("NVIDIA driver library (libnvidia-ml.so.1) not found")),
            "{gpus:?}"
        );
    }
    let addr: String = c
        .request("wallet_address", rpc_params![])
        .await
        .expect("address");
    assert_eq!(addr, w.address());
    let before: Balance = c
        .request("wallet_balance", rpc_params![])
        .await
        .expect("balance");
    assert_eq!(before.lovelace, 1_000_000_000_000);

    let sent: Sent = c
        .request("wallet_send", rpc_params![dest.address(), 4_000_000u64])
        .await
        .expect("send");
    assert_eq!(sent.tx_id.len(), 64);
    let block = h.forge_now().await.expect("forge").expect("a block");
    let tip: Option<Tip> = c.request("node_tip", rpc_params![]).await.expect("tip");
    assert_eq!(
        tip.map(|t| (t.slot, t.hash)),
        Some((block.slot, block.hash.to_string()))
    );
    let after: Balance = c
        .request("wallet_balance", rpc_params![])
        .await
        .expect("balance");
    assert_eq!(after.lovelace, before.lovelace - 4_000_000 - sent.fee);

    // Bad params: wrong types, missing, unparsable address, other network, below min-UTxO.
    let bad = [
        rpc_params![dest.address(), "four"],
        rpc_params![dest.address()],
        rpc_params![],
        rpc_params!["not-an-address", 4_000_000u64],
        rpc_params![
            dest.key()
                .address(pallas_addresses::Network::Mainnet)
                .to_bech32()
                .expect("bech32"),
            4_000_000u64
        ],
        rpc_params![dest.address(), 1u64],
        rpc_params![dest.address(), -5i64],
    ];
    for p in bad {
        let e = c
            .request::<Sent, _>("wallet_send", p)
            .await
            .expect_err("bad params");
        assert_eq!(code(e), codes::INVALID_PARAMS);
    }
    // Too much: the wallet cannot fund it.
    let e = c
        .request::<Sent, _>("wallet_send", rpc_params![dest.address(), u64::MAX / 2])
        .await
        .expect_err("insufficient funds");
    assert_eq!(code(e), codes::WALLET);
    let e = c
        .request::<Sent, _>("no_suchMethod", rpc_params![])
        .await
        .expect_err("unknown method");
    assert_eq!(code(e), -32601);
    // The server survived all of that.
    let again: NodeInfo = c
        .request("node_info", rpc_params![])
        .await
        .expect("still up");
    assert_eq!(again, info);

    // WebSocket on the same port.
    let ws = WsClientBuilder::default()
        .build(format!("ws://{}", running.addr))
        .await
        .expect("ws");
    let ws_addr: String = ws
        .request("wallet_address", rpc_params![])
        .await
        .expect("ws call");
    assert_eq!(ws_addr, w.address());
    running.handle.stop().expect("stop");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_calls_without_the_token_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let mut s = settings(&h, &t.path().join("node"));
    s.apply_env(|k| (k == "GANGLION_RPC_LISTEN").then(|| "127.0.0.1:0".to_string()))
        .expect("listen");
    let w = Wallet::create(s.clone(), Some(2)).expect("wallet");
    let running = rpc::serve(s).await.expect("serves");
    for c in [http(running.addr, None), http(running.addr, Some("wrong"))] {
        let e = c
            .request::<Sent, _>("wallet_send", rpc_params![w.address(), 2_000_000u64])
            .await
            .expect_err("refused");
        assert_eq!(code(e), codes::UNAUTHORIZED);
        // Reads need no token.
        let a: String = c
            .request("wallet_address", rpc_params![])
            .await
            .expect("read");
        assert_eq!(a, w.address());
    }
    let ws = WsClientBuilder::default()
        .build(format!("ws://{}", running.addr))
        .await
        .expect("ws");
    let e = ws
        .request::<Sent, _>("wallet_send", rpc_params![w.address(), 2_000_000u64])
        .await
        .expect_err("refused over ws");
    assert_eq!(code(e), codes::UNAUTHORIZED);
    assert_eq!(
        h.forge_now().await.expect("forge"),
        None,
        "nothing was submitted"
    );
    running.handle.stop().expect("stop");
    h.shutdown().await;
}

#[test]
fn openrpc_document_lists_exactly_the_served_methods() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openrpc.json"))
            .expect("docs/openrpc.json");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let mut documented: Vec<String> = doc["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .map(|m| m["name"].as_str().expect("name").to_string())
        .collect();
    documented.sort();
    let s = ganglion_node::settings::Settings::from_toml(
        "network = \"devnet\"\ndata_dir = \"/nonexistent/ganglion-openrpc\"",
    )
    .expect("settings");
    // No key and an unreachable data dir are fine: only the method list is read. The
    // namespaces are attached as `node run` attaches them (audit over an empty index).
    let api = Api::new(s);
    let module = match api {
        Ok(a) => crate::support::with_offline_namespaces(a).into_module(),
        Err(e) => panic!("api: {e}"),
    };
    let served: Vec<String> = ganglion_rpc::server::method_names(&module)
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(documented, served);
}
