//! NVIDIA GPUs through NVML (`nvml-wrapper`, which `dlopen`s `libnvidia-ml.so.1`).
//!
//! Per GPU: index, UUID, name, VRAM total/free, compute capability, driver and CUDA driver
//! version, PCIe generation and width, NVLink peers, MIG mode, utilisation, temperature,
//! power limit and running compute processes. A field the driver refuses (e.g. MIG on a
//! consumer card: `NotSupported`) is `None`, never an error. NVML calls block: call
//! [`detect`] from `spawn_blocking` in async code.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;

use super::{Gpu, Source};
use crate::market::spec::{ComputeCapability, Vendor};

/// NVLink links to probe per GPU (`NVML_NVLINK_MAX_LINKS` is 18 since Hopper).
const MAX_NVLINKS: u32 = 18;

/// Why NVML could not be used at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The library is not installed (no NVIDIA driver on this machine).
    #[error("libnvidia-ml.so.1 not found: {0} (no NVIDIA driver; NVIDIA GPUs are skipped)")]
    LibraryMissing(String),
    /// The library loaded but NVML failed to start or to count devices.
    #[error("NVML failed: {0}")]
    Nvml(#[source] NvmlError),
}

/// GPUs found and per-device problems.
#[derive(Debug, Default)]
pub struct Found {
    /// GPUs NVML enumerated.
    pub gpus: Vec<Gpu>,
    /// One line per device NVML listed but could not describe.
    pub notes: Vec<String>,
}

/// Enumerates NVIDIA GPUs.
///
/// # Errors
/// [`Error::LibraryMissing`] without the driver, [`Error::Nvml`] when NVML cannot start.
pub fn detect() -> Result<Found, Error> {
    let nvml = Nvml::init().map_err(|e| match e {
        NvmlError::LibloadingError(le) => Error::LibraryMissing(le.to_string()),
        NvmlError::FailedToLoadSymbol(s) => Error::LibraryMissing(s),
        other => Error::Nvml(other),
    })?;
    let count = nvml.device_count().map_err(Error::Nvml)?;
    let driver = nvml.sys_driver_version().ok();
    let cuda = nvml.sys_cuda_driver_version().ok();
    let mut found = Found::default();
    for index in 0..count {
        match describe(&nvml, index) {
            Ok(mut gpu) => {
                gpu.driver_version.clone_from(&driver);
                gpu.cuda_driver_version = cuda;
                found.gpus.push(gpu);
            }
            Err(e) => found.notes.push(format!("NVML device {index}: {e}")),
        }
    }
    Ok(found)
}

fn describe(nvml: &Nvml, index: u32) -> Result<Gpu, NvmlError> {
    let d = nvml.device_by_index(index)?;
    let mem = d.memory_info()?;
    let cc = d.cuda_compute_capability().ok().and_then(|c| {
        Some(ComputeCapability {
            major: u8::try_from(c.major).ok()?,
            minor: u8::try_from(c.minor).ok()?,
        })
    });
    let mut nvlink_peers = Vec::new();
    for link in 0..MAX_NVLINKS {
        let l = d.link_wrapper_for(link);
        if l.is_active().unwrap_or(false)
            && let Ok(pci) = l.remote_pci_info()
        {
            nvlink_peers.push(pci.bus_id);
        }
    }
    Ok(Gpu {
        index,
        source: Source::Nvml,
        vendor: Vendor::Nvidia,
        name: d.name()?,
        uuid: d.uuid().ok(),
        vram_total_mib: mem.total >> 20,
        vram_free_mib: Some(mem.free >> 20),
        compute_capability: cc,
        gfx_target: None,
        render_node: None,
        pci_bus_id: d.pci_info().ok().map(|p| p.bus_id),
        pcie_gen: d.current_pcie_link_gen().ok(),
        pcie_width: d.current_pcie_link_width().ok(),
        nvlink_peers,
        mig_enabled: d.mig_mode().ok().map(|m| m.current == 1),
        utilization_pct: d.utilization_rates().ok().map(|u| u.gpu),
        temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
        power_limit_mw: d.power_management_limit().ok(),
        processes: d.running_compute_processes().ok().map(|p| p.len() as u32),
        driver_version: None,
        cuda_driver_version: None,
    })
}
