//! Declared GPUs: written in the config's `[[gpus.declared]]` tables, for devnets, tests and
//! CPU-only machines. They are [`Source::Declared`] everywhere, carry no benchmark numbers, and
//! the node's `Inventory::offerable` refuses them on any network but the devnet.

use serde::{Deserialize, Serialize};

use crate::gpu::{Gpu, Source};
use crate::spec::{ComputeCapability, Vendor};

/// One `[[gpus.declared]]` table: `count` identical GPUs.
///
/// ```toml
/// [[gpus.declared]]
/// name = "NVIDIA A100-SXM4-80GB"
/// vendor = "nvidia"
/// vram_gib = 80
/// compute_capability = "8.0"
/// count = 2
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredGpu {
    /// Model name, matched by a spec's `gpus.models` globs.
    pub name: String,
    /// `nvidia` or `amd`.
    pub vendor: Vendor,
    /// VRAM per GPU, GiB.
    pub vram_gib: u64,
    /// CUDA compute capability (NVIDIA), e.g. `"8.0"`.
    #[serde(default)]
    pub compute_capability: Option<ComputeCapability>,
    /// gfx target (AMD), e.g. `"gfx90a"`.
    #[serde(default)]
    pub gfx_target: Option<String>,
    /// How many; default 1.
    #[serde(default = "one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

/// The declared GPUs as inventory entries, indexed in declaration order.
pub fn to_gpus(declared: &[DeclaredGpu]) -> Vec<Gpu> {
    declared
        .iter()
        .flat_map(|d| std::iter::repeat_n(d, d.count as usize))
        .enumerate()
        .map(|(i, d)| {
            let mut g = Gpu::bare(i as u32, Source::Declared, d.vendor, d.name.clone());
            g.uuid = Some(format!("declared-{i}"));
            g.vram_total_mib = d.vram_gib * 1024;
            g.compute_capability = d.compute_capability;
            g.gfx_target.clone_from(&d.gfx_target);
            g
        })
        .collect()
}
