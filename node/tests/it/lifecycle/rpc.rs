//! `job_submit`, `job_status` and `job_cancel` over HTTP against a running orchestrator engine:
//! the happy path to a cancelled job, the bearer token, bad params, and a node without an
//! engine.

use std::sync::Arc;

use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::error as codes;
use ganglion_rpc::types::{JobStatus, JobSubmitted};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

use crate::rpc_client::{code, http};

use super::support::{self, Chain, wait_for};

const TOKEN: &str = "lifecycle-test-token";

fn api(dir: &std::path::Path) -> Api {
    let s = Settings::from_toml(&format!(
        "network = \"devnet\"\ndata_dir = \"{}\"",
        dir.display()
    ))
    .expect("settings");
    Api::new(s).expect("api")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn job_methods_submit_report_and_cancel_over_http() {
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let module = api(&root.join("rpc"))
        .with_jobs(Arc::new(orch.engine.handle()))
        .into_module()
        .expect("the namespaces merge");
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), TOKEN, module)
        .await
        .expect("serves");
    let c = http(running.addr, Some(TOKEN));
    let anon = http(running.addr, None);
    let spec = serde_json::to_value(support::probe_spec(1, 600_000)).expect("spec JSON");

    let e = anon
        .request::<JobSubmitted, _>("job_submit", rpc_params![spec.clone()])
        .await
        .expect_err("no token");
    assert_eq!(code(e), codes::UNAUTHORIZED);
    let mut bad = spec.clone();
    bad["gpus"]["count"] = serde_json::json!("two");
    let e = c
        .request::<JobSubmitted, _>("job_submit", rpc_params![bad])
        .await
        .expect_err("bad spec");
    assert_eq!(code(e), codes::INVALID_PARAMS);
    let e = c
        .request::<Vec<JobStatus>, _>("job_status", rpc_params!["xyz"])
        .await
        .expect_err("bad id");
    assert_eq!(code(e), codes::INVALID_PARAMS);
    let none: Vec<JobStatus> = c
        .request("job_status", rpc_params![hex::encode([7u8; 32])])
        .await
        .expect("unknown job");
    assert!(none.is_empty());

    let sub: JobSubmitted = c
        .request("job_submit", rpc_params![spec])
        .await
        .expect("submitted");
    let id = sub.job_id.clone();
    wait_for("matching, by job_status", || async {
        let s: Vec<JobStatus> = c
            .request("job_status", rpc_params![id.clone()])
            .await
            .expect("status");
        (s.len() == 1 && s[0].role == "orchestrator" && s[0].state == "matching").then_some(())
    })
    .await;
    let e = anon
        .request::<JobStatus, _>("job_cancel", rpc_params![id.clone()])
        .await
        .expect_err("no token");
    assert_eq!(code(e), codes::UNAUTHORIZED);
    let after: JobStatus = c
        .request("job_cancel", rpc_params![id.clone()])
        .await
        .expect("cancel submitted");
    assert_eq!(
        after
            .txs
            .iter()
            .map(|t| t.kind.as_str())
            .collect::<Vec<_>>(),
        ["lock", "cancel"]
    );
    let done = wait_for("cancelled, by job_status", || async {
        let s: Vec<JobStatus> = c
            .request("job_status", rpc_params![id.clone()])
            .await
            .expect("status");
        (s[0].state == "cancelled").then(|| s[0].clone())
    })
    .await;
    assert_eq!(
        done.history
            .iter()
            .map(|t| t.state.as_str())
            .collect::<Vec<_>>(),
        ["locked", "matching", "cancelled"]
    );
    let e = c
        .request::<JobStatus, _>("job_cancel", rpc_params![id.clone()])
        .await
        .expect_err("already cancelled");
    assert_eq!(code(e), codes::JOB);

    // A node without a job engine says so.
    let bare = ganglion_rpc::server::start(
        "127.0.0.1:0".parse().expect("addr"),
        TOKEN,
        api(&root.join("rpc2"))
            .into_module()
            .expect("the namespaces merge"),
    )
    .await
    .expect("serves");
    let e = http(bare.addr, Some(TOKEN))
        .request::<Vec<JobStatus>, _>("job_status", rpc_params![id])
        .await
        .expect_err("no engine");
    assert_eq!(code(e), codes::JOB);
    super::support::shutdown(chain, orch, vec![]).await;
}
