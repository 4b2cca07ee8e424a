//! Measured compute on a live market (issue #21): the onboarding benchmark stubbed at the GPU
//! boundary only — no GPU here, so an NVML-found GPU and CUDA figures for it are a named test
//! double — goes through the daemon's own offer code (`daemon::gpus::benchmarked_offer`) into
//! a signed offer; the orchestrator's market sees it measured, with the benchmark's version
//! and score, and at equal price places a job on it before the declared, unmeasured provider
//! — even one advertising a higher score.

use ganglion_dispatch::gpu::bench::{BENCH_VERSION, Device, Measured};
use ganglion_market::gpu::{Gpu, Source};
use ganglion_market::limits::ProviderLimits;
use ganglion_market::snapshot::Compute;
use ganglion_market::spec::Vendor;
use ganglion_node::daemon::gpus::benchmarked_offer;
use ganglion_node::job::control::JobControl as _;
use ganglion_node::job::quote::Quote;

use super::support::{self, Chain, ProviderIdent, RATE, STAKE, probe_spec, wait_for};

/// The test double at the GPU boundary: what NVML would report for one H200.
fn nvml_gpu() -> Gpu {
    let mut g = Gpu::bare(0, Source::Nvml, Vendor::Nvidia, "NVIDIA H200".into());
    g.uuid = Some("GPU-00000000-0000-0000-0000-000000000001".into());
    g.vram_total_mib = 143_771;
    g
}

/// The test double at the GPU boundary: what the CUDA kernels would measure on it, scored
/// below the declared provider's advertised score.
fn cuda_figures() -> Measured {
    Measured {
        device: Device::Cuda(0),
        fp32_tflops: 51.0,
        fp16_tflops: Some(600.0),
        bf16_tflops: Some(600.0),
        mem_gbps: 4_000.0,
        h2d_gbps: Some(50.0),
        score: 100,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn benchmark_figures_reach_the_orchestrators_market_and_rank_a_measured_offer_first() {
    let chain = Chain::start().await;
    let a = ProviderIdent::bonded(&chain, 1).await;
    let b = ProviderIdent::bonded(&chain, 2).await;
    let root = chain.dir.path().to_path_buf();
    let orch = support::orchestrator(&chain, 0, &root.join("orch")).await;
    let limits: ProviderLimits = serde_json::from_value(serde_json::json!({
        "price_ntx_per_gpu_hour": RATE,
    }))
    .expect("limits");
    let gpu = nvml_gpu();
    let offer = benchmarked_offer(
        &limits,
        [0; 28],
        (STAKE / 1_000_000) as u32,
        false,
        &[&gpu],
        &[cuda_figures()],
    );
    assert_eq!(
        offer.compute,
        Compute::Measured {
            bench_version: BENCH_VERSION
        }
    );
    assert_eq!(offer.score, 100);
    assert!(offer.gpus.iter().all(|g| !g.declared), "{offer:?}");
    let pa = support::provider_offering(&chain, &a, &root.join("pa"), offer).await;
    let pb = support::provider_with(&chain, &b, &root.join("pb"), RATE, 200).await;
    support::connect_market(&orch, &[&pa, &pb], 2).await;

    // The orchestrator's market: A measured by this benchmark version, B unmeasured.
    let market = wait_for("both offers in the orchestrator's market", || async {
        let m = orch.p2p.market().await.ok()?;
        (m.len() == 2).then_some(m)
    })
    .await;
    let compute_of = |key| {
        market
            .iter()
            .find(|o| o.body.market.provider == key)
            .map(|o| (o.body.market.compute, o.body.market.score))
    };
    assert_eq!(
        compute_of(pa.key_hash),
        Some((
            Compute::Measured {
                bench_version: BENCH_VERSION
            },
            100
        ))
    );
    assert_eq!(compute_of(pb.key_hash), Some((Compute::Unmeasured, 200)));

    // Equal price: the measured offer is placed first, its lower score notwithstanding.
    let mut spec = probe_spec(1, 600_000);
    spec.gpus.count = 1;
    match orch.engine.handle().quote(&spec).await.expect("quotes") {
        Quote::Placeable { nodes, .. } => {
            assert_eq!(nodes.len(), 1, "{nodes:?}");
            assert_eq!(nodes[0].provider, pa.key_hash, "{nodes:?}");
        }
        other => panic!("two one-GPU offers place a one-GPU job: {other:?}"),
    }
    support::shutdown(chain, orch, vec![pa, pb]).await;
}
