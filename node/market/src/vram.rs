//! VRAM classes: what a spec's `min_vram_gib` (and a per-model `vram_class_gib`) means against
//! the memory a driver reports.
//!
//! A card is sold by a *marketed class* ("80 GB", Akash's `ram: 80Gi`), but the driver reports
//! its total after ECC, row-remapping and firmware carve-outs: an H100 80GB reports 81 559 MiB
//! (79.65 GiB), an L40S 46 068 MiB (44.99 GiB), a T4 15 360 MiB (15.00 GiB). Comparing
//! `reported_mib ≥ gib × 1024` refuses every one of them for its own class.
//!
//! # Rule
//! A card whose driver reports `b` bytes of total memory
//! - **meets class `N`** (`min_vram_gib: N`) when `b ≥ N × 10⁹`: the class is read in decimal
//!   gigabytes, i.e. with a tolerance of `1 − 10⁹/2³⁰ ≈ 6.87 %` below `N` GiB;
//! - **is of class `N`** (a per-model `vram_class_gib: N`, Akash's exact `ram` attribute)
//!   when `N × 10⁹ ≤ b ≤ N × 2³⁰`: no card reports more than its marketed GiB.
//!
//! # Source
//! `shared/fixtures/field/vram/reported-vram.csv` (NVML / nvidia-smi totals collected in
//! modal-client#2797, gpu-burn#114, nccl#1264, NixOS/nixpkgs#420638, fastfetch#1658 and Akash's
//! provider-configs `gpus.json`). Over those cards the reported total lies between 93.7 % (A10,
//! L4, L40S, T4) and 100 % (A100) of the marketed GiB, and is always at least the marketed
//! decimal GB (smallest margin: L40S, 48.31 GB for 48). The next class down that must *not*
//! pass is at least 11.5 % away (H100 80GB, 79.65 GiB, for 90), so any tolerance between 6.3 %
//! and 11.5 % gives every answer of the CSV; the decimal-GB reading (6.87 %) is the one that needs
//! no table. Fit checks (does a model's working set fit) keep using the exact reported bytes
//! ([`super::GpuModel::vram_total_bytes`]); only the class comparison uses this rule.

/// Bytes in one decimal gigabyte (the unit GPU memory is marketed in).
pub const GB: u64 = 1_000_000_000;

/// Bytes in one GiB.
pub const GIB: u64 = 1 << 30;

/// Bytes in one MiB.
pub const MIB: u64 = 1 << 20;

/// Whether a card reporting `reported_bytes` of total memory meets the marketed class
/// `class_gib` (a spec's `gpus.min_vram_gib`): `reported_bytes ≥ class_gib × 10⁹`. Class 0 is
/// met by everything.
pub fn meets_class(reported_bytes: u64, class_gib: u32) -> bool {
    reported_bytes >= u64::from(class_gib) * GB
}

/// Whether a card reporting `reported_bytes` is of the marketed class `class_gib` exactly
/// (a per-model `vram_class_gib`): `class_gib × 10⁹ ≤ reported_bytes ≤ class_gib × 2³⁰`.
pub fn is_class(reported_bytes: u64, class_gib: u32) -> bool {
    meets_class(reported_bytes, class_gib) && reported_bytes <= u64::from(class_gib) * GIB
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive() {
        assert!(meets_class(80 * GB, 80));
        assert!(!meets_class(80 * GB - 1, 80));
        assert!(meets_class(0, 0));
        assert!(is_class(40 * GIB, 40));
        assert!(!is_class(40 * GIB + 1, 40));
        assert!(
            !is_class(80 * GIB, 40),
            "an A100 80GB is not of the 40 GB class"
        );
    }
}
