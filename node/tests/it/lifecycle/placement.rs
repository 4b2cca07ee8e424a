//! Network-aware placement (issue #21) on a live market: the two providers ping each other,
//! their offers carry the measurements as signed links, and the orchestrator's matcher judges
//! `placement.max_rtt_ms` by the matrix it assembles from them — a two-node job with the
//! bound matches, and `job_status` / `market_matrix` show the measured pair; an orchestrator
//! to which those links are stale (its clock runs past their freshness bound) refuses the same
//! spec naming `placement.max_rtt_ms`.

use std::sync::Arc;

use ganglion_indexer::store::SledKv;
use ganglion_node::audit::service::AuditService;
use ganglion_node::job::control::JobControl as _;
use ganglion_node::job::quote::Quote;
use ganglion_node::job::state::OrchestratorState;
use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_p2p as p2p;
use ganglion_p2p::links::LINK_MAX_AGE_MS;
use ganglion_p2p::matrix::LinkMatrix;
use ganglion_rpc::audit::MarketMatrix;
use ganglion_rpc::types::JobStatus;
use ganglion_storage::blockstore::Blockstore;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

use super::support::{self, Node, World, connect_market, engine_config, probe_spec, wait_for};
use crate::rpc_client::http;

/// The bound the specs ask for, ms: far above loopback round trips (well under 1 ms).
const MAX_RTT_MS: u32 = 200;

/// A clock past the links' freshness bound (and the offers' validity).
fn ahead() -> u64 {
    p2p::now_ms() + LINK_MAX_AGE_MS + 60_000
}

/// A JSON-RPC server over `orch`'s engine, indexer and swarm, as `ganglion node run` serves it.
async fn serve<E: ganglion_dispatch::executor::Executor + 'static>(
    orch: &Node<E>,
) -> ganglion_rpc::server::Running {
    let settings = Settings::from_toml(&format!(
        "network = \"devnet\"\ndata_dir = \"{}\"",
        orch.dir.join("rpc").display()
    ))
    .expect("settings");
    let module = Api::new(settings)
        .expect("api")
        .with_jobs(Arc::new(orch.engine.handle()))
        .with_audit(
            AuditService::<SledKv>::new(
                orch.indexer.clone(),
                orch.blocks.clone() as Arc<dyn Blockstore>,
            )
            .with_p2p(orch.p2p.clone()),
        )
        .into_module()
        .expect("the namespaces merge");
    ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), "token", module)
        .await
        .expect("serves")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_max_rtt_job_matches_on_the_providers_links_and_stale_links_refuse_it() {
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = World::two_providers().await;
    let (ka, kb) = (pa.key_hash, pb.key_hash);
    let mut spec = probe_spec(1, 1_800_000);
    spec.placement.max_rtt_ms = Some(MAX_RTT_MS);

    // Both providers report the pair (each pings the other every 500 ms and re-publishes
    // every 500 ms).
    wait_for(
        "a two-sided A–B pair in the orchestrator's matrix",
        || async {
            let market = orch.p2p.market().await.ok()?;
            let m = LinkMatrix::assemble(&market, p2p::now_ms());
            m.between(&ka, &kb).filter(|p| !p.one_sided).cloned()
        },
    )
    .await;
    let handle = orch.engine.handle();
    match handle.quote(&spec).await.expect("quotes") {
        Quote::Placeable { nodes, .. } => assert_eq!(nodes.len(), 2, "{nodes:?}"),
        other => panic!("two providers 1 ms apart place a 200 ms job: {other:?}"),
    }

    // The live match: the job is assigned across both, with the pair kept in its record.
    let job = orch.engine.handle().submit(&spec).await.expect("submits");
    let record = wait_for("the job assigned", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert!(
            !matches!(
                r.state,
                OrchestratorState::Cancelled | OrchestratorState::Expired
            ),
            "{r:?}"
        );
        matches!(
            r.state,
            OrchestratorState::Assigned | OrchestratorState::Settled
        )
        .then_some(r)
    })
    .await;
    let links = record.detail.links.clone().expect("the plan's links");
    assert_eq!(links.pairs.len(), 1, "{links:?}");
    let pair = &links.pairs[0];
    assert!(pair.joins(&ka, &kb), "{pair:?}");
    assert!(
        pair.rtt_p50_us <= MAX_RTT_MS * 1000 && pair.rtt_p50_us <= pair.rtt_p90_us,
        "{pair:?}"
    );
    assert!(!pair.one_sided);

    // What `ganglion job status` and `ganglion market --json` show.
    let running = serve(&orch).await;
    let c = http(running.addr, None);
    let id = hex::encode(job.0);
    let statuses: Vec<JobStatus> = c
        .request("job_status", rpc_params![id])
        .await
        .expect("job_status");
    let mine = statuses
        .iter()
        .find(|s| s.role == "orchestrator")
        .expect("orchestrator record");
    assert_eq!(mine.links.len(), 1, "{mine:?}");
    assert_eq!(mine.links[0].rtt_p50_us, pair.rtt_p50_us);
    assert_eq!(
        [mine.links[0].a.clone(), mine.links[0].b.clone()],
        [hex::encode(ka.min(kb)), hex::encode(ka.max(kb))]
    );
    let matrix: MarketMatrix = c
        .request("market_matrix", rpc_params![])
        .await
        .expect("market_matrix");
    assert!(
        matrix
            .pairs
            .iter()
            .any(|p| p.a == hex::encode(ka.min(kb)) && p.b == hex::encode(ka.max(kb))),
        "{matrix:?}"
    );
    assert_eq!(matrix.max_age_s, LINK_MAX_AGE_MS / 1000);
    // The orchestrator pings both providers: its own row, for information.
    assert_eq!(matrix.own.len(), 2, "{matrix:?}");
    running.handle.stop().expect("stop");
    // The job ends, its GPUs are offered again.
    wait_for("the job settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.state == OrchestratorState::Settled).then_some(())
    })
    .await;

    // Stale links: an orchestrator whose clock is past their freshness bound sees the same
    // offers and refuses the spec for want of a measured pair.
    let stale = support::orchestrator_with(
        &chain,
        3,
        &chain.dir.path().join("stale"),
        ganglion_node::job::EngineConfig {
            clock: ahead,
            ..engine_config(&chain)
        },
    )
    .await;
    connect_market(&stale, &[&pa, &pb], 2).await;
    // Without the bound it places the spec (once the providers offer their GPUs again): only
    // the RTT bound needs links.
    let mut unbounded = spec.clone();
    unbounded.placement.max_rtt_ms = None;
    let stale_handle = stale.engine.handle();
    wait_for(
        "the stale orchestrator to place the unbounded spec",
        || async {
            matches!(
                stale_handle.quote(&unbounded).await.expect("quotes"),
                Quote::Placeable { .. }
            )
            .then_some(())
        },
    )
    .await;
    match stale_handle.quote(&spec).await.expect("quotes") {
        Quote::NotPlaceable { reason, pair } => {
            assert!(reason.contains("placement.max_rtt_ms"), "{reason}");
            assert!(reason.contains("1 unmeasured"), "{reason}");
            // The pair the text shortens, in full.
            let pair = pair.expect("the failing pair is named");
            assert_eq!(pair.rtt_us, None, "{pair:?}");
            let mut ends = [pair.a, pair.b];
            ends.sort_unstable();
            let mut want = [ka, kb];
            want.sort_unstable();
            assert_eq!(ends, want);
        }
        other => panic!("stale links placed a max_rtt job: {other:?}"),
    }

    stale.cancel.cancel();
    stale.shutdown().await;
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
