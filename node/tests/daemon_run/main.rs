//! `ganglion node run` as separate processes: a devnet in the test process (validator deployed
//! by the lifecycle support), one orchestrator and two provider nodes as child processes of the
//! real binary, each with its own data dir and config written by
//! `ganglion_node::daemon::devnet`. The providers post their bonds at start; a probe job is
//! submitted through JSON-RPC `job_submit` over HTTP with the orchestrator's cookie and
//! followed with `job_status` until `settled`; both providers' NTX rose; SIGTERM stops a node
//! cleanly. Docker is required (the providers run the probe container).

#[path = "../lifecycle/support.rs"]
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use ganglion_node::daemon::NodeInfo;
use ganglion_node::daemon::devnet::{self, DevnetNode, DevnetProvider};
use ganglion_node::datadir::DataDir;
use ganglion_rpc::types::{JobStatus, JobSubmitted};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;

use support::{Chain, RATE, STAKE, dev_key, hash_of, wait_for};

/// Longest wait for a node process to write its `node.json`.
const START: Duration = Duration::from_secs(60);

/// The child processes; killed (SIGKILL) and reaped when the test ends, however it ends.
#[derive(Default)]
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn ganglion() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ganglion"))
}

fn config(chain: &Chain, dir: PathBuf, seed: u32, bootstrap: Vec<String>) -> DevnetNode {
    DevnetNode {
        data_dir: dir,
        n2c: chain.handle.n2c_tcp_addr().expect("n2c"),
        payment_seed: seed,
        deployment: chain.deployment.params.clone(),
        reference: chain.deployment.reference.reference,
        bootstrap,
        provider: None,
        settle_grace_ms: None,
    }
}

/// Writes `node`'s config, spawns `ganglion node run` on it and waits for its `node.json`.
/// On failure the panic message carries the node's log.
fn start(kids: &mut Children, node: &DevnetNode, name: &str) -> NodeInfo {
    let cfg = node.write().expect("config written");
    let log = node.data_dir.with_extension("log");
    let mut child = devnet::spawn(ganglion(), &cfg, &log).expect("spawns");
    let started =
        tokio::task::block_in_place(|| devnet::wait_started(&mut child, &node.data_dir, START));
    kids.0.push(child);
    match started {
        Ok(info) => info,
        Err(e) => panic!(
            "{name} did not start: {e}\n--- log ---\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        ),
    }
}

fn http(info: &NodeInfo, token: &str) -> HttpClient {
    let mut h = HeaderMap::new();
    h.insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).expect("header"),
    );
    HttpClientBuilder::default()
        .set_headers(h)
        .request_timeout(Duration::from_secs(30))
        .build(format!("http://{}", info.rpc))
        .expect("client")
}

/// Gives devnet key `seed` a UTxO unique to this run, so the job id (seeded from the
/// orchestrator's UTxOs) and hence the container names differ from concurrent tests'.
async fn fresh_seed(chain: &Chain, seed: u32) {
    let access = chain.access(dev_key(seed));
    let mut draft = ganglion_contracts::tx::Draft::default();
    draft.pay(ganglion_contracts::tx::Output::new(
        access.address(),
        ganglion_contracts::tx::Value::lovelace(
            100_000_000 + ganglion_node::p2p::now_ms() % 1_000_000,
        ),
    ));
    let now = ganglion_node::p2p::now_ms();
    let tx = access.build(draft, now).await.expect("seed builds");
    access.submit(&tx, now).await.expect("seed submits");
    let address = access.address();
    wait_for("the fresh seed UTxO", || {
        let found = chain
            .handle
            .chain()
            .utxos_at(&address)
            .expect("utxos")
            .iter()
            .any(|(r, _)| *r.tx_id == tx.hash);
        async move { found.then_some(()) }
    })
    .await;
}

/// Sends SIGTERM to `child` and waits up to 20 s for it to exit.
fn terminate(child: &mut Child) -> Option<std::process::ExitStatus> {
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: kill(2) on our own child's pid with a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return Some(s);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_orchestrator_and_two_provider_processes_settle_a_job_over_json_rpc() {
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let _ = support::probe_image();
    fresh_seed(&chain, 0).await;
    let mut kids = Children::default();

    let orch_node = config(&chain, root.join("orch"), 0, vec![]);
    let orch = start(&mut kids, &orch_node, "orchestrator");
    assert!(orch.bond.is_none(), "an orchestrator posts no bond");
    assert!(!orch.p2p.is_empty());

    let mut providers = Vec::new();
    for (name, seed) in [("pa", 1), ("pb", 2)] {
        let mut node = config(&chain, root.join(name), seed, orch.p2p.clone());
        node.provider = Some(DevnetProvider {
            gpus: 1,
            price_ntx_per_gpu_hour: RATE,
            stake_ntx: STAKE,
        });
        let info = start(&mut kids, &node, name);
        assert!(info.bond.is_some(), "{name} posted its bond at start");
        assert_eq!(info.payment_key_hash, hex::encode(hash_of(&dev_key(seed))));
        providers.push(seed);
    }
    // Bonds are posted, so balances from here on change only by the job's payments.
    let before: Vec<u64> = providers
        .iter()
        .map(|seed| chain.ntx_of(&hash_of(&dev_key(*seed))))
        .collect();

    let token = DataDir::open(&orch_node.data_dir)
        .expect("data dir")
        .read_rpc_cookie()
        .expect("cookie written by the node");
    let c = http(&orch, &token);
    let spec = serde_json::to_value(support::probe_spec(2, 600_000)).expect("spec JSON");
    let sub: JobSubmitted = c
        .request("job_submit", rpc_params![spec])
        .await
        .expect("job_submit");
    let id = sub.job_id.clone();
    let done = wait_for("settled, by job_status", || async {
        let s: Vec<JobStatus> = c
            .request("job_status", rpc_params![id.clone()])
            .await
            .expect("job_status");
        let o = s.iter().find(|r| r.role == "orchestrator")?;
        assert!(
            !matches!(o.state.as_str(), "cancelled" | "expired"),
            "the job ended without settling: {o:?}"
        );
        (o.state == "settled").then(|| o.clone())
    })
    .await;
    assert_eq!(
        done.txs.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        ["lock", "assign", "settle"],
        "one transaction each"
    );
    for (seed, before) in providers.iter().zip(before) {
        let after = chain.ntx_of(&hash_of(&dev_key(*seed)));
        assert!(
            after > before,
            "provider {seed} was not paid: {before} → {after}"
        );
    }

    // SIGTERM stops the orchestrator cleanly (engine, RPC, swarm, follower).
    let status = tokio::task::block_in_place(|| terminate(&mut kids.0[0]));
    assert!(
        status.is_some_and(|s| s.success()),
        "the orchestrator did not exit cleanly on SIGTERM: {status:?}"
    );
    drop(kids);
    chain.handle.shutdown().await;
}
