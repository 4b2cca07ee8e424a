//! Synthetic heterogeneous markets and job mixes for tests and benches (`test-utils` feature).
//!
//! Deterministic from a seed (SplitMix64, no external RNG). Providers sit in sites of 50 with
//! intra-site RTTs of 0.2–3 ms and a few inter-site links of 20–150 ms, the inter-site ones
//! with a measured throughput of 1, 5 or 20 Gbit/s (never above either end's uplink). GPU
//! models are real products with their VRAM, compute capability or gfx target and fabric;
//! prices and scores vary ±25 % around a per-model base. About 9 % of providers have no live
//! bond; half of the offers have a measured score. Every job has an RTT bound; about 1 in 16 of
//! the 8- and 16-GPU jobs asks for latency groups.

use super::matching::{GroupRequirements, Requirements};
use super::snapshot::{Compute, GpuModel, Offer, OfferedGpus, ProviderId, RttSample};
use super::spec::{ComputeCapability, Interconnect, Vendor};

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// (name, vendor, VRAM GiB, CC, gfx, fabric, base price NTX/GPU-h, base score)
type ModelRow = (
    &'static str,
    Vendor,
    u64,
    Option<(u8, u8)>,
    Option<&'static str>,
    Interconnect,
    u64,
    u32,
);

const MODELS: &[ModelRow] = &[
    (
        "NVIDIA H100 80GB HBM3 SXM",
        Vendor::Nvidia,
        80,
        Some((9, 0)),
        None,
        Interconnect::Nvlink,
        4_000_000,
        1000,
    ),
    (
        "NVIDIA A100-SXM4-80GB",
        Vendor::Nvidia,
        80,
        Some((8, 0)),
        None,
        Interconnect::Nvlink,
        2_000_000,
        520,
    ),
    (
        "NVIDIA A100-PCIE-40GB",
        Vendor::Nvidia,
        40,
        Some((8, 0)),
        None,
        Interconnect::Any,
        1_500_000,
        480,
    ),
    (
        "NVIDIA L40S",
        Vendor::Nvidia,
        48,
        Some((8, 9)),
        None,
        Interconnect::Any,
        1_200_000,
        560,
    ),
    (
        "NVIDIA GeForce RTX 4090",
        Vendor::Nvidia,
        24,
        Some((8, 9)),
        None,
        Interconnect::Any,
        700_000,
        500,
    ),
    (
        "NVIDIA GeForce RTX 3090",
        Vendor::Nvidia,
        24,
        Some((8, 6)),
        None,
        Interconnect::Any,
        400_000,
        250,
    ),
    (
        "Tesla T4",
        Vendor::Nvidia,
        16,
        Some((7, 5)),
        None,
        Interconnect::Any,
        150_000,
        90,
    ),
    (
        "AMD Instinct MI250X",
        Vendor::Amd,
        128,
        None,
        Some("gfx90a"),
        Interconnect::Xgmi,
        1_800_000,
        600,
    ),
    (
        "AMD Instinct MI300X",
        Vendor::Amd,
        192,
        None,
        Some("gfx942"),
        Interconnect::Xgmi,
        3_500_000,
        1100,
    ),
    (
        "AMD Radeon RX 7900 XTX",
        Vendor::Amd,
        24,
        None,
        Some("gfx1100"),
        Interconnect::Any,
        350_000,
        300,
    ),
];

fn model(row: &ModelRow) -> GpuModel {
    GpuModel {
        vendor: row.1,
        name: row.0.to_string(),
        vram_mib: row.2 * 1024,
        compute_capability: row
            .3
            .map(|(major, minor)| ComputeCapability { major, minor }),
        gfx_target: row.4.map(str::to_string),
        interconnect: row.5,
        ..GpuModel::default()
    }
}

/// Provider key hash for index `i` (distinct for every `i`).
pub fn provider_id(i: u32) -> ProviderId {
    let mut id = [0u8; 28];
    id[..4].copy_from_slice(&i.to_be_bytes());
    id[27] = 0x9a;
    id
}

/// A market of `n` providers (about 7 GPUs each on average) and its RTT samples.
pub fn market(n: u32, seed: u64) -> (Vec<Offer>, Vec<RttSample>) {
    let mut rng = Rng::new(seed);
    let mut offers = Vec::with_capacity(n as usize);
    for i in 0..n {
        let groups = if rng.chance(20) { 2 } else { 1 };
        let mut gpus = Vec::new();
        let (mut price, mut score) = (0u64, 0u32);
        for _ in 0..groups {
            let row = &MODELS[rng.range(0, MODELS.len() as u64 - 1) as usize];
            let size = [1u32, 2, 4, 8, 8, 8][rng.range(0, 5) as usize];
            let free = if rng.chance(70) {
                size
            } else {
                rng.range(0, u64::from(size)) as u32
            };
            price = price.max(row.6 * rng.range(75, 125) / 100);
            score = score.max(row.7 * rng.range(75, 125) as u32 / 100);
            gpus.push(OfferedGpus {
                model: model(row),
                free,
                declared: false,
            });
        }
        offers.push(Offer {
            provider: provider_id(i),
            bond_gpus: if rng.chance(9) {
                0
            } else {
                [8, 16, 16, 64][rng.range(0, 3) as usize]
            },
            price_per_gpu_hour: price,
            score,
            uplink_mbps: [1_000, 10_000, 25_000, 100_000][rng.range(0, 3) as usize],
            max_job_duration_s: if rng.chance(10) { Some(3600) } else { None },
            max_job_nodes: if rng.chance(10) { Some(1) } else { None },
            gpus,
            // Two in three reachable without a relay, one in two measured; no draw, so the RNG
            // stream is unchanged.
            direct_capable: i % 3 != 0,
            compute: if i % 2 == 0 {
                Compute::Measured { bench_version: 1 }
            } else {
                Compute::Unmeasured
            },
        });
    }
    let mut rtts = Vec::new();
    const SITE: u32 = 50;
    for i in 0..n {
        let site_end = ((i / SITE) + 1) * SITE;
        for j in i + 1..site_end.min(n) {
            rtts.push(RttSample {
                a: provider_id(i),
                b: provider_id(j),
                rtt_us: rng.range(200, 3_000) as u32,
                mbps: None,
            });
        }
        for _ in 0..2 {
            let j = rng.range(0, u64::from(n) - 1) as u32;
            if j / SITE != i / SITE {
                let rtt_us = rng.range(20_000, 150_000) as u32;
                // From the RTT's digits (no draw, so the RNG stream is unchanged), and never
                // above either end's uplink, as a real measurement.
                let path = [1_000, 5_000, 20_000][(rtt_us % 3) as usize];
                let ends = offers[i as usize]
                    .uplink_mbps
                    .min(offers[j as usize].uplink_mbps);
                rtts.push(RttSample {
                    a: provider_id(i),
                    b: provider_id(j),
                    rtt_us,
                    mbps: Some(path.min(ends)),
                });
            }
        }
    }
    (offers, rtts)
}

/// A job of 1, 2, 4, 8, 16 or 32 GPUs with mixed constraints. Every job has an RTT bound of 5,
/// 20, 80 or 200 ms (it matters to multi-node plans only); about 1 in 16 of the 8- and 16-GPU
/// jobs asks for latency groups of 4 GPUs within 1 ms (2 × 4, 4 × 4).
pub fn job(rng: &mut Rng) -> Requirements {
    let count = [1u32, 2, 4, 8, 16, 32][rng.range(0, 5) as usize];
    let mut req = Requirements {
        count,
        vendor: Vendor::Any,
        min_vram_gib: 0,
        min_compute_capability: None,
        rocm_arch: Vec::new(),
        models: Vec::new(),
        per_model: Vec::new(),
        interconnect: Interconnect::Any,
        form_factor: None,
        interconnect_group: None,
        min_gpus_per_node: 1,
        max_gpus_per_node: None,
        max_nodes: 1,
        max_rtt_us: None,
        min_bandwidth_mbps: None,
        groups: None,
        max_rate: 5_000_000,
        max_duration_s: 1800,
        collective: false,
    };
    match rng.range(0, 5) {
        0 => req.vendor = Vendor::Nvidia,
        1 => {
            req.vendor = Vendor::Nvidia;
            req.min_compute_capability = Some(ComputeCapability { major: 8, minor: 0 });
        }
        2 => {
            req.vendor = Vendor::Amd;
            req.rocm_arch = vec!["gfx90a".into(), "gfx942".into()];
        }
        3 => req.models = vec!["*A100*".into(), "*H100*".into()],
        _ => {}
    }
    req.min_vram_gib = [0u32, 16, 24, 40][rng.range(0, 3) as usize];
    if count == 8 && rng.chance(30) && req.vendor != Vendor::Amd {
        req.vendor = Vendor::Nvidia;
        req.rocm_arch.clear();
        req.interconnect = Interconnect::Nvlink;
    }
    let bound = [5_000u32, 20_000, 80_000, 200_000][rng.range(0, 3) as usize];
    req.max_rtt_us = Some(bound);
    if count > 8 {
        req.max_nodes = count / 8 + 1;
        req.min_gpus_per_node = 4;
        req.min_bandwidth_mbps = Some(10_000);
    } else if count >= 2 && rng.chance(50) {
        req.max_nodes = 2;
    }
    if (count == 8 || count == 16) && rng.chance(6) {
        grouped(&mut req);
    }
    req
}

/// Turns an 8- or 16-GPU job into groups of 4 GPUs within 1 ms (tensor parallelism inside a
/// group), any node count up to one per GPU; the job's RTT bound stays the bound across groups.
fn grouped(req: &mut Requirements) {
    req.groups = Some(GroupRequirements {
        count: req.count / 4,
        gpus: 4,
        max_rtt_us: 1_000,
    });
    req.interconnect = Interconnect::Any;
    req.min_gpus_per_node = 1;
    req.max_nodes = req.count;
    req.max_rtt_us = req.max_rtt_us.map(|b| b.max(1_000));
}
