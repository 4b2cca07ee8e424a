//! The web console (`ganglion_node::console`) over a real devnet job, in headless Chromium:
//! the job page, opened while the job is young, shows each state as it happens without a
//! reload (the `job_subscribe` stream relayed as server-sent events); once settled, its
//! numbers — each node's pay and GPU time, the refund, every audit check — equal what
//! `ganglion job status --json` and `ganglion audit verify --json` print; the other pages
//! (jobs, market with the latency matrix, provider with its earnings chart, logs, outputs,
//! audit search by job, provider and CID) render what the RPC says; every page is under
//! 100 KB and fits a 375 px wide screen; stopping a job needs the token. A screenshot of every
//! page is written under `target/console-screenshots/` (and the page sizes and first-paint
//! times to `sizes.txt` there).

use std::net::SocketAddr;
use std::sync::Arc;

use ganglion_node::audit::service::AuditService;
use ganglion_node::console::{self, Console, Source};
use ganglion_node::datadir::DataDir;
use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::audit::AuditReport;
use ganglion_rpc::types::JobStatus;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::pin::Embedded;
use tokio_util::sync::CancellationToken;

use super::browser::{self, Browser};
use super::support::{self, Node, World, wait_for};

/// The largest page the issue allows, bytes.
const MAX_PAGE: usize = 100 * 1024;

/// A node's RPC module as `ganglion node run` builds it (engine, storage, audit over its
/// indexer, blockstore and swarm; `provider` for `provider_bond`).
fn module<E: ganglion_dispatch::executor::Executor + 'static>(
    node: &Node<E>,
    settings: Settings,
    provider: bool,
) -> ganglion_rpc::jsonrpsee::RpcModule<()> {
    let audit = AuditService::new(
        node.indexer.clone(),
        node.blocks.clone() as Arc<dyn Blockstore>,
    )
    .with_p2p(node.p2p.clone());
    let audit = if provider {
        audit.with_provider(node.key_hash)
    } else {
        audit
    };
    Api::new(settings)
        .expect("api")
        .with_engine(node.engine.handle())
        .with_storage(Embedded::new(node.blocks.clone()))
        .with_audit(audit)
        .into_module()
        .expect("the namespaces merge")
}

/// The node's console on a free port, and its RPC server (for the CLI) with `node.json` in
/// `data` and a config file pointing there.
struct Served {
    console: SocketAddr,
    config: std::path::PathBuf,
    token: String,
    _rpc: ganglion_rpc::server::Running,
}

async fn serve<E: ganglion_dispatch::executor::Executor + 'static>(
    node: &Node<E>,
    name: &str,
    provider: bool,
    stop: &CancellationToken,
) -> Served {
    let data = node.dir.join(format!("{name}-cli"));
    let token = DataDir::open(&data)
        .expect("data dir")
        .new_rpc_cookie()
        .expect("cookie");
    let base = format!("network = \"devnet\"\ndata_dir = \"{}\"\n", data.display());
    let config = node.dir.join(format!("{name}.toml"));
    std::fs::write(&config, &base).expect("config");
    let settings = Settings::from_toml(&base).expect("settings");
    let rpc = ganglion_rpc::server::start(
        "127.0.0.1:0".parse().expect("addr"),
        &token,
        module(node, settings.clone(), provider),
    )
    .await
    .expect("RPC serves");
    support::write_node_json(&data, rpc.addr, &node.key_hash);
    let serving = console::start(
        "127.0.0.1:0".parse().expect("addr"),
        Console {
            source: Source::new(module(node, settings, provider)),
            token: token.clone(),
            blocks: node.blocks.clone() as Arc<dyn Blockstore>,
        },
        stop.clone(),
    )
    .await
    .expect("console serves");
    Served {
        console: serving.addr,
        config,
        token,
        _rpc: rpc,
    }
}

async fn cli_json<T: serde::de::DeserializeOwned>(config: &std::path::Path, args: &[&str]) -> T {
    let out = support::ganglion_cli(config, args)
        .output()
        .await
        .expect("ganglion runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The numbers in `data-v` of every element matching `css`.
async fn numbers(b: &Browser, css: &str) -> Vec<u64> {
    b.attrs(css, "data-v")
        .await
        .iter()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{css}: {v:?} is not a number"))
        })
        .collect()
}

/// Opens `path`, checks it fits 375 px, restores the width, screenshots it as `name` and
/// records its size and first paint in `sizes`.
async fn visit(b: &Browser, addr: SocketAddr, path: &str, name: &str, sizes: &mut Vec<String>) {
    b.open(addr, path).await;
    let (status, body) = browser::get(addr, path).await;
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    assert!(
        body.len() < MAX_PAGE,
        "{path} is {} bytes, over {MAX_PAGE}",
        body.len()
    );
    let paint = b
        .js(
            "const p = performance.getEntriesByName('first-contentful-paint')[0]; \
             return p ? Math.round(p.startTime) : null",
        )
        .await;
    let shot = b.screenshot(name).await;
    sizes.push(format!(
        "{name}.png  {path}  {} bytes  first paint {} ms",
        body.len(),
        paint
    ));
    assert!(shot.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_follows_a_job_live_and_shows_the_numbers_the_rpc_gives() {
    let world = World::two_providers().await;
    let stop = CancellationToken::new();
    let orch = serve(&world.orch, "orch", false, &stop).await;
    let pa = serve(&world.pa, "pa", true, &stop).await;
    // A client that never finishes its headers is dropped (after HEADER_READ_TIMEOUT_S),
    // not kept: checked at the end, while the rest runs.
    let stalled = {
        let addr = orch.console;
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            s.write_all(b"GET /jobs HTTP/1.1\r\nHost: x\r\n")
                .await
                .expect("write");
            let mut buf = Vec::new();
            tokio::time::timeout(
                std::time::Duration::from_secs(console::serve::HEADER_READ_TIMEOUT_S * 4),
                s.read_to_end(&mut buf),
            )
            .await
            .is_ok()
        })
    };
    let b = Browser::start().await;
    let mut sizes = Vec::new();

    // The market: both providers' offers, as market_offers has them.
    b.open(orch.console, "/market").await;
    wait_for("both offers on the market page", || async {
        b.open(orch.console, "/market").await;
        (b.attrs("tr.offer", "data-provider").await.len() == 2).then_some(())
    })
    .await;
    let offered = b.attrs("tr.offer", "data-provider").await;
    for p in [&world.pa, &world.pb] {
        assert!(offered.contains(&hex::encode(p.key_hash)), "{offered:?}");
    }

    // A job, its page opened while it is young: each state arrives without a reload.
    let job = world.orch.submit_probe(6, 600_000).await;
    let id = hex::encode(job.0);
    b.open(orch.console, &format!("/jobs/{id}")).await;
    b.js("window.__loaded = 'once'; return null").await;
    let badge = "section.record[data-role=orchestrator] [data-current-state]";
    let mut seen: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        if let Some(s) = b.attr(badge, "data-current-state").await
            && seen.last() != Some(&s)
        {
            seen.push(s);
        }
        if seen.last().is_some_and(|s| s == "settled") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job page never showed the job settled; it showed {seen:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        b.js("return window.__loaded").await,
        serde_json::json!("once"),
        "the page reloaded"
    );
    // Each state the badge showed is one the job went through, in order, and the page saw
    // the job before it ended (a slow page may miss a short state; the timeline has them all).
    assert!(
        seen.len() >= 2 && seen[0] != "settled",
        "states seen as they happened: {seen:?}"
    );
    let events: u64 = b
        .attr("#live", "data-events")
        .await
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(events >= 2, "job_subscribe events relayed: {events}");

    // Settled: the page's numbers are the CLI's, once its live part is rendered final. The
    // badge turns "settled" from the event stream at once, before the refresh the event asks
    // for; so wait for a render whose records are all terminal (`data-terminal`), with the
    // audit that a closed escrow brings. (Each list below is read in one script, one snapshot
    // of the page, which may still be replaced by an identical render meanwhile.)
    wait_for(
        "the final live part with its audit on the job page",
        || async {
            let terminal = b.attr("#live-inner", "data-terminal").await;
            let audit = b.attr("section.audit", "data-pass").await;
            (terminal.as_deref() == Some("true"))
                .then_some(audit)
                .flatten()
        },
    )
    .await;
    let status: Vec<JobStatus> = cli_json(&orch.config, &["job", "status", &id, "--json"]).await;
    let record = status
        .iter()
        .find(|r| r.role == "orchestrator")
        .expect("the orchestrator's record");
    let timeline = b
        .attrs(
            "section.record[data-role=orchestrator] ol.timeline li",
            "data-state",
        )
        .await;
    let history: Vec<_> = record.history.iter().map(|t| t.state.clone()).collect();
    assert_eq!(timeline, history);
    let mut rest = history.iter();
    assert!(
        seen.iter().all(|s| rest.any(|h| h == s)),
        "the page showed {seen:?}, not in the order of {history:?}"
    );
    let paid: Vec<u64> = record
        .nodes
        .iter()
        .map(|n| n.paid.expect("every node paid").get())
        .collect();
    assert_eq!(
        numbers(&b, "section.record tr.node td.paid .amt").await,
        paid
    );
    let gpu_ms: Vec<u64> = record
        .nodes
        .iter()
        .map(|n| n.gpu_ms.expect("gpu_ms"))
        .collect();
    assert_eq!(
        numbers(&b, "section.record tr.node td.gpu-ms span").await,
        gpu_ms
    );
    assert_eq!(
        numbers(&b, "section.chain tr.assignment td.paid .amt").await,
        paid
    );
    let report: AuditReport = cli_json(&orch.config, &["audit", "verify", &id, "--json"]).await;
    assert!(report.pass, "{report:#?}");
    let names = b.attrs("section.audit tr.check", "data-name").await;
    let passes = b.attrs("section.audit tr.check", "data-pass").await;
    let want: Vec<(String, String)> = report
        .checks
        .iter()
        .map(|c| (c.name.clone(), c.pass.to_string()))
        .collect();
    assert_eq!(names.into_iter().zip(passes).collect::<Vec<_>>(), want);
    let audit_job: ganglion_rpc::audit::AuditJob =
        cli_json(&orch.config, &["audit", "job", &id, "--json"]).await;
    let refund = audit_job.refund.expect("a refund").get();
    assert_eq!(
        numbers(&b, "section.chain dd.refund .amt").await,
        vec![refund]
    );
    assert_eq!(
        numbers(&b, "section.chain dd.budget .amt").await,
        vec![audit_job.budget.get()]
    );
    let fees = numbers(&b, "section.chain tr.tx .amt").await;
    assert!(
        fees.len() == audit_job.txs.len() && fees.iter().all(|f| *f > 0),
        "every transaction with its fee: {fees:?}"
    );
    visit(&b, orch.console, &format!("/jobs/{id}"), "job", &mut sizes).await;

    // The other pages.
    visit(&b, orch.console, "/jobs", "jobs", &mut sizes).await;
    assert!(b.attrs("tr.job", "data-job").await.contains(&id));
    let row = format!("tr.job[data-job='{id}'][data-role=orchestrator]");
    assert_eq!(
        numbers(&b, &format!("{row} td.paid .amt")).await,
        vec![paid.iter().sum::<u64>()],
        "the list's cost is what the job's nodes were paid"
    );
    visit(&b, orch.console, "/market", "market", &mut sizes).await;
    visit(
        &b,
        orch.console,
        &format!("/jobs/{id}/logs"),
        "logs",
        &mut sizes,
    )
    .await;
    assert_eq!(b.attrs("section.log", "data-index").await, ["0", "1"]);
    visit(
        &b,
        orch.console,
        &format!("/jobs/{id}/outputs"),
        "outputs",
        &mut sizes,
    )
    .await;
    // A log downloads byte for byte as job_logs has it.
    let logs: Vec<ganglion_rpc::audit::JobLog> =
        cli_json(&orch.config, &["job", "logs", &id, "--json"]).await;
    let (code, bytes) = browser::get(orch.console, &format!("/ipfs/{}", logs[0].cid)).await;
    assert_eq!(code, 200);
    assert_eq!(String::from_utf8_lossy(&bytes), logs[0].text);

    // The provider's page: its bond and what it earned, as audit_provider says.
    visit(&b, pa.console, "/provider", "provider", &mut sizes).await;
    let pa_key = hex::encode(world.pa.key_hash);
    let summary: ganglion_rpc::audit::AuditProvider =
        cli_json(&pa.config, &["audit", "provider", &pa_key, "--json"]).await;
    assert!(summary.earnings.get() > 0);
    assert_eq!(
        numbers(&b, "dd.earnings .amt").await,
        vec![summary.earnings.get()]
    );
    assert_eq!(b.attrs("tr.bond td.gpus", "data-v").await.len(), 1);
    assert!(
        b.attr("figure.chart svg path", "d").await.is_some(),
        "the earnings chart"
    );

    // Audit search: a job id, a provider key, a CID.
    visit(
        &b,
        orch.console,
        &format!("/search?q={id}"),
        "search-job",
        &mut sizes,
    )
    .await;
    assert!(b.text().await.contains("claimed"));
    visit(
        &b,
        orch.console,
        &format!("/search?q={pa_key}"),
        "search-provider",
        &mut sizes,
    )
    .await;
    assert_eq!(
        numbers(&b, "dd.earnings .amt").await,
        vec![summary.earnings.get()]
    );
    visit(
        &b,
        orch.console,
        &format!("/search?q={}", audit_job.spec),
        "search-cid",
        &mut sizes,
    )
    .await;
    assert_eq!(b.attrs("tr.use", "data-field").await, ["spec"]);
    let log_uses: Vec<ganglion_rpc::audit::AuditCidUse> =
        cli_json(&orch.config, &["audit", "cid", &logs[0].cid, "--json"]).await;
    assert!(log_uses.iter().any(|u| u.field == "logs" && u.job_id == id));

    b.close().await;

    // 375 px wide: no page scrolls sideways (tables scroll inside their box).
    let phone = Browser::start_narrow(375).await;
    for path in [
        "/jobs".to_string(),
        format!("/jobs/{id}"),
        "/market".into(),
        "/search".into(),
    ] {
        phone.open(orch.console, &path).await;
        let widths = phone
            .js("return [window.innerWidth, document.documentElement.scrollWidth]")
            .await;
        assert_eq!(
            widths[0], 375,
            "{path}: the viewport is not 375 px: {widths}"
        );
        assert_eq!(
            widths[1], 375,
            "{path} scrolls sideways at 375 px: {widths}"
        );
    }
    phone.open(orch.console, &format!("/jobs/{id}")).await;
    phone.screenshot("job-375px").await;
    sizes.push(format!("job-375px.png  /jobs/{id} at 375 px"));
    phone.close().await;

    // Actions need the token; bad input is a 404, never a panic.
    let form = "token=wrong";
    let (code, _) = browser::request(
        orch.console,
        &format!(
            "POST /jobs/{id}/stop HTTP/1.0\r\nHost: x\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        ),
    )
    .await;
    assert_eq!(code, 403, "a wrong token stops nothing");
    assert!(!orch.token.is_empty());
    let (_, head, _) = browser::get_with_headers(orch.console, "/jobs").await;
    for h in [
        "x-frame-options: deny",
        "x-content-type-options: nosniff",
        "frame-ancestors 'none'",
    ] {
        assert!(head.contains(h), "{h} missing from {head}");
    }
    let unknown = "0".repeat(64);
    for bad in [
        "/jobs/zz".to_string(),
        "/jobs/%00".into(),
        "/ipfs/not-a-cid".into(),
        "/nowhere".into(),
        "/jobs/../../etc".into(),
        format!("/jobs/{unknown}"),
        format!("/jobs/{unknown}/live"),
    ] {
        let (code, _) = browser::get(orch.console, &bad).await;
        assert_eq!(code, 404, "{bad}");
    }
    std::fs::write(
        browser::screenshot_dir().join("sizes.txt"),
        sizes.join("\n") + "\n",
    )
    .expect("sizes.txt");

    assert!(
        stalled.await.expect("the stalled client's task"),
        "a client that never finished its headers was not dropped"
    );
    stop.cancel();
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = world;
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
