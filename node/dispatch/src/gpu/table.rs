//! `ganglion gpus`'s table: one row per GPU or MIG device with whether it is offered and, when
//! not, why (MIG parent, unidentified, APU shared memory, not usable in containers).

use super::Inventory;

/// The inventory as a table: one row per GPU or MIG device (`IDX` `0/2` = MIG index 2 of GPU
/// 0), with `STATUS` saying whether it is offered and, if not, why.
pub fn render(inv: &Inventory) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<5} {:<9} {:<7} {:<32} {:>9} {:<8} {:<42} STATUS",
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
        let idx = match &g.mig {
            Some(m) => format!("{}/{}", m.parent_index, m.slot),
            None => g.index.to_string(),
        };
        let name = if g.name.is_empty() {
            "(unidentified)"
        } else {
            g.name.as_str()
        };
        let status = g
            .not_offered
            .as_ref()
            .map_or_else(|| "offered".to_string(), |n| format!("not offered: {n}"));
        let _ = writeln!(
            out,
            "{:<5} {:<9} {:<7} {:<32} {:>9.1} {:<8} {:<42} {}",
            idx,
            source,
            vendor,
            name,
            g.vram_total_mib as f64 / 1024.0,
            arch,
            id,
            status
        );
    }
    if inv.gpus.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{Gpu, MigSlice, NotOffered, Source};
    use ganglion_market::spec::Vendor;

    #[test]
    fn every_not_offered_reason_and_mig_index_is_shown() {
        let mut parent = Gpu::bare(
            0,
            Source::Nvml,
            Vendor::Nvidia,
            "NVIDIA A100-PCIE-40GB".into(),
        );
        parent.uuid = Some("GPU-3b722aa5".into());
        parent.not_offered = Some(NotOffered::MigParent { slices: 3 });
        let mut slice = Gpu::bare(
            0,
            Source::Nvml,
            Vendor::Nvidia,
            "NVIDIA A100-PCIE-40GB MIG 1g.5gb".into(),
        );
        slice.uuid = Some("MIG-5f16849a".into());
        slice.mig = Some(MigSlice {
            parent_uuid: parent.uuid.clone(),
            parent_index: 0,
            slot: 2,
            profile: Some("1g.5gb".into()),
        });
        let mut unknown = Gpu::bare(1, Source::Nvml, Vendor::Nvidia, String::new());
        unknown.not_offered = Some(NotOffered::Unidentified {
            query: "nvmlDeviceGetName returned an empty name".into(),
        });
        let mut apu = Gpu::bare(0, Source::Sysfs, Vendor::Amd, "0x1002:0x1586".into());
        apu.not_offered = Some(NotOffered::SharedSystemMemory);
        let mut l4 = Gpu::bare(2, Source::Nvml, Vendor::Nvidia, "NVIDIA L4".into());
        l4.not_offered = Some(NotOffered::NotUsableInContainers {
            reason: "NVIDIA Container Toolkit missing; fix: install it".into(),
        });
        let inv = Inventory {
            gpus: vec![parent, slice, unknown, apu, l4],
            notes: vec![],
        };
        let t = render(&inv);
        let rows: Vec<&str> = t.lines().skip(1).collect();
        assert_eq!(rows.len(), 5, "{t}");
        assert!(
            rows[0].ends_with(
                "not offered: MIG enabled: its 3 MIG device(s) are offered instead of the whole GPU"
            ),
            "{t}"
        );
        assert!(
            rows[1].starts_with("0/2 ") && rows[1].ends_with(" offered"),
            "{t}"
        );
        assert!(rows[2].contains("(unidentified)"), "{t}");
        assert!(
            rows[2]
                .ends_with("not offered: unidentified (nvmlDeviceGetName returned an empty name)"),
            "{t}"
        );
        assert!(
            rows[3].ends_with("not offered: APU: shared system memory, not dedicated VRAM"),
            "{t}"
        );
        assert!(
            rows[4].ends_with(
                "not offered: present but not usable in containers: NVIDIA Container Toolkit missing; fix: install it"
            ),
            "{t}"
        );
        assert_eq!(render(&Inventory::default()).lines().nth(1), Some("(none)"));
    }
}
