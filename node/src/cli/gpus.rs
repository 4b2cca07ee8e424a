//! `ganglion gpus [--json] [--config FILE]`: what this machine has, as a table or JSON.

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_dispatch::gpu;
use ganglion_market::snapshot::{Compute, Offer};
use ganglion_node::settings::Settings;

use super::remote::print_stdout;

/// Show the GPUs this node detects (NVML, AMD sysfs/KFD) and declares (config).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also run the onboarding benchmark (CPU on machines without a usable GPU).
    #[arg(long)]
    pub bench: bool,
    /// Also show the offer `ganglion node run` would advertise for these GPUs (needs
    /// `[provider]`; runs the benchmark, whose CUDA score the offer carries). The bond is
    /// assumed to cover every pooled GPU and the provider key is left zero: no chain is read.
    #[arg(long)]
    pub offer: bool,
    /// Node config (TOML) with `[[gpus.declared]]` and `network`: the same file `node`,
    /// `wallet` and `doctor` read; `GANGLION_*` variables override it.
    #[arg(long, env = "GANGLION_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Runs the subcommand; notes (degraded sources) go to stderr, one line each.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let cfg = Settings::load(args.config.as_deref()).context("loading the settings")?;
    let mut inv = gpu::detect(&cfg.gpus.sysfs_root, &cfg.gpus.declared);
    // With NVIDIA GPUs to offer, the provider's start-up check: can containers get them?
    let containers = if inv.has_offerable_nvidia() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        rt.block_on(ganglion_node::daemon::gpus::container_check(
            std::path::Path::new(ganglion_dispatch::executor::engine::DEFAULT_SOCKET),
            std::time::Duration::from_secs(60),
            &mut inv,
            &ganglion_node::daemon::overlay::probe_image_tag(),
        ))
    } else {
        None
    };
    if let Some(gpu::docker::NvidiaAccess::Missing { missing, .. }) =
        containers.as_ref().map(|c| &c.access)
    {
        eprintln!("warning: NVIDIA GPUs present but not usable in containers: {missing}");
    }
    for note in &inv.notes {
        eprintln!("note: {note}");
    }
    let offerable = ganglion_node::config::offerable_on(&inv, cfg.network);
    if let Err(e) = &offerable {
        eprintln!("warning: {e}");
    }
    let bench = (args.bench || args.offer).then(|| {
        let (results, note) = gpu::bench::measure_onboarding(gpu::cuda::CudaSizes::ONBOARDING);
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        results
    });
    let offer = if args.offer {
        let limits = cfg
            .provider
            .as_ref()
            .context("--offer needs a [provider] section in the config")?;
        let offerable = offerable.context("no offer on this network")?;
        let pooled = limits.pooled(&offerable).context("[provider] pool")?;
        let measured = bench.as_deref().unwrap_or_default();
        Some(ganglion_node::daemon::gpus::benchmarked_offer(
            limits,
            [0; 28],
            u32::try_from(pooled.len()).unwrap_or(u32::MAX),
            cfg.overlay.direct,
            &pooled,
            measured,
        ))
    } else {
        None
    };
    if args.json {
        let out = serde_json::json!({
            "inventory": inv,
            "containers": containers,
            "benchmark": bench,
            "offer": offer.as_ref().map(offer_json).transpose()?,
        });
        return print_stdout(&format!("{}\n", serde_json::to_string_pretty(&out)?));
    }
    let mut text = gpu::table::render(&inv);
    for m in bench.iter().flatten() {
        text.push_str(&bench_line(m));
        text.push('\n');
    }
    if let Some(o) = &offer {
        text.push_str(&offer_line(o));
        text.push('\n');
    }
    print_stdout(&text)
}

/// One benchmark result as a line of text.
fn bench_line(m: &gpu::bench::Measured) -> String {
    match m.device {
        gpu::bench::Device::Cpu => format!(
            "benchmark (CPU, 1 thread; no GPU numbers measured): fp32 {:.2} GFLOP/s, memory {:.1} \
             GB/s, score {}",
            m.fp32_tflops * 1000.0,
            m.mem_gbps,
            m.score
        ),
        gpu::bench::Device::Cuda(ordinal) => format!(
            "benchmark (CUDA device {ordinal}): fp32 {:.1} TFLOP/s, fp16 {:.1} TFLOP/s, bf16 {:.1} \
             TFLOP/s, device memory {:.0} GB/s, host-to-device {:.1} GB/s, score {}",
            m.fp32_tflops,
            m.fp16_tflops.unwrap_or(0.0),
            m.bf16_tflops.unwrap_or(0.0),
            m.mem_gbps,
            m.h2d_gbps.unwrap_or(0.0),
            m.score
        ),
    }
}

/// The benchmark version behind an offer's score; `None` = unmeasured.
fn bench_version(o: &Offer) -> Option<u32> {
    match o.compute {
        Compute::Measured { bench_version } => Some(bench_version),
        Compute::Unmeasured => None,
    }
}

/// The offer preview as text: its score and where it comes from (`measured (bench vN)` or
/// `unmeasured`, as `ganglion market` says it), price, uplink (Mbit/s) and GPUs.
fn offer_line(o: &Offer) -> String {
    let gpus: Vec<String> = (o.gpus.iter())
        .map(|g| format!("{} × {} ({} MiB)", g.free, g.model.name, g.model.vram_mib))
        .collect();
    format!(
        "offer (as `ganglion node run` would advertise it): score {} {}, {} per GPU-hour, uplink \
         {} Mbit/s (the default until its throughput probes measure one), GPUs: {}",
        o.score,
        super::market::compute_text(bench_version(o)),
        ganglion_rpc::amount::ntx_text(o.price_per_gpu_hour),
        o.uplink_mbps,
        if gpus.is_empty() {
            "none".to_string()
        } else {
            gpus.join(", ")
        }
    )
}

/// The offer preview as JSON: the offer as signed, with `compute` always written —
/// `{"kind": "measured", "bench_version": N}` or `{"kind": "unmeasured"}` — where the signed
/// form leaves an unmeasured offer's out.
fn offer_json(o: &Offer) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(o)?;
    if let Some(map) = v.as_object_mut() {
        map.insert("compute".into(), serde_json::to_value(o.compute)?);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(compute: Compute) -> Offer {
        Offer {
            provider: [0; 28],
            bond_gpus: 2,
            price_per_gpu_hour: 1_000_000,
            score: 100,
            uplink_mbps: 1_000,
            max_job_duration_s: None,
            max_job_nodes: None,
            gpus: vec![],
            direct_capable: false,
            compute,
        }
    }

    /// The preview says where the score comes from, in text and in JSON, measured or not.
    #[test]
    fn the_offer_preview_says_measured_or_unmeasured() {
        let measured = offer(Compute::Measured { bench_version: 2 });
        let unmeasured = offer(Compute::Unmeasured);
        assert!(
            offer_line(&measured).contains("score 100 measured (bench v2), "),
            "{}",
            offer_line(&measured)
        );
        let line = offer_line(&unmeasured);
        assert!(line.contains("score 100 unmeasured, "), "{line}");
        assert!(line.contains("uplink 1000 Mbit/s"), "{line}");
        let json = offer_json(&measured).expect("json");
        assert_eq!(
            json["compute"],
            serde_json::json!({"kind": "measured", "bench_version": 2})
        );
        let json = offer_json(&unmeasured).expect("json");
        assert_eq!(json["compute"], serde_json::json!({"kind": "unmeasured"}));
        assert_eq!(json["score"], 100);
    }
}
