//! A provider admits a job's spec before it reserves anything (issue 18): its `[provider]`
//! image policy (`refuse_images`) and its Docker Engine's images are checked against the spec
//! fetched from the orchestrator. A refused provider is left out and the job placed on
//! another; a job whose image no provider holds is assigned to nobody (its budget never pays a
//! run that would fail at dispatch), and the orchestrator's record says why.

use ganglion_market::limits::ProviderLimits;
use ganglion_market::spec::Ensemble;
use ganglion_node::job::state::OrchestratorState;

use super::support::{self, Chain, ProviderIdent, wait_for};

/// The probe spec on one GPU of one node, with `image`.
fn one_gpu(image: &str) -> Ensemble {
    let mut json = serde_json::to_value(support::probe_spec(1, 600_000)).expect("json");
    json["gpus"]["count"] = 1.into();
    json["placement"]["max_nodes"] = 1.into();
    json["image"] = serde_json::json!({ "local": image });
    Ensemble::from_json_str(&json.to_string()).expect("spec parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_or_absent_image_is_declined_at_accept() {
    let chain = Chain::start().await;
    let a = ProviderIdent::bonded(&chain, 1).await;
    let b = ProviderIdent::bonded(&chain, 2).await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let image = support::probe_image();
    let repo = image.split(':').next().expect("repo").to_string();
    // A scores higher (the matcher asks it first) and refuses the probe's repository.
    let limits: ProviderLimits = serde_json::from_value(serde_json::json!({
        "price_ntx_per_gpu_hour": support::RATE,
        "refuse_images": [format!("{repo}:*")],
    }))
    .expect("limits");
    let pa = support::provider_limited(
        &chain,
        &a,
        &root.join("pa"),
        support::RATE,
        200,
        Some(limits),
    )
    .await;
    let pb = support::provider(&chain, &b, &root.join("pb")).await;
    support::connect_market(&orch, &[&pa, &pb], 2).await;

    let job = orch
        .engine
        .submit(&one_gpu(&image))
        .await
        .expect("lock submitted");
    let r = wait_for("Settled", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        assert!(
            !r.state.is_terminal() || r.state == OrchestratorState::Settled,
            "{r:?}"
        );
        (r.state == OrchestratorState::Settled).then_some(r)
    })
    .await;
    let view = orch.indexer.job(&job, 0).expect("q").expect("known").value;
    assert_eq!(view.assignments.len(), 1);
    assert_eq!(
        view.assignments[0].provider,
        b.payment_hash(),
        "placed on B"
    );
    let refusal = r
        .detail
        .excluded
        .iter()
        .find(|e| e.chosen.provider == a.payment_hash())
        .expect("A was asked first and refused");
    assert!(
        refusal.reason.contains("refuse_images") && refusal.reason.contains(&image),
        "{refusal:?}"
    );
    assert!(refusal.until_ms.is_none(), "left out for the job's life");

    // An image neither provider's engine holds: both decline, nobody is assigned.
    let job = orch
        .engine
        .submit(&one_gpu("ganglion/never-built:1"))
        .await
        .expect("lock submitted");
    let r = wait_for("both providers declined", || async {
        let r = orch.engine.orchestrator_record(&job).expect("store")?;
        (r.detail.excluded.len() == 2).then_some(r)
    })
    .await;
    for e in &r.detail.excluded {
        assert!(
            e.reason
                .contains("image `ganglion/never-built:1` is not on this provider"),
            "{e:?}"
        );
    }
    assert_eq!(r.state, OrchestratorState::Matching, "{r:?}");
    assert!(
        orch.indexer
            .job(&job, 0)
            .expect("q")
            .expect("known")
            .value
            .assignments
            .is_empty()
    );
    orch.engine.cancel(&job).await.expect("cancel");
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
