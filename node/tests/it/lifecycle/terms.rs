//! Terms no run can meet are refused before anything is locked or started:
//! a budget of 1 base unit for the probe's two GPUs, a budget that pays the longest run but not
//! every GPU until the deadline (the escrow v2 assign would refuse it, G6), and a 200 s run
//! with the deadline 150 s ahead, a budget above the wallet's NTX. Nothing reaches the chain: the orchestrator's NTX and ADA are untouched and its job
//! store is empty.

use ganglion_node::job::EngineError;
use ganglion_node::job::engine::{OrchestratorRole, SpecError};
use ganglion_node::job::terms::{SETTLE_MARGIN_MS, TermsError};

use super::support::{self, Chain, RATE};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn impossible_terms_are_refused_before_the_lock() {
    let chain = Chain::start().await;
    let orch = support::orchestrator(&chain, 0, &chain.dir.path().join("orch")).await;
    let ntx = chain.ntx_of(&orch.key_hash);

    let mut poor = support::probe_spec(1, 600_000);
    poor.budget_ntx = 1;
    let err = orch.engine.submit(&poor).await.expect_err("budget refused");
    match &err {
        EngineError::Terms(TermsError::BudgetBelowWindow {
            budget: 1,
            gpus: 2,
            max_rate,
            max_duration_s,
            needed,
        }) => {
            assert_eq!(*max_rate, RATE);
            assert_eq!(
                *needed,
                ganglion_node::job::terms::window_cost(2, RATE, *max_duration_s)
            );
        }
        other => panic!("{other}"),
    }

    // 2 GPUs × 120 s cost 240 000; until the deadline 10 minutes out, 1 200 000.
    let mut short = support::probe_spec(1, 600_000);
    short.budget_ntx = 300_000;
    let err = orch
        .engine
        .submit(&short)
        .await
        .expect_err("window refused");
    match &err {
        EngineError::Terms(TermsError::BudgetBelowDeadlineWindow {
            budget: 300_000,
            gpus: 2,
            window_ms,
            needed,
            ..
        }) => {
            assert!(*window_ms <= 600_000 && *window_ms > 590_000, "{window_ms}");
            assert_eq!(
                *needed,
                ganglion_node::job::terms::deadline_window_cost([(2, RATE)], *window_ms, 0)
            );
        }
        other => panic!("{other}"),
    }

    let mut late = support::probe_spec(200, 150_000);
    late.limits.max_duration_s = 200;
    late.budget_ntx = 1_000_000;
    let err = orch
        .engine
        .submit(&late)
        .await
        .expect_err("deadline refused");
    match &err {
        EngineError::Terms(TermsError::DurationPastDeadline {
            max_duration_s: 200,
            left_ms,
            margin_ms,
        }) => {
            assert!(*left_ms <= 150_000 && *left_ms > 140_000, "{left_ms}");
            assert_eq!(*margin_ms, SETTLE_MARGIN_MS);
        }
        other => panic!("{other}"),
    }

    // A budget above the wallet's NTX: refused with both amounts, not the balancer's shortfall.
    let mut rich = support::probe_spec(1, 600_000);
    rich.budget_ntx = ntx + 1;
    let err = orch
        .engine
        .submit(&rich)
        .await
        .expect_err("balance refused");
    match &err {
        EngineError::Spec(s) => match s.as_ref() {
            SpecError::BudgetOverBalance { budget, balance } => {
                assert_eq!((*budget, *balance), (ntx + 1, ntx));
                let text = err.to_string();
                assert!(text.contains(" NTX > balance "), "{text}");
            }
            other => panic!("{other}"),
        },
        other => panic!("{other}"),
    }

    assert_eq!(chain.ntx_of(&orch.key_hash), ntx, "nothing locked");
    assert!(
        orch.engine
            .store()
            .all::<OrchestratorRole>()
            .expect("store")
            .is_empty(),
        "no job recorded"
    );
    orch.shutdown().await;
}
