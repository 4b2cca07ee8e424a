//! A GPU as the market sees it: the description a provider's inventory gives each device
//! (detected through NVML or sysfs by `ganglion-dispatch`'s `gpu` module, or declared in the
//! config, see [`crate::declared`]), and why a listed device is never offered.

use serde::Serialize;

use crate::spec::{ComputeCapability, Vendor};

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
    /// Total VRAM, MiB (2^20 bytes), rounded down.
    pub vram_total_mib: u64,
    /// The same total in exact bytes, when the source reads bytes (NVML `nvmlMemory_t.total`,
    /// amdgpu's `mem_info_vram_total`); `None` for declared GPUs, whose size is given in GiB.
    /// The offer carries it as [`crate::GpuModel::vram_bytes`], so fit checks see the bytes the
    /// driver reported (an H100 NVL's 99 961 274 368 B is not a whole number of MiB) and only
    /// the class comparison ([`crate::vram`]) applies a tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_total_bytes: Option<u64>,
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
    /// Set when this entry is a MIG device (a slice of a MIG-enabled NVIDIA GPU): its own
    /// `uuid` (`MIG-…`) and memory come from the MIG handle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigSlice>,
    /// The "VRAM" is shared system memory (an APU), not dedicated device memory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_memory: bool,
    /// Why this GPU is listed but never offered; `None` for a GPU that may be offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_offered: Option<NotOffered>,
}

impl Gpu {
    /// Whether the GPU is declared rather than detected.
    pub fn is_declared(&self) -> bool {
        self.source == Source::Declared
    }

    /// A GPU of `source` and `vendor` with every optional field empty.
    pub fn bare(index: u32, source: Source, vendor: Vendor, name: String) -> Self {
        Self {
            index,
            source,
            vendor,
            name,
            uuid: None,
            vram_total_mib: 0,
            vram_total_bytes: None,
            vram_free_mib: None,
            compute_capability: None,
            gfx_target: None,
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
            mig: None,
            shared_memory: false,
            not_offered: None,
        }
    }
}

/// Where a MIG device sits on its parent GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigSlice {
    /// The parent GPU's UUID (`GPU-…`).
    pub parent_uuid: Option<String>,
    /// The parent GPU's NVML index.
    pub parent_index: u32,
    /// The index given to `nvmlDeviceGetMigDeviceHandleByIndex` (sparse: NotFound indices
    /// are skipped, so the slots of three slices need not be 0, 1, 2).
    pub slot: u32,
    /// The GPU-instance profile, e.g. `3g.20gb`, when the MIG device's name carries it.
    pub profile: Option<String>,
}

/// Why a listed GPU is never offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "why")]
pub enum NotOffered {
    /// MIG is enabled: its MIG devices are offered one by one instead, never the parent whole
    /// as well (NVIDIA MIG user guide: a MIG-enabled GPU is used only through its instances).
    MigParent {
        /// MIG devices found on it (listed as their own entries).
        slices: u32,
    },
    /// NVML listed the device but could not identify it (the README's `name: ""`, memory 0).
    Unidentified {
        /// The NVML query that failed and how, e.g. `nvmlDeviceGetName returned an empty name`.
        query: String,
    },
    /// An APU: its memory is the host's (KFD `local_mem_size` 0), so there is no dedicated
    /// VRAM of any size to offer.
    SharedSystemMemory,
    /// An AMD card with no node in the KFD topology (`/sys/class/kfd/kfd/topology/nodes`):
    /// ROCm reaches a GPU only through `/dev/kfd` and its KFD node, so no container could
    /// compute on it (amdkfd not loaded, or the card unsupported by it).
    NoKfdNode,
    /// The Docker Engine cannot give this GPU to a container (decided at start-up, see
    /// `ganglion-dispatch`'s `gpu::docker`).
    NotUsableInContainers {
        /// The reason, with its fix.
        reason: String,
    },
}

impl std::fmt::Display for NotOffered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MigParent { slices } => write!(
                f,
                "MIG enabled: its {slices} MIG device(s) are offered instead of the whole GPU"
            ),
            Self::Unidentified { query } => write!(f, "unidentified ({query})"),
            Self::SharedSystemMemory => {
                write!(f, "APU: shared system memory, not dedicated VRAM")
            }
            Self::NoKfdNode => write!(
                f,
                "no KFD topology node: ROCm cannot use it (load amdgpu with KFD: `modprobe \
                 amdgpu`, check `ls /sys/class/kfd/kfd/topology/nodes` and `/dev/kfd`)"
            ),
            Self::NotUsableInContainers { reason } => {
                write!(f, "present but not usable in containers: {reason}")
            }
        }
    }
}
