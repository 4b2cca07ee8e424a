//! Declared GPUs: written in the config's `[[gpus.declared]]` tables, for devnets, tests and
//! CPU-only machines. They are [`Source::Declared`] everywhere, carry no benchmark numbers, and
//! [`super::Inventory::offerable`] refuses them on any network but the devnet.

use serde::{Deserialize, Serialize};

use super::{Gpu, Source};
use crate::market::spec::{ComputeCapability, Vendor};

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
        .map(|(i, d)| Gpu {
            index: i as u32,
            source: Source::Declared,
            vendor: d.vendor,
            name: d.name.clone(),
            uuid: Some(format!("declared-{i}")),
            vram_total_mib: d.vram_gib * 1024,
            vram_free_mib: None,
            compute_capability: d.compute_capability,
            gfx_target: d.gfx_target.clone(),
            render_node: None,
            pci_bus_id: None,
            pcie_gen: None,
            pcie_width: None,
            nvlink_peers: Vec::new(),
            mig_enabled: None,
            utilization_pct: None,
            temperature_c: None,
            power_limit_mw: None,
            processes: None,
            driver_version: None,
            cuda_driver_version: None,
        })
        .collect()
}
