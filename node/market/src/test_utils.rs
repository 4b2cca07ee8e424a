//! Hand-built markets for tests, examples and benches (`test-utils` feature): three real GPU
//! models, one-line offers and requirements, and a plan read back as `(provider, GPUs)` pairs.

use crate::spec::{ComputeCapability, Interconnect, Vendor};
use crate::{
    Compute, GpuModel, MarketSnapshot, Offer, OfferedGpus, Plan, Requirements, RttSample,
    SnapshotOptions,
};

/// A provider id made of one repeated byte: provider `i` is `[i; 28]`.
pub fn id(i: u8) -> [u8; 28] {
    [i; 28]
}

/// NVIDIA A100-SXM4-80GB: 80 GiB, CC 8.0, NVLink.
pub fn a100() -> GpuModel {
    GpuModel {
        vendor: Vendor::Nvidia,
        name: "NVIDIA A100-SXM4-80GB".into(),
        vram_mib: 80 * 1024,
        compute_capability: Some(ComputeCapability { major: 8, minor: 0 }),
        gfx_target: None,
        interconnect: Interconnect::Nvlink,
        ..GpuModel::default()
    }
}

/// NVIDIA GeForce RTX 3090: 24 GiB, CC 8.6, no fabric.
pub fn rtx3090() -> GpuModel {
    GpuModel {
        vendor: Vendor::Nvidia,
        name: "NVIDIA GeForce RTX 3090".into(),
        vram_mib: 24 * 1024,
        compute_capability: Some(ComputeCapability { major: 8, minor: 6 }),
        gfx_target: None,
        interconnect: Interconnect::Any,
        ..GpuModel::default()
    }
}

/// AMD Instinct MI250X: 128 GiB, gfx90a, xGMI.
pub fn mi250() -> GpuModel {
    GpuModel {
        vendor: Vendor::Amd,
        name: "AMD Instinct MI250X".into(),
        vram_mib: 128 * 1024,
        compute_capability: None,
        gfx_target: Some("gfx90a".into()),
        interconnect: Interconnect::Xgmi,
        ..GpuModel::default()
    }
}

/// Provider `i`'s offer of `free` GPUs of `model` at `price` NTX base units per GPU-hour
/// (bond backs 64 GPUs, score 100, 10 Gbit/s uplink, no duration or node limit).
pub fn offer(i: u8, model: GpuModel, free: u32, price: u64) -> Offer {
    Offer {
        provider: id(i),
        bond_gpus: 64,
        price_per_gpu_hour: price,
        score: 100,
        uplink_mbps: 10_000,
        max_job_duration_s: None,
        max_job_nodes: None,
        gpus: vec![OfferedGpus {
            model,
            free,
            declared: false,
        }],
        direct_capable: false,
        compute: Compute::Unmeasured,
    }
}

/// [`offer`] whose score is measured (benchmark version 1).
pub fn measured(i: u8, model: GpuModel, free: u32, price: u64) -> Offer {
    Offer {
        compute: Compute::Measured { bench_version: 1 },
        ..offer(i, model, free, price)
    }
}

/// Requirements for `count` GPUs of any kind: at most 4 nodes, 3600 s, any rate.
pub fn req(count: u32) -> Requirements {
    Requirements {
        count,
        vendor: Vendor::Any,
        min_vram_gib: 0,
        min_compute_capability: None,
        rocm_arch: vec![],
        models: vec![],
        per_model: Vec::new(),
        interconnect: Interconnect::Any,
        form_factor: None,
        interconnect_group: None,
        min_gpus_per_node: 1,
        max_gpus_per_node: None,
        max_nodes: 4,
        max_rtt_us: None,
        min_bandwidth_mbps: None,
        groups: None,
        max_rate: u64::MAX,
        max_duration_s: 3600,
        collective: false,
    }
}

/// An RTT sample of `ms` milliseconds between providers `a` and `b`, throughput unmeasured.
pub fn rtt(a: u8, b: u8, ms: u32) -> RttSample {
    RttSample {
        a: id(a),
        b: id(b),
        rtt_us: ms * 1000,
        mbps: None,
    }
}

/// [`rtt`] with a measured throughput of `mbps` Mbit/s.
pub fn link(a: u8, b: u8, ms: u32, mbps: u32) -> RttSample {
    RttSample {
        mbps: Some(mbps),
        ..rtt(a, b, ms)
    }
}

/// Latency groups: `count` groups of `gpus` GPUs, pairs inside a group within `max_rtt_ms`.
pub fn groups(count: u32, gpus: u32, max_rtt_ms: u32) -> crate::GroupRequirements {
    crate::GroupRequirements {
        count,
        gpus,
        max_rtt_us: max_rtt_ms * 1000,
    }
}

/// A snapshot of `offers` and `rtts` with default options.
///
/// # Panics
/// When two offers name the same provider (a test's own mistake).
pub fn snap(offers: &[Offer], rtts: &[RttSample]) -> MarketSnapshot {
    MarketSnapshot::build(offers, rtts, SnapshotOptions::default()).expect("distinct providers")
}

/// A plan as `(provider byte, GPUs)` pairs, in plan order.
pub fn providers(plan: &Plan) -> Vec<(u8, u32)> {
    plan.nodes.iter().map(|n| (n.provider[0], n.gpus)).collect()
}
