//! `ganglion node run` as separate processes: a devnet in the test process (validator deployed
//! by the lifecycle support), one orchestrator and two provider nodes as child processes of the
//! real binary, each with its own data dir and config written by
//! `ganglion_node::daemon::devnet`. The providers post their bonds at start; a probe job is
//! submitted through JSON-RPC `job_submit` over HTTP with the orchestrator's cookie and
//! followed with `job_status` until `settled`; both providers' NTX rose; SIGTERM stops a node
//! cleanly; the CLI (`audit verify|job|provider`, `market`, `provider bond|offers`) answers
//! with `--json` from the running nodes; `GET /metrics` of the orchestrator and a provider
//! counts the settled job, its dispatch latency, peers, offers and the chain tip lag; a node
//! whose indexer store fails stops and names it (`supervisor`, root); an orchestrator with
//! `[gateway] listen` routes its service to the providers' replicas (`service`). Docker is
//! required (the providers run the probe container).

use super::lifecycle::support;

mod crash_points;
mod detected_gpus;
mod metrics;
mod npm_client;
mod overlay_port;
mod service;
mod supervisor;
mod unusable_gpus;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use ganglion_contracts::tx::TxoRef;
use ganglion_node::daemon::NodeInfo;
use ganglion_node::daemon::devnet::{self, DevnetNode, DevnetProvider};
use ganglion_node::datadir::DataDir;
use ganglion_rpc::types::{JobStatus, JobSubmitted};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;

use support::{Chain, MIN_BOND_PER_GPU, RATE, dev_key, hash_of, wait_for};

/// GPUs each test provider's bond backs: its one GPU and one more, so that a job assigned
/// while the previous one's claim is still in flight finds room (a claim releases its job's
/// commitment, G5).
const BOND_GPUS: u64 = 2;

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

impl Children {
    /// Waits (at most `limit`) for the first child — a node expected to stop on its own — to
    /// exit; returns its status and its log at `log`.
    fn first_exit(
        &mut self,
        log: &Path,
        limit: std::time::Duration,
    ) -> (std::process::ExitStatus, String) {
        let status = tokio::task::block_in_place(|| {
            let t0 = std::time::Instant::now();
            loop {
                if let Some(s) = self.0[0].try_wait().expect("wait") {
                    return s;
                }
                assert!(
                    t0.elapsed() < limit,
                    "the node did not stop: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        (status, std::fs::read_to_string(log).unwrap_or_default())
    }
}

fn ganglion() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ganglion"))
}

fn config(
    chain: &Chain,
    reference: TxoRef,
    dir: PathBuf,
    seed: u32,
    bootstrap: Vec<String>,
) -> DevnetNode {
    DevnetNode {
        data_dir: dir,
        n2c: chain.handle.n2c_tcp_addr().expect("n2c"),
        payment_seed: seed,
        deployment: chain.deployment.params.clone(),
        reference,
        bootstrap,
        provider: None,
        receipt_interval_ms: None,
        overclaim_factor: None,
        net: Default::default(),
    }
}

/// Writes `node`'s config, spawns `ganglion node run` on it and waits for its `node.json`.
/// On failure the panic message carries the node's log.
fn start(kids: &mut Children, node: &DevnetNode, name: &str) -> NodeInfo {
    start_with(kids, node, name, "")
}

/// [`start`] with `extra` TOML appended to the node's config.
fn start_with(kids: &mut Children, node: &DevnetNode, name: &str, extra: &str) -> NodeInfo {
    let cfg = node.write().expect("config written");
    if !extra.is_empty() {
        let mut text = std::fs::read_to_string(&cfg).expect("config");
        text.push_str(extra);
        std::fs::write(&cfg, text).expect("config");
    }
    let log = node.data_dir.with_extension("log");
    let t0 = std::time::Instant::now();
    let mut child = devnet::spawn(ganglion(), &cfg, &log).expect("spawns");
    let started =
        tokio::task::block_in_place(|| devnet::wait_started(&mut child, &node.data_dir, START));
    kids.0.push(child);
    match started {
        Ok(info) => {
            eprintln!("{name}: node.json after {:?}", t0.elapsed());
            info
        }
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

/// The deadline of the job of the JSON-RPC test, ms from its submission.
const JOB_DEADLINE_IN_MS: u64 = 40_000;

/// Runs `ganglion <args> --json --config <config>` and parses its stdout; `ok` is the exit
/// status expected.
fn cli_json<T: serde::de::DeserializeOwned>(config: &Path, args: &[&str], ok: bool) -> T {
    let out = std::process::Command::new(ganglion())
        .args(args)
        .arg("--json")
        .arg("--config")
        .arg(config)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.success(),
        ok,
        "ganglion {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "ganglion {args:?} --json: {e}\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// What `ganglion market --json` prints: the live offers and the latency matrix.
#[derive(Debug, serde::Deserialize)]
struct MarketJson {
    offers: Vec<ganglion_rpc::audit::MarketOffer>,
    matrix: Option<ganglion_rpc::audit::MarketMatrix>,
}

/// The live offers `ganglion market --json --config CONFIG` shows.
fn market_offers(config: &Path) -> Vec<ganglion_rpc::audit::MarketOffer> {
    cli_json::<MarketJson>(config, &["market"], true).offers
}

/// Polls `ok` every 500 ms for up to 60 s.
fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
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

/// A devnet with an orchestrator process and two bonded provider processes (devnet keys 0, 1
/// and 2), and a JSON-RPC client of the orchestrator holding its cookie's token.
struct Network {
    chain: Chain,
    kids: Children,
    orch: NodeInfo,
    /// The orchestrator's config (to restart it).
    orch_node: DevnetNode,
    /// Each provider's config and devnet key seed.
    providers: Vec<(DevnetNode, u32)>,
    rpc: HttpClient,
    /// The PostgreSQL server of the orchestrator's index, when it keeps it there.
    _postgres: Option<ganglion_testnet::postgres::Cluster>,
}

impl Network {
    async fn start() -> Self {
        Self::start_with(None).await
    }

    /// [`Self::start`]; with `postgres`, the orchestrator keeps its index in a new database
    /// of that server (`[indexer] store`) and serves the index's read API (`[indexer]
    /// listen`, its address in `node.json`).
    async fn start_with(postgres: Option<ganglion_testnet::postgres::Cluster>) -> Self {
        Self::start_configured(postgres, "").await
    }

    /// [`Self::start_with`], with `orchestrator_extra` TOML appended to the orchestrator's
    /// config.
    async fn start_configured(
        postgres: Option<ganglion_testnet::postgres::Cluster>,
        orchestrator_extra: &str,
    ) -> Self {
        let chain = Chain::start().await;
        let root = chain.dir.path().to_path_buf();
        let _ = support::probe_image();
        support::fresh_seed(&chain, &dev_key(0)).await;
        let mut kids = Children::default();
        // The nodes use a reference script deployed here (devnet key 3), not the support's.
        let reference = devnet::deploy_validator(
            chain.handle.n2c_tcp_addr().expect("n2c"),
            &chain.deployment.params,
            &dev_key(3),
        )
        .await
        .expect("validator deployed");
        assert_ne!(reference, chain.deployment.reference.reference);

        let orch_node = config(&chain, reference, root.join("orch"), 0, vec![]);
        let extra = match &postgres {
            Some(pg) => format!(
                "[indexer]\nstore = \"{}\"\nlisten = \"127.0.0.1:0\"\n",
                pg.create_database()
                    .expect("a database for the orchestrator's index")
            ),
            None => String::new(),
        } + orchestrator_extra;
        let orch = start_with(&mut kids, &orch_node, "orchestrator", &extra);
        assert!(orch.bond.is_none(), "an orchestrator posts no bond");
        assert!(!orch.p2p.is_empty());

        let mut providers = Vec::new();
        for (name, seed) in [("pa", 1), ("pb", 2)] {
            let mut node = config(&chain, reference, root.join(name), seed, orch.p2p.clone());
            node.provider = Some(DevnetProvider {
                gpus: 1,
                price_ntx_per_gpu_hour: RATE,
                // Escrow v2 commits each job's GPU on the bond until its claim releases it
                // (or its deadline plus the claim window).
                stake_ntx: BOND_GPUS * MIN_BOND_PER_GPU,
                bond_gpus: Some(BOND_GPUS),
            });
            let info = start(&mut kids, &node, name);
            assert!(info.bond.is_some(), "{name} posted its bond at start");
            assert_eq!(info.payment_key_hash, hex::encode(hash_of(&dev_key(seed))));
            providers.push((node, seed));
        }
        let token = DataDir::open(&orch_node.data_dir)
            .expect("data dir")
            .read_rpc_cookie()
            .expect("cookie written by the node");
        let rpc = http(&orch, &token);
        Self {
            chain,
            kids,
            orch,
            orch_node,
            providers,
            rpc,
            _postgres: postgres,
        }
    }

    fn ntx(&self) -> Vec<u64> {
        self.providers
            .iter()
            .map(|(_, seed)| self.chain.ntx_of(&hash_of(&dev_key(*seed))))
            .collect()
    }

    async fn submit(&self, sleep_s: u32) -> String {
        self.submit_spec(&support::probe_spec(sleep_s, 600_000))
            .await
    }

    async fn submit_spec(&self, spec: &ganglion_market::spec::Ensemble) -> String {
        let spec = serde_json::to_value(spec).expect("spec JSON");
        let sub: JobSubmitted = self
            .rpc
            .request("job_submit", rpc_params![spec])
            .await
            .expect("job_submit");
        sub.job_id
    }

    /// The orchestrator's record of `id`, by `job_status`.
    async fn orchestrator_status(&self, id: &str) -> Option<JobStatus> {
        let s: Vec<JobStatus> = self
            .rpc
            .request("job_status", rpc_params![id])
            .await
            .expect("job_status");
        s.into_iter().find(|r| r.role == "orchestrator")
    }

    /// Waits for the orchestrator's record of `id` to reach `state` (or a later one).
    async fn reached(&self, id: &str, state: &str) {
        wait_for(state, || async {
            let o = self.orchestrator_status(id).await?;
            (o.state == state || o.state == "settled").then_some(())
        })
        .await
    }

    /// Waits for the orchestrator's record of `id` to reach `settled`.
    async fn settled(&self, id: &str) -> JobStatus {
        wait_for("settled, by job_status", || async {
            let o = self.orchestrator_status(id).await?;
            assert!(
                !matches!(o.state.as_str(), "cancelled" | "expired"),
                "the job ended without settling: {o:?}"
            );
            (o.state == "settled").then_some(o)
        })
        .await
    }
}

/// Each provider's executor outcome of job `id` as its `report.json` says (`outcome`, reason,
/// exit codes), printed by the tests that settle so a run's log shows how each rank ended.
fn outcomes(providers: &[(DevnetNode, u32)], id: &str) -> Vec<String> {
    use ganglion_node::demo::torch;
    let mut out = Vec::new();
    for (node, seed) in providers {
        for dir in torch::artifact_dirs(&node.data_dir, id) {
            let report: serde_json::Value = std::fs::read(dir.join("report.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            let exits: Vec<_> = report["ranks"]
                .as_array()
                .map(|r| r.iter().map(|r| r["exit_code"].clone()).collect())
                .unwrap_or_default();
            out.push(format!(
                "provider {seed}: outcome {} {} exit codes {exits:?} adopted {}",
                report["outcome"], report["reason"], report["adopted"]
            ));
        }
    }
    out
}

/// What each provider's node kept of job `id` (the executor's `report.json` per rank and the
/// node log's job lines), for the message of a failed payment assertion.
fn unpaid_evidence(providers: &[(DevnetNode, u32)], id: &str) -> String {
    use ganglion_node::demo::torch;
    let mut out = String::new();
    for (node, seed) in providers {
        for dir in torch::artifact_dirs(&node.data_dir, id) {
            let report = std::fs::read_to_string(dir.join("report.json")).unwrap_or_default();
            out.push_str(&format!(
                "--- provider {seed} {}:\n{report}\n",
                dir.display()
            ));
        }
        let log = std::fs::read_to_string(node.data_dir.with_extension("log")).unwrap_or_default();
        out.push_str(&format!("--- provider {seed} log (job lines):\n"));
        for line in log
            .lines()
            .filter(|l| l.contains("executor") || l.contains("provider") || l.contains("adopt"))
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Names of the containers created on this Docker host since `since` (POSIX s) whose name
/// starts with `prefix`, one entry per `create` event (Docker's event log, via the CLI).
fn containers_created(since: u64, prefix: &str) -> Vec<String> {
    container_events(since, prefix, "create")
}

/// Names of the containers with a Docker `event` (`create`, `start`, …) since `since` (POSIX s)
/// whose name starts with `prefix`, one entry per event (Docker's event log, via the CLI).
fn container_events(since: u64, prefix: &str, event: &str) -> Vec<String> {
    let until = ganglion_p2p::now_ms() / 1000 + 1;
    let out = std::process::Command::new("docker")
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &until.to_string(),
            "--filter",
            "type=container",
            "--filter",
            &format!("event={event}"),
            "--format",
            "{{.Actor.Attributes.name}}",
        ])
        .output()
        .expect("docker events runs");
    assert!(out.status.success(), "docker events: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// Names of this Docker host's containers (any state) whose name starts with `prefix`.
fn containers_named(prefix: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("name=^{prefix}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .expect("docker ps runs");
    assert!(out.status.success(), "docker ps: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_orchestrator_and_two_provider_processes_settle_a_job_over_json_rpc() {
    // The orchestrator keeps its index in PostgreSQL and serves the index's read API.
    let postgres = ganglion_testnet::postgres::Cluster::start()
        .unwrap_or_else(|e| panic!("a throwaway PostgreSQL server: {e}"));
    let mut net = Network::start_with(Some(postgres)).await;
    // Bonds are posted, so balances from here on change only by the job's payments.
    let before = net.ntx();
    let t0 = std::time::Instant::now();
    // A deadline 40 s out, a probe of 2 s: while the job is assigned the providers' bonds
    // back it (G5) and cannot unbond; each claim releases its bond, and the provider unbonds
    // at the end of this test, long before the deadline.
    let id = net
        .submit_spec(&support::probe_spec(2, JOB_DEADLINE_IN_MS))
        .await;
    let deadline_ms = ganglion_p2p::now_ms() + JOB_DEADLINE_IN_MS;
    net.reached(&id, "assigned").await;
    let early = std::process::Command::new(ganglion())
        .args(["provider", "unbond", "--config"])
        .arg(net.providers[0].0.data_dir.join("node.toml"))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&early.stderr);
    assert!(
        !early.status.success() && err.contains(&format!("the bond backs job {id}")),
        "an unbond while assigned: {err}"
    );
    let done = net.settled(&id).await;
    eprintln!("rank outcomes: {:?}", outcomes(&net.providers, &id));
    eprintln!(
        "job_submit → settled: {:?} (probe sleeps 2 s)",
        t0.elapsed()
    );
    assert_eq!(
        done.txs.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        ["lock", "assign"],
        "one transaction each; the providers claim their pay themselves"
    );
    for ((after, before), (_, seed)) in net
        .ntx()
        .into_iter()
        .zip(before.clone())
        .zip(&net.providers)
    {
        assert!(
            after > before,
            "provider {seed} was not paid: {before} → {after}\n{}",
            unpaid_evidence(&net.providers, &id)
        );
    }

    // GET /metrics (its address in node.json): the orchestrator counts the settled job, its
    // transactions, its peers and the providers' offers; a provider its dispatch latency.
    // Each claim moved its provider's bond (the release, G5); the market follows a bond to
    // its new UTxO, so both offers are still there.
    let m = metrics::scrape(net.orch.metrics.expect("orchestrator metrics address")).await;
    assert_eq!(metrics::value(&m, "ganglion_market_offers", &[]), 2.0);
    let settled = [("role", "orchestrator"), ("state", "settled")];
    assert!(metrics::value(&m, "ganglion_jobs", &settled) >= 1.0);
    assert_eq!(
        metrics::series(&m, "ganglion_jobs"),
        7 + 9,
        "every state of both roles"
    );
    assert_eq!(
        metrics::value(&m, "ganglion_jobs", &[("state", "expired")]),
        0.0
    );
    assert!(
        metrics::value(&m, "ganglion_p2p_peers", &[]) >= 2.0,
        "both providers"
    );
    for kind in ["lock", "assign"] {
        let n = metrics::value(&m, "ganglion_txs_submitted_total", &[("kind", kind)]);
        assert!(n >= 1.0, "{kind}: {n}");
    }
    assert!(metrics::value(&m, "ganglion_job_settle_duration_seconds_count", &[]) >= 1.0);
    let lag = metrics::value(&m, "ganglion_chain_tip_lag_slots", &[]);
    eprintln!("orchestrator: chain tip lag {lag} slots right after the settle");
    assert!((-5.0..=120.0).contains(&lag), "tip lag {lag} slots");
    let pa = NodeInfo::read(&net.providers[0].0.data_dir).expect("provider node.json");
    let p = metrics::scrape(pa.metrics.expect("provider metrics address")).await;
    let dispatched = metrics::value(&p, "ganglion_dispatch_latency_seconds_count", &[]);
    let latency = metrics::value(&p, "ganglion_dispatch_latency_seconds_sum", &[]);
    eprintln!("provider: dispatch latency {latency} s over {dispatched} job(s)");
    assert!(dispatched >= 1.0 && latency > 0.0, "{dispatched} {latency}");
    assert!(metrics::value(&p, "ganglion_p2p_peers", &[]) >= 1.0);
    let claims = metrics::value(&p, "ganglion_txs_submitted_total", &[("kind", "claim")]);
    assert!(claims >= 1.0, "the provider submitted its claim: {claims}");
    let provided: f64 = ["finished", "claiming", "paid"]
        .iter()
        .map(|s| metrics::value(&p, "ganglion_jobs", &[("role", "provider"), ("state", s)]))
        .sum();
    assert!(provided >= 1.0, "the provider's record of the job");
    let (status, _, _) = metrics::get(pa.metrics.expect("address"), "/").await;
    assert_eq!(status, 404);

    // The index's read API (the orchestrator's index is in PostgreSQL): the job is claimed,
    // and what it says each provider was paid is what their balances rose by.
    let api = net
        .orch
        .indexer_api
        .expect("the index's read API address in node.json");
    let (status, _, body) = metrics::get(api, &format!("/jobs/{id}")).await;
    assert_eq!(status, 200, "{body}");
    let view: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(view["status"], "Claimed", "{view}");
    let rose: u64 = net
        .ntx()
        .iter()
        .zip(&before)
        .map(|(after, before)| after - before)
        .sum();
    assert_eq!(view["paid"], rose.to_string(), "{view}");
    let (status, _, body) = metrics::get(api, "/jobs/zz").await;
    assert_eq!(status, 400, "{body}");

    // A third-party library from npm (Blaze, its Blockfrost provider pointed at the devnet's
    // HTTP API) builds, signs and submits an ordinary payment from devnet key 3 (idle since
    // it deployed the validator), reads it back, then reads this job from the index's API.
    let devnet_api = net.chain.handle.http_addr().expect("the devnet's HTTP API");
    let to =
        ganglion_testnet::keys::DevKey::from_seed(9).address(pallas_addresses::Network::Testnet);
    let to_bech32 = to.to_bech32().expect("bech32");
    let client = npm_client::run(&[
        format!("http://{devnet_api}/"),
        hex::encode(ganglion_cardano::devkey::secret(3)),
        to_bech32.clone(),
        format!("http://{api}"),
        id.clone(),
    ])
    .await;
    if let Some(out) = client {
        eprintln!(
            "npm client: payment {} (fee {} lovelace) in block {}",
            out["tx_id"], out["fee"], out["block_height"]
        );
        assert_eq!(out["paid_to"], to_bech32.as_str(), "{out}");
        assert_eq!(out["paid_lovelace"], "5000000", "{out}");
        assert_eq!(out["listed_at_address"], true, "{out}");
        // The payment is on the chain as the library said: in its block, paying the address.
        let tx_id = out["tx_id"].as_str().expect("tx_id");
        let tx_hash: [u8; 32] = hex::decode(tx_id)
            .expect("hex")
            .try_into()
            .expect("32 bytes");
        let chain = net.chain.handle.chain();
        let place = chain
            .store()
            .tx_place(&tx_hash)
            .expect("store")
            .expect("the payment is on the chain");
        assert_eq!(out["block_height"], place.block, "{out}");
        let paid = chain.utxos_at(&to.to_vec()).expect("utxos");
        assert!(
            paid.iter()
                .any(|(r, _)| r.tx_hash == tx_hash && r.index == 0),
            "the ledger holds the payment at {to_bech32}"
        );
        // The job as the library's fetch read it from the index is the job the RPC settled.
        assert_eq!(out["job_status"], 200, "{out}");
        assert_eq!(out["job"]["status"], "Claimed", "{out}");
        assert_eq!(out["job"]["paid"], rose.to_string(), "{out}");
    }

    // The CLI against the running orchestrator (JSON-RPC through node.json and the cookie):
    // `audit verify` passes every check, fetching results and logs from the providers.
    let orch_config = net.chain.dir.path().join("orch").join("node.toml");
    let report: ganglion_rpc::audit::AuditReport =
        cli_json(&orch_config, &["audit", "verify", &id], true);
    assert!(report.pass && report.checks.len() >= 16, "{report:#?}");
    let job: ganglion_rpc::audit::AuditJob = cli_json(&orch_config, &["audit", "job", &id], true);
    assert_eq!(job.status, "claimed");
    let pa = &job.assignments[0].provider;
    let prov: ganglion_rpc::audit::AuditProvider =
        cli_json(&orch_config, &["audit", "provider", pa], true);
    assert_eq!(prov.jobs, std::slice::from_ref(&id));
    assert!(prov.earnings > 0 && prov.bonds.len() == 1, "{prov:?}");
    let market: MarketJson = cli_json(&orch_config, &["market"], true);
    let offers = market.offers;
    assert_eq!(offers.len(), 2, "both providers' offers: {offers:?}");
    assert!(market.matrix.is_some(), "the latency matrix is shown");
    // The providers ping each other (they met for the job, and each connects to the market's
    // other providers): their offers' links give the orchestrator's matrix the pair.
    wait_until("the providers' pair in `ganglion market`'s matrix", || {
        cli_json::<MarketJson>(&orch_config, &["market"], true)
            .matrix
            .is_some_and(|m| m.pairs.len() == 1 && m.own.len() == 2)
    });
    let pa_config = net.providers[0].0.data_dir.join("node.toml");
    let bonds: Vec<ganglion_rpc::audit::BondInfo> =
        cli_json(&pa_config, &["provider", "bond"], true);
    assert_eq!(bonds.len(), 1, "{bonds:?}");
    let own: Vec<ganglion_rpc::audit::MarketOffer> =
        cli_json(&pa_config, &["provider", "offers"], true);
    assert!(
        own.iter().all(|o| o.provider == bonds[0].provider) && !own.is_empty(),
        "{own:?}"
    );
    // `job logs` / `job outputs`: what the providers attested, fetched by the orchestrator.
    let logs: Vec<ganglion_rpc::audit::JobLog> =
        cli_json(&orch_config, &["job", "logs", &id], true);
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(
        logs.iter()
            .all(|l| l.error.is_none() && l.text.contains("probe done")),
        "{logs:?}"
    );
    let out_dir = net.chain.dir.path().join("outputs");
    let outs: Vec<ganglion_rpc::audit::JobOutput> = cli_json(
        &orch_config,
        &[
            "job",
            "outputs",
            &id,
            "--out",
            out_dir.to_str().expect("utf-8"),
        ],
        true,
    );
    assert_eq!(outs.len(), 2, "{outs:?}");
    for o in &outs {
        let file = o
            .files
            .iter()
            .find(|f| f.path == "result.bin")
            .expect("result.bin listed");
        let written = out_dir.join(format!("rank-{}", o.index)).join("result.bin");
        assert_eq!(
            std::fs::metadata(&written).map(|m| m.len()).ok(),
            Some(file.bytes),
            "{}",
            written.display()
        );
    }
    // An unknown job: `audit verify` exits non-zero with the node's message.
    let out = std::process::Command::new(ganglion())
        .args(["audit", "verify", &"ab".repeat(32), "--json", "--config"])
        .arg(&orch_config)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not on chain"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The provider leaves before the job's deadline: its claim released the bond's
    // commitment (G5), so the unbond goes through, then a withdraw refused before the delay
    // (saying when), then the withdraw, which returns the stake to its wallet.
    assert!(
        ganglion_p2p::now_ms() < deadline_ms,
        "the job settled after its deadline: the early unbond proves nothing"
    );
    let unbond: ganglion_rpc::types::BondTx = cli_json(&pa_config, &["provider", "unbond"], true);
    assert_eq!(unbond.bond, bonds[0].bond);
    let from_ms = unbond.withdrawable_from_ms.expect("withdrawable from");
    let from_slot = unbond
        .withdrawable_from_slot
        .expect("withdrawable from slot");
    wait_until("the unbond on chain", || {
        let b: Vec<ganglion_rpc::audit::BondInfo> =
            cli_json(&pa_config, &["provider", "bond"], true);
        b.first().is_some_and(|b| b.unbonding_since_ms.is_some())
    });
    let early = std::process::Command::new(ganglion())
        .args(["provider", "withdraw", "--config"])
        .arg(&pa_config)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&early.stderr);
    assert!(
        !early.status.success() && err.contains(&format!("withdrawn from slot {from_slot}")),
        "{err}"
    );
    let staked = net.ntx()[0];
    let wait_ms = from_ms.saturating_sub(ganglion_p2p::now_ms()) + 1_500;
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    let withdrawn: ganglion_rpc::types::BondTx =
        cli_json(&pa_config, &["provider", "withdraw"], true);
    // The unbond re-created the bond with its clock: the withdraw spends that output.
    assert!(
        withdrawn.bond.starts_with(&unbond.tx_id),
        "{withdrawn:?} {unbond:?}"
    );
    wait_until("the stake back in the wallet", || {
        net.ntx()[0] == staked + bonds[0].stake.get()
    });
    let left: Vec<ganglion_rpc::audit::BondInfo> =
        cli_json(&pa_config, &["provider", "bond"], true);
    assert!(left.is_empty(), "{left:?}");

    // Back without a restart: `provider bond post` bonds again from the wallet, and the node
    // offers its GPUs under the new bond; `provider bond top-up` adds one GPU's worth of
    // stake, and the offer follows the bond to its new UTxO with the GPUs it now backs.
    let stake = bonds[0].stake.get();
    let posted: ganglion_rpc::types::BondTx = cli_json(
        &pa_config,
        &[
            "provider",
            "bond",
            "post",
            "--stake-ntx",
            &stake.to_string(),
        ],
        true,
    );
    assert!(posted.bond.starts_with(&posted.tx_id), "{posted:?}");
    let pa_key = bonds[0].provider.clone();
    let offer_of = |bond: &str| -> Option<ganglion_rpc::audit::MarketOffer> {
        market_offers(&orch_config)
            .into_iter()
            .find(|o| o.provider == pa_key && o.bond == bond)
    };
    wait_until("provider A offered under its new bond", || {
        offer_of(&posted.bond).is_some()
    });
    let before_top_up = offer_of(&posted.bond).expect("offered").bond_gpus;
    assert_eq!(u64::from(before_top_up), stake / MIN_BOND_PER_GPU);
    let topped: ganglion_rpc::types::BondTx = cli_json(
        &pa_config,
        &[
            "provider",
            "bond",
            "top-up",
            "--stake-ntx",
            &MIN_BOND_PER_GPU.to_string(),
        ],
        true,
    );
    assert_eq!(
        topped.bond, posted.bond,
        "the top-up spends the posted bond"
    );
    let continued = format!("{}#0", topped.tx_id);
    wait_until("provider A offered under its topped-up bond", || {
        offer_of(&continued).is_some_and(|o| o.bond_gpus == before_top_up + 1)
    });
    let now: Vec<ganglion_rpc::audit::BondInfo> = cli_json(&pa_config, &["provider", "bond"], true);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(now[0].stake.get(), stake + MIN_BOND_PER_GPU);
    assert_eq!(now[0].bond, continued);

    // SIGTERM stops the orchestrator cleanly (engine, RPC, swarm, follower).
    let status = tokio::task::block_in_place(|| terminate(&mut net.kids.0[0]));
    assert!(
        status.is_some_and(|s| s.success()),
        "the orchestrator did not exit cleanly on SIGTERM: {status:?}"
    );
    assert!(!net.orch.p2p.is_empty());
    drop(net.kids);
    net.chain.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_killed_mid_run_restarts_on_its_data_dir_and_the_job_settles_once() {
    let mut net = Network::start().await;
    let since = ganglion_p2p::now_ms() / 1000;
    let before = net.ntx();
    let id = net.submit(8).await;

    // Provider A's own RPC says when its container runs; then SIGKILL it.
    let (pa_node, _) = net.providers[0].clone();
    let pa_info = NodeInfo::read(&pa_node.data_dir).expect("pa node.json");
    let pa_token = DataDir::open(&pa_node.data_dir)
        .expect("data dir")
        .read_rpc_cookie()
        .expect("pa cookie");
    let pa_rpc = http(&pa_info, &pa_token);
    wait_for("provider A running the job", || async {
        let s: Vec<JobStatus> = pa_rpc
            .request("job_status", rpc_params![id.clone()])
            .await
            .ok()?;
        s.iter()
            .any(|r| r.role == "provider" && r.state == "running")
            .then_some(())
    })
    .await;
    // Index 1 is provider A (0 is the orchestrator).
    let mut pa = net.kids.0.remove(1);
    pa.kill().expect("SIGKILL");
    let _ = pa.wait();
    let restarted = start(&mut net.kids, &pa_node, "pa (restarted)");
    assert_eq!(
        restarted.peer_id, pa_info.peer_id,
        "same identity from the data dir"
    );
    let done = net.settled(&id).await;
    // The bond found again, not re-posted: the live one, as the assign continued it (escrow
    // v2 commits each provider's bond in the assign).
    let assign = done
        .txs
        .iter()
        .find(|t| t.kind == "assign")
        .expect("assign");
    let bond = restarted.bond.clone().expect("bond");
    assert!(
        bond.starts_with(&assign.tx_id),
        "{bond} is the assign's continuation of {:?}",
        pa_info.bond
    );
    eprintln!("rank outcomes: {:?}", outcomes(&net.providers, &id));
    assert_eq!(
        done.txs.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        ["lock", "assign"]
    );
    for ((after, before), (_, seed)) in net.ntx().into_iter().zip(before).zip(&net.providers) {
        assert!(
            after > before,
            "provider {seed} was not paid: {before} → {after}\n{}",
            unpaid_evidence(&net.providers, &id)
        );
    }
    // Workload containers and (as root) overlay sandboxes: one each per rank, none twice.
    let all = containers_created(since, &format!("ganglion-{}", &id[..40]));
    let (pods, mut created): (Vec<String>, Vec<String>) =
        all.into_iter().partition(|n| n.contains("-pod-"));
    created.sort();
    let n = created.len();
    created.dedup();
    assert_eq!(
        n, 2,
        "one container per rank, none started twice: {created:?}"
    );
    assert_eq!(created.len(), 2, "two distinct ranks: {created:?}");
    // SAFETY: geteuid(2) has no preconditions.
    let expected_pods = if unsafe { libc::geteuid() } == 0 {
        2
    } else {
        0
    };
    assert_eq!(pods.len(), expected_pods, "one sandbox per rank: {pods:?}");
    drop(net.kids);
    net.chain.handle.shutdown().await;
}

/// The job's containers must talk: a 2-rank PyTorch DDP job (gloo) across the two provider
/// processes, each rank in its provider's pod on the per-job overlay (the providers' pods share
/// no Docker network), settles; both ranks print the same weights' checksum. Root only (the
/// pods' TUNs); the torch image is built on first use (about 3 minutes, cached by tag).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_provider_processes_train_ddp_over_the_overlay_and_settle() {
    use ganglion_node::demo::torch;
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIP two_provider_processes_train_ddp_over_the_overlay_and_settle: needs root \
             (the overlay's TUN inside each pod needs CAP_NET_ADMIN)"
        );
        return;
    }
    let image = tokio::task::block_in_place(|| torch::image(|_| {})).expect("torch image");
    let net = Network::start().await;
    let since = ganglion_p2p::now_ms() / 1000;
    let before = net.ntx();
    let spec = torch::ensemble(
        &image,
        2,
        1,
        2,
        RATE,
        // The escrow pays both GPUs at RATE until the deadline (G6): 2 × 600 000 GPU-ms.
        1_300_000,
        120,
        ganglion_p2p::now_ms() + 600_000,
    )
    .expect("spec");
    let t0 = std::time::Instant::now();
    let id = net.submit_spec(&spec).await;
    let done = net.settled(&id).await;
    eprintln!("rank outcomes: {:?}", outcomes(&net.providers, &id));
    eprintln!("torch DDP 1+1: job_submit → settled in {:?}", t0.elapsed());
    assert_eq!(
        done.txs.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        ["lock", "assign"]
    );
    for ((after, before), (_, seed)) in net.ntx().into_iter().zip(before).zip(&net.providers) {
        assert!(
            after > before,
            "provider {seed} was not paid: {before} → {after}\n{}",
            unpaid_evidence(&net.providers, &id)
        );
    }
    // Each provider kept its rank's log; every rank printed the same checksum.
    let mut sums = Vec::new();
    for (node, _) in &net.providers {
        for log in torch::rank_logs(&node.data_dir, &id) {
            sums.extend(torch::checksums(
                &std::fs::read_to_string(&log).expect("log"),
            ));
        }
    }
    sums.sort();
    assert_eq!(
        sums.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        [0, 1],
        "one checksum per rank: {sums:?}"
    );
    assert_eq!(sums[0].1, sums[1].1, "the ranks disagree: {sums:?}");
    // Each rank ran in a pod: a sandbox per provider, the workload joined to it.
    let created = containers_created(since, &format!("ganglion-{}", &id[..40]));
    let pods = created.iter().filter(|n| n.contains("-pod-")).count();
    assert_eq!(pods, 2, "one overlay sandbox per provider: {created:?}");
    drop(net.kids);
    net.chain.handle.shutdown().await;
}

/// Runs `ganglion node run` on `config_text` (data dir `dir`) and returns its exit status and
/// stderr; the node is expected to stop at once.
fn run_failing(dir: &Path, config_text: &str) -> (std::process::ExitStatus, String) {
    std::fs::create_dir_all(dir).expect("dir");
    let cfg = dir.join("node.toml");
    std::fs::write(&cfg, config_text).expect("config");
    let out = std::process::Command::new(ganglion())
        .args(["node", "run", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "warn")
        .output()
        .expect("runs");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn node_run_refuses_bad_config_with_the_cause() {
    let tmp = tempfile::tempdir().expect("tmp");
    let base = format!(
        "network = \"devnet\"\ndata_dir = \"{}\"\n[chain]\nn2c = \"127.0.0.1:1\"\n",
        tmp.path().join("data").display()
    );
    // An unknown key in a daemon section names the key.
    let (status, err) = run_failing(tmp.path(), &format!("{base}[p2p]\nport = 4001\n"));
    assert!(!status.success());
    assert!(err.contains("unknown field `port`"), "{err}");
    // No payment key: says how to make one.
    let (status, err) = run_failing(tmp.path(), &base);
    assert!(!status.success());
    assert!(err.contains("ganglion wallet new"), "{err}");
    // A key, and nothing listens on the N2C address (with or without [validator]: without,
    // the node looks for the reference script on chain, `daemon::deploy_cli`): a chain error.
    ganglion_node::wallet::PaymentKey::devnet(0)
        .create(
            &DataDir::open(tmp.path().join("data"))
                .expect("dir")
                .payment_key(),
        )
        .expect("key");
    let (status, err) = run_failing(tmp.path(), &base);
    assert!(!status.success());
    assert!(
        err.contains("the node stopped") && err.contains("chain:"),
        "{err}"
    );
    let with_validator = format!(
        "{base}[validator]\nreference = {{ tx_hash = \"{}\", index = 0 }}\n",
        "00".repeat(32)
    );
    let (status, err) = run_failing(tmp.path(), &with_validator);
    assert!(!status.success());
    assert!(err.contains("chain:"), "{err}");
}

#[test]
fn node_run_writes_json_log_lines_with_log_format_json() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    ganglion_node::wallet::PaymentKey::devnet(0)
        .create(&DataDir::open(&data).expect("dir").payment_key())
        .expect("key");
    // Nothing listens on the N2C address: the node logs its start, then stops.
    let cfg = tmp.path().join("node.toml");
    std::fs::write(
        &cfg,
        format!(
            "network = \"devnet\"\ndata_dir = \"{}\"\n[chain]\nn2c = \"127.0.0.1:1\"\n\
             [validator]\nreference = {{ tx_hash = \"{}\", index = 0 }}\n",
            data.display(),
            "00".repeat(32)
        ),
    )
    .expect("config");
    // `--json`, as on every command, is the same as `--log-format json`.
    for flags in [&["--log-format", "json"][..], &["--json"][..]] {
        let out = std::process::Command::new(ganglion())
            .args(["node", "run"])
            .args(flags)
            .arg("--config")
            .arg(&cfg)
            .env("RUST_LOG", "info")
            .env_remove("GANGLION_LOG_FORMAT")
            .output()
            .expect("runs");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        let line: serde_json::Value = serde_json::from_str(first)
            .unwrap_or_else(|e| panic!("{flags:?}: not JSON ({e}): {stderr}"));
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["fields"]["message"], "starting", "{line}");
        assert_eq!(line["fields"]["network"], "devnet", "{line}");
        assert!(line["timestamp"].is_string(), "{line}");
    }
    // An unknown format is refused by the argument parser.
    let out = std::process::Command::new(ganglion())
        .args(["node", "run", "--log-format", "xml", "--config"])
        .arg(&cfg)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("xml"));
}
