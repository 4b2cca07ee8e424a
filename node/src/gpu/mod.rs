//! GPU inventory: what this machine has, from where, and how sure we are.
//!
//! Three sources, merged by [`detect`]:
//! - [`nvml`]: NVIDIA GPUs through NVML (`libnvidia-ml.so.1`, loaded at run time by
//!   `nvml-wrapper`, so the node builds and runs without the driver);
//! - [`amd`]: AMD GPUs from sysfs (`/sys/class/drm`) and the KFD topology
//!   (`/sys/class/kfd/kfd/topology/nodes`), no ROCm tools needed;
//! - [`declared`]: GPUs written in the config, for devnets, tests and CPU-only machines,
//!   always marked [`Source::Declared`] and refused on any network but the devnet.
//!
//! A source that cannot run degrades to one line in [`Inventory::notes`]; detection never
//! panics and never fails as a whole.

pub mod amd;
pub mod bench;
pub mod cuda;
pub mod declared;
pub mod docker;
pub mod nvml;

use std::path::Path;

use serde::Serialize;

use crate::config::Network;
use crate::market::spec::{ComputeCapability, Vendor};

/// Where a GPU's description comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Read from the NVIDIA driver (NVML).
    Nvml,
    /// Read from the kernel's sysfs and KFD topology (AMD).
    Sysfs,
    /// Written in the config: not detected, never real hardware.
    Declared,
}

/// One GPU as this node sees it. Fields a source cannot read are `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    /// Index within its source (NVML index, DRM card number, or declaration order).
    pub index: u32,
    /// Where this description comes from.
    pub source: Source,
    /// Vendor.
    pub vendor: Vendor,
    /// Product name, e.g. `NVIDIA A100-SXM4-80GB`; for AMD `0x1002:0x740c` unless declared.
    pub name: String,
    /// NVIDIA UUID (`GPU-…`), or a stable id for other sources.
    pub uuid: Option<String>,
    /// Total VRAM, MiB.
    pub vram_total_mib: u64,
    /// Free VRAM, MiB, when the driver reports it.
    pub vram_free_mib: Option<u64>,
    /// CUDA compute capability (NVIDIA).
    pub compute_capability: Option<ComputeCapability>,
    /// gfx target, e.g. `gfx90a` (AMD).
    pub gfx_target: Option<String>,
    /// Render node, e.g. `/dev/dri/renderD128` (AMD; what a container is given with `/dev/kfd`).
    pub render_node: Option<String>,
    /// PCI bus id, e.g. `0000:41:00.0`.
    pub pci_bus_id: Option<String>,
    /// Current PCIe generation.
    pub pcie_gen: Option<u32>,
    /// Current PCIe link width (lanes).
    pub pcie_width: Option<u32>,
    /// PCI bus ids at the far end of active NVLinks.
    pub nvlink_peers: Vec<String>,
    /// MIG mode enabled.
    pub mig_enabled: Option<bool>,
    /// GPU utilisation, percent.
    pub utilization_pct: Option<u32>,
    /// Temperature, °C.
    pub temperature_c: Option<u32>,
    /// Power limit, mW.
    pub power_limit_mw: Option<u32>,
    /// Compute processes running on it now.
    pub processes: Option<u32>,
    /// Driver version string (NVIDIA).
    pub driver_version: Option<String>,
    /// CUDA driver API version, e.g. 12040 for 12.4 (NVIDIA).
    pub cuda_driver_version: Option<i32>,
}

impl Gpu {
    /// Whether the GPU is declared rather than detected.
    pub fn is_declared(&self) -> bool {
        self.source == Source::Declared
    }
}

/// Every GPU found, and one line per source that could not look.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Inventory {
    /// GPUs in source order: NVML, sysfs, declared.
    pub gpus: Vec<Gpu>,
    /// Degradation messages, e.g. `NVML: libnvidia-ml.so.1 not found: …`.
    pub notes: Vec<String>,
}

/// Inventory rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Declared GPUs may only be offered on the devnet.
    #[error(
        "{count} declared GPU(s) in [gpus.declared] cannot be offered as real hardware on {network}; only the devnet accepts them"
    )]
    DeclaredOnRealNetwork {
        /// Declared GPUs.
        count: usize,
        /// The network configured.
        network: Network,
    },
}

impl Inventory {
    /// GPUs that may be offered on `network`.
    ///
    /// # Errors
    /// [`Error::DeclaredOnRealNetwork`] when declared GPUs are present on a network other than
    /// the devnet (remove them from the config there).
    pub fn offerable(&self, network: Network) -> Result<&[Gpu], Error> {
        let count = self.gpus.iter().filter(|g| g.is_declared()).count();
        if count > 0 && network != Network::Devnet {
            return Err(Error::DeclaredOnRealNetwork { count, network });
        }
        Ok(&self.gpus)
    }
}

/// Detects GPUs from every source: NVML, then AMD under `sysfs_root` (normally `/sys`), then
/// the declared ones. Never fails: a source that cannot look adds a note.
pub fn detect(sysfs_root: &Path, declared: &[declared::DeclaredGpu]) -> Inventory {
    let mut inv = Inventory::default();
    match nvml::detect() {
        Ok(found) => {
            inv.gpus.extend(found.gpus);
            inv.notes.extend(found.notes);
        }
        Err(e) => inv.notes.push(format!("NVML: {e}")),
    }
    match amd::detect(sysfs_root) {
        Ok(gpus) => inv.gpus.extend(gpus),
        Err(e) => inv.notes.push(format!("AMD sysfs: {e}")),
    }
    inv.gpus.extend(declared::to_gpus(declared));
    if inv.gpus.is_empty() {
        inv.notes
            .push("no GPUs detected or declared; see [gpus.declared] in the config".into());
    }
    inv
}
