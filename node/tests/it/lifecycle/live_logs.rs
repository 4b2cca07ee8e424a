//! Live logs, end to end: a job's workload prints a line and sleeps; each provider sends the
//! tail of its container's log with its heartbeats, and the orchestrator's `job_liveLogs` shows
//! the line while the job still runs (fetched over bitswap from each provider). `ganglion job
//! logs --follow`, a process talking to the orchestrator's JSON-RPC server, prints it per node
//! as it comes; after `job stop` it prints what the attested logs add (each provider's note),
//! nothing twice, and exits non-zero as `job submit --wait` does for a stopped job. Meanwhile
//! `job logs` without `--follow` says the job runs, nothing attested yet, and suggests it.

use std::collections::BTreeMap;

use ganglion_node::datadir::DataDir;
use ganglion_node::job::JobControl as _;
use ganglion_node::job::state::{OrchestratorState, ProviderState};
use ganglion_node::settings::Settings;
use ganglion_rpc::audit::LiveJobLog;
use ganglion_storage::blockstore::Blockstore;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::http_client::{HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _};

use super::support::{self, Node, WAIT, World, wait_for};
use ganglion_market::spec::Ensemble;

/// What the workload prints before it sleeps.
const LINE: &str = "live-log-probe: epoch 1 loss 0.25";

/// The orchestrator's JSON-RPC server (engine, audit, storage) with a client holding its token,
/// and a config whose data dir leads the CLI to it (`node.json`, `rpc.cookie`), as one
/// `ganglion node run` wrote.
async fn serve_for_cli<E: ganglion_dispatch::executor::Executor + 'static>(
    orch: &Node<E>,
) -> (
    ganglion_rpc::server::Running,
    HttpClient,
    std::path::PathBuf,
) {
    let data = orch.dir.join("cli-node");
    let token = DataDir::open(&data)
        .expect("data dir")
        .new_rpc_cookie()
        .expect("cookie");
    let base = format!("network = \"devnet\"\ndata_dir = \"{}\"\n", data.display());
    let module = super::content::module(orch, Settings::from_toml(&base).expect("settings"));
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), &token, module)
        .await
        .expect("serves");
    support::write_node_json(&data, running.addr, &orch.key_hash);
    let config = orch.dir.join("cli-node.toml");
    std::fs::write(&config, &base).expect("config");
    let mut headers = jsonrpsee::http_client::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    let client = HttpClientBuilder::default()
        .set_headers(headers)
        .build(format!("http://{}", running.addr))
        .expect("client");
    (running, client, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_jobs_log_reaches_its_orchestrator_live_and_follow_prints_it_once() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let (_server, c, config) = serve_for_cli(&orch).await;
    let mut spec = serde_json::to_value(support::probe_spec(600, 900_000)).expect("json");
    spec["command"] = serde_json::json!(["echo", LINE, "sleep", "600"]);
    let spec = Ensemble::from_json_str(&spec.to_string()).expect("spec parses");
    let job = orch.engine.submit(&spec).await.expect("lock submitted");
    let id = hex::encode(job.0);

    // `job logs --follow` from the start: it waits for the job to run.
    let mut cli = support::ganglion_cli(&config, &["job", "logs", &id, "--follow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("ganglion runs");
    let mut stdout = tokio::io::BufReader::new(cli.stdout.take().expect("stdout")).lines();

    // The orchestrator's live logs show each node's line while the job runs.
    let live: Vec<LiveJobLog> = wait_for("both nodes' line in job_liveLogs", || async {
        let logs: Vec<LiveJobLog> = c
            .request("job_liveLogs", rpc_params![id.clone()])
            .await
            .expect("job_liveLogs");
        (logs.len() == 2 && logs.iter().all(|l| l.text.contains(LINE))).then_some(logs)
    })
    .await;
    let record = orch
        .engine
        .orchestrator_record(&job)
        .expect("store")
        .expect("record");
    assert_eq!(record.state, OrchestratorState::Assigned, "still running");
    for p in [&pa, &pb] {
        let r = p
            .engine
            .provider_record(&job)
            .expect("store")
            .expect("record");
        assert_eq!(r.state, ProviderState::Running);
    }
    let mut providers: Vec<String> = live.iter().map(|l| l.provider.clone()).collect();
    providers.sort();
    let mut want: Vec<String> = [&pa, &pb].iter().map(|p| hex::encode(p.key_hash)).collect();
    want.sort();
    assert_eq!(providers, want, "{live:#?}");
    let pins = orch.blocks.pins().expect("pins");
    for (i, l) in live.iter().enumerate() {
        assert_eq!(l.index, i as u64, "{l:?}");
        assert_eq!(l.error, None, "{l:?}");
        assert_eq!(l.text, format!("{LINE}\n"), "{l:?}");
        assert_eq!((l.offset, l.total), (0, l.text.len() as u64), "{l:?}");
        assert!(l.at_ms > 0, "{l:?}");
        // The tail came over bitswap into the orchestrator's store, unpinned.
        let cid = cid::Cid::try_from(l.cid.as_str()).expect("cid");
        assert!(orch.blocks.has(&cid).expect("has"), "{l:?}");
        assert!(!pins.contains(&cid), "{l:?}");
    }

    // The CLI printed each node's line, prefixed, while the job runs.
    let mut printed: Vec<String> = Vec::new();
    tokio::time::timeout(WAIT, async {
        while !(0..2).all(|n| printed.contains(&format!("node {n} | {LINE}"))) {
            let line = stdout
                .next_line()
                .await
                .expect("reads")
                .expect("the CLI still runs");
            printed.push(line);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the CLI did not print both lines: {printed:?}"));
    assert_eq!(
        orch.engine
            .orchestrator_record(&job)
            .expect("store")
            .expect("record")
            .state,
        OrchestratorState::Assigned,
        "printed while the job runs"
    );

    // Without --follow, nothing is attested yet: `job logs` says the job runs and suggests it.
    let plain = support::ganglion_cli(&config, &["job", "logs", &id])
        .output()
        .await
        .expect("ganglion runs");
    let said = String::from_utf8_lossy(&plain.stderr);
    assert!(!plain.status.success(), "{said}");
    assert!(
        said.contains("is running") && said.contains(&format!("job logs {id} --follow")),
        "{said}"
    );

    // Stopped: the CLI prints what the attested logs add, and exits as for a stopped job.
    orch.engine.handle().stop(&job).await.expect("stopped");
    let status = tokio::time::timeout(WAIT, cli.wait())
        .await
        .expect("the CLI ends once the job has an outcome")
        .expect("waits");
    while let Some(line) = stdout.next_line().await.expect("reads") {
        printed.push(line);
    }
    let mut stderr = String::new();
    cli.stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .await
        .expect("stderr");
    assert!(!status.success(), "{printed:#?}\n{stderr}");
    assert!(stderr.contains("job stop"), "{stderr}");
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &printed {
        *count.entry(l.as_str()).or_default() += 1;
    }
    for n in 0..2 {
        assert_eq!(
            count.get(format!("node {n} | {LINE}").as_str()),
            Some(&1),
            "node {n}'s line once: {printed:#?}"
        );
        assert!(
            printed
                .iter()
                .any(|l| l.starts_with(&format!("node {n} | [ganglion] node rank {n}"))),
            "node {n}'s attested note: {printed:#?}\n{stderr}"
        );
    }
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
