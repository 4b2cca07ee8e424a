//! The NVML field cases of `shared/fixtures/field/README.md` through a **test double of the
//! NVML library boundary** ([`FakeNvml`]: no GPU on this machine), plus the real library's
//! absence on this machine.

use std::collections::HashMap;

use super::*;

/// Test double of NVML: answers each [`NvmlApi`] call from tables, `NotFound` for anything not
/// in them (what NVML answers for an absent MIG index).
#[derive(Default)]
struct FakeNvml {
    count: u32,
    names: HashMap<Handle, String>,
    uuids: HashMap<Handle, String>,
    memory: HashMap<Handle, Memory>,
    mig_enabled: HashMap<u32, bool>,
    max_mig: HashMap<u32, u32>,
    /// `(parent, slot)` pairs that have a MIG device.
    mig_slots: Vec<(u32, u32)>,
    /// A MIG index that answers `NoPermission` instead.
    no_permission_slot: Option<u32>,
}

impl NvmlApi for FakeNvml {
    fn device_count(&self) -> Result<u32, NvmlError> {
        Ok(self.count)
    }
    fn driver_version(&self) -> Result<String, NvmlError> {
        Ok("535.230.02".into())
    }
    fn cuda_driver_version(&self) -> Result<i32, NvmlError> {
        Ok(12020)
    }
    fn name(&self, h: Handle) -> Result<String, NvmlError> {
        self.names.get(&h).cloned().ok_or(NvmlError::NotFound)
    }
    fn uuid(&self, h: Handle) -> Result<String, NvmlError> {
        self.uuids.get(&h).cloned().ok_or(NvmlError::NotFound)
    }
    fn memory(&self, h: Handle) -> Result<Memory, NvmlError> {
        self.memory.get(&h).copied().ok_or(NvmlError::NotFound)
    }
    fn compute_capability(&self, h: Handle) -> Result<(i32, i32), NvmlError> {
        match h {
            Handle::Gpu(_) if self.names.get(&h).is_some_and(|n| !n.is_empty()) => Ok((8, 0)),
            _ => Err(NvmlError::NotSupported),
        }
    }
    fn pci_bus_id(&self, h: Handle) -> Result<String, NvmlError> {
        match h {
            Handle::Gpu(i) => Ok(format!("00000000:{:02X}:00.0", 0x17 + i)),
            Handle::Mig { .. } => Err(NvmlError::NotSupported),
        }
    }
    fn pcie_gen(&self, _: Handle) -> Result<u32, NvmlError> {
        Ok(4)
    }
    fn pcie_width(&self, _: Handle) -> Result<u32, NvmlError> {
        Ok(16)
    }
    fn nvlink_peer(&self, _: Handle, _: u32) -> Result<Option<String>, NvmlError> {
        Err(NvmlError::NotSupported)
    }
    fn mig_enabled(&self, h: Handle) -> Result<bool, NvmlError> {
        match h {
            Handle::Gpu(i) => self
                .mig_enabled
                .get(&i)
                .copied()
                .ok_or(NvmlError::NotSupported),
            Handle::Mig { .. } => Err(NvmlError::NotSupported),
        }
    }
    fn max_mig_device_count(&self, parent: u32) -> Result<u32, NvmlError> {
        self.max_mig
            .get(&parent)
            .copied()
            .ok_or(NvmlError::NotSupported)
    }
    fn mig_device(&self, parent: u32, slot: u32) -> Result<(), NvmlError> {
        if self.no_permission_slot == Some(slot) {
            Err(NvmlError::NoPermission)
        } else if self.mig_slots.contains(&(parent, slot)) {
            Ok(())
        } else {
            Err(NvmlError::NotFound)
        }
    }
    fn utilization_pct(&self, _: Handle) -> Result<u32, NvmlError> {
        Err(NvmlError::NotSupported)
    }
    fn temperature_c(&self, _: Handle) -> Result<u32, NvmlError> {
        Err(NvmlError::NotSupported)
    }
    fn power_limit_mw(&self, _: Handle) -> Result<u32, NvmlError> {
        Err(NvmlError::NotSupported)
    }
    fn processes(&self, _: Handle) -> Result<u32, NvmlError> {
        Err(NvmlError::NotSupported)
    }
}

const MIB: u64 = 1 << 20;
const A100_UUID: &str = "GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078";
/// The README's three MIG devices: UUID, profile, and memory (MiB) as a MIG handle of an
/// A100-PCIE-40GB reports it for that profile (`nvidia-smi mig -lgip` sizes).
const SLICES: [(&str, &str, u64); 3] = [
    ("MIG-23de08f7-6fcc-5be3-9094-cc3b4162f0bb", "3g.20gb", 19968),
    ("MIG-9d822d55-dc61-5acb-8c24-544828b47b03", "2g.10gb", 9856),
    ("MIG-5f16849a-8ae9-571a-bc2c-486916c4a324", "1g.5gb", 4864),
];

/// The README's A100 with MIG on: max 7 MIG indices, devices at 0–2, NotFound for 3–6.
fn mig_a100() -> FakeNvml {
    let mut f = FakeNvml {
        count: 1,
        ..FakeNvml::default()
    };
    let gpu = Handle::Gpu(0);
    f.names.insert(gpu, "NVIDIA A100-PCIE-40GB".into());
    f.uuids.insert(gpu, A100_UUID.into());
    f.memory.insert(
        gpu,
        Memory {
            total: 40960 * MIB,
            free: 40000 * MIB,
        },
    );
    f.mig_enabled.insert(0, true);
    f.max_mig.insert(0, 7);
    for (slot, (uuid, profile, mib)) in SLICES.iter().enumerate() {
        let slot = slot as u32;
        let h = Handle::Mig { parent: 0, slot };
        f.names
            .insert(h, format!("NVIDIA A100-PCIE-40GB MIG {profile}"));
        f.uuids.insert(h, (*uuid).into());
        f.memory.insert(
            h,
            Memory {
                total: mib * MIB,
                free: (mib - 13) * MIB,
            },
        );
        f.mig_slots.push((0, slot));
    }
    f
}

#[test]
fn mig_a100_with_sparse_indices_gives_three_slices_and_no_whole_parent() {
    let found = enumerate(&mig_a100()).expect("enumerates");
    assert!(
        found.notes.is_empty(),
        "NotFound is skipped silently: {:?}",
        found.notes
    );
    assert_eq!(
        found.gpus.len(),
        4,
        "parent + 3 MIG devices (7 is a bound, not a count)"
    );
    let parent = &found.gpus[0];
    assert_eq!(parent.uuid.as_deref(), Some(A100_UUID));
    assert_eq!(parent.mig_enabled, Some(true));
    assert_eq!(
        parent.not_offered,
        Some(NotOffered::MigParent { slices: 3 })
    );
    for (g, (uuid, profile, mib)) in found.gpus[1..].iter().zip(SLICES) {
        assert_eq!(g.uuid.as_deref(), Some(uuid), "its own MIG UUID");
        assert_eq!(
            g.vram_total_mib, mib,
            "memory from the MIG handle, not the parent's"
        );
        let mig = g.mig.as_ref().expect("a MIG device");
        assert_eq!(mig.parent_uuid.as_deref(), Some(A100_UUID));
        assert_eq!(mig.profile.as_deref(), Some(profile));
        assert_eq!(g.not_offered, None, "each slice is schedulable");
        assert!(g.nvlink_peers.is_empty(), "no peer path between slices");
    }
    let inv = Inventory {
        gpus: found.gpus,
        notes: vec![],
    };
    let offered: Vec<_> = inv.offerable().into_iter().filter_map(|g| g.uuid).collect();
    assert_eq!(
        offered,
        SLICES.map(|s| s.0.to_string()),
        "slices only, never the parent"
    );
}

/// A MIG device whose UUID NVML cannot read cannot be scheduled (device requests name MIG
/// devices by UUID): listed as unidentified with the failing query, never offered, and its
/// siblings are unaffected.
#[test]
fn a_mig_device_without_a_uuid_is_unidentified_and_never_offered() {
    let mut f = mig_a100();
    f.uuids.remove(&Handle::Mig { parent: 0, slot: 1 });
    let found = enumerate(&f).expect("enumerates");
    assert_eq!(found.gpus.len(), 4, "parent + 3 MIG devices, all listed");
    let nameless = &found.gpus[2];
    assert!(nameless.mig.is_some(), "still known as a slice of its card");
    assert!(
        matches!(
            &nameless.not_offered,
            Some(NotOffered::Unidentified { query }) if query.starts_with("nvmlDeviceGetUUID (MIG device): ")
        ),
        "{:?}",
        nameless.not_offered
    );
    let inv = Inventory {
        gpus: found.gpus,
        notes: vec![],
    };
    let offered: Vec<_> = inv.offerable().into_iter().filter_map(|g| g.uuid).collect();
    assert_eq!(
        offered,
        vec![SLICES[0].0.to_string(), SLICES[2].0.to_string()]
    );
    // A whole GPU without a readable UUID is still identified by name and memory.
    let mut g = FakeNvml {
        count: 1,
        ..FakeNvml::default()
    };
    g.names.insert(Handle::Gpu(0), "NVIDIA L4".into());
    g.memory.insert(
        Handle::Gpu(0),
        Memory {
            total: 23034 * MIB,
            free: 0,
        },
    );
    let found = enumerate(&g).expect("enumerates");
    assert_eq!(found.gpus[0].not_offered, None);
}

/// Field case `vram/`: the H100 NVL reports 99 961 274 368 B, not a whole number of MiB. The
/// inventory keeps the bytes, the offer built from it carries them, and the matcher reads the
/// marketed class from them (94 and 90 met).
#[test]
fn exact_reported_bytes_reach_the_offer_and_the_class_check() {
    use ganglion_market::limits::OfferTerms;
    use ganglion_market::test_utils::req;
    use ganglion_market::{MarketSnapshot, ProviderLimits, SnapshotOptions, match_gang};
    const NVL_BYTES: u64 = 99_961_274_368;
    let mut f = FakeNvml {
        count: 1,
        ..FakeNvml::default()
    };
    f.names.insert(Handle::Gpu(0), "NVIDIA H100 NVL".into());
    f.uuids.insert(Handle::Gpu(0), "GPU-h100-nvl".into());
    f.memory.insert(
        Handle::Gpu(0),
        Memory {
            total: NVL_BYTES,
            free: NVL_BYTES,
        },
    );
    let found = enumerate(&f).expect("enumerates");
    let g = &found.gpus[0];
    assert_eq!(g.vram_total_bytes, Some(NVL_BYTES));
    assert_eq!(g.vram_total_mib, 95_330, "MiB rounded down");
    let limits = ProviderLimits {
        pool: None,
        price_ntx_per_gpu_hour: 10,
        max_concurrent_jobs: 1,
        max_job_duration_s: None,
        max_job_nodes: None,
        allow_images: vec![],
        refuse_images: vec![],
        fabric: None,
    };
    let terms = OfferTerms {
        provider: [1; 28],
        bond_gpus: 1,
        score: 1,
        uplink_mbps: 1_000,
        direct_capable: false,
    };
    let pooled: Vec<&Gpu> = found.gpus.iter().collect();
    let offer = limits.offer(terms, &pooled, &[]);
    assert_eq!(offer.gpus[0].model.vram_total_bytes(), NVL_BYTES);
    let market =
        MarketSnapshot::build(&[offer], &[], SnapshotOptions::default()).expect("one provider");
    let mut r = req(1);
    for (class, met) in [(90, true), (94, true), (100, false)] {
        r.min_vram_gib = class;
        assert_eq!(match_gang(&r, &market).is_ok(), met, "min_vram_gib {class}");
    }
    // The slices of a MIG card carry their own handle's bytes.
    let found = enumerate(&mig_a100()).expect("enumerates");
    for (g, (_, _, mib)) in found.gpus[1..].iter().zip(SLICES) {
        assert_eq!(g.vram_total_bytes, Some(mib * MIB));
    }
}

#[test]
fn a_mig_index_error_other_than_not_found_is_noted_and_the_rest_kept() {
    let mut f = mig_a100();
    f.no_permission_slot = Some(1);
    let found = enumerate(&f).expect("enumerates");
    assert_eq!(found.gpus.len(), 3, "parent + slots 0 and 2");
    assert_eq!(
        found.gpus[0].not_offered,
        Some(NotOffered::MigParent { slices: 2 })
    );
    assert_eq!(found.notes.len(), 1, "{:?}", found.notes);
    assert!(
        found.notes[0].contains("nvmlDeviceGetMigDeviceHandleByIndex(1)"),
        "{:?}",
        found.notes
    );
}

#[test]
fn unidentified_device_is_listed_with_the_failing_query_and_never_offered() {
    let mut f = FakeNvml {
        count: 2,
        ..FakeNvml::default()
    };
    f.names.insert(Handle::Gpu(0), "NVIDIA L4".into());
    f.uuids.insert(Handle::Gpu(0), "GPU-aaaa".into());
    f.memory.insert(
        Handle::Gpu(0),
        Memory {
            total: 23034 * MIB,
            free: 23034 * MIB,
        },
    );
    // The README's device: name "" and memory 0.
    f.names.insert(Handle::Gpu(1), String::new());
    f.uuids.insert(Handle::Gpu(1), "GPU-bbbb".into());
    f.memory
        .insert(Handle::Gpu(1), Memory { total: 0, free: 0 });
    let found = enumerate(&f).expect("enumerates");
    assert_eq!(found.gpus.len(), 2, "the unidentified device is listed");
    let NotOffered::Unidentified { query } = found.gpus[1].not_offered.clone().expect("flagged")
    else {
        panic!("unidentified expected: {:?}", found.gpus[1].not_offered)
    };
    assert!(
        query.contains("nvmlDeviceGetName returned an empty name"),
        "{query}"
    );
    assert!(
        query.contains("nvmlDeviceGetMemoryInfo reported 0 bytes"),
        "{query}"
    );
    assert_eq!(found.gpus[0].not_offered, None);
    let inv = Inventory {
        gpus: found.gpus,
        notes: vec![],
    };
    let offered = inv.offerable();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].uuid.as_deref(), Some("GPU-aaaa"));
    // A query that errors names the error.
    let mut g = FakeNvml {
        count: 1,
        ..FakeNvml::default()
    };
    g.memory.insert(
        Handle::Gpu(0),
        Memory {
            total: MIB,
            free: 0,
        },
    );
    let found = enumerate(&g).expect("enumerates");
    assert!(matches!(
        &found.gpus[0].not_offered,
        Some(NotOffered::Unidentified { query }) if query.starts_with("nvmlDeviceGetName: ")
    ));
}

#[test]
fn rm_version_mismatch_offers_nothing_and_names_the_fix() {
    let e = init_error(NvmlError::LibRmVersionMismatch);
    assert!(matches!(e, Error::RmVersionMismatch));
    let text = e.to_string();
    assert!(text.contains("version mismatch"), "{text}");
    assert!(text.contains("reboot"), "{text}");
    assert!(text.contains("reload the nvidia kernel module"), "{text}");
    let mut inv = Inventory::default();
    merge(&mut inv, Err(e));
    assert!(inv.gpus.is_empty());
    assert_eq!(inv.notes.len(), 1);
    assert!(inv.notes[0].starts_with("NVML: NVIDIA driver/library version mismatch"));
}

#[test]
fn driver_not_loaded_and_other_init_errors_are_named() {
    assert!(matches!(
        init_error(NvmlError::DriverNotLoaded),
        Error::DriverNotLoaded
    ));
    assert!(matches!(
        init_error(NvmlError::LibraryNotFound),
        Error::LibraryMissing { .. }
    ));
    assert!(matches!(
        init_error(NvmlError::NoPermission),
        Error::Nvml(_)
    ));
}

/// This machine, for real: without the NVIDIA driver NVML must not load, and the reason is the
/// README's sentence. Skipped where the library exists.
#[test]
fn no_driver_here_means_zero_gpus_with_the_readme_reason() {
    let present = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]
        .iter()
        .any(|d| std::path::Path::new(d).join(LIBRARY).exists());
    if present {
        eprintln!("SKIPPED: {LIBRARY} is installed here");
        return;
    }
    let e = detect().expect_err("no driver here");
    assert!(matches!(e, Error::LibraryMissing { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("NVIDIA driver library (libnvidia-ml.so.1) not found"),
        "{e}"
    );
}

#[test]
fn mig_profile_comes_from_the_mig_device_name() {
    assert_eq!(
        mig_profile("NVIDIA A100-PCIE-40GB MIG 3g.20gb").as_deref(),
        Some("3g.20gb")
    );
    assert_eq!(mig_profile("NVIDIA A100-PCIE-40GB"), None);
}
