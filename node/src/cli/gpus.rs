//! `ganglion gpus [--json] [--config FILE]`: what this machine has, as a table or JSON.

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_dispatch::gpu;
use ganglion_node::settings::Settings;

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
            "offer": offer,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", gpu::table::render(&inv));
        for m in bench.iter().flatten() {
            match m.device {
                gpu::bench::Device::Cpu => println!(
                    "benchmark (CPU, 1 thread; no GPU numbers measured): fp32 {:.2} GFLOP/s, memory {:.1} GB/s, score {}",
                    m.fp32_tflops * 1000.0,
                    m.mem_gbps,
                    m.score
                ),
                gpu::bench::Device::Cuda(ordinal) => println!(
                    "benchmark (CUDA device {ordinal}): fp32 {:.1} TFLOP/s, fp16 {:.1} TFLOP/s, bf16 {:.1} TFLOP/s, device memory {:.0} GB/s, host-to-device {:.1} GB/s, score {}",
                    m.fp32_tflops,
                    m.fp16_tflops.unwrap_or(0.0),
                    m.bf16_tflops.unwrap_or(0.0),
                    m.mem_gbps,
                    m.h2d_gbps.unwrap_or(0.0),
                    m.score
                ),
            }
        }
        if let Some(o) = &offer {
            let gpus: Vec<String> = (o.gpus.iter())
                .map(|g| format!("{} × {} ({} MiB)", g.free, g.model.name, g.model.vram_mib))
                .collect();
            println!(
                "offer (as `ganglion node run` would advertise it): score {}, {} per GPU-hour, GPUs: {}",
                o.score,
                ganglion_rpc::amount::ntx_text(o.price_per_gpu_hour),
                if gpus.is_empty() {
                    "none".to_string()
                } else {
                    gpus.join(", ")
                }
            );
        }
    }
    Ok(())
}
