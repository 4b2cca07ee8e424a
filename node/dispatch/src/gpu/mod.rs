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
pub mod docker;
pub mod nvml;
pub mod smoke;
pub mod table;

use std::path::Path;

use serde::Serialize;

pub use ganglion_market::declared;
pub use ganglion_market::gpu::{Gpu, MigSlice, NotOffered, Source};

/// Every GPU found, and one line per source that could not look.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Inventory {
    /// GPUs in source order: NVML, sysfs, declared.
    pub gpus: Vec<Gpu>,
    /// Degradation messages, e.g. `NVML: NVIDIA driver library (libnvidia-ml.so.1) not found`.
    pub notes: Vec<String>,
}

impl Inventory {
    /// GPUs that may be offered: every listed GPU without a [`Gpu::not_offered`] reason (MIG
    /// parents, unidentified devices, APUs and GPUs containers cannot reach are listed but left
    /// out), in inventory order. Declared GPUs are among them: the node refuses those on every
    /// network but the devnet (its config's `offerable_on`).
    pub fn offerable(&self) -> Vec<Gpu> {
        self.gpus
            .iter()
            .filter(|g| g.not_offered.is_none())
            .cloned()
            .collect()
    }

    /// How many GPUs are declared in the config rather than detected.
    pub fn declared_count(&self) -> usize {
        self.gpus.iter().filter(|g| g.is_declared()).count()
    }

    /// Marks every NVML GPU (whole GPUs and MIG devices) not offered when `access` says the
    /// engine cannot give NVIDIA GPUs to containers; returns how many were marked.
    pub fn apply_container_access(&mut self, access: &docker::NvidiaAccess) -> usize {
        let docker::NvidiaAccess::Missing { missing, .. } = access else {
            return 0;
        };
        let mut marked = 0;
        for g in self.gpus.iter_mut().filter(|g| g.source == Source::Nvml) {
            if g.not_offered.is_none() {
                g.not_offered = Some(NotOffered::NotUsableInContainers {
                    reason: missing.clone(),
                });
                marked += 1;
            }
        }
        marked
    }

    /// Whether any NVML GPU (or MIG device) would be offered: the start-up container check
    /// runs only then.
    pub fn has_offerable_nvidia(&self) -> bool {
        self.gpus
            .iter()
            .any(|g| g.source == Source::Nvml && g.not_offered.is_none())
    }
}

/// Detects GPUs from every source: NVML, then AMD under `sysfs_root` (normally `/sys`), then
/// the declared ones. Never fails: a source that cannot look adds a note.
pub fn detect(sysfs_root: &Path, declared: &[declared::DeclaredGpu]) -> Inventory {
    let mut inv = Inventory::default();
    nvml::merge(&mut inv, nvml::detect());
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
