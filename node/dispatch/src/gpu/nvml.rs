//! NVIDIA GPUs through NVML (`nvml-wrapper`, which `dlopen`s `libnvidia-ml.so.1`).
//!
//! Per GPU: index, UUID, name, VRAM total/free, compute capability, driver and CUDA driver
//! version, PCIe generation and width, NVLink peers, MIG mode and MIG devices, utilisation,
//! temperature, power limit and running compute processes. A field the driver refuses (e.g. MIG
//! on a consumer card: `NotSupported`) is `None`, never an error. NVML calls block: call
//! [`detect`] from `spawn_blocking` in async code.
//!
//! The inventory talks to NVML only through [`NvmlApi`], one method per NVML function, so the
//! field cases of `shared/fixtures/field/README.md` (sections "NVIDIA MIG with sparse indices"
//! and "NVML start-up states") run against a test double of that boundary on a machine without
//! a GPU. The rules, each from that README and the NVML API reference:
//! - the library is `libnvidia-ml.so.1`, the versioned name the driver installs (the
//!   unversioned `libnvidia-ml.so` symlink comes only with development packages);
//! - no library: 0 NVIDIA GPUs and the reason "NVIDIA driver library (libnvidia-ml.so.1) not
//!   found", never a failure of the command;
//! - `nvmlInit` → `NVML_ERROR_LIB_RM_VERSION_MISMATCH` (driver upgraded, old kernel module still
//!   loaded): no GPUs, the reason names the mismatch and the fix (reboot, or reload the nvidia
//!   kernel module); every start and every `ganglion gpus` probes again;
//! - MIG enabled: `nvmlDeviceGetMaxMigDeviceCount` is an upper bound on indices, not a count;
//!   each index of `nvmlDeviceGetMigDeviceHandleByIndex` that answers `NVML_ERROR_NOT_FOUND` is
//!   skipped; each MIG device found is its own entry with its own UUID (`MIG-…`) and the memory of
//!   its MIG handle, and the parent is listed but not offered whole;
//! - a device whose name is empty or unreadable, or whose memory is 0 or unreadable, is listed
//!   as unidentified with the failing query and never offered; so is a MIG device without a
//!   readable UUID (a MIG device is scheduled by its `MIG-…` UUID and nothing else);
//! - memory is kept in exact bytes (`nvmlMemory_t.total`, [`Gpu::vram_total_bytes`]) beside the
//!   MiB, for fit checks (field case `vram/`: an H100 NVL reports 99 961 274 368 B).

use std::ffi::OsStr;

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::{Gpu, Inventory, MigSlice, NotOffered, Source};
use ganglion_market::spec::{ComputeCapability, Vendor};

/// The NVML library the driver installs (the versioned soname; see the module docs).
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// NVLink links to probe per GPU (`NVML_NVLINK_MAX_LINKS` is 18 since Hopper).
const MAX_NVLINKS: u32 = 18;

/// Why NVML could not be used at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The library is not installed (no NVIDIA driver on this machine).
    #[error("NVIDIA driver library ({LIBRARY}) not found: 0 NVIDIA GPUs ({detail})")]
    LibraryMissing {
        /// The loader's words.
        detail: String,
    },
    /// A library of that name was loaded but it lacks `nvmlInit_v2`.
    #[error(
        "{LIBRARY} was loaded but is not a usable NVML (no nvmlInit_v2: {detail}): 0 NVIDIA GPUs; reinstall the NVIDIA driver"
    )]
    NotNvml {
        /// The loader's words.
        detail: String,
    },
    /// `nvmlInit` answered `NVML_ERROR_LIB_RM_VERSION_MISMATCH`.
    #[error(
        "NVIDIA driver/library version mismatch (NVML: RM version mismatch): the driver was \
         upgraded while the old nvidia kernel module is still loaded; no NVIDIA GPUs are offered. \
         Fix: reboot, or reload the nvidia kernel module (stop GPU users, then `rmmod nvidia_uvm \
         nvidia_drm nvidia_modeset nvidia && modprobe nvidia`); the node probes again at its next \
         start and `ganglion gpus` at each run"
    )]
    RmVersionMismatch,
    /// `nvmlInit` answered `NVML_ERROR_DRIVER_NOT_LOADED`.
    #[error(
        "NVIDIA kernel driver not loaded (NVML: driver not loaded): 0 NVIDIA GPUs; load it with `modprobe nvidia`"
    )]
    DriverNotLoaded,
    /// The library loaded but NVML failed to start or to count devices.
    #[error("NVML failed: {0}")]
    Nvml(#[source] NvmlError),
}

/// Maps an `nvmlInit` (or library load) failure to the reason shown to the operator.
pub fn init_error(e: NvmlError) -> Error {
    match e {
        NvmlError::LibloadingError(le) => Error::LibraryMissing {
            detail: le.to_string(),
        },
        NvmlError::FailedToLoadSymbol(s) => Error::NotNvml { detail: s },
        NvmlError::LibraryNotFound => Error::LibraryMissing {
            detail: "NVML_ERROR_LIBRARY_NOT_FOUND".into(),
        },
        NvmlError::LibRmVersionMismatch => Error::RmVersionMismatch,
        NvmlError::DriverNotLoaded => Error::DriverNotLoaded,
        other => Error::Nvml(other),
    }
}

/// A device as NVML addresses it: a GPU by index, or a MIG device by its parent's index and the
/// MIG index (`nvmlDeviceGetMigDeviceHandleByIndex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handle {
    /// `nvmlDeviceGetHandleByIndex_v2(index)`.
    Gpu(u32),
    /// `nvmlDeviceGetMigDeviceHandleByIndex(parent, slot)`.
    Mig {
        /// The parent GPU's index.
        parent: u32,
        /// The MIG index.
        slot: u32,
    },
}

/// Memory of a device, bytes (`nvmlMemory_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Total, bytes.
    pub total: u64,
    /// Free, bytes.
    pub free: u64,
}

/// The NVML functions the inventory calls, one method each (the NVML name in its doc). The real
/// library is [`Driver`]; tests use a test double of this boundary.
pub trait NvmlApi {
    /// `nvmlDeviceGetCount_v2`.
    fn device_count(&self) -> Result<u32, NvmlError>;
    /// `nvmlSystemGetDriverVersion`.
    fn driver_version(&self) -> Result<String, NvmlError>;
    /// `nvmlSystemGetCudaDriverVersion_v2`, e.g. 12040.
    fn cuda_driver_version(&self) -> Result<i32, NvmlError>;
    /// `nvmlDeviceGetName`.
    fn name(&self, h: Handle) -> Result<String, NvmlError>;
    /// `nvmlDeviceGetUUID`.
    fn uuid(&self, h: Handle) -> Result<String, NvmlError>;
    /// `nvmlDeviceGetMemoryInfo`.
    fn memory(&self, h: Handle) -> Result<Memory, NvmlError>;
    /// `nvmlDeviceGetCudaComputeCapability`: (major, minor).
    fn compute_capability(&self, h: Handle) -> Result<(i32, i32), NvmlError>;
    /// `nvmlDeviceGetPciInfo_v3`: the bus id.
    fn pci_bus_id(&self, h: Handle) -> Result<String, NvmlError>;
    /// `nvmlDeviceGetCurrPcieLinkGeneration`.
    fn pcie_gen(&self, h: Handle) -> Result<u32, NvmlError>;
    /// `nvmlDeviceGetCurrPcieLinkWidth`.
    fn pcie_width(&self, h: Handle) -> Result<u32, NvmlError>;
    /// `nvmlDeviceGetNvLinkState` and `nvmlDeviceGetNvLinkRemotePciInfo_v2`: the far end's bus id
    /// when `link` is active.
    fn nvlink_peer(&self, h: Handle, link: u32) -> Result<Option<String>, NvmlError>;
    /// `nvmlDeviceGetMigMode`: whether the current mode is enabled.
    fn mig_enabled(&self, h: Handle) -> Result<bool, NvmlError>;
    /// `nvmlDeviceGetMaxMigDeviceCount`: an upper bound on MIG indices.
    fn max_mig_device_count(&self, parent: u32) -> Result<u32, NvmlError>;
    /// `nvmlDeviceGetMigDeviceHandleByIndex`: `Ok` when a MIG device exists at `slot`,
    /// `NotFound` when not.
    fn mig_device(&self, parent: u32, slot: u32) -> Result<(), NvmlError>;
    /// `nvmlDeviceGetUtilizationRates`: GPU percent.
    fn utilization_pct(&self, h: Handle) -> Result<u32, NvmlError>;
    /// `nvmlDeviceGetTemperature` (GPU sensor), °C.
    fn temperature_c(&self, h: Handle) -> Result<u32, NvmlError>;
    /// `nvmlDeviceGetPowerManagementLimit`, mW.
    fn power_limit_mw(&self, h: Handle) -> Result<u32, NvmlError>;
    /// `nvmlDeviceGetComputeRunningProcesses`: how many.
    fn processes(&self, h: Handle) -> Result<u32, NvmlError>;
}

/// The real NVML: `libnvidia-ml.so.1` through `nvml-wrapper`, plus the raw MIG handle calls
/// `nvml-wrapper` 0.11 does not wrap.
pub struct Driver {
    nvml: Nvml,
    raw: nvml_wrapper_sys::bindings::NvmlLib,
}

impl Driver {
    /// Loads [`LIBRARY`] and runs `nvmlInit_v2`.
    ///
    /// # Errors
    /// [`init_error`]'s mapping of the failure.
    pub fn load() -> Result<Self, Error> {
        let nvml = Nvml::builder()
            .lib_path(OsStr::new(LIBRARY))
            .init()
            .map_err(init_error)?;
        // SAFETY: loading the library nvml-wrapper has just loaded and initialised (dlopen is
        // reference counted); its initialisers have already run.
        let raw = unsafe { nvml_wrapper_sys::bindings::NvmlLib::new(LIBRARY) }.map_err(|e| {
            Error::LibraryMissing {
                detail: e.to_string(),
            }
        })?;
        Ok(Self { nvml, raw })
    }

    fn mig_handle(
        &self,
        parent: &Device<'_>,
        slot: u32,
    ) -> Result<nvml_wrapper_sys::bindings::nvmlDevice_t, NvmlError> {
        let sym =
            nvml_wrapper::error::nvml_sym(self.raw.nvmlDeviceGetMigDeviceHandleByIndex.as_ref())?;
        let mut out: nvml_wrapper_sys::bindings::nvmlDevice_t = std::ptr::null_mut();
        // SAFETY: `parent.handle()` is a live NVML handle of this library; `out` is a valid
        // out-pointer; NVML writes a handle only on success.
        nvml_wrapper::error::nvml_try(unsafe { sym(parent.handle(), slot, &mut out) })?;
        Ok(out)
    }

    fn with<T>(
        &self,
        h: Handle,
        f: impl FnOnce(&Device<'_>) -> Result<T, NvmlError>,
    ) -> Result<T, NvmlError> {
        match h {
            Handle::Gpu(i) => f(&self.nvml.device_by_index(i)?),
            Handle::Mig { parent, slot } => {
                let p = self.nvml.device_by_index(parent)?;
                let raw = self.mig_handle(&p, slot)?;
                // SAFETY: `raw` is a MIG device handle NVML just returned for this library.
                let d = unsafe { Device::new(raw, &self.nvml) };
                f(&d)
            }
        }
    }
}

impl NvmlApi for Driver {
    fn device_count(&self) -> Result<u32, NvmlError> {
        self.nvml.device_count()
    }
    fn driver_version(&self) -> Result<String, NvmlError> {
        self.nvml.sys_driver_version()
    }
    fn cuda_driver_version(&self) -> Result<i32, NvmlError> {
        self.nvml.sys_cuda_driver_version()
    }
    fn name(&self, h: Handle) -> Result<String, NvmlError> {
        self.with(h, |d| d.name())
    }
    fn uuid(&self, h: Handle) -> Result<String, NvmlError> {
        self.with(h, |d| d.uuid())
    }
    fn memory(&self, h: Handle) -> Result<Memory, NvmlError> {
        self.with(h, |d| {
            d.memory_info().map(|m| Memory {
                total: m.total,
                free: m.free,
            })
        })
    }
    fn compute_capability(&self, h: Handle) -> Result<(i32, i32), NvmlError> {
        self.with(h, |d| {
            d.cuda_compute_capability().map(|c| (c.major, c.minor))
        })
    }
    fn pci_bus_id(&self, h: Handle) -> Result<String, NvmlError> {
        self.with(h, |d| d.pci_info().map(|p| p.bus_id))
    }
    fn pcie_gen(&self, h: Handle) -> Result<u32, NvmlError> {
        self.with(h, |d| d.current_pcie_link_gen())
    }
    fn pcie_width(&self, h: Handle) -> Result<u32, NvmlError> {
        self.with(h, |d| d.current_pcie_link_width())
    }
    fn nvlink_peer(&self, h: Handle, link: u32) -> Result<Option<String>, NvmlError> {
        self.with(h, |d| {
            let l = d.link_wrapper_for(link);
            if l.is_active()? {
                Ok(Some(l.remote_pci_info()?.bus_id))
            } else {
                Ok(None)
            }
        })
    }
    fn mig_enabled(&self, h: Handle) -> Result<bool, NvmlError> {
        self.with(h, |d| d.mig_mode().map(|m| m.current == 1))
    }
    fn max_mig_device_count(&self, parent: u32) -> Result<u32, NvmlError> {
        let d = self.nvml.device_by_index(parent)?;
        let sym = nvml_wrapper::error::nvml_sym(self.raw.nvmlDeviceGetMaxMigDeviceCount.as_ref())?;
        let mut count: std::os::raw::c_uint = 0;
        // SAFETY: a live handle of this library and a valid out-pointer.
        nvml_wrapper::error::nvml_try(unsafe { sym(d.handle(), &mut count) })?;
        Ok(count)
    }
    fn mig_device(&self, parent: u32, slot: u32) -> Result<(), NvmlError> {
        let p = self.nvml.device_by_index(parent)?;
        self.mig_handle(&p, slot).map(|_| ())
    }
    fn utilization_pct(&self, h: Handle) -> Result<u32, NvmlError> {
        self.with(h, |d| d.utilization_rates().map(|u| u.gpu))
    }
    fn temperature_c(&self, h: Handle) -> Result<u32, NvmlError> {
        self.with(h, |d| d.temperature(TemperatureSensor::Gpu))
    }
    fn power_limit_mw(&self, h: Handle) -> Result<u32, NvmlError> {
        self.with(h, |d| d.power_management_limit())
    }
    fn processes(&self, h: Handle) -> Result<u32, NvmlError> {
        self.with(h, |d| {
            d.running_compute_processes()
                .map(|p| u32::try_from(p.len()).unwrap_or(u32::MAX))
        })
    }
}

/// GPUs found and per-device problems.
#[derive(Debug, Default)]
pub struct Found {
    /// GPUs and MIG devices NVML enumerated (unidentified ones included, marked not offered).
    pub gpus: Vec<Gpu>,
    /// One line per device NVML listed but could not describe.
    pub notes: Vec<String>,
}

/// Enumerates NVIDIA GPUs through the real library.
///
/// # Errors
/// [`Error::LibraryMissing`] without the driver, [`Error::RmVersionMismatch`] after a driver
/// upgrade without a reboot, [`Error::Nvml`] when NVML cannot start or count.
pub fn detect() -> Result<Found, Error> {
    enumerate(&Driver::load()?)
}

/// Adds NVML's answer to `inv`: the GPUs and notes, or the start-up failure as a note
/// (`NVML: <reason>`), so that no NVIDIA GPU is offered and nothing fails.
pub fn merge(inv: &mut Inventory, found: Result<Found, Error>) {
    match found {
        Ok(found) => {
            inv.gpus.extend(found.gpus);
            inv.notes.extend(found.notes);
        }
        Err(e) => inv.notes.push(format!("NVML: {e}")),
    }
}

/// Enumerates every device of `api` (see the module docs for the rules).
///
/// # Errors
/// [`Error::Nvml`] when the device count cannot be read.
pub fn enumerate(api: &dyn NvmlApi) -> Result<Found, Error> {
    let count = api.device_count().map_err(Error::Nvml)?;
    let driver = api.driver_version().ok();
    let cuda = api.cuda_driver_version().ok();
    let mut found = Found::default();
    for index in 0..count {
        let mut gpu = describe(api, Handle::Gpu(index), index);
        gpu.driver_version.clone_from(&driver);
        gpu.cuda_driver_version = cuda;
        if gpu.not_offered.is_none() && gpu.mig_enabled == Some(true) {
            let slices = mig_devices(api, &gpu, &mut found.notes);
            gpu.not_offered = Some(NotOffered::MigParent {
                slices: u32::try_from(slices.len()).unwrap_or(u32::MAX),
            });
            found.gpus.push(gpu);
            for mut s in slices {
                s.driver_version.clone_from(&driver);
                s.cuda_driver_version = cuda;
                found.gpus.push(s);
            }
        } else {
            found.gpus.push(gpu);
        }
    }
    Ok(found)
}

/// The MIG devices of `parent`: every index below `nvmlDeviceGetMaxMigDeviceCount` that has a
/// handle (NotFound skipped; other errors noted).
fn mig_devices(api: &dyn NvmlApi, parent: &Gpu, notes: &mut Vec<String>) -> Vec<Gpu> {
    let p = parent.index;
    let max = match api.max_mig_device_count(p) {
        Ok(m) => m,
        Err(e) => {
            notes.push(format!(
                "NVML device {p}: MIG enabled but nvmlDeviceGetMaxMigDeviceCount failed: {e}"
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for slot in 0..max {
        match api.mig_device(p, slot) {
            Ok(()) => {}
            Err(NvmlError::NotFound) => continue,
            Err(e) => {
                notes.push(format!(
                    "NVML device {p}: nvmlDeviceGetMigDeviceHandleByIndex({slot}) failed: {e}"
                ));
                continue;
            }
        }
        let mut g = describe(api, Handle::Mig { parent: p, slot }, p);
        g.pci_bus_id.clone_from(&parent.pci_bus_id);
        g.pcie_gen = parent.pcie_gen;
        g.pcie_width = parent.pcie_width;
        g.compute_capability = g.compute_capability.or(parent.compute_capability);
        g.nvlink_peers = Vec::new(); // no peer path between MIG devices (MIG user guide)
        g.mig_enabled = None;
        g.mig = Some(MigSlice {
            parent_uuid: parent.uuid.clone(),
            parent_index: p,
            slot,
            profile: mig_profile(&g.name),
        });
        out.push(g);
    }
    out
}

/// The GPU-instance profile in a MIG device's name: `NVIDIA A100-PCIE-40GB MIG 3g.20gb` →
/// `3g.20gb`.
pub fn mig_profile(name: &str) -> Option<String> {
    let (_, tail) = name.rsplit_once(" MIG ")?;
    let p = tail.trim();
    (!p.is_empty()).then(|| p.to_string())
}

/// One device; identity failures make it [`NotOffered::Unidentified`], never an error.
fn describe(api: &dyn NvmlApi, h: Handle, index: u32) -> Gpu {
    let mut failed = Vec::new();
    let name = match api.name(h) {
        Ok(n) if !n.trim().is_empty() => n,
        Ok(_) => {
            failed.push("nvmlDeviceGetName returned an empty name".to_string());
            String::new()
        }
        Err(e) => {
            failed.push(format!("nvmlDeviceGetName: {e}"));
            String::new()
        }
    };
    let mem = match api.memory(h) {
        Ok(m) if m.total > 0 => Some(m),
        Ok(_) => {
            failed.push("nvmlDeviceGetMemoryInfo reported 0 bytes".to_string());
            None
        }
        Err(e) => {
            failed.push(format!("nvmlDeviceGetMemoryInfo: {e}"));
            None
        }
    };
    // A MIG device is only ever scheduled by its own UUID (device requests, `[provider] pool`,
    // the busy list): without one it cannot be given to a container, so it is unidentified too.
    let uuid = match (api.uuid(h), h) {
        (Ok(u), _) if !u.trim().is_empty() => Some(u),
        (Ok(_), Handle::Mig { .. }) => {
            failed.push("nvmlDeviceGetUUID returned an empty UUID for a MIG device".to_string());
            None
        }
        (Err(e), Handle::Mig { .. }) => {
            failed.push(format!("nvmlDeviceGetUUID (MIG device): {e}"));
            None
        }
        (_, Handle::Gpu(_)) => None,
    };
    let cc = api.compute_capability(h).ok().and_then(|(major, minor)| {
        Some(ComputeCapability {
            major: u8::try_from(major).ok()?,
            minor: u8::try_from(minor).ok()?,
        })
    });
    let mut g = Gpu::bare(index, Source::Nvml, Vendor::Nvidia, name);
    g.uuid = uuid;
    g.vram_total_mib = mem.map_or(0, |m| m.total >> 20);
    g.vram_total_bytes = mem.map(|m| m.total);
    g.vram_free_mib = mem.map(|m| m.free >> 20);
    g.compute_capability = cc;
    if let Handle::Gpu(_) = h {
        g.pci_bus_id = api.pci_bus_id(h).ok();
        g.pcie_gen = api.pcie_gen(h).ok();
        g.pcie_width = api.pcie_width(h).ok();
        g.nvlink_peers = (0..MAX_NVLINKS)
            .filter_map(|link| api.nvlink_peer(h, link).ok().flatten())
            .collect();
        g.mig_enabled = api.mig_enabled(h).ok();
    }
    g.utilization_pct = api.utilization_pct(h).ok();
    g.temperature_c = api.temperature_c(h).ok();
    g.power_limit_mw = api.power_limit_mw(h).ok();
    g.processes = api.processes(h).ok();
    if !failed.is_empty() {
        g.not_offered = Some(NotOffered::Unidentified {
            query: failed.join("; "),
        });
    }
    g
}

#[cfg(test)]
mod tests;
