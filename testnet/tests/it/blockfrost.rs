//! The devnet's HTTP API (Blockfrost's and Kupo's conventions) asked as a client would:
//! a payment submitted over HTTP is found and read back as the ledger has it; scripts are
//! evaluated with the units the ledger measures (also against outputs not on the chain yet);
//! bad input gets a 4xx in Blockfrost's error shape.

use std::net::SocketAddr;

use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::devnet::{self, DevnetConfig, DevnetHandle};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::{decode_tx, phase1, tx_hash};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use serde_json::{Value, json};

use crate::common::*;
use crate::plutus::{ALWAYS, BUDGET, Locked, NEVER, lock, spend};

async fn start_with_http(dir: &std::path::Path) -> (DevnetHandle, SocketAddr) {
    let mut config = DevnetConfig::new(genesis(), dir);
    config.http_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let h = devnet::start(config).await.expect("devnet starts");
    let addr = h.http_addr().expect("the HTTP API is served");
    (h, addr)
}

/// One request; the status and the body as JSON (every answer of the API is JSON).
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    let res = client.request(req).await.expect("an answer");
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    let json = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{method} {path}: not JSON ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    (status, json)
}

async fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    call(addr, "GET", path, None, Vec::new()).await
}

async fn get_ok(addr: SocketAddr, path: &str) -> Value {
    let (status, v) = get(addr, path).await;
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

fn bech32(seed: u32) -> String {
    DevKey::from_seed(seed)
        .address(Network::Testnet)
        .to_bech32()
        .expect("bech32")
}

fn lovelace(amount: &Value) -> u64 {
    amount
        .as_array()
        .expect("amount list")
        .iter()
        .find(|a| a["unit"] == "lovelace")
        .and_then(|a| a["quantity"].as_str())
        .and_then(|q| q.parse().ok())
        .expect("a lovelace quantity")
}

/// Submit `tx` over HTTP (through a doubled slash, as clients joining a base URL ending in `/`
/// send it) and wait for its block; its id and block number.
async fn submit_over_http(h: &DevnetHandle, addr: SocketAddr, tx: Vec<u8>) -> (String, u64) {
    let mut events = h.events();
    let (status, id) = call(addr, "POST", "//tx/submit", Some("application/cbor"), tx).await;
    assert_eq!(status, 200, "{id}");
    let id = id.as_str().expect("the id as a JSON string").to_owned();
    let hash: [u8; 32] = hex::decode(&id).expect("hex").try_into().expect("32 bytes");
    let number = wait_included(&mut events, pallas_crypto::hash::Hash::new(hash)).await;
    (id, number)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_submitted_over_http_is_read_back_as_the_ledger_has_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, api) = start_with_http(dir.path()).await;
    assert_eq!(get_ok(api, "/health").await, json!({ "is_healthy": true }));
    let (status, v) = get(api, "/blocks/latest").await;
    assert_eq!((status, &v["status_code"]), (404, &json!(404)), "{v}");

    // The parameters a builder pays by are the ledger's.
    let p = &h.genesis().protocol_params;
    let params = get_ok(api, "/epochs/latest/parameters").await;
    assert_eq!(params["min_fee_a"], p.min_fee_a);
    assert_eq!(params["min_fee_b"], p.min_fee_b);
    assert_eq!(params["max_tx_size"], p.max_tx_size);
    assert_eq!(
        params["coins_per_utxo_size"],
        p.coins_per_utxo_byte.to_string()
    );
    assert_eq!(params["max_tx_ex_mem"], p.max_tx_ex_units.mem.to_string());
    assert_eq!(
        params["cost_models_raw"]["PlutusV3"],
        json!(p.cost_model_v3)
    );
    assert_eq!(params["collateral_percent"], p.collateral_percentage);

    // Submission: the content type is checked, a malformed transaction names its rule.
    let (tx1, spec1) = payment(&h, 1, 2, 5_000_000);
    let (status, v) = call(api, "POST", "/tx/submit", Some("text/plain"), tx1.clone()).await;
    assert_eq!(status, 415, "{v}");
    let (status, v) = call(
        api,
        "POST",
        "/tx/submit",
        Some("application/cbor"),
        vec![0x84, 1, 2],
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("Malformed") || m.contains("not a Conway")),
        "{v}"
    );
    let fee1 = decode_tx(&tx1).expect("tx").transaction_body.fee;
    let (id1, block1) = submit_over_http(&h, api, tx1).await;

    // The transaction, where it is and what it cost.
    let tx = get_ok(api, &format!("/txs/{id1}")).await;
    let b = h
        .chain()
        .store()
        .block(block1)
        .expect("store")
        .expect("block");
    assert_eq!(tx["hash"], id1.as_str());
    assert_eq!(tx["block"], b.at.hash.to_string());
    assert_eq!(tx["block_height"], block1);
    assert_eq!(tx["slot"], b.at.slot);
    assert_eq!(tx["index"], 0);
    assert_eq!(tx["fees"], fee1.to_string());
    assert_eq!(tx["valid_contract"], true);
    assert!(tx["size"].as_u64().is_some_and(|s| s > 100), "{tx}");
    assert_eq!(lovelace(&tx["output_amount"]) + fee1, {
        let input = spec1.inputs[0];
        let raw = h.genesis().initial_utxos().expect("genesis");
        let (_, o) = raw
            .iter()
            .find(|(r, _)| *r == input)
            .expect("a genesis input");
        phase1::output_facts(o).expect("output").value.coin as u64
    });

    // Its inputs resolved, its outputs as paid.
    let utxos = get_ok(api, &format!("/txs/{id1}/utxos")).await;
    let inputs = utxos["inputs"].as_array().expect("inputs");
    assert_eq!(inputs.len(), 1, "{utxos}");
    assert_eq!(inputs[0]["tx_hash"], hex::encode(spec1.inputs[0].tx_hash));
    assert_eq!(inputs[0]["output_index"], spec1.inputs[0].index);
    assert_eq!(inputs[0]["address"], bech32(1));
    assert_eq!(inputs[0]["collateral"], false);
    let outputs = utxos["outputs"].as_array().expect("outputs");
    assert_eq!(outputs[0]["address"], bech32(2));
    assert_eq!(lovelace(&outputs[0]["amount"]), 5_000_000);
    assert_eq!(outputs[1]["address"], bech32(1));
    let sum_out: u64 = outputs.iter().map(|o| lovelace(&o["amount"])).sum();
    assert_eq!(lovelace(&inputs[0]["amount"]), sum_out + fee1, "balanced");
    assert!(outputs.iter().all(|o| o["consumed_by_tx"].is_null()));
    assert_eq!(
        get_ok(api, &format!("/txs/{id1}/metadata/cbor")).await,
        json!([])
    );

    // A second payment spends the first one's change: that output says by which transaction.
    let (tx2, spec2) = payment(&h, 1, 3, 7_000_000);
    assert_eq!(
        spec2.inputs[0],
        TxoRef {
            tx_hash: hex::decode(&id1).expect("hex").try_into().expect("32"),
            index: 1
        }
    );
    let (id2, block2) = submit_over_http(&h, api, tx2).await;
    let utxos = get_ok(api, &format!("/txs/{id1}/utxos")).await;
    assert_eq!(utxos["outputs"][1]["consumed_by_tx"], id2.as_str());
    assert!(utxos["outputs"][0]["consumed_by_tx"].is_null());
    let utxos2 = get_ok(api, &format!("/txs/{id2}/utxos")).await;
    assert_eq!(utxos2["inputs"][0]["tx_hash"], id1.as_str());
    assert_eq!(utxos2["inputs"][0]["output_index"], 1);

    // The address's unspent outputs: the genesis fund and the payment, oldest first, in pages.
    let all = get_ok(api, &format!("/addresses/{}/utxos", bech32(2))).await;
    let all = all.as_array().expect("list").clone();
    let last = all.last().expect("the payment is listed");
    assert_eq!(
        last["tx_hash"],
        id1.as_str(),
        "the newest comes last: {all:?}"
    );
    assert_eq!(last["output_index"], 0);
    assert_eq!(last["block"], b.at.hash.to_string());
    assert_eq!(lovelace(&last["amount"]), 5_000_000);
    assert!(
        all[..all.len() - 1].iter().all(|u| u["block"].is_null()),
        "genesis outputs first"
    );
    let mut paged = Vec::new();
    for page in 1..=all.len() + 1 {
        let v = get_ok(
            api,
            &format!("/addresses/{}/utxos?count=1&page={page}", bech32(2)),
        )
        .await;
        paged.extend(v.as_array().expect("list").iter().cloned());
    }
    assert_eq!(paged, all);
    let desc = get_ok(api, &format!("/addresses/{}/utxos?order=desc", bech32(2))).await;
    assert_eq!(
        desc.as_array()
            .expect("list")
            .iter()
            .rev()
            .cloned()
            .collect::<Vec<_>>(),
        all
    );
    // What the ledger holds at the address, no more, no less.
    let to2 = DevKey::from_seed(2).address(Network::Testnet).to_vec();
    assert_eq!(h.chain().utxos_at(&to2).expect("utxos").len(), all.len());

    // Blocks: the latest is the tip; by height and by hash alike; linked to their neighbours.
    let latest = get_ok(api, "/blocks/latest").await;
    let tip = h.tip().expect("tip");
    assert_eq!(latest["height"], tip.number);
    assert_eq!(latest["hash"], tip.hash.to_string());
    let b2 = get_ok(api, &format!("/blocks/{block2}")).await;
    assert_eq!(
        b2,
        get_ok(
            api,
            &format!("/blocks/{}", b2["hash"].as_str().expect("hash"))
        )
        .await
    );
    assert_eq!(b2["tx_count"], 1);
    let b1 = get_ok(api, &format!("/blocks/{block1}")).await;
    assert_eq!(b1["next_block"], b2["hash"]);
    assert_eq!(b2["previous_block"], b1["hash"]);
    assert_eq!(b1["fees"], fee1.to_string());

    // Kupo: matches by address, by credential, by output reference and by asset.
    let by_address = get_ok(api, &format!("/matches/{}", bech32(2))).await;
    let by_address = by_address.as_array().expect("matches").clone();
    assert_eq!(by_address.len(), all.len(), "{by_address:?}");
    let m = by_address
        .iter()
        .find(|m| m["transaction_id"] == id1.as_str())
        .expect("the payment matches");
    assert_eq!(m["output_index"], 0);
    assert_eq!(m["value"]["coins"], 5_000_000);
    assert_eq!(m["created_at"]["slot_no"], b.at.slot);
    assert_eq!(m["created_at"]["header_hash"], b.at.hash.to_string());
    assert!(m["spent_at"].is_null());
    let cred = DevKey::from_seed(2).key_hash().to_string();
    let by_cred = get_ok(api, &format!("/matches/{cred}/*")).await;
    assert_eq!(by_cred.as_array().expect("matches"), &by_address);
    let of_tx1 = get_ok(api, &format!("/matches/*@{id1}")).await;
    assert_eq!(
        of_tx1.as_array().expect("matches").len(),
        1,
        "the change was spent: {of_tx1}"
    );
    let policy = h.genesis().ntx_policy_id().expect("policy").to_string();
    let ntx = get_ok(api, &format!("/matches/{policy}.*")).await;
    let ntx = ntx.as_array().expect("matches");
    assert!(!ntx.is_empty());
    assert!(
        ntx.iter().all(|m| m["value"]["assets"]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with(&policy)))),
        "{ntx:?}"
    );
    assert!(
        ntx.iter().any(|m| m["transaction_id"] == id2.as_str()),
        "key 1's change holds its NTX"
    );
    assert_eq!(
        get_ok(api, &format!("/matches/{}?spent", bech32(2))).await,
        json!([])
    );
    h.shutdown().await;
}

/// A script address paying to `script`'s hash.
fn script_address(script: &[u8]) -> String {
    let (hash, _, _) = phase1::plutus(2, script);
    ShelleyAddress::new(
        Network::Testnet,
        ShelleyPaymentPart::script_hash(hash),
        ShelleyDelegationPart::Null,
    )
    .to_bech32()
    .expect("bech32")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_evaluated_with_the_units_the_ledger_measures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, api) = start_with_http(dir.path()).await;
    // A spend of an always-succeeds script (its lock pending in the mempool, as the ledger
    // lets a chained spend see it).
    let l = lock(&h, ALWAYS).await;
    let tx = spend(&h, &l, BUDGET, false);
    let measured = h.chain().dry_run(&tx).expect("dry run").ex_units;
    let units = json!({ "spend:0": { "memory": measured.mem, "steps": measured.steps } });
    for body in [hex::encode(&tx).into_bytes(), tx.clone()] {
        let (status, v) = call(
            api,
            "POST",
            "/utils/txs/evaluate",
            Some("application/cbor"),
            body,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["result"]["EvaluationResult"], units, "{v}");
    }

    // A failing script: the failure names the redeemer. (Its lock spends the first lock's
    // change, once that is confirmed.)
    let mut events = h.events();
    wait_included(
        &mut events,
        pallas_crypto::hash::Hash::new(l.script_input.tx_hash),
    )
    .await;
    let never = lock(&h, NEVER).await;
    let bad = spend(&h, &never, BUDGET, false);
    let (status, v) = call(
        api,
        "POST",
        "/utils/txs/evaluate",
        Some("application/cbor"),
        bad,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["result"]["EvaluationFailure"]["ScriptFailures"]["spend:0"].is_array(),
        "{v}"
    );

    // A spend of an output not on the chain: unknown without it, measured with it given as
    // an additional UTxO (what a builder chaining transactions sends).
    let unborn = Locked {
        script: l.script.clone(),
        script_input: TxoRef {
            tx_hash: [7; 32],
            index: 0,
        },
        collateral: l.collateral,
        collateral_lovelace: l.collateral_lovelace,
    };
    let chained = spend(&h, &unborn, BUDGET, false);
    let (_, v) = call(
        api,
        "POST",
        "/utils/txs/evaluate",
        Some("application/cbor"),
        hex::encode(&chained).into_bytes(),
    )
    .await;
    assert_eq!(
        v["result"]["EvaluationFailure"]["UnknownInputs"],
        json!([{ "txId": hex::encode([7u8; 32]), "index": 0 }]),
        "{v}"
    );
    let with = json!({
        "cbor": hex::encode(&chained),
        "additionalUtxoset": [[
            { "txId": hex::encode([7u8; 32]), "index": 0 },
            { "address": script_address(&l.script), "value": { "coins": 10_000_000 }, "datum": "182a" }
        ]],
    });
    let (status, v) = call(
        api,
        "POST",
        "/utils/txs/evaluate/utxos",
        Some("application/json"),
        serde_json::to_vec(&with).expect("json"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let got = &v["result"]["EvaluationResult"]["spend:0"];
    assert!(got["memory"].as_u64().is_some_and(|m| m > 0), "{v}");
    assert_eq!(
        got, &units["spend:0"],
        "the same script and redeemer cost the same"
    );
    // An additional output never hides one on the chain: the always-succeeds spend, with its
    // script input offered again as a key-locked output (which would make its redeemer
    // extraneous), still costs what the chain's output makes it cost.
    let shadow = json!({
        "cbor": hex::encode(&tx),
        "additionalUtxoset": [[
            { "txId": hex::encode(l.script_input.tx_hash), "index": l.script_input.index },
            { "address": bech32(1), "value": { "coins": 10_000_000 } }
        ]],
    });
    let (status, v) = call(
        api,
        "POST",
        "/utils/txs/evaluate/utxos",
        Some("application/json"),
        serde_json::to_vec(&shadow).expect("json"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["EvaluationResult"], units, "{v}");
    // Bad additional outputs are named.
    let bad_addr = json!({
        "cbor": hex::encode(&chained),
        "additionalUtxoset": [[{ "txId": hex::encode([7u8; 32]), "index": 0 }, { "address": "addr_test1nope", "value": { "coins": 1 } }]],
    });
    let (status, v) = call(
        api,
        "POST",
        "/utils/txs/evaluate/utxos",
        Some("application/json"),
        serde_json::to_vec(&bad_addr).expect("json"),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"].as_str().is_some_and(|m| m.contains("bech32")),
        "{v}"
    );
    let id = tx_hash(&decode_tx(&tx).expect("tx"));
    assert_eq!(id, h.chain().dry_run(&tx).expect("still valid").tx_hash);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_in_blockfrosts_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, api) = start_with_http(dir.path()).await;
    let addr = bech32(1);
    let unknown = "ab".repeat(32);
    let cases: Vec<(&str, String, u16)> = vec![
        ("GET", "/addresses/addr_test1nope/utxos".into(), 400),
        ("GET", format!("/addresses/{addr}/utxos?page=0"), 400),
        (
            "GET",
            format!("/addresses/{addr}/utxos?page=99999999999"),
            400,
        ),
        ("GET", format!("/addresses/{addr}/utxos?count=101"), 400),
        ("GET", format!("/addresses/{addr}/utxos?order=up"), 400),
        ("GET", "/txs/zz".into(), 400),
        ("GET", format!("/txs/{unknown}"), 404),
        ("GET", format!("/txs/{unknown}/utxos"), 404),
        ("GET", format!("/txs/{unknown}/metadata/cbor"), 404),
        ("GET", format!("/blocks/{unknown}"), 404),
        ("GET", "/blocks/99999".into(), 404),
        ("GET", "/blocks/nope".into(), 400),
        ("GET", "/scripts/zz".into(), 400),
        ("GET", format!("/scripts/{}", "ab".repeat(28)), 404),
        ("GET", "/matches/nonsense".into(), 400),
        ("GET", format!("/matches/*@{unknown}?order=sideways"), 400),
        ("GET", "/no/such/route".into(), 404),
        ("POST", "/utils/txs/evaluate".into(), 400),
        ("POST", "/utils/txs/evaluate/utxos".into(), 400),
    ];
    for (method, path, want) in cases {
        let ct = (method == "POST").then_some("application/json");
        let body = if path.ends_with("/utxos") && method == "POST" {
            b"{\"cbor\": 5}".to_vec()
        } else {
            b"zz".to_vec()
        };
        let (status, v) = call(api, method, &path, ct, body).await;
        assert_eq!(status, want, "{method} {path}: {v}");
        assert_eq!(v["status_code"], want, "{method} {path}: {v}");
        assert!(v["error"].is_string() && v["message"].is_string(), "{v}");
    }
    h.shutdown().await;
}
