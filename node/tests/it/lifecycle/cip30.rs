//! The CIP-30 flow with a key held only by this test (a stand-in for a browser wallet; the
//! node's data dir never sees it): `job_buildLock` returns the unsigned lock, the test signs
//! the body hash (ed25519 over blake2b-256 of the body) and builds the witness set as
//! `signTx` would, `tx_submit` joins and submits it. The lock lands with the right escrow
//! datum, the wallet paid the budget, the node adopts the job (Locked → Matching) and
//! `job_subscribe` streams its transitions over WebSocket until the cancel ends it.

use ed25519_dalek::Signer;
use ganglion_indexer::JobStatus as ChainStatus;
use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::error as codes;
use ganglion_rpc::types::{JobEvent, JobStatus, TxSubmitted, UnsignedLock};
use jsonrpsee::core::client::{ClientT, Error as ClientError, SubscriptionClientT};
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::WsClientBuilder;
use pallas_codec::minicbor::{Decoder, Encoder};

use super::support::{self, Chain, dev_key, hash_of, wait_for};

const TOKEN: &str = "cip30-test-token";

fn headers(token: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(t) = token {
        h.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {t}")).expect("header"),
        );
    }
    h
}

fn http(addr: std::net::SocketAddr, token: Option<&str>) -> HttpClient {
    HttpClientBuilder::default()
        .set_headers(headers(token))
        .build(format!("http://{addr}"))
        .expect("client")
}

fn code(e: ClientError) -> i32 {
    match e {
        ClientError::Call(o) => o.code(),
        other => panic!("expected a JSON-RPC error object, got {other:?}"),
    }
}

/// A one-GPU job nobody will run (no provider joins): it stays in Matching until cancelled.
fn spec() -> serde_json::Value {
    serde_json::json!({
        "image": { "local": "ganglion/cip30-never-runs:latest" },
        "command": ["true"],
        "gpus": { "count": 1 },
        "limits": { "max_duration_s": 60, "max_rate_ntx_per_gpu_hour": support::RATE },
        "budget_ntx": 750_000,
        "deadline_ms": ganglion_p2p::now_ms() + 600_000,
    })
}

/// What a CIP-30 wallet does in `signTx`: blake2b-256 of the body, ed25519 over it, returned
/// as a witness set `{0: [[vkey, signature]]}` (an untagged list).
fn sign_like_a_wallet(tx: &[u8], key: &ed25519_dalek::SigningKey) -> ([u8; 32], Vec<u8>) {
    let mut d = Decoder::new(tx);
    d.array().expect("tx array");
    let start = d.position();
    d.skip().expect("body");
    let id: [u8; 32] = *pallas_crypto::hash::Hasher::<256>::hash(&tx[start..d.position()]);
    let sig = key.sign(&id);
    let mut e = Encoder::new(Vec::new());
    e.map(1).expect("w").u64(0).expect("w").array(1).expect("w");
    e.array(2)
        .expect("w")
        .bytes(&key.verifying_key().to_bytes())
        .expect("w")
        .bytes(&sig.to_bytes())
        .expect("w");
    (id, e.into_writer())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_signed_outside_the_node_is_submitted_adopted_and_streamed() {
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    // The wallet: devnet key 2, known to this test only.
    let wallet = dev_key(2);
    support::fresh_seed(&chain, &wallet).await;
    let wallet_hash = hash_of(&wallet);
    let wallet_addr = pallas_addresses::Address::from_bytes(
        &ganglion_contracts::blueprint::key_address(chain.env.network, &wallet_hash),
    )
    .expect("address")
    .to_bech32()
    .expect("bech32");
    let settings = Settings::from_toml(&format!(
        "network = \"devnet\"\ndata_dir = \"{}\"",
        root.join("rpc").display()
    ))
    .expect("settings");
    let module = Api::new(settings)
        .expect("api")
        .with_engine(orch.engine.handle())
        .into_module()
        .expect("the namespaces merge");
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), TOKEN, module)
        .await
        .expect("serves");
    let c = http(running.addr, Some(TOKEN));
    let anon = http(running.addr, None);
    let wallet_ntx = chain.ntx_of(&wallet_hash);
    let node_ntx = chain.ntx_of(&orch.key_hash);
    assert!(wallet_ntx >= 750_000, "the wallet holds NTX at genesis");

    let e = anon
        .request::<UnsignedLock, _>("job_buildLock", rpc_params![spec(), wallet_addr.clone()])
        .await
        .expect_err("no token");
    assert_eq!(code(e), codes::UNAUTHORIZED);
    let e = c
        .request::<UnsignedLock, _>("job_buildLock", rpc_params![spec(), "addr_test1nope"])
        .await
        .expect_err("bad address");
    assert_eq!(code(e), codes::INVALID_PARAMS);

    let lock: UnsignedLock = c
        .request("job_buildLock", rpc_params![spec(), wallet_addr.clone()])
        .await
        .expect("built");
    assert_eq!(
        lock.orchestrator,
        hex::encode(orch.key_hash),
        "node is orchestrator"
    );
    assert!(lock.fee > 150_000, "a real fee: {}", lock.fee);
    let tx = hex::decode(&lock.tx_cbor_hex).expect("hex");
    let (id, witnesses) = sign_like_a_wallet(&tx, &wallet);
    assert_eq!(hex::encode(id), lock.tx_id, "the id is the body's hash");

    // A signature by the wrong key over the right hash is refused before the ledger.
    let (_, forged) = sign_like_a_wallet(&tx, &dev_key(4));
    let before_bad = chain.ntx_of(&wallet_hash);
    let e = anon
        .request::<TxSubmitted, _>(
            "tx_submit",
            rpc_params![lock.tx_cbor_hex.clone(), hex::encode(&witnesses)],
        )
        .await
        .expect_err("no token");
    assert_eq!(code(e), codes::UNAUTHORIZED);
    let mut corrupt = witnesses.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let e = c
        .request::<TxSubmitted, _>(
            "tx_submit",
            rpc_params![lock.tx_cbor_hex.clone(), hex::encode(&corrupt)],
        )
        .await
        .expect_err("corrupt signature");
    assert_eq!(code(e), codes::INVALID_PARAMS);
    // Valid signature, wrong key: the ledger refuses (missing witness for the wallet's inputs).
    let e = c
        .request::<TxSubmitted, _>(
            "tx_submit",
            rpc_params![lock.tx_cbor_hex.clone(), hex::encode(&forged)],
        )
        .await
        .expect_err("wrong key");
    assert_eq!(code(e), codes::TX_REJECTED);
    assert_eq!(chain.ntx_of(&wallet_hash), before_bad, "nothing moved");
    let statuses: Vec<JobStatus> = c
        .request("job_status", rpc_params![lock.job_id.clone()])
        .await
        .expect("status");
    assert_eq!(statuses.len(), 1, "the refused lock left a record");
    assert_eq!(
        statuses[0].state, "cancelled",
        "a refused lock ends its record"
    );
    assert!(statuses[0].last_error.is_some());

    // The refused attempt ended that record: a fresh build gets a fresh job id, the wallet
    // signs, and the node adopts it.
    support::fresh_seed(&chain, &wallet).await;
    let lock: UnsignedLock = c
        .request("job_buildLock", rpc_params![spec(), wallet_addr.clone()])
        .await
        .expect("built again");
    let (_, witnesses) = sign_like_a_wallet(&hex::decode(&lock.tx_cbor_hex).expect("hex"), &wallet);
    let sub: TxSubmitted = c
        .request(
            "tx_submit",
            rpc_params![lock.tx_cbor_hex.clone(), hex::encode(&witnesses)],
        )
        .await
        .expect("submitted");
    assert_eq!(sub.tx_id, lock.tx_id);
    assert_eq!(sub.job_id.as_deref(), Some(lock.job_id.as_str()));
    assert!(sub.adopted, "the node orchestrates the wallet's job");

    let ws = WsClientBuilder::default()
        .set_headers(headers(None))
        .build(format!("ws://{}", running.addr))
        .await
        .expect("ws");
    let e = ws
        .subscribe::<JobEvent, _>("job_subscribe", rpc_params!["nothex"], "job_unsubscribe")
        .await
        .expect_err("bad id");
    assert_eq!(code(e), codes::INVALID_PARAMS);
    let e = ws
        .subscribe::<JobEvent, _>(
            "job_subscribe",
            rpc_params![hex::encode([3u8; 32])],
            "job_unsubscribe",
        )
        .await
        .expect_err("unknown job");
    assert_eq!(code(e), codes::JOB);
    let mut events = ws
        .subscribe::<JobEvent, _>(
            "job_subscribe",
            rpc_params![lock.job_id.clone()],
            "job_unsubscribe",
        )
        .await
        .expect("subscribed");
    let mut seen: Vec<JobEvent> = Vec::new();
    while !seen.iter().any(|e| e.state == "matching") {
        let e = tokio::time::timeout(support::WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("stream open")
            .expect("event decodes");
        seen.push(e);
    }
    let job = ganglion_contracts::v2::datum::JobId(
        hex::decode(&lock.job_id)
            .expect("hex")
            .try_into()
            .expect("32 bytes"),
    );
    let view = orch
        .indexer
        .job(&job, 0)
        .expect("indexer")
        .expect("the lock is on chain")
        .value;
    assert_eq!(view.status, ChainStatus::Locked);
    assert_eq!(view.orchestrator, orch.key_hash);
    assert_eq!(view.budget, 750_000);
    assert_eq!(view.gpus, 1);
    assert_eq!(
        chain.ntx_of(&wallet_hash),
        wallet_ntx - 750_000,
        "the wallet paid the budget"
    );
    assert_eq!(
        chain.ntx_of(&orch.key_hash),
        node_ntx,
        "the node paid nothing"
    );

    // The node drives it like its own: cancel refunds (to the orchestrator of record).
    let after: JobStatus = c
        .request("job_cancel", rpc_params![lock.job_id.clone()])
        .await
        .expect("cancel");
    assert_eq!(
        after
            .txs
            .iter()
            .map(|t| t.kind.as_str())
            .collect::<Vec<_>>(),
        ["lock", "cancel"]
    );
    while let Some(e) = tokio::time::timeout(support::WAIT, events.next())
        .await
        .expect("events until the end")
    {
        seen.push(e.expect("event decodes"));
    }
    assert_eq!(
        seen.iter().map(|e| e.state.as_str()).collect::<Vec<_>>(),
        ["locked", "matching", "cancelled"],
        "every transition once, in order; the stream ends at the terminal state"
    );
    assert!(
        seen.iter()
            .all(|e| e.role == "orchestrator" && e.job_id == lock.job_id)
    );
    assert!(seen[2].terminal && !seen[1].terminal);
    assert!(seen[1].slot.is_some(), "the confirmed lock names its slot");
    assert_eq!(seen[2].txs.len(), 2);
    wait_for("the refund", || async {
        (chain.ntx_of(&orch.key_hash) == node_ntx + 750_000).then_some(())
    })
    .await;
    super::support::shutdown(chain, orch, vec![]).await;
}
