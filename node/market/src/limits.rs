//! Provider limits: which GPUs a provider pools, what it charges, how many jobs it runs at once
//! and which jobs it refuses ("Provider limits").
//!
//! Written by the provider in the `[provider]` section of the node config. Pure functions apply them:
//! [`ProviderLimits::pooled`] picks the GPUs that may be offered, [`ProviderLimits::offer`]
//! turns them into the matcher's [`Offer`] (groups per model and NVLink domain, price, limits),
//! and [`ProviderLimits::admit`] decides whether one job is taken. The matcher sees the same rules through the offer (price,
//! `max_job_duration_s`, `max_job_nodes`) and the snapshot's [`super::snapshot::ProviderLoad`]
//! (concurrent jobs), so a plan never names a provider that would refuse it on these grounds.

use serde::{Deserialize, Serialize};

use super::glob;
use super::snapshot::{GpuModel, Offer, OfferedGpus, ProviderId};
use super::spec::{Ensemble, Interconnect, Vendor};
use crate::gpu::{Gpu, Source};

/// `[provider]`: a provider's own rules. Units in the field names.
///
/// ```toml
/// [provider]
/// pool = ["GPU-8d2c…", "declared:1"]   # absent = every offerable GPU
/// price_ntx_per_gpu_hour = 1500000
/// max_concurrent_jobs = 2
/// max_job_duration_s = 86400
/// max_job_nodes = 4
/// allow_images = ["pytorch/*", "nvcr.io/nvidia/*"]
/// refuse_images = ["*:latest"]
/// fabric = "ib-pod-7"                  # an RDMA fabric, for gpus.interconnect_group
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderLimits {
    /// GPUs that may be pooled, each named by UUID, PCI bus id or `source:index` (`nvml:0`,
    /// `sysfs:1`, `declared:0`); absent = every offerable GPU. A name matching no GPU is an
    /// error ([`PoolError`]), never silently ignored.
    #[serde(default)]
    pub pool: Option<Vec<String>>,
    /// Price, NTX base units per GPU-hour (> 0): the offer's price and the lowest rate accepted.
    pub price_ntx_per_gpu_hour: u64,
    /// Jobs running at once (≥ 1).
    #[serde(default = "one")]
    pub max_concurrent_jobs: u32,
    /// Longest job accepted, seconds (the spec's `limits.max_duration_s`); absent = any.
    #[serde(default)]
    pub max_job_duration_s: Option<u64>,
    /// Most nodes a job may span for this provider to join it; absent = any.
    #[serde(default)]
    pub max_job_nodes: Option<u32>,
    /// Image globs accepted (`*`, `?`, ASCII case-insensitive) against the local image name or
    /// `cid:<CID>` for an archive; empty = any image.
    #[serde(default)]
    pub allow_images: Vec<String>,
    /// Image globs refused, checked after `allow_images`.
    #[serde(default)]
    pub refuse_images: Vec<String>,
    /// The RDMA fabric (InfiniBand or RoCE network) this machine's GPUs attach to, named as
    /// the operator names it (e.g. `ib-pod-7`); absent = none. Offered as every GPU's
    /// [`GpuModel::fabric`]: what a spec's `gpus.interconnect_group` needs.
    #[serde(default)]
    pub fabric: Option<String>,
}

fn one() -> u32 {
    1
}

/// Why a provider refuses a job. Each variant carries the limit and what the job asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// `max_concurrent_jobs` jobs already run.
    #[error("already running {active} jobs (max_concurrent_jobs = {max})")]
    MaxConcurrentJobs {
        /// Jobs running now.
        active: u32,
        /// The limit.
        max: u32,
    },
    /// The job's highest rate is below the provider's price.
    #[error("limits.max_rate_ntx_per_gpu_hour {max_rate} is below the price {price}")]
    Price {
        /// Provider price, NTX base units per GPU-hour.
        price: u64,
        /// The job's `limits.max_rate_ntx_per_gpu_hour`.
        max_rate: u64,
    },
    /// The job may run longer than the provider accepts.
    #[error("limits.max_duration_s {asked_s} exceeds max_job_duration_s {max_s}")]
    Duration {
        /// The job's `limits.max_duration_s`.
        asked_s: u64,
        /// The provider's limit.
        max_s: u64,
    },
    /// The job spans more nodes than the provider joins.
    #[error("the plan spans {nodes} nodes, more than max_job_nodes {max}")]
    Nodes {
        /// Nodes of the plan.
        nodes: u32,
        /// The provider's limit.
        max: u32,
    },
    /// The image matches no `allow_images` glob.
    #[error("image `{image}` matches no allow_images glob")]
    ImageNotAllowed {
        /// The image reference (`name` or `cid:<CID>`).
        image: String,
    },
    /// The image matches a `refuse_images` glob.
    #[error("image `{image}` matches refuse_images glob `{pattern}`")]
    ImageRefused {
        /// The image reference.
        image: String,
        /// The glob that matched.
        pattern: String,
    },
}

/// A `pool` entry that names no GPU of the inventory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "provider.pool: `{0}` names no GPU (use a UUID, a PCI bus id or source:index, e.g. nvml:0)"
)]
pub struct PoolError(pub String);

/// Why the `[provider]` section itself is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// `price_ntx_per_gpu_hour` is 0.
    #[error("provider.price_ntx_per_gpu_hour: must be greater than 0")]
    ZeroPrice,
    /// `max_concurrent_jobs` is 0.
    #[error("provider.max_concurrent_jobs: must be at least 1")]
    ZeroConcurrentJobs,
    /// `max_job_duration_s` is 0.
    #[error("provider.max_job_duration_s: must be greater than 0")]
    ZeroDuration,
    /// `max_job_nodes` is 0.
    #[error("provider.max_job_nodes: must be at least 1")]
    ZeroNodes,
}

impl ProviderLimits {
    /// Rejects settings no job could ever pass.
    ///
    /// # Errors
    /// The first [`LimitsError`] found, naming its key.
    pub fn validate(&self) -> Result<(), LimitsError> {
        if self.price_ntx_per_gpu_hour == 0 {
            return Err(LimitsError::ZeroPrice);
        }
        if self.max_concurrent_jobs == 0 {
            return Err(LimitsError::ZeroConcurrentJobs);
        }
        if self.max_job_duration_s == Some(0) {
            return Err(LimitsError::ZeroDuration);
        }
        if self.max_job_nodes == Some(0) {
            return Err(LimitsError::ZeroNodes);
        }
        Ok(())
    }

    /// Whether the provider takes `spec` as one of `plan_nodes` nodes while `active_jobs` jobs
    /// run. Checks in this order: concurrent jobs, price, duration, nodes, image. Pure.
    ///
    /// # Errors
    /// The first [`Refusal`] that applies.
    pub fn admit(&self, spec: &Ensemble, plan_nodes: u32, active_jobs: u32) -> Result<(), Refusal> {
        if active_jobs >= self.max_concurrent_jobs {
            return Err(Refusal::MaxConcurrentJobs {
                active: active_jobs,
                max: self.max_concurrent_jobs,
            });
        }
        let max_rate = spec.limits.max_rate_ntx_per_gpu_hour;
        if max_rate < self.price_ntx_per_gpu_hour {
            return Err(Refusal::Price {
                price: self.price_ntx_per_gpu_hour,
                max_rate,
            });
        }
        if let Some(max_s) = self.max_job_duration_s
            && spec.limits.max_duration_s > max_s
        {
            return Err(Refusal::Duration {
                asked_s: spec.limits.max_duration_s,
                max_s,
            });
        }
        if let Some(max) = self.max_job_nodes
            && plan_nodes > max
        {
            return Err(Refusal::Nodes {
                nodes: plan_nodes,
                max,
            });
        }
        self.admit_image(spec)
    }

    /// What a provider node checks of a spec when it is asked to accept a job (price, nodes
    /// and concurrent jobs are checked there against the request and its records): its
    /// duration, then its image. Pure.
    ///
    /// # Errors
    /// [`Refusal::Duration`], [`Refusal::ImageNotAllowed`], [`Refusal::ImageRefused`].
    pub fn admit_spec(&self, spec: &Ensemble) -> Result<(), Refusal> {
        if let Some(max_s) = self.max_job_duration_s
            && spec.limits.max_duration_s > max_s
        {
            return Err(Refusal::Duration {
                asked_s: spec.limits.max_duration_s,
                max_s,
            });
        }
        self.admit_image(spec)
    }

    /// The image policy: `allow_images` (when set), then `refuse_images`.
    fn admit_image(&self, spec: &Ensemble) -> Result<(), Refusal> {
        let image = image_ref(spec);
        if !self.allow_images.is_empty()
            && !self.allow_images.iter().any(|p| glob::matches(p, &image))
        {
            return Err(Refusal::ImageNotAllowed { image });
        }
        if let Some(p) = self.refuse_images.iter().find(|p| glob::matches(p, &image)) {
            return Err(Refusal::ImageRefused {
                pattern: p.clone(),
                image,
            });
        }
        Ok(())
    }

    /// The GPUs of `offerable` that may be pooled, in inventory order.
    ///
    /// # Errors
    /// [`PoolError`] naming the first `pool` entry that matches no GPU.
    pub fn pooled<'a>(&self, offerable: &'a [Gpu]) -> Result<Vec<&'a Gpu>, PoolError> {
        let Some(names) = &self.pool else {
            return Ok(offerable.iter().collect());
        };
        if let Some(bad) = names
            .iter()
            .find(|n| !offerable.iter().any(|g| names_gpu(n, g)))
        {
            return Err(PoolError(bad.clone()));
        }
        Ok(offerable
            .iter()
            .filter(|g| names.iter().any(|n| names_gpu(n, g)))
            .collect())
    }
}

/// What an offer says besides the GPUs and the limits: who, under which bond, how fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferTerms {
    /// The provider (the bond's `provider`).
    pub provider: ProviderId,
    /// GPUs the live bond covers for one job (`stake / min_bond_per_gpu`).
    pub bond_gpus: u32,
    /// Unified benchmark score per GPU (the dispatch crate's `gpu::bench::score`).
    pub score: u32,
    /// Advertised uplink, Mbit/s.
    pub uplink_mbps: u32,
    /// Declared reachable without a relay ([`Offer::direct_capable`]).
    pub direct_capable: bool,
}

impl ProviderLimits {
    /// The matcher's view of this provider's offer: the pooled GPUs (`pooled`, see
    /// [`ProviderLimits::pooled`]) grouped into identical models per fabric domain, those whose
    /// UUID is in `in_use` not free, priced and limited as configured. NVIDIA GPUs joined by
    /// active NVLinks (by PCI bus id, transitively) form one `nvlink` group; every other GPU
    /// is PCIe (`any`). Declared GPUs stay marked declared. Each model keeps the size the
    /// driver reported: MiB, and the exact bytes when the inventory read them
    /// ([`Gpu::vram_total_bytes`] → [`GpuModel::vram_bytes`]), for fit checks.
    ///
    /// MIG (field case "NVIDIA MIG with sparse indices"): a slice (UUID `MIG-…`) is offered as
    /// its own GPU, with its own memory, free unless its own UUID is in `in_use`, and with
    /// [`GpuModel::mig_parent`] set ([`mig_parent`]); a whole GPU with MIG mode enabled is never
    /// offered (its capacity is its slices'), so the parent is not offered next to them.
    ///
    /// Each GPU's model and domain are [`ProviderLimits::pool_models`]'s: the provider's job
    /// engine picks a job's GPUs by the same description.
    pub fn offer(&self, terms: OfferTerms, pooled: &[&Gpu], in_use: &[String]) -> Offer {
        let mut gpus: Vec<OfferedGpus> = Vec::new();
        // Parallel to `gpus`: the NVLink domain of each group (None = PCIe).
        let mut keys: Vec<Option<usize>> = Vec::new();
        for (g, offered) in pooled.iter().zip(self.pool_models(pooled)) {
            let Some(PoolModel {
                model,
                nvlink_domain: key,
            }) = offered
            else {
                continue;
            };
            let free = u32::from(!g.uuid.as_ref().is_some_and(|u| in_use.contains(u)));
            let declared = g.source == Source::Declared;
            let same = (gpus.iter_mut().zip(&keys))
                .find(|(o, k)| o.model == model && o.declared == declared && **k == key);
            match same {
                Some((o, _)) => o.free += free,
                None => {
                    gpus.push(OfferedGpus {
                        model,
                        free,
                        declared,
                    });
                    keys.push(key);
                }
            }
        }
        Offer {
            provider: terms.provider,
            bond_gpus: terms.bond_gpus,
            price_per_gpu_hour: self.price_ntx_per_gpu_hour,
            score: terms.score,
            uplink_mbps: terms.uplink_mbps,
            max_job_duration_s: self.max_job_duration_s,
            max_job_nodes: self.max_job_nodes,
            gpus,
            direct_capable: terms.direct_capable,
            // The daemon sets it when its onboarding benchmark measured the score.
            compute: super::snapshot::Compute::Unmeasured,
        }
    }

    /// How each GPU of `pooled` is offered, in order: its [`GpuModel`] exactly as
    /// [`ProviderLimits::offer`] groups it, and its NVLink domain; `None` for a GPU that is never
    /// offered (a whole GPU with MIG mode enabled: its capacity is its slices'). The provider's
    /// job engine judges each pooled GPU against a spec with this same description
    /// ([`crate::Requirements::rejects_model`]), so it never runs a job on a GPU the matcher
    /// would not have counted.
    pub fn pool_models(&self, pooled: &[&Gpu]) -> Vec<Option<PoolModel>> {
        let domain = nvlink_domains(pooled);
        pooled
            .iter()
            .zip(domain)
            .map(|(g, key)| {
                if g.mig_enabled == Some(true) && !is_mig_slice(g) {
                    return None;
                }
                let model = GpuModel {
                    vendor: g.vendor,
                    name: g.name.clone(),
                    vram_mib: g.vram_total_mib,
                    vram_bytes: g.vram_total_bytes,
                    compute_capability: g.compute_capability,
                    gfx_target: g.gfx_target.clone(),
                    interconnect: if key.is_some() {
                        Interconnect::Nvlink
                    } else {
                        Interconnect::Any
                    },
                    mig_parent: mig_parent(g, pooled),
                    fabric: self.fabric.clone(),
                    ..GpuModel::default()
                };
                Some(PoolModel {
                    model,
                    nvlink_domain: key,
                })
            })
            .collect()
    }
}

/// One pooled GPU as offered ([`ProviderLimits::pool_models`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolModel {
    /// The model it is offered as (the group it counts in).
    pub model: GpuModel,
    /// Its NVLink domain: the pool index of the first GPU joined to it by active NVLinks
    /// (transitively); `None` = no pooled NVLink peer (PCIe).
    pub nvlink_domain: Option<usize>,
}

/// Whether `gpu` is a MIG slice: the inventory gave it a [`crate::gpu::MigSlice`] (it came from
/// `nvmlDeviceGetMigDeviceHandleByIndex`), or NVML names it by a `MIG-…` UUID (R470+ drivers;
/// older ones `MIG-GPU-…/gi/ci`, same prefix).
pub fn is_mig_slice(gpu: &Gpu) -> bool {
    gpu.mig.is_some() || gpu.uuid.as_deref().is_some_and(|u| u.starts_with("MIG-"))
}

/// The card a MIG slice is carved from, as [`GpuModel::mig_parent`]: the parent UUID NVML
/// gave for the slice ([`crate::gpu::MigSlice::parent_uuid`]), else the UUID of the whole GPU
/// of `all` at the slice's PCI bus id (a MIG device reports its parent's bus id), else
/// `pci:<bus id>`, else one shared `unknown` card (so slices of unknown parents are never given
/// together to a collective job). `None` for a GPU that is not a slice.
pub fn mig_parent(gpu: &Gpu, all: &[&Gpu]) -> Option<String> {
    if !is_mig_slice(gpu) {
        return None;
    }
    if let Some(parent) = gpu.mig.as_ref().and_then(|m| m.parent_uuid.clone()) {
        return Some(parent);
    }
    let Some(bus) = gpu.pci_bus_id.as_deref() else {
        return Some("unknown".into());
    };
    let parent = all
        .iter()
        .find(|g| !is_mig_slice(g) && g.pci_bus_id.as_deref() == Some(bus))
        .and_then(|g| g.uuid.clone());
    Some(parent.unwrap_or_else(|| format!("pci:{bus}")))
}

/// For each pooled GPU, its NVLink domain (the smallest index of the GPUs joined to it by
/// active NVLinks, transitively), or `None` for a GPU without a pooled NVLink peer.
fn nvlink_domains(pooled: &[&Gpu]) -> Vec<Option<usize>> {
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let n = pooled.len();
    let mut parent: Vec<usize> = (0..n).collect();
    let mut linked = vec![false; n];
    for (i, g) in pooled.iter().enumerate() {
        // MIG slices have no NVLink (and share their parent's bus id).
        if g.vendor != Vendor::Nvidia || is_mig_slice(g) {
            continue;
        }
        for peer in &g.nvlink_peers {
            let j = pooled.iter().position(|h| {
                h.vendor == Vendor::Nvidia
                    && !is_mig_slice(h)
                    && h.pci_bus_id.as_deref() == Some(peer.as_str())
            });
            if let Some(j) = j {
                let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                parent[a.max(b)] = a.min(b);
                linked[i] = true;
                linked[j] = true;
            }
        }
    }
    (0..n)
        .map(|i| linked[i].then(|| find(&mut parent, i)))
        .collect()
}

/// The image reference the globs see: the local name, or `cid:<CID>` for an archive.
pub fn image_ref(spec: &Ensemble) -> String {
    match (&spec.image.local, &spec.image.archive) {
        (Some(name), _) => name.clone(),
        (None, Some(a)) => format!("cid:{}", a.cid.0),
        (None, None) => String::new(),
    }
}

/// Whether `name` (UUID, PCI bus id or `source:index`) names `gpu`.
fn names_gpu(name: &str, gpu: &Gpu) -> bool {
    if gpu.uuid.as_deref() == Some(name) || gpu.pci_bus_id.as_deref() == Some(name) {
        return true;
    }
    let source = match gpu.source {
        crate::gpu::Source::Nvml => "nvml",
        crate::gpu::Source::Sysfs => "sysfs",
        crate::gpu::Source::Declared => "declared",
    };
    name.split_once(':')
        .is_some_and(|(s, i)| s == source && i.parse() == Ok(gpu.index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declared::{DeclaredGpu, to_gpus};

    const SPEC: &str = r#"
image: { local: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" }
command: ["python", "train.py"]
gpus: { count: 4 }
placement: { max_nodes: 2 }
limits: { max_duration_s: 7200, max_rate_ntx_per_gpu_hour: 2000000 }
budget_ntx: 100000000
deadline_ms: 99999999999999
"#;

    fn spec() -> Ensemble {
        serde_norway::from_str(SPEC).expect("the test spec parses")
    }

    fn limits() -> ProviderLimits {
        ProviderLimits {
            pool: None,
            price_ntx_per_gpu_hour: 1_500_000,
            max_concurrent_jobs: 2,
            max_job_duration_s: Some(86_400),
            max_job_nodes: Some(2),
            allow_images: vec!["pytorch/*".into()],
            refuse_images: vec![],
            fabric: None,
        }
    }

    #[test]
    fn a_slice_names_the_parent_nvml_gave_before_any_bus_id_match() {
        use crate::gpu::{MigSlice, Source};
        use crate::spec::Vendor;
        let mut slice = Gpu::bare(
            0,
            Source::Nvml,
            Vendor::Nvidia,
            "NVIDIA A100-PCIE-40GB MIG 3g.20gb".into(),
        );
        slice.uuid = Some("MIG-23de08f7-6fcc-5be3-9094-cc3b4162f0bb".into());
        slice.mig = Some(MigSlice {
            parent_uuid: Some("GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078".into()),
            parent_index: 0,
            slot: 0,
            profile: Some("3g.20gb".into()),
        });
        assert_eq!(
            mig_parent(&slice, &[&slice]).as_deref(),
            Some("GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078")
        );
        slice.mig = None;
        assert_eq!(mig_parent(&slice, &[&slice]).as_deref(), Some("unknown"));
    }

    /// A MIG device NVML enumerated but whose UUID it could not read is still a slice of its
    /// card (never counted as a whole GPU a collective job may pair with its siblings).
    #[test]
    fn a_slice_is_known_by_its_mig_record_without_a_uuid() {
        use crate::gpu::{MigSlice, Source};
        use crate::spec::Vendor;
        let mut slice = Gpu::bare(
            0,
            Source::Nvml,
            Vendor::Nvidia,
            "NVIDIA A100 MIG 1g.5gb".into(),
        );
        assert!(!is_mig_slice(&slice));
        slice.mig = Some(MigSlice {
            parent_uuid: Some("GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078".into()),
            parent_index: 0,
            slot: 2,
            profile: Some("1g.5gb".into()),
        });
        assert!(is_mig_slice(&slice));
        assert_eq!(
            mig_parent(&slice, &[&slice]).as_deref(),
            Some("GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078")
        );
    }

    /// The offer carries the exact bytes the inventory read (field case `vram/`: the H100 NVL's
    /// 99 961 274 368 B), not the MiB rounded down; GPUs without bytes fall back to MiB.
    #[test]
    fn the_offer_keeps_the_exact_reported_bytes() {
        use crate::gpu::Source;
        use crate::spec::Vendor;
        let mut nvl = Gpu::bare(0, Source::Nvml, Vendor::Nvidia, "NVIDIA H100 NVL".into());
        nvl.uuid = Some("GPU-nvl".into());
        nvl.vram_total_bytes = Some(99_961_274_368);
        nvl.vram_total_mib = 99_961_274_368 >> 20;
        let declared = two_declared();
        let pooled: Vec<&Gpu> = std::iter::once(&nvl).chain(declared.iter()).collect();
        let terms = OfferTerms {
            provider: [5; 28],
            bond_gpus: 3,
            score: 1,
            uplink_mbps: 1,
            direct_capable: false,
        };
        let o = limits().offer(terms, &pooled, &[]);
        let nvl_model = &o.gpus[0].model;
        assert_eq!(nvl_model.vram_bytes, Some(99_961_274_368));
        assert_eq!(nvl_model.vram_total_bytes(), 99_961_274_368);
        assert!(nvl_model.vram_mib * crate::vram::MIB < nvl_model.vram_total_bytes());
        let declared_model = &o.gpus[1].model;
        assert_eq!(declared_model.vram_bytes, None);
        assert_eq!(
            declared_model.vram_total_bytes(),
            declared_model.vram_mib * crate::vram::MIB
        );
    }

    #[test]
    fn the_declared_fabric_is_offered_on_every_gpu() {
        let gpus = two_declared();
        let pooled: Vec<&Gpu> = gpus.iter().collect();
        let terms = OfferTerms {
            provider: [5; 28],
            bond_gpus: 2,
            score: 1,
            uplink_mbps: 1,
            direct_capable: false,
        };
        assert_eq!(
            limits().offer(terms, &pooled, &[]).gpus[0].model.fabric,
            None
        );
        let l = ProviderLimits {
            fabric: Some("ib-pod-7".into()),
            ..limits()
        };
        let o = l.offer(terms, &pooled, &[]);
        assert!(
            o.gpus
                .iter()
                .all(|g| g.model.fabric.as_deref() == Some("ib-pod-7"))
        );
    }

    #[test]
    fn admit_spec_checks_the_duration_and_the_image_only() {
        let mut l = limits();
        // Price and concurrency are the accept decision's, not the spec's.
        l.price_ntx_per_gpu_hour = u64::MAX;
        assert_eq!(l.admit_spec(&spec()), Ok(()));
        l.refuse_images = vec!["*".into()];
        assert!(matches!(
            l.admit_spec(&spec()),
            Err(Refusal::ImageRefused { .. })
        ));
        l.max_job_duration_s = Some(1);
        assert!(matches!(
            l.admit_spec(&spec()),
            Err(Refusal::Duration { max_s: 1, .. })
        ));
    }

    #[test]
    fn admits_a_job_within_every_limit() {
        assert_eq!(limits().admit(&spec(), 2, 1), Ok(()));
    }

    #[test]
    fn refuses_at_max_concurrent_jobs() {
        assert_eq!(
            limits().admit(&spec(), 1, 2),
            Err(Refusal::MaxConcurrentJobs { active: 2, max: 2 })
        );
    }

    #[test]
    fn refuses_a_max_rate_below_the_price() {
        let mut l = limits();
        l.price_ntx_per_gpu_hour = 2_000_001;
        assert_eq!(
            l.admit(&spec(), 1, 0),
            Err(Refusal::Price {
                price: 2_000_001,
                max_rate: 2_000_000
            })
        );
        l.price_ntx_per_gpu_hour = 2_000_000;
        assert_eq!(
            l.admit(&spec(), 1, 0),
            Ok(()),
            "equal to the price is accepted"
        );
    }

    #[test]
    fn refuses_a_longer_job() {
        let mut l = limits();
        l.max_job_duration_s = Some(7_199);
        assert_eq!(
            l.admit(&spec(), 1, 0),
            Err(Refusal::Duration {
                asked_s: 7_200,
                max_s: 7_199
            })
        );
    }

    #[test]
    fn refuses_more_nodes_than_it_joins() {
        let mut l = limits();
        l.max_job_nodes = Some(1);
        assert_eq!(l.admit(&spec(), 1, 0), Ok(()));
        assert_eq!(
            l.admit(&spec(), 2, 0),
            Err(Refusal::Nodes { nodes: 2, max: 1 })
        );
    }

    #[test]
    fn image_allow_and_refuse_globs() {
        let mut l = limits();
        l.allow_images = vec!["nvcr.io/*".into()];
        assert!(matches!(
            l.admit(&spec(), 1, 0),
            Err(Refusal::ImageNotAllowed { .. })
        ));
        l.allow_images.clear();
        l.refuse_images = vec!["*cudnn8*".into()];
        assert_eq!(
            l.admit(&spec(), 1, 0),
            Err(Refusal::ImageRefused {
                image: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime".into(),
                pattern: "*cudnn8*".into()
            })
        );
    }

    #[test]
    fn archive_images_are_matched_as_cid() {
        let text = SPEC.replace(
            r#"{ local: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" }"#,
            r#"{ archive: { cid: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", format: docker-save } }"#,
        );
        let spec: Ensemble = serde_norway::from_str(&text).expect("archive spec parses");
        let mut l = limits();
        l.allow_images = vec!["cid:bafkreigh2*".into()];
        assert_eq!(l.admit(&spec, 1, 0), Ok(()));
        l.allow_images = vec!["pytorch/*".into()];
        assert!(matches!(
            l.admit(&spec, 1, 0),
            Err(Refusal::ImageNotAllowed { .. })
        ));
    }

    #[test]
    fn validate_names_the_bad_key() {
        let mut l = limits();
        l.max_concurrent_jobs = 0;
        assert_eq!(l.validate(), Err(LimitsError::ZeroConcurrentJobs));
        assert!(
            l.validate()
                .expect_err("zero")
                .to_string()
                .contains("max_concurrent_jobs")
        );
        let mut l = limits();
        l.price_ntx_per_gpu_hour = 0;
        assert_eq!(l.validate(), Err(LimitsError::ZeroPrice));
        assert_eq!(limits().validate(), Ok(()));
    }

    fn nvlinked(index: u32, bus: &str, peers: &[&str]) -> Gpu {
        let mut g = two_declared().remove(0);
        g.source = Source::Nvml;
        g.index = index;
        g.uuid = Some(format!("GPU-{index}"));
        g.pci_bus_id = Some(bus.into());
        g.nvlink_peers = peers.iter().map(|p| (*p).to_string()).collect();
        g
    }

    #[test]
    fn offer_groups_models_per_nvlink_domain_and_applies_price_and_limits() {
        // Two NVLink pairs (0-1, 2-3), one PCIe GPU (4); GPU-1 is busy.
        let gpus = [
            nvlinked(0, "a", &["b"]),
            nvlinked(1, "b", &["a"]),
            nvlinked(2, "c", &["d"]),
            nvlinked(3, "d", &["c"]),
            nvlinked(4, "e", &[]),
        ];
        let pooled: Vec<&Gpu> = gpus.iter().collect();
        let terms = OfferTerms {
            provider: [5; 28],
            bond_gpus: 16,
            score: 420,
            uplink_mbps: 10_000,
            direct_capable: true,
        };
        let o = limits().offer(terms, &pooled, &["GPU-1".to_string()]);
        assert!(o.direct_capable, "the declared reachability is advertised");
        assert_eq!(o.price_per_gpu_hour, 1_500_000);
        assert_eq!(
            (o.max_job_duration_s, o.max_job_nodes),
            (Some(86_400), Some(2))
        );
        let groups: Vec<(Interconnect, u32)> = o
            .gpus
            .iter()
            .map(|g| (g.model.interconnect, g.free))
            .collect();
        assert_eq!(
            groups,
            vec![
                (Interconnect::Nvlink, 1),
                (Interconnect::Nvlink, 2),
                (Interconnect::Any, 1)
            ]
        );
        assert!(o.gpus.iter().all(|g| !g.declared));
        // Declared GPUs stay declared, in one PCIe group.
        let decl = two_declared();
        let o = limits().offer(terms, &decl.iter().collect::<Vec<_>>(), &[]);
        assert_eq!(o.gpus.len(), 1);
        assert!(o.gpus[0].declared && o.gpus[0].free == 2);
    }

    fn two_declared() -> Vec<Gpu> {
        to_gpus(&[DeclaredGpu {
            name: "NVIDIA A100-SXM4-80GB".into(),
            vendor: crate::spec::Vendor::Nvidia,
            vram_gib: 80,
            compute_capability: None,
            gfx_target: None,
            count: 2,
        }])
    }

    #[test]
    fn pool_selects_named_gpus_and_rejects_unknown_names() {
        let gpus = two_declared();
        let mut l = limits();
        assert_eq!(l.pooled(&gpus).expect("all").len(), 2);
        l.pool = Some(vec!["declared:1".into()]);
        let picked = l.pooled(&gpus).expect("one");
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].index, 1);
        l.pool = Some(vec!["nvml:0".into()]);
        assert_eq!(l.pooled(&gpus), Err(PoolError("nvml:0".into())));
    }
}
