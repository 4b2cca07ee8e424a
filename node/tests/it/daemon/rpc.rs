//! The JSON-RPC server over a real devnet: each method's happy path and bad-params path over
//! HTTP and WebSocket, the bearer token on mutating calls, and `docs/openrpc.json` against the
//! server's method list.

use ganglion_node::datadir::DataDir;
use ganglion_node::rpc::{self, Api};
use ganglion_node::wallet::Wallet;
use ganglion_rpc::error as codes;
use ganglion_rpc::types::{Balance, NodeInfo, Sent, Tip};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::WsClientBuilder;

use crate::rpc_client::{code, http};

use super::support::{devnet, settings};

/// A devnet, a node's RPC server on it with a funded wallet (devnet key 1), an empty
/// destination wallet, and a client holding the node's cookie.
struct Served {
    h: ganglion_testnet::devnet::DevnetHandle,
    w: Wallet,
    dest: Wallet,
    running: ganglion_rpc::server::Running,
    c: jsonrpsee::http_client::HttpClient,
}

async fn served(dir: &std::path::Path) -> Served {
    let h = devnet(dir).await;
    let mut s = settings(&h, &dir.join("node"));
    s.apply_env(|k| (k == "GANGLION_RPC_LISTEN").then(|| "127.0.0.1:0".to_string()))
        .expect("listen");
    let w = Wallet::create(s.clone(), Some(1)).expect("wallet");
    let dest = Wallet::create(settings(&h, &dir.join("dest")), None).expect("dest");
    let running = rpc::serve(s.clone()).await.expect("serves");
    let token = DataDir::open(s.data_dir().expect("dir"))
        .expect("dir")
        .read_rpc_cookie()
        .expect("cookie");
    let c = http(running.addr, Some(&token));
    Served {
        h,
        w,
        dest,
        running,
        c,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_answers_and_bad_params_get_codes() {
    let t = tempfile::tempdir().expect("tempdir");
    let Served {
        h,
        w,
        dest,
        running,
        c,
    } = served(t.path()).await;

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
    assert_eq!(
        after.lovelace,
        before.lovelace.get() - 4_000_000 - sent.fee.get()
    );

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

/// `shared/fixtures/field/README.md`, "Amounts over JSON-RPC", over a real server and devnet:
/// every amount in a response is a decimal string; a request's amount may be a string or a bare
/// integer (by position or by name), parsed exactly; anything else is invalid params naming
/// the field, and nothing is submitted for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amounts_are_strings_out_and_strings_or_integers_in() {
    use jsonrpsee::core::params::ObjectParams;
    use serde_json::{Value, json};

    let t = tempfile::tempdir().expect("tempdir");
    let Served {
        h,
        w,
        dest,
        running,
        c,
    } = served(t.path()).await;

    // Responses: strings, for lovelace and for every asset quantity.
    let before: Value = c
        .request("wallet_balance", rpc_params![])
        .await
        .expect("balance");
    assert_eq!(before["lovelace"], json!("1000000000000"), "{before}");
    let assets = before["assets"].as_object().expect("assets");
    assert_eq!(assets.len(), 1, "the genesis NTX: {before}");
    let (ntx_key, ntx_before) = assets.iter().next().expect("NTX");
    assert_eq!(ntx_before, &json!("1000000000"));
    let ntx_key = ntx_key.clone();

    // Requests: strings by position, then a bare integer by name; both exact.
    let by_string: Value = c
        .request("wallet_send", rpc_params![dest.address(), "3000000", "7"])
        .await
        .expect("send with strings");
    let fee_1: u64 = by_string["fee"]
        .as_str()
        .expect("the fee is a string")
        .parse()
        .expect("decimal");
    h.forge_now().await.expect("forge").expect("a block");
    let mut named = ObjectParams::new();
    named.insert("to", dest.address()).expect("to");
    named.insert("lovelace", 2_000_000u64).expect("lovelace");
    let by_integer: Sent = c
        .request("wallet_send", named)
        .await
        .expect("send with an integer");
    h.forge_now().await.expect("forge").expect("a block");
    let got = dest.balance().await.expect("dest balance");
    assert_eq!(got.lovelace, 5_000_000);
    assert_eq!(got.assets.get(&ntx_key), Some(&7));
    let after: Balance = c
        .request("wallet_balance", rpc_params![])
        .await
        .expect("balance");
    assert_eq!(
        after.lovelace,
        1_000_000_000_000 - 5_000_000 - fee_1 - by_integer.fee.get()
    );
    assert_eq!(
        after.assets.get(&ntx_key).map(|a| a.get()),
        Some(1_000_000_000 - 7)
    );
    assert_eq!(
        w.balance().await.expect("balance").lovelace,
        after.lovelace.get()
    );

    // 2^64 − 1 parses (the wallet then cannot fund it: a wallet error, not a params one).
    let e = c
        .request::<Sent, _>(
            "wallet_send",
            rpc_params![dest.address(), "18446744073709551615"],
        )
        .await
        .expect_err("cannot fund");
    assert_eq!(code(e), codes::WALLET);

    // Not amounts: invalid params, the message and `data.field` naming the field.
    let number = |text: &str| -> Value { serde_json::from_str(text).expect("json number") };
    let bad: Vec<(Vec<Value>, &str, &str)> = vec![
        (
            vec![json!(dest.address()), json!("1.5")],
            "lovelace",
            "not_integer",
        ),
        (
            vec![json!(dest.address()), json!(-1)],
            "lovelace",
            "negative",
        ),
        (
            vec![json!(dest.address()), number("1e3")],
            "lovelace",
            "not_integer",
        ),
        (vec![json!(dest.address()), json!("+7")], "lovelace", "sign"),
        (
            vec![json!(dest.address()), json!("0x10")],
            "lovelace",
            "not_decimal",
        ),
        (
            vec![json!(dest.address()), json!("18446744073709551616")],
            "lovelace",
            "too_large",
        ),
        (
            vec![json!(dest.address()), json!("3000000"), json!("-1")],
            "ntx",
            "negative",
        ),
    ];
    for (p, field, rule) in bad {
        let mut params = jsonrpsee::core::params::ArrayParams::new();
        for v in &p {
            params.insert(v).expect("param");
        }
        let e = c
            .request::<Sent, _>("wallet_send", params)
            .await
            .expect_err("refused");
        let o = match e {
            jsonrpsee::core::client::Error::Call(o) => o,
            other => panic!("{p:?}: expected a JSON-RPC error, got {other:?}"),
        };
        assert_eq!(o.code(), codes::INVALID_PARAMS, "{p:?}");
        assert!(
            o.message()
                .starts_with(&format!("invalid amount for `{field}`: ")),
            "{p:?}: {}",
            o.message()
        );
        let data: Value = serde_json::from_str(o.data().expect("data").get()).expect("data json");
        assert_eq!(data["field"], json!(field), "{p:?}");
        assert_eq!(data["rule"], json!(rule), "{p:?}");
    }
    assert_eq!(
        h.forge_now().await.expect("forge"),
        None,
        "nothing was submitted for the refused amounts"
    );
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
        Ok(a) => super::support::with_offline_namespaces(a)
            .into_module()
            .expect("the namespaces merge"),
        Err(e) => panic!("api: {e}"),
    };
    let served: Vec<String> = ganglion_rpc::server::method_names(&module)
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(documented, served);
}
