//! `ganglion gpus [--json] [--config FILE]`: what this machine has, as a table or JSON.

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_node::gpu::{self, Inventory};
use ganglion_node::settings::Settings;

/// Show the GPUs this node detects (NVML, AMD sysfs/KFD) and declares (config).
#[derive(Debug, clap::Args)]
pub struct Args {
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
pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = Settings::load(args.config.as_deref())
        .context("loading the settings")?
        .node;
    let inv = gpu::detect(&cfg.gpus.sysfs_root, &cfg.gpus.declared);
    for note in &inv.notes {
        eprintln!("note: {note}");
    }
    if let Err(e) = inv.offerable(cfg.network) {
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
        let out = serde_json::json!({ "inventory": inv, "benchmark": bench });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table(&inv));
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

fn table(inv: &Inventory) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<4} {:<9} {:<7} {:<28} {:>9} {:<8} {:<18}",
        "IDX", "SOURCE", "VENDOR", "NAME", "VRAM GiB", "ARCH", "UUID / NODE"
    );
    for g in &inv.gpus {
        let source = format!("{:?}", g.source).to_lowercase();
        let vendor = format!("{:?}", g.vendor).to_lowercase();
        let arch = g
            .compute_capability
            .map(|c| format!("sm_{}{}", c.major, c.minor))
            .or_else(|| g.gfx_target.clone())
            .unwrap_or_else(|| "-".into());
        let id = g
            .uuid
            .clone()
            .or_else(|| g.render_node.clone())
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{:<4} {:<9} {:<7} {:<28} {:>9.1} {:<8} {:<18}",
            g.index,
            source,
            vendor,
            g.name,
            g.vram_total_mib as f64 / 1024.0,
            arch,
            id
        );
    }
    if inv.gpus.is_empty() {
        out.push_str("(none)\n");
    }
    out
}
