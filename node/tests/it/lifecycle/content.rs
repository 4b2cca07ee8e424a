//! A job's content and its failures, end to end: the orchestrator `storage_add`s a dataset
//! (JSON-RPC, into its blockstore); each provider fetches the spec's `inputs` from it over
//! bitswap before any container starts, the workload reads them under `/inputs` and writes a
//! declared output; the orchestrator's `job_status` shows each node's attested exit code and
//! the job's outcome. Content the orchestrator does not serve comes from a provider's Kubo RPC
//! (`[storage] kubo_rpc`, a real js-ipfs daemon) when it has one. A failed share (its workload exits non-zero; an input nobody holds stops
//! it before any container) claims what ran, and its reason — appended by the provider to the
//! log it attests — reaches the orchestrator's `job_status` and `job_logs`.

use std::sync::Arc;

use ganglion_node::audit::service::AuditService;
use ganglion_node::job::state::OrchestratorState;
use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::audit::{JobLog, JobOutput};
use ganglion_rpc::storage::Added;
use ganglion_rpc::types::JobStatus;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::pin::Embedded;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::http_client::{HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;

use super::support::{self, Node, World, wait_for};
use ganglion_contracts::v2::datum::JobId;
use ganglion_market::spec::Ensemble;

/// The orchestrator's JSON-RPC methods (engine, audit, storage) over `settings`.
pub(super) fn module<E: ganglion_dispatch::executor::Executor + 'static>(
    orch: &Node<E>,
    settings: Settings,
) -> ganglion_rpc::jsonrpsee::RpcModule<()> {
    Api::new(settings)
        .expect("api")
        .with_engine(orch.engine.handle())
        .with_storage(Embedded::new(orch.blocks.clone()))
        .with_audit(
            AuditService::new(
                orch.indexer.clone(),
                orch.blocks.clone() as Arc<dyn Blockstore>,
            )
            .with_p2p(orch.p2p.clone()),
        )
        .into_module()
        .expect("the namespaces merge")
}

/// The orchestrator's JSON-RPC server ([`module`]), and a client with its token.
pub(super) async fn serve<E: ganglion_dispatch::executor::Executor + 'static>(
    orch: &Node<E>,
) -> (ganglion_rpc::server::Running, HttpClient) {
    let settings = Settings::from_toml(&format!(
        "network = \"devnet\"\ndata_dir = \"{}\"",
        orch.dir.join("rpc").display()
    ))
    .expect("settings");
    let module = module(orch, settings);
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), "t", module)
        .await
        .expect("serves");
    let mut headers = jsonrpsee::http_client::HeaderMap::new();
    headers.insert("authorization", "Bearer t".parse().expect("header"));
    let client = HttpClientBuilder::default()
        .set_headers(headers)
        .build(format!("http://{}", running.addr))
        .expect("client");
    (running, client)
}

/// The probe spec of `support::probe_spec` with `command`, `inputs`, `outputs` and `image`
/// changed as `edit` says (JSON).
fn spec_with(edit: serde_json::Value) -> Ensemble {
    let mut json = serde_json::to_value(support::probe_spec(2, 600_000)).expect("json");
    for (k, v) in edit.as_object().expect("object") {
        json[k] = v.clone();
    }
    Ensemble::from_json_str(&json.to_string()).expect("spec parses")
}

/// Waits for the orchestrator's record to settle, then its `job_status` over JSON-RPC.
async fn settled_status<E: ganglion_dispatch::executor::Executor + 'static>(
    orch: &Node<E>,
    c: &HttpClient,
    job: &JobId,
) -> JobStatus {
    wait_for("the orchestrator to reach Settled", || async {
        let r = orch.engine.orchestrator_record(job).expect("store")?;
        assert!(
            !matches!(
                r.state,
                OrchestratorState::Cancelled | OrchestratorState::Expired
            ),
            "{r:?}"
        );
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;
    let all: Vec<JobStatus> = c
        .request("job_status", rpc_params![hex::encode(job.0)])
        .await
        .expect("job_status");
    all.into_iter()
        .find(|s| s.role == "orchestrator")
        .expect("orchestrator record")
}

/// Both ranks' outputs of `job` hold `result/copy.csv`, of `bytes` bytes, whose CID is
/// `file_cid`: each copied its input byte for byte.
async fn each_output_is_the_copy(c: &HttpClient, job: &JobId, file_cid: &str, bytes: u64) {
    let outputs: Vec<JobOutput> = c
        .request("job_outputs", rpc_params![hex::encode(job.0)])
        .await
        .expect("job_outputs");
    assert_eq!(outputs.len(), 2);
    for o in &outputs {
        let copy = o
            .files
            .iter()
            .find(|f| f.path == "result/copy.csv")
            .unwrap_or_else(|| panic!("result/copy.csv in {o:?}"));
        assert_eq!((copy.cid.as_str(), copy.bytes), (file_cid, bytes));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inputs_come_from_the_orchestrator_and_a_declared_output_comes_back() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let (_server, c) = serve(&orch).await;
    // The user's dataset, added on the orchestrator's node only.
    let dataset = orch.dir.join("dataset");
    std::fs::create_dir_all(dataset.join("shards")).expect("mkdir");
    let rows: String = (0..5000).map(|i| format!("{i},{}\n", i * 7 % 13)).collect();
    std::fs::write(dataset.join("shards/train.csv"), &rows).expect("write");
    let added: Added = c
        .request(
            "storage_add",
            rpc_params![dataset.display().to_string(), serde_json::Value::Null],
        )
        .await
        .expect("storage_add");
    assert_eq!(added.content_bytes, rows.len() as u64);
    let pins: Vec<String> = c
        .request("storage_pins", rpc_params![])
        .await
        .expect("storage_pins");
    assert!(pins.contains(&added.cid), "{pins:?}");
    for p in [&pa, &pb] {
        let root = cid::Cid::try_from(added.cid.as_str()).expect("cid");
        assert!(
            !p.blocks.has(&root).expect("has"),
            "the providers start without it"
        );
    }

    let spec = spec_with(serde_json::json!({
        "command": ["copy", "/inputs/data/shards/train.csv", "/outputs/result/copy.csv",
                    "echo", "copied", "sleep", "1"],
        "inputs": [{ "cid": added.cid, "path": "/inputs/data" }],
        "outputs": [{ "path": "/outputs/result" }],
    }));
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    let status = settled_status(&orch, &c, &job).await;
    assert_eq!(status.outcome.as_deref(), Some("succeeded"), "{status:#?}");
    assert_eq!(status.nodes.len(), 2, "{status:#?}");
    for n in &status.nodes {
        assert_eq!(
            (n.state.as_str(), n.exit_code),
            ("claimed", Some(0)),
            "{n:?}"
        );
        assert!(
            n.gpu_ms.is_some_and(|g| g > 0) && n.reason.is_none(),
            "{n:?}"
        );
    }
    // Each rank's declared output holds the input, byte for byte: the same file CID (outputs
    // are imported as `storage add` imports by default, CIDv1 with raw leaves).
    let file_cid = ganglion_storage::unixfs::import_bytes(
        rows.as_bytes(),
        &ganglion_storage::unixfs::ImportOptions::cid_v1(),
        ganglion_storage::unixfs::HashOnly::default(),
    )
    .expect("hash")
    .root
    .to_string();
    let back = orch.dir.join("train-back.csv");
    let wrote: ganglion_rpc::storage::Wrote = c
        .request(
            "storage_cat",
            rpc_params![file_cid.clone(), back.display().to_string()],
        )
        .await
        .expect("storage_cat");
    assert_eq!(wrote.bytes, rows.len() as u64);
    assert_eq!(std::fs::read_to_string(&back).expect("read"), rows);
    each_output_is_the_copy(&c, &job, &file_cid, rows.len() as u64).await;
    support::shutdown(chain, orch, vec![pa, pb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_share_that_cannot_start_tells_the_orchestrator_why() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let (_server, c) = serve(&orch).await;

    // A workload that fails: its exit code and the provider's note reach the orchestrator.
    let spec = spec_with(serde_json::json!({
        "command": ["echo", "loading shard 3", "err", "ValueError: bad shape", "exit", "3"],
    }));
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    let status = settled_status(&orch, &c, &job).await;
    assert_eq!(status.outcome.as_deref(), Some("failed"), "{status:#?}");
    for n in &status.nodes {
        assert_eq!(
            (n.state.as_str(), n.exit_code),
            ("claimed", Some(3)),
            "{n:?}"
        );
        assert_eq!(
            n.reason.as_deref(),
            Some(format!("node rank {}: rank {} exited with code 3", n.index, n.index).as_str()),
            "{n:?}"
        );
    }
    let logs: Vec<JobLog> = c
        .request("job_logs", rpc_params![hex::encode(job.0)])
        .await
        .expect("job_logs");
    assert_eq!(logs.len(), 2);
    for l in &logs {
        // The container's own output first, then the provider's line.
        let text = &l.text;
        let ours = text
            .find("[ganglion] node rank")
            .unwrap_or_else(|| panic!("{l:?}"));
        assert!(text[..ours].contains("ValueError: bad shape"), "{l:?}");
    }

    // An input nobody holds: refused before any container, naming the CID.
    let absent = ganglion_storage::unixfs::import_bytes(
        b"held by nobody",
        &ganglion_storage::unixfs::ImportOptions::cid_v1(),
        ganglion_storage::unixfs::HashOnly::default(),
    )
    .expect("hash")
    .root
    .to_string();
    let spec = spec_with(serde_json::json!({
        "inputs": [{ "cid": absent, "path": "/inputs/weights" }],
    }));
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    let status = settled_status(&orch, &c, &job).await;
    assert_eq!(status.outcome.as_deref(), Some("failed"), "{status:#?}");
    for n in &status.nodes {
        assert_eq!((n.exit_code, n.gpu_ms), (Some(-1), Some(0)), "{n:?}");
        let why = n.reason.as_deref().unwrap_or_default();
        assert!(
            why.contains(&absent) && why.contains("/inputs/weights") && why.contains("fetched"),
            "{n:?}"
        );
    }
    for p in [&pa, &pb] {
        let exec = p.executor.as_ref().expect("executor");
        assert_eq!(
            exec.table().all().expect("table").len(),
            1,
            "only the first job reached the executor: the second never started a container"
        );
    }
    support::shutdown(chain, orch, vec![pa, pb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_input_the_orchestrator_does_not_serve_comes_from_the_providers_kubo_rpc() {
    let daemon = match ganglion_storage::test_utils::js_ipfs::start().await {
        Ok(d) => d,
        Err(why) => return ganglion_storage::test_utils::js_ipfs::unavailable(&why),
    };
    let kubo = ganglion_storage::pin::Kubo::new(&daemon.endpoint).expect("client");
    let chain = support::Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    // The dataset is pinned on the Kubo daemon only (a pinning service, say).
    let rows: String = (0..20_000)
        .map(|i| format!("{i},{}\n", i * 11 % 17))
        .collect();
    let file = root.join("weights.csv");
    std::fs::write(&file, &rows).expect("write");
    use ganglion_storage::pin::Pinner;
    let added = kubo
        .add_file(&file, &ganglion_storage::unixfs::ImportOptions::cid_v1())
        .await
        .expect("added on the Kubo daemon");

    let a = support::ProviderIdent::bonded(&chain, 1).await;
    let b = support::ProviderIdent::bonded(&chain, 2).await;
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let pa = support::provider_fetching_from(&chain, &a, &root.join("pa"), kubo.clone()).await;
    let pb = support::provider_fetching_from(&chain, &b, &root.join("pb"), kubo.clone()).await;
    support::connect_market(&orch, &[&pa, &pb], 2).await;
    let (_server, c) = serve(&orch).await;
    assert!(
        !orch.blocks.has(&added.root).expect("has"),
        "the orchestrator never held it"
    );

    let spec = spec_with(serde_json::json!({
        "command": ["copy", "/inputs/weights.csv", "/outputs/result/copy.csv", "echo", "copied"],
        "inputs": [{ "cid": added.root.to_string(), "path": "/inputs/weights.csv" }],
        "outputs": [{ "path": "/outputs/result" }],
    }));
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    let status = settled_status(&orch, &c, &job).await;
    assert_eq!(status.outcome.as_deref(), Some("succeeded"), "{status:#?}");
    for p in [&pa, &pb] {
        assert!(
            p.blocks.has(&added.root).expect("has"),
            "fetched from the Kubo RPC"
        );
    }
    // Each rank copied the input byte for byte: its output file has the input's CID.
    each_output_is_the_copy(&c, &job, &added.root.to_string(), rows.len() as u64).await;
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
