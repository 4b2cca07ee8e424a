//! `ganglion job submit [--wait]|status|cancel` as a process, talking over JSON-RPC to a node (an
//! orchestrator engine behind the real server) whose address (`node.json`) and cookie it reads
//! from the config's data dir.

use ganglion_node::datadir::DataDir;
use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::types::{JobStatus, JobSubmitted};

use tokio::io::AsyncBufReadExt as _;

use super::support::{self, Chain, wait_for};

async fn ganglion(config: &std::path::Path, args: &[&str]) -> std::process::Output {
    support::ganglion_cli(config, args)
        .output()
        .await
        .expect("ganglion runs")
}

fn stdout(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn job_cli_submits_follows_and_cancels_through_the_node() {
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let data = root.join("cli-node");
    let token = DataDir::open(&data)
        .expect("data dir")
        .new_rpc_cookie()
        .expect("cookie");
    let config = root.join("node.toml");
    let base = format!("network = \"devnet\"\ndata_dir = \"{}\"\n", data.display());
    let settings = Settings::from_toml(&base).expect("settings");
    let module = Api::new(settings)
        .expect("api")
        .with_engine(orch.engine.handle())
        .into_module()
        .expect("the namespaces merge");
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), &token, module)
        .await
        .expect("serves");
    std::fs::write(&config, &base).expect("config");
    // The CLI finds the node as it finds one `ganglion node run` started: `node.json`.
    support::write_node_json(&data, running.addr, &orch.key_hash);
    let spec = root.join("spec.yaml");
    std::fs::write(
        &spec,
        format!(
            "image: {{ local: \"ganglion/cli-never-runs:latest\" }}\ncommand: [\"true\"]\n\
             gpus: {{ count: 1 }}\nlimits: {{ max_duration_s: 60, max_rate_ntx_per_gpu_hour: {} }}\n\
             budget_ntx: 700000\ndeadline_ms: {}\n",
            support::RATE,
            ganglion_p2p::now_ms() + 600_000
        ),
    )
    .expect("spec");

    // No provider offers anything: `submit` refuses before locking, naming why and `--force`.
    let refused = ganglion(&config, &["job", "submit", spec.to_str().expect("utf8")]).await;
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(
        err.contains("nothing was locked") && err.contains("--force"),
        "{err}"
    );
    let listed = stdout(&ganglion(&config, &["job", "list", "--json"]).await);
    assert_eq!(listed.trim(), "[]", "no job was locked");
    let out = stdout(
        &ganglion(
            &config,
            &[
                "job",
                "submit",
                spec.to_str().expect("utf8"),
                "--json",
                "--force",
            ],
        )
        .await,
    );
    let sub: JobSubmitted = serde_json::from_str(&out).expect("submit JSON");
    assert_eq!(sub.job_id.len(), 64);
    let id = sub.job_id.clone();
    wait_for("matching, by `ganglion job status --json`", || async {
        let out = stdout(&ganglion(&config, &["job", "status", &id, "--json"]).await);
        let s: Vec<JobStatus> = serde_json::from_str(&out).expect("status JSON");
        (s.len() == 1 && s[0].state == "matching").then_some(())
    })
    .await;
    let text = stdout(&ganglion(&config, &["job", "status", &id]).await);
    assert!(
        text.contains("orchestrator") && text.contains("locked → matching"),
        "{text}"
    );
    let text = stdout(&ganglion(&config, &["job", "cancel", &id]).await);
    assert!(text.starts_with("cancel submitted"), "{text}");
    assert!(text.contains("cancel tx "), "{text}");
    wait_for("cancelled", || async {
        let out = stdout(&ganglion(&config, &["job", "status", &id, "--json"]).await);
        let s: Vec<JobStatus> = serde_json::from_str(&out).expect("status JSON");
        (s[0].state == "cancelled").then_some(())
    })
    .await;
    // `submit --wait` follows the job to its end: here a cancel from another process. The
    // job id comes first (text mode), the final record last; a cancelled job exits non-zero.
    let mut waiting = support::ganglion_cli(
        &config,
        &[
            "job",
            "submit",
            spec.to_str().expect("utf8"),
            "--wait",
            "--force",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true)
    .spawn()
    .expect("ganglion runs");
    let mut lines = tokio::io::BufReader::new(waiting.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the job id within 30 s")
        .expect("stdout")
        .expect("a line");
    let waited = first
        .strip_prefix("job ")
        .and_then(|l| l.strip_suffix(" locked"))
        .expect("`job <id> locked`")
        .to_string();
    wait_for("the waited job matching", || async {
        let out = stdout(&ganglion(&config, &["job", "status", &waited, "--json"]).await);
        let s: Vec<JobStatus> = serde_json::from_str(&out).expect("status JSON");
        (s.len() == 1 && s[0].state == "matching").then_some(())
    })
    .await;
    stdout(&ganglion(&config, &["job", "cancel", &waited]).await);
    let mut rest = String::new();
    while let Some(l) = lines.next_line().await.expect("stdout") {
        rest.push_str(&l);
        rest.push('\n');
    }
    let end = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        waiting.wait_with_output(),
    )
    .await
    .expect("--wait returns once the job is cancelled")
    .expect("exit");
    let err = String::from_utf8_lossy(&end.stderr);
    assert!(!end.status.success(), "a cancelled job is not a success");
    assert!(err.contains("ended cancelled"), "{err}");
    assert!(
        rest.contains("history: locked → matching → cancelled"),
        "{rest}"
    );
    // Not a terminal: no spinner frames in the captured stderr.
    assert!(!err.contains('\r'), "{err:?}");
    // A bad id: non-zero exit, the server's reason on stderr.
    let o = ganglion(&config, &["job", "status", "xyz"]).await;
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("asking the node") && err.contains("64 hex digits"),
        "{err}"
    );
    // `job list`: both jobs, newest change first; filtered by state.
    let out = stdout(&ganglion(&config, &["job", "list", "--json"]).await);
    let all: Vec<JobStatus> = serde_json::from_str(&out).expect("list JSON");
    let ids: Vec<&str> = all.iter().map(|s| s.job_id.as_str()).collect();
    assert!(
        ids.contains(&id.as_str()) && ids.contains(&waited.as_str()),
        "{out}"
    );
    assert!(
        all.iter()
            .all(|s| s.role == "orchestrator" && s.state == "cancelled"),
        "{out}"
    );
    let last = |s: &JobStatus| s.history.last().map_or(0, |t| t.at_ms);
    assert!(all.windows(2).all(|w| last(&w[0]) >= last(&w[1])), "{out}");
    let out = stdout(&ganglion(&config, &["job", "list", "--state", "cancelled", "--json"]).await);
    let cancelled: Vec<JobStatus> = serde_json::from_str(&out).expect("list JSON");
    assert_eq!(cancelled.len(), all.len(), "{out}");
    let out = stdout(&ganglion(&config, &["job", "list", "--state", "running", "--json"]).await);
    let running: Vec<JobStatus> = serde_json::from_str(&out).expect("list JSON");
    assert!(running.is_empty(), "{out}");
    let text = stdout(&ganglion(&config, &["job", "list"]).await);
    assert!(text.contains(&format!("{id} orchestrator ")), "{text}");
    // A well-formed id the node does not know: non-zero too, saying so.
    let o = ganglion(&config, &["job", "status", &"ab".repeat(32)]).await;
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no record of job"), "{err}");
    super::support::shutdown(chain, orch, vec![]).await;
}
