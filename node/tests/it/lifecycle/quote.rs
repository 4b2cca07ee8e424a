//! `job_quote` on a live market (two providers offering one GPU each, seen by the
//! orchestrator): a spec the market can place is quoted on both providers with its worst-case
//! cost, one it cannot fit is answered with the matcher's reason, one whose terms cannot be
//! met is refused as a submit would be; and a quote locks nothing, records nothing.

use ganglion_node::job::EngineError;
use ganglion_node::job::control::JobControl as _;
use ganglion_node::job::quote::Quote;

use super::support::{World, probe_spec};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quote_places_on_todays_market_and_locks_nothing() {
    let world = World::two_providers().await;
    let before = world.ntx();
    let World {
        chain,
        orch,
        pa,
        pb,
        ..
    } = world;
    let handle = orch.engine.handle();

    let spec = probe_spec(2, 600_000);
    let quote = handle.quote(&spec).await.expect("quotes");
    let Quote::Placeable { nodes, worst_case } = quote else {
        panic!("two one-GPU offers place a two-GPU job: {quote:?}");
    };
    let mut providers: Vec<_> = nodes.iter().map(|n| n.provider).collect();
    providers.sort_unstable();
    let mut want = vec![pa.key_hash, pb.key_hash];
    want.sort_unstable();
    assert_eq!(providers, want, "{nodes:?}");
    assert_eq!(nodes.iter().map(|n| n.gpus).sum::<u64>(), 2);
    // Every GPU at its rate until the deadline, at most: within the budget, and above the
    // cost of the run alone.
    assert!(
        worst_case <= spec.budget_ntx,
        "{worst_case} > {}",
        spec.budget_ntx
    );
    let run = ganglion_node::job::terms::window_cost(
        2,
        nodes[0].rate.max(nodes[1].rate),
        spec.limits.max_duration_s,
    );
    assert!(worst_case >= run, "{worst_case} < {run}");

    // More GPUs than the market holds: not placeable, with the matcher's reason.
    let mut big = spec.clone();
    big.gpus.count = 64;
    big.placement.max_nodes = Some(64);
    big.budget_ntx = spec.budget_ntx * 64;
    match handle.quote(&big).await.expect("quotes") {
        Quote::NotPlaceable { reason, .. } => assert!(!reason.is_empty()),
        other => panic!("64 GPUs placed on two one-GPU offers: {other:?}"),
    }

    // A budget that cannot pay the window: refused as a submit is.
    let mut short = spec.clone();
    short.budget_ntx = 1;
    let e = handle.quote(&short).await.expect_err("short budget");
    assert!(matches!(e, EngineError::Terms(_)), "{e}");

    // Nothing locked, nothing recorded.
    assert_eq!(
        orch.engine.handle().all_records().expect("store").0.len(),
        0
    );
    assert_eq!(
        [
            chain.ntx_of(&pa.key_hash),
            chain.ntx_of(&pb.key_hash),
            chain.ntx_of(&orch.key_hash)
        ],
        before
    );
    super::support::shutdown(chain, orch, vec![pa, pb]).await;
}
