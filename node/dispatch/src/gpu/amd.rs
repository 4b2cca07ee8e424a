//! AMD GPUs from sysfs and the KFD topology, without ROCm tools.
//!
//! Read under a sysfs root (normally `/sys`):
//! - `class/drm/card<N>/device/vendor` = `0x1002` (AMD), `device` = PCI device id;
//! - `class/drm/card<N>/device/mem_info_vram_total`: total VRAM in bytes (amdgpu). Not
//!   `mem_info_vis_vram_total`, which is only the CPU-visible BAR window (often 256 MiB: the
//!   trap that made other marketplaces report 256 MB for an 8 GB card);
//! - `class/drm/card<N>/device/drm/renderD<M>`: the render node a container needs (with
//!   `/dev/kfd`); `class/drm/card<N>/device/uevent`: `PCI_SLOT_NAME`;
//! - `class/kfd/kfd/topology/nodes/<K>/properties`: `key value` lines; a GPU node has a non-zero
//!   `gfx_target_version` (`major·10000 + minor·100 + stepping`, e.g. 90010 = gfx90a) and
//!   `drm_render_minor` = M, which ties it to its card.
//!
//! Sources: Linux `Documentation/gpu/amdgpu/driver-misc.rst` (mem_info_*), the KFD topology
//! code `drivers/gpu/drm/amd/amdkfd/kfd_topology.c` (properties names).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{Gpu, NotOffered, Source};
use ganglion_market::spec::Vendor;

/// PCI vendor id of AMD/ATI.
pub const AMD_PCI_VENDOR: &str = "0x1002";

/// Why the sysfs scan failed as a whole (per-card problems skip the card).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `class/drm` could not be listed.
    #[error("cannot list {path}: {source}")]
    ListDrm {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Scans `root/class/drm` for AMD cards. A machine without `class/drm` (a container, a VM
/// without GPUs) has no AMD GPUs: `Ok(vec![])`.
///
/// # Errors
/// [`Error::ListDrm`] if the directory exists but cannot be read.
pub fn detect(root: &Path) -> Result<Vec<Gpu>, Error> {
    let drm = root.join("class/drm");
    let entries = match fs::read_dir(&drm) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::ListDrm { path: drm, source }),
    };
    let kfd = kfd_gfx_targets(root);
    let mut cards: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_prefix("card")?.parse().ok()?; // skips card0-DP-1
            Some((n, e.path()))
        })
        .collect();
    cards.sort();
    let mut gpus = Vec::new();
    for (index, card) in cards {
        let dev = card.join("device");
        if read_trim(&dev.join("vendor")).as_deref() != Some(AMD_PCI_VENDOR) {
            continue;
        }
        let Some(vram_bytes) =
            read_trim(&dev.join("mem_info_vram_total")).and_then(|s| s.parse::<u64>().ok())
        else {
            continue; // not an amdgpu-driven device (e.g. radeon): no VRAM accounting
        };
        let device_id = read_trim(&dev.join("device")).unwrap_or_else(|| "0x0000".into());
        let render_minor = fs::read_dir(dev.join("drm")).ok().and_then(|it| {
            it.filter_map(Result::ok)
                .filter_map(|e| {
                    e.file_name()
                        .into_string()
                        .ok()?
                        .strip_prefix("renderD")?
                        .parse::<u32>()
                        .ok()
                })
                .min()
        });
        let pci = read_trim(&dev.join("uevent")).and_then(|u| {
            u.lines()
                .find_map(|l| l.strip_prefix("PCI_SLOT_NAME=").map(str::to_string))
        });
        let node = render_minor.and_then(|m| kfd.get(&m));
        let mut g = Gpu::bare(
            index,
            Source::Sysfs,
            Vendor::Amd,
            format!("{AMD_PCI_VENDOR}:{device_id}"),
        );
        g.uuid = read_trim(&dev.join("unique_id"));
        g.vram_total_mib = vram_bytes >> 20;
        g.vram_total_bytes = Some(vram_bytes);
        g.vram_free_mib = read_trim(&dev.join("mem_info_vram_used"))
            .and_then(|s| s.parse::<u64>().ok())
            .map(|used| vram_bytes.saturating_sub(used) >> 20);
        g.gfx_target = node.map(|n| n.gfx_target.clone());
        g.render_node = render_minor.map(|m| format!("/dev/dri/renderD{m}"));
        g.pci_bus_id = pci;
        g.pcie_width = read_trim(&dev.join("current_link_width")).and_then(|s| s.parse().ok());
        g.utilization_pct = read_trim(&dev.join("gpu_busy_percent")).and_then(|s| s.parse().ok());
        match node {
            Some(n) if n.apu => {
                g.shared_memory = true;
                g.not_offered = Some(NotOffered::SharedSystemMemory);
            }
            Some(_) => {}
            // Listed, never offered: without its KFD node no ROCm container can compute on it.
            None => g.not_offered = Some(NotOffered::NoKfdNode),
        }
        gpus.push(g);
    }
    Ok(gpus)
}

/// A GPU node of the KFD topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KfdNode {
    /// The gfx target, e.g. `gfx1151` ([`gfx_target`] of `gfx_target_version`).
    pub gfx_target: String,
    /// `drm_render_minor`: ties the node to `renderD<minor>`.
    pub render_minor: u32,
    /// An APU: `local_mem_size` is 0, i.e. the node has no dedicated frame buffer and its memory
    /// bank is the host's RAM (kfd_topology.c fills `local_mem_size` from the device's private
    /// and public VRAM, both 0 on an APU; `shared/fixtures/field/amd-kfd/` gfx1151 case). Its
    /// sysfs `mem_info_vram_total` is the UMA carve-out of system memory, never offered as
    /// dedicated VRAM.
    pub apu: bool,
}

/// Parses one KFD `properties` file (`key value` lines). `None` for a CPU node
/// (`gfx_target_version` 0, `simd_count` 0), a node without `drm_render_minor`, or a version
/// [`gfx_target`] cannot name.
pub fn kfd_node(properties: &str) -> Option<KfdNode> {
    let props: HashMap<&str, u64> = properties
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k, v.trim().parse().ok()?))
        })
        .collect();
    let version = *props.get("gfx_target_version")?;
    if version == 0 || props.get("simd_count") == Some(&0) {
        return None; // a CPU node
    }
    Some(KfdNode {
        gfx_target: gfx_target(version)?,
        render_minor: u32::try_from(*props.get("drm_render_minor")?).ok()?,
        apu: props.get("local_mem_size") == Some(&0),
    })
}

/// `drm_render_minor → node` for every GPU node of the KFD topology.
fn kfd_gfx_targets(root: &Path) -> HashMap<u32, KfdNode> {
    let mut out = HashMap::new();
    let Ok(nodes) = fs::read_dir(root.join("class/kfd/kfd/topology/nodes")) else {
        return out;
    };
    for node in nodes.filter_map(Result::ok) {
        let Ok(text) = fs::read_to_string(node.path().join("properties")) else {
            continue;
        };
        if let Some(n) = kfd_node(&text) {
            out.insert(n.render_minor, n);
        }
    }
    out
}

/// `gfx_target_version` → target name: 90010 → `gfx90a`, 90402 → `gfx942`, 110501 →
/// `gfx1151`. The version is `major·10000 + minor·100 + stepping` (kfd_topology.c,
/// `HSA_GET_GFX_VERSION`); the name is `gfx` + major in decimal + minor and stepping as one hex
/// digit each (LLVM AMDGPU processor names), so 90010 is gfx9-0-a, not "gfx9010". 0 is a CPU node:
/// `None`. Every row of `shared/fixtures/field/amd-kfd/gfx-target-decode.csv` is a test.
pub fn gfx_target(version: u64) -> Option<String> {
    let (major, minor, step) = (version / 10000, version / 100 % 100, version % 100);
    (major > 0 && minor < 16 && step < 16).then(|| format!("gfx{major}{minor:x}{step:x}"))
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` to `root/rel`, creating the folders on the way (the test sysfs trees).
    fn write_file(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().expect("has parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    /// A test double of sysfs: the real file names and formats of an amdgpu machine with an
    /// MI210-class card (gfx90a, 64 GiB, 256 MiB BAR window), a consumer RX 7900 XTX (gfx1100),
    /// an Intel iGPU, a connector entry, and the KFD CPU node.
    fn fake_sysfs() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tempdir");
        let w = |rel: &str, text: &str| write_file(t.path(), rel, text);
        w("class/drm/card0/device/vendor", "0x1002\n");
        w("class/drm/card0/device/device", "0x740f\n");
        w(
            "class/drm/card0/device/mem_info_vram_total",
            "68702699520\n",
        );
        w(
            "class/drm/card0/device/mem_info_vis_vram_total",
            "268435456\n",
        );
        w("class/drm/card0/device/mem_info_vram_used", "1073741824\n");
        w(
            "class/drm/card0/device/uevent",
            "DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_SLOT_NAME=0000:41:00.0\n",
        );
        w("class/drm/card0/device/drm/renderD128/dev", "226:128\n");
        w("class/drm/card0/device/drm/card0/dev", "226:0\n");
        w("class/drm/card0-DP-1/status", "disconnected\n");
        w("class/drm/card1/device/vendor", "0x8086\n");
        w("class/drm/card1/device/device", "0x4680\n");
        w("class/drm/card2/device/vendor", "0x1002\n");
        w("class/drm/card2/device/device", "0x744c\n");
        w(
            "class/drm/card2/device/mem_info_vram_total",
            "25753026560\n",
        );
        w(
            "class/drm/card2/device/mem_info_vis_vram_total",
            "268435456\n",
        );
        w("class/drm/card2/device/drm/renderD130/dev", "226:130\n");
        w(
            "class/kfd/kfd/topology/nodes/0/properties",
            "cpu_cores_count 32\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\ndrm_render_minor 0\n",
        );
        w(
            "class/kfd/kfd/topology/nodes/1/properties",
            "cpu_cores_count 0\nsimd_count 416\nmem_banks_count 1\ngfx_target_version 90010\nvendor_id 4098\ndevice_id 29711\nlocation_id 16640\ndrm_render_minor 128\nnum_xcc 1\n",
        );
        w(
            "class/kfd/kfd/topology/nodes/2/properties",
            "cpu_cores_count 0\nsimd_count 192\ngfx_target_version 110000\nvendor_id 4098\ndevice_id 29772\ndrm_render_minor 130\n",
        );
        t
    }

    #[test]
    fn reads_total_vram_not_the_bar_window_and_ties_kfd_to_render_node() {
        let t = fake_sysfs();
        let gpus = detect(t.path()).expect("scan");
        assert_eq!(
            gpus.len(),
            2,
            "Intel card and connector entry skipped: {gpus:?}"
        );
        let mi = &gpus[0];
        assert_eq!(mi.index, 0);
        assert_eq!(mi.name, "0x1002:0x740f");
        assert_eq!(mi.vram_total_mib, 65520, "64 GiB class, not 256 MiB");
        assert_eq!(
            mi.vram_total_bytes,
            Some(68_702_699_520),
            "exact bytes kept"
        );
        assert_eq!(mi.vram_free_mib, Some(65520 - 1024));
        assert_eq!(mi.gfx_target.as_deref(), Some("gfx90a"));
        assert_eq!(mi.render_node.as_deref(), Some("/dev/dri/renderD128"));
        assert_eq!(mi.pci_bus_id.as_deref(), Some("0000:41:00.0"));
        let rx = &gpus[1];
        assert_eq!(rx.index, 2);
        assert_eq!(rx.gfx_target.as_deref(), Some("gfx1100"));
        assert_eq!(rx.vram_total_mib, 24560);
    }

    #[test]
    fn no_drm_directory_means_no_amd_gpus() {
        let t = tempfile::tempdir().expect("tempdir");
        assert!(detect(t.path()).expect("scan").is_empty());
    }

    fn field(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures/field/amd-kfd")
            .join(rel)
    }

    /// Every row of the field table: `gfx_target_version` → arch; 0 is a CPU node, skipped.
    #[test]
    fn gfx_target_decodes_every_row_of_the_field_table() {
        let csv = fs::read_to_string(field("gfx-target-decode.csv")).expect("fixture");
        let mut rows = 0;
        for line in csv.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let mut cols = line.splitn(3, ',');
            let version: u64 = cols.next().and_then(|v| v.parse().ok()).expect("version");
            let expected = cols.next().expect("expected_arch");
            rows += 1;
            if version == 0 {
                assert_eq!(gfx_target(0), None, "0 is not a GPU");
                let cpu =
                    "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\ndrm_render_minor 0\n";
                assert_eq!(kfd_node(cpu), None, "a CPU node is skipped");
                continue;
            }
            assert_eq!(gfx_target(version).as_deref(), Some(expected), "{line}");
        }
        assert_eq!(rows, 10, "the table has ten rows");
    }

    /// The gfx1151 APU of the field case: its KFD node (the fixture file, unchanged) has no
    /// local memory, so the card's `mem_info_vram_total` (a UMA carve-out) is flagged as shared
    /// system memory and not offered.
    #[test]
    fn gfx1151_apu_is_flagged_shared_memory_and_not_offered() {
        let props = fs::read_to_string(field("kfd-node-gfx1151-apu.properties")).expect("fixture");
        let node = kfd_node(&props).expect("a GPU node");
        assert_eq!(
            node,
            KfdNode {
                gfx_target: "gfx1151".into(),
                render_minor: 128,
                apu: true
            }
        );
        let t = tempfile::tempdir().expect("tempdir");
        let w = |rel: &str, text: &str| write_file(t.path(), rel, text);
        w("class/drm/card0/device/vendor", "0x1002\n");
        w("class/drm/card0/device/device", "0x1586\n");
        // A 96 GiB UMA carve-out of system memory.
        w(
            "class/drm/card0/device/mem_info_vram_total",
            "103079215104\n",
        );
        w("class/drm/card0/device/drm/renderD128/dev", "226:128\n");
        w("class/kfd/kfd/topology/nodes/1/properties", &props);
        let gpus = detect(t.path()).expect("scan");
        assert_eq!(gpus.len(), 1, "listed");
        let apu = &gpus[0];
        assert_eq!(apu.gfx_target.as_deref(), Some("gfx1151"));
        assert!(apu.shared_memory);
        assert_eq!(apu.not_offered, Some(NotOffered::SharedSystemMemory));
        let inv = crate::gpu::Inventory {
            gpus,
            notes: vec![],
        };
        assert!(inv.offerable().is_empty(), "not offered as dedicated VRAM");
        // A discrete card (local memory present) is not an APU.
        let discrete = props.replace("local_mem_size 0", "local_mem_size 25753026560");
        assert!(!kfd_node(&discrete).expect("GPU node").apu);
    }

    /// A card amdgpu lists but the KFD topology does not (amdkfd not loaded, or the card not
    /// supported by it): listed with the reason and its fix, never offered.
    #[test]
    fn a_card_without_a_kfd_node_is_listed_but_not_offered() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = |rel: &str, text: &str| write_file(t.path(), rel, text);
        w("class/drm/card0/device/vendor", "0x1002\n");
        w("class/drm/card0/device/device", "0x744c\n");
        w(
            "class/drm/card0/device/mem_info_vram_total",
            "25753026560\n",
        );
        w("class/drm/card0/device/drm/renderD128/dev", "226:128\n");
        let gpus = detect(t.path()).expect("scan");
        assert_eq!(gpus.len(), 1, "listed");
        assert_eq!(gpus[0].not_offered, Some(NotOffered::NoKfdNode));
        assert!(
            gpus[0]
                .not_offered
                .as_ref()
                .expect("reason")
                .to_string()
                .contains("modprobe")
        );
        let inv = crate::gpu::Inventory {
            gpus,
            notes: vec![],
        };
        assert!(inv.offerable().is_empty(), "never offered");
    }

    #[test]
    fn gfx_target_names() {
        assert_eq!(gfx_target(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_target(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_target(110000).as_deref(), Some("gfx1100"));
        assert_eq!(gfx_target(100300).as_deref(), Some("gfx1030"));
        assert_eq!(gfx_target(0), None);
    }
}
