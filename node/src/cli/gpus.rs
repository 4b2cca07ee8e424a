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
    if let Err(e) = ganglion_node::config::offerable_on(&inv, cfg.network) {
        eprintln!("warning: {e}");
    }
    let bench = args.bench.then(|| {
        let (results, note) = gpu::bench::measure_onboarding(gpu::cuda::CudaSizes::ONBOARDING);
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        results
    });
    if args.json {
        let out = serde_json::json!({
            "inventory": inv,
            "containers": containers,
            "benchmark": bench,
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
    }
    Ok(())
}
