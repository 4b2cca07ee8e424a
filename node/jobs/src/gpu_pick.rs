//! Which of this provider's pooled GPUs run its share of a job: pure, deterministic.
//!
//! The matcher places `n` GPUs on a provider by counting the GPUs of its offer that meet the
//! spec ([`Requirements::rejects_model`]); [`pick`] then chooses *which* `n`, judging each
//! pooled GPU by the very model it is offered as ([`ProviderLimits::pool_models`]), so a job is
//! never run on a GPU the matcher would not have counted. The rules, in order:
//!
//! 1. only GPUs meeting the spec (vendor, VRAM class, compute capability or gfx target, model
//!    lists, per-model classes, form factor, fabric, interconnect);
//! 2. never a GPU held by another active job of this node (its ids recorded with that job's
//!    dispatch), nor one sharing its hardware: a MIG slice whose card is held, a card one of
//!    whose slices is held;
//! 3. MIG (field case "NVIDIA MIG with sparse indices", `docs/ensemble-spec.md` § MIG slices):
//!    never a slice together with its card, and a collective job
//!    ([`Requirements::collective`]: `distributed.framework` with more than one GPU) at most one
//!    slice per card — slices of one card have no peer path (NVIDIA MIG user guide: no
//!    GPU-to-GPU P2P between MIG devices), so NCCL cannot join them;
//! 4. with `gpus.interconnect` set, all from one NVLink domain.
//!
//! Among the GPUs allowed, whole GPUs come first, then MIG slices, then a card whose slices are
//! pooled too (so a card never takes the place of its slices); within each, the smallest
//! memory first (a small job leaves the large cards to the jobs that need them), then pool
//! order. When `n` cannot be met, [`PickRefusal`] says why, with the requirement and the
//! numbers.

use ganglion_dispatch::executor::plan::GpuAttachment;
use ganglion_market::gpu::Gpu;
use ganglion_market::limits::{PoolModel, ProviderLimits};
use ganglion_market::matching::{Constraint, Requirements};
use ganglion_market::snapshot::{GpuModel, Offer};
use ganglion_market::spec::{Interconnect, Vendor};

/// One GPU of this provider's pool: how a container reaches it, and how the market judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PooledGpu {
    /// Its stable name, recorded with the jobs that hold it: the UUID (`GPU-…`, `MIG-…`, or a
    /// source's stable id), else the attachment's id.
    pub id: String,
    /// How a container is given it.
    pub attachment: GpuAttachment,
    /// How it is offered ([`ProviderLimits::pool_models`]); `None`: never offered nor picked
    /// (a whole GPU with MIG mode enabled: its capacity is its slices').
    pub offered: Option<PoolModel>,
}

impl PooledGpu {
    /// The model it is offered as.
    pub fn model(&self) -> Option<&GpuModel> {
        self.offered.as_ref().map(|o| &o.model)
    }

    /// The card this MIG slice is carved from ([`GpuModel::mig_parent`]); `None` for a whole
    /// GPU (or one never offered).
    fn card(&self) -> Option<&str> {
        self.model().and_then(|m| m.mig_parent.as_deref())
    }
}

/// The pool of a provider: `pooled` ([`ProviderLimits::pooled`]) with each GPU's attachment
/// (`attachments`, in the same order) and its model as [`ProviderLimits::offer`] offers it.
pub fn pool(
    limits: &ProviderLimits,
    pooled: &[&Gpu],
    attachments: Vec<GpuAttachment>,
) -> Vec<PooledGpu> {
    pooled
        .iter()
        .zip(attachments)
        .zip(limits.pool_models(pooled))
        .map(|((g, attachment), offered)| PooledGpu {
            id: g
                .uuid
                .clone()
                .unwrap_or_else(|| attachment.id().to_string()),
            attachment,
            offered,
        })
        .collect()
}

/// Whether two pooled GPUs share hardware: the same GPU, or a MIG slice and its card.
fn shares_hardware(a: &PooledGpu, b: &PooledGpu) -> bool {
    a.id == b.id || a.card() == Some(b.id.as_str()) || b.card() == Some(a.id.as_str())
}

/// Whether `pool[i]` is taken by the GPUs named in `held` (ids recorded by this node's other
/// active jobs): it is one of them, or a slice of a held card, or the card of a held slice.
pub fn is_held(pool: &[PooledGpu], i: usize, held: &[String]) -> bool {
    let g = &pool[i];
    held.iter().any(|h| {
        *h == g.id
            || g.card() == Some(h.as_str())
            || pool
                .iter()
                .any(|p| p.id == *h && p.card() == Some(g.id.as_str()))
    })
}

/// `offer` (built with every pooled GPU free) with each offered GPU that `held` takes
/// ([`is_held`]: the GPU, its MIG card or a slice of it held by a job) out of the free count of
/// its model's group: the matcher then sees which GPUs are free, not only how many.
pub fn with_held(offer: &Offer, pool: &[PooledGpu], held: &[String]) -> Offer {
    let mut o = offer.clone();
    for (i, g) in pool.iter().enumerate() {
        let Some(model) = g.model() else { continue };
        if !is_held(pool, i, held) {
            continue;
        }
        if let Some(group) = o.gpus.iter_mut().find(|x| x.model == *model && x.free > 0) {
            group.free -= 1;
        }
    }
    o
}

/// Why a provider cannot give its share of a job: too few pooled GPUs meeting the spec are
/// free. Each variant names the requirement and the numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PickRefusal {
    /// Fewer pooled GPUs meet the spec than the share.
    #[error(
        "not enough GPUs meeting the spec: {needed} needed ({requirement}), {meeting} of the \
         {offered} pooled GPU(s) meet it{}",
        excluded_list(.excluded)
    )]
    TooFewMeetSpec {
        /// GPUs of this node's share.
        needed: u32,
        /// The spec's GPU requirement ([`requirement`]).
        requirement: String,
        /// Pooled GPUs that may be offered.
        offered: u32,
        /// Of those, the ones meeting the spec.
        meeting: u32,
        /// The others, by the first constraint each fails.
        excluded: Vec<(Constraint, u32)>,
    },
    /// Enough meet the spec, but this node's other active jobs hold them.
    #[error(
        "not enough GPUs meeting the spec free: {needed} needed ({requirement}), {meeting} meet \
         it, {held} of them held by this node's other active jobs"
    )]
    HeldByOtherJobs {
        /// GPUs of this node's share.
        needed: u32,
        /// The spec's GPU requirement ([`requirement`]).
        requirement: String,
        /// Pooled GPUs meeting the spec.
        meeting: u32,
        /// Of those, the ones held (or whose MIG card or slice is held) by other jobs.
        held: u32,
    },
    /// Enough are free, but the MIG rules leave too few that may go together.
    #[error(
        "not enough GPUs meeting the spec free: {needed} needed ({requirement}), {free} free \
         meet it but {usable} may go together: MIG slices: a collective job \
         (distributed.framework) gets at most one MIG slice per card, and no job a slice \
         together with its card"
    )]
    MigSlices {
        /// GPUs of this node's share.
        needed: u32,
        /// The spec's GPU requirement ([`requirement`]).
        requirement: String,
        /// Free GPUs meeting the spec.
        free: u32,
        /// The most of them one job may hold.
        usable: u32,
    },
    /// Enough are free, but not in one NVLink domain.
    #[error(
        "not enough GPUs meeting the spec free: {needed} needed ({requirement}), {usable} free \
         meet it but the largest NVLink domain has {largest} (gpus.interconnect)"
    )]
    OneDomain {
        /// GPUs of this node's share.
        needed: u32,
        /// The spec's GPU requirement ([`requirement`]).
        requirement: String,
        /// Free GPUs meeting the spec that may go together.
        usable: u32,
        /// The most of them in one domain.
        largest: u32,
    },
}

fn excluded_list(excluded: &[(Constraint, u32)]) -> String {
    if excluded.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = excluded
        .iter()
        .map(|(c, n)| format!("{c} excludes {n}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

/// The spec's GPU requirement in the spec's words, e.g.
/// `gpus.vendor nvidia, gpus.min_vram_gib 80, collective`; `any GPU` when it asks for nothing.
pub fn requirement(req: &Requirements) -> String {
    let mut parts = Vec::new();
    match req.vendor {
        Vendor::Any => {}
        Vendor::Nvidia => parts.push("gpus.vendor nvidia".to_string()),
        Vendor::Amd => parts.push("gpus.vendor amd".to_string()),
    }
    if req.min_vram_gib > 0 {
        parts.push(format!("gpus.min_vram_gib {}", req.min_vram_gib));
    }
    if let Some(cc) = req.min_compute_capability {
        parts.push(format!("gpus.min_compute_capability {cc}"));
    }
    if !req.rocm_arch.is_empty() {
        parts.push(format!("gpus.rocm_arch {:?}", req.rocm_arch));
    }
    if !req.models.is_empty() {
        parts.push(format!("gpus.models {:?}", req.models));
    }
    for pm in &req.per_model {
        match pm.vram_class_gib {
            Some(c) => parts.push(format!("gpus.per_model {} {c} GiB", pm.model)),
            None => parts.push(format!("gpus.per_model {}", pm.model)),
        }
    }
    if let Some(f) = req.form_factor {
        parts.push(format!("gpus.form_factor {f:?}").to_lowercase());
    }
    if let Some(g) = &req.interconnect_group {
        parts.push(format!("gpus.interconnect_group {g}"));
    }
    if req.interconnect != Interconnect::Any {
        parts.push(format!("gpus.interconnect {:?}", req.interconnect).to_lowercase());
    }
    if req.collective {
        parts.push("collective (distributed.framework)".to_string());
    }
    if parts.is_empty() {
        "any GPU".to_string()
    } else {
        parts.join(", ")
    }
}

/// The `n` GPUs of `pool` (their indices, in pick order) for a job requiring `req`, given the
/// ids `held` by this node's other active jobs. The rules and the order are the module's.
///
/// # Errors
/// [`PickRefusal`], by the first shortfall: too few meet the spec, too few of those are free,
/// the MIG rules leave too few that may go together, or no NVLink domain has enough.
pub fn pick(
    pool: &[PooledGpu],
    req: &Requirements,
    held: &[String],
    n: u32,
) -> Result<Vec<usize>, PickRefusal> {
    let needed = n;
    let n = n as usize;
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut excluded: Vec<(Constraint, u32)> = Vec::new();
    let mut meeting = Vec::new();
    for (i, g) in pool.iter().enumerate() {
        let Some(model) = g.model() else { continue };
        match req.rejects_model(model) {
            None => meeting.push(i),
            Some(c) => match excluded.iter_mut().find(|(e, _)| *e == c) {
                Some((_, k)) => *k += 1,
                None => excluded.push((c, 1)),
            },
        }
    }
    excluded.sort();
    let count = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    if meeting.len() < n {
        return Err(PickRefusal::TooFewMeetSpec {
            needed,
            requirement: requirement(req),
            offered: count(pool.iter().filter(|g| g.offered.is_some()).count()),
            meeting: count(meeting.len()),
            excluded,
        });
    }
    let mut free: Vec<usize> = meeting
        .iter()
        .copied()
        .filter(|&i| !is_held(pool, i, held))
        .collect();
    if free.len() < n {
        return Err(PickRefusal::HeldByOtherJobs {
            needed,
            requirement: requirement(req),
            meeting: count(meeting.len()),
            held: count(meeting.len() - free.len()),
        });
    }
    // Whole GPUs, then slices, then cards whose slices are pooled; smallest memory first.
    let class = |i: usize| {
        let g = &pool[i];
        if g.card().is_some() {
            1
        } else if pool.iter().any(|p| p.card() == Some(g.id.as_str())) {
            2
        } else {
            0
        }
    };
    let bytes = |i: usize| pool[i].model().map_or(0, GpuModel::vram_total_bytes);
    free.sort_by_key(|&i| (class(i), bytes(i), i));
    // The GPUs of `candidates` one job may hold together, in order (at most `n`).
    let together = |candidates: &mut dyn Iterator<Item = usize>| {
        let mut chosen: Vec<usize> = Vec::new();
        for i in candidates {
            let g = &pool[i];
            let clash = chosen.iter().any(|&c| {
                let c = &pool[c];
                shares_hardware(c, g)
                    || (req.collective && g.card().is_some() && c.card() == g.card())
            });
            if !clash {
                chosen.push(i);
                if chosen.len() == n {
                    break;
                }
            }
        }
        chosen
    };
    let usable = together(&mut free.iter().copied());
    if usable.len() < n {
        return Err(PickRefusal::MigSlices {
            needed,
            requirement: requirement(req),
            free: count(free.len()),
            usable: count(usable.len()),
        });
    }
    if req.interconnect == Interconnect::Any {
        return Ok(usable);
    }
    let mut domains: Vec<usize> = free
        .iter()
        .filter_map(|&i| pool[i].offered.as_ref()?.nvlink_domain)
        .collect();
    domains.sort_unstable();
    domains.dedup();
    let mut largest = 0;
    for d in domains {
        let chosen = together(
            &mut free
                .iter()
                .copied()
                .filter(|&i| pool[i].offered.as_ref().and_then(|o| o.nvlink_domain) == Some(d)),
        );
        if chosen.len() == n {
            return Ok(chosen);
        }
        largest = largest.max(chosen.len());
    }
    Err(PickRefusal::OneDomain {
        needed,
        requirement: requirement(req),
        usable: count(usable.len()),
        largest: count(largest),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ganglion_market::gpu::{MigSlice, Source};
    use ganglion_market::spec::{ComputeCapability, Ensemble};

    pub(crate) const A100: &str = "GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078";
    /// The field README's slices (NVIDIA MIG with sparse indices): id, profile, MiB.
    const SLICES: [(&str, &str, u64); 3] = [
        (
            "MIG-23de08f7-6fcc-5be3-9094-cc3b4162f0bb",
            "3g.20gb",
            20_096,
        ),
        ("MIG-9d822d55-dc61-5acb-8c24-544828b47b03", "2g.10gb", 9_984),
        ("MIG-5f16849a-8ae9-571a-bc2c-486916c4a324", "1g.5gb", 4_864),
    ];
    pub(crate) const RTX4090: &str = "GPU-4090";
    pub(crate) const H100: &str = "GPU-h100";

    fn nvidia(index: u32, name: &str, uuid: &str, mib: u64, cc: (u8, u8)) -> Gpu {
        let mut g = Gpu::bare(index, Source::Nvml, Vendor::Nvidia, name.into());
        g.uuid = Some(uuid.into());
        g.vram_total_mib = mib;
        g.compute_capability = Some(ComputeCapability {
            major: cc.0,
            minor: cc.1,
        });
        g
    }

    /// An RTX 4090 (24 564 MiB), an H100 80GB (81 559 MiB, `shared/fixtures/field/vram`) and a
    /// MIG-enabled A100-PCIE-40GB with the field README's three slices. `mig_enabled` is what
    /// the driver said of the A100 (`None`: not read, so the card is offered whole as well).
    pub(crate) fn inventory(mig_enabled: Option<bool>) -> Vec<Gpu> {
        let mut a100 = nvidia(2, "NVIDIA A100-PCIE-40GB", A100, 40_960, (8, 0));
        a100.mig_enabled = mig_enabled;
        a100.pci_bus_id = Some("0000:41:00.0".into());
        let mut gpus = vec![
            nvidia(0, "NVIDIA GeForce RTX 4090", RTX4090, 24_564, (8, 9)),
            nvidia(1, "NVIDIA H100 80GB HBM3", H100, 81_559, (9, 0)),
            a100,
        ];
        for (slot, (uuid, profile, mib)) in SLICES.iter().enumerate() {
            let mut s = nvidia(
                2,
                &format!("NVIDIA A100-PCIE-40GB MIG {profile}"),
                uuid,
                *mib,
                (8, 0),
            );
            s.pci_bus_id = Some("0000:41:00.0".into());
            s.mig = Some(MigSlice {
                parent_uuid: Some(A100.into()),
                parent_index: 2,
                slot: slot as u32,
                profile: Some((*profile).into()),
            });
            gpus.push(s);
        }
        gpus
    }

    pub(crate) fn limits() -> ProviderLimits {
        ProviderLimits {
            pool: None,
            price_ntx_per_gpu_hour: 1,
            max_concurrent_jobs: 4,
            max_job_duration_s: None,
            max_job_nodes: None,
            allow_images: vec![],
            refuse_images: vec![],
            fabric: None,
        }
    }

    /// The pool the daemon builds from `inventory` (attachments through the NVIDIA runtime).
    pub(crate) fn mixed_pool(mig_enabled: Option<bool>) -> Vec<PooledGpu> {
        let inv = inventory(mig_enabled);
        let pooled: Vec<&Gpu> = inv.iter().collect();
        let attachments = inv
            .iter()
            .map(|g| GpuAttachment::NvidiaRuntime {
                uuid: g.uuid.clone().expect("uuid"),
            })
            .collect();
        pool(&limits(), &pooled, attachments)
    }

    /// The requirements of a spec with this `gpus` block and `distributed.framework`.
    fn req(gpus: serde_json::Value, framework: &str) -> Requirements {
        let json = serde_json::json!({
            "image": { "local": "pytorch/pytorch:2.3.1" },
            "command": ["python", "train.py"],
            "gpus": gpus,
            "distributed": { "framework": framework },
            "limits": { "max_duration_s": 60, "max_rate_ntx_per_gpu_hour": 10 },
            "budget_ntx": 1_000_000,
            "deadline_ms": 99_999_999_999_999_u64,
        });
        let spec = Ensemble::from_json_str(&json.to_string()).expect("spec parses");
        Requirements::from_ensemble(&spec)
    }

    fn ids(pool: &[PooledGpu], picked: &[usize]) -> Vec<String> {
        picked.iter().map(|&i| pool[i].id.clone()).collect()
    }

    fn is_slice(id: &str) -> bool {
        id.starts_with("MIG-")
    }

    #[test]
    fn the_pool_offers_slices_and_not_their_mig_enabled_card() {
        let pool = mixed_pool(Some(true));
        let offered: Vec<&str> = pool
            .iter()
            .filter(|g| g.offered.is_some())
            .map(|g| g.id.as_str())
            .collect();
        assert_eq!(
            offered,
            [RTX4090, H100, SLICES[0].0, SLICES[1].0, SLICES[2].0]
        );
        assert_eq!(pool[3].card(), Some(A100));
    }

    #[test]
    fn an_80_gb_spec_gets_the_h100_only() {
        let pool = mixed_pool(Some(true));
        let r = req(
            serde_json::json!({ "count": 1, "min_vram_gib": 80 }),
            "none",
        );
        // The 4090 comes first in the pool: `take(1)` ran the 80 GB job on it.
        assert_eq!(ids(&pool, &pick(&pool, &r, &[], 1).expect("fits")), [H100]);
        // Held by another job: refused, not moved to the 4090.
        let held = vec![H100.to_string()];
        let why = pick(&pool, &r, &held, 1).expect_err("held");
        assert_eq!(
            why,
            PickRefusal::HeldByOtherJobs {
                needed: 1,
                requirement: "gpus.min_vram_gib 80".into(),
                meeting: 1,
                held: 1,
            }
        );
        // Compute capability 9.0 too: the H100 only.
        let r = req(
            serde_json::json!({ "count": 1, "min_compute_capability": "9.0" }),
            "none",
        );
        assert_eq!(ids(&pool, &pick(&pool, &r, &[], 1).expect("fits")), [H100]);
    }

    #[test]
    fn two_concurrent_jobs_get_disjoint_gpus() {
        let pool = mixed_pool(Some(true));
        let any = req(serde_json::json!({ "count": 2 }), "none");
        let first = ids(&pool, &pick(&pool, &any, &[], 2).expect("first"));
        let second = ids(&pool, &pick(&pool, &any, &first, 2).expect("second"));
        assert!(
            first.iter().all(|g| !second.contains(g)),
            "{first:?} {second:?}"
        );
        // Whole GPUs first, smallest first: the first job leaves the slices to the second.
        assert_eq!(first, [RTX4090, H100]);
        // A third job finds one slice left; a fourth nothing.
        let held: Vec<String> = first.iter().chain(&second).cloned().collect();
        let third = ids(&pool, &pick(&pool, &any, &held, 1).expect("third"));
        assert!(!held.contains(&third[0]));
        let all: Vec<String> = held.iter().chain(&third).cloned().collect();
        assert!(matches!(
            pick(&pool, &any, &all, 1),
            Err(PickRefusal::HeldByOtherJobs { held: 5, .. })
        ));
    }

    #[test]
    fn a_two_gpu_collective_job_never_gets_two_slices_of_one_card() {
        let pool = mixed_pool(Some(true));
        let torch = req(serde_json::json!({ "count": 2 }), "torch");
        let max_20 = |r: Requirements| Requirements {
            models: vec!["*A100*".into(), "*4090*".into()],
            ..r
        };
        let r = max_20(torch.clone());
        // One slice and the 4090, never two slices.
        let got = ids(&pool, &pick(&pool, &r, &[], 2).expect("fits"));
        assert_eq!(got.iter().filter(|g| is_slice(g)).count(), 1, "{got:?}");
        assert!(got.contains(&RTX4090.to_string()), "{got:?}");
        // The 4090 held: three slices free, only one may go: refused by name.
        let why = pick(&pool, &r, &[RTX4090.to_string()], 2).expect_err("two slices");
        assert!(
            matches!(
                why,
                PickRefusal::MigSlices {
                    free: 3,
                    usable: 1,
                    ..
                }
            ),
            "{why:?}"
        );
        assert!(
            why.to_string().contains(
                "a collective job (distributed.framework) gets at most one MIG slice per card"
            ),
            "{why}"
        );
        // Independent ranks (framework none) may take several slices of one card.
        let r = max_20(req(serde_json::json!({ "count": 2 }), "none"));
        let got = ids(
            &pool,
            &pick(&pool, &r, &[RTX4090.to_string()], 2).expect("fits"),
        );
        assert!(got.iter().all(|g| is_slice(g)), "{got:?}");
    }

    #[test]
    fn a_slice_never_goes_with_its_card() {
        // The driver did not say MIG is on: the card is offered whole next to its slices.
        let pool = mixed_pool(None);
        let a100_only = |framework| Requirements {
            models: vec!["*A100*".into()],
            ..req(serde_json::json!({ "count": 2 }), framework)
        };
        // Independent ranks: two slices, never the card with one.
        let got = ids(
            &pool,
            &pick(&pool, &a100_only("none"), &[], 2).expect("fits"),
        );
        assert!(got.iter().all(|g| is_slice(g)), "{got:?}");
        // Four of the card at once: its three slices, never the card as a fourth.
        assert!(matches!(
            pick(&pool, &a100_only("none"), &[], 4),
            Err(PickRefusal::MigSlices {
                free: 4,
                usable: 3,
                ..
            })
        ));
        // Collective: a slice or the card, one of them only.
        assert!(matches!(
            pick(&pool, &a100_only("torch"), &[], 2),
            Err(PickRefusal::MigSlices {
                free: 4,
                usable: 1,
                ..
            })
        ));
        // The card held by another job: its slices are not free; a slice held: the card is not.
        let r = Requirements {
            count: 1,
            collective: false,
            ..a100_only("none")
        };
        assert!(matches!(
            pick(&pool, &r, &[A100.to_string()], 1),
            Err(PickRefusal::HeldByOtherJobs {
                meeting: 4,
                held: 4,
                ..
            })
        ));
        let held: Vec<String> = SLICES.iter().map(|s| s.0.to_string()).collect();
        assert!(matches!(
            pick(&pool, &r, &held, 1),
            Err(PickRefusal::HeldByOtherJobs {
                meeting: 4,
                held: 4,
                ..
            })
        ));
        let got = ids(
            &pool,
            &pick(&pool, &r, &held[..1], 1).expect("a sibling slice"),
        );
        assert!(is_slice(&got[0]) && got[0] != held[0], "{got:?}");
    }

    #[test]
    fn too_few_gpus_meeting_the_spec_is_a_typed_refusal_with_the_numbers() {
        let pool = mixed_pool(Some(true));
        let r = req(
            serde_json::json!({ "count": 2, "vendor": "nvidia", "min_vram_gib": 24 }),
            "torch",
        );
        let why = pick(&pool, &r, &[], 2).expect("the 4090 and the H100");
        assert_eq!(ids(&pool, &why), [RTX4090, H100]);
        let r = req(
            serde_json::json!({ "count": 2, "min_vram_gib": 80 }),
            "torch",
        );
        let why = pick(&pool, &r, &[], 2).expect_err("one H100");
        assert_eq!(
            why,
            PickRefusal::TooFewMeetSpec {
                needed: 2,
                requirement: "gpus.min_vram_gib 80, collective (distributed.framework)".into(),
                offered: 5,
                meeting: 1,
                excluded: vec![(Constraint::Vram, 4)],
            }
        );
        assert_eq!(
            why.to_string(),
            "not enough GPUs meeting the spec: 2 needed (gpus.min_vram_gib 80, collective \
             (distributed.framework)), 1 of the 5 pooled GPU(s) meet it (gpus.min_vram_gib \
             excludes 4)"
        );
        assert_eq!(pick(&pool, &r, &[], 0), Ok(vec![]));
    }

    #[test]
    fn the_offer_shows_which_gpus_are_held() {
        use ganglion_market::limits::OfferTerms;
        let inv = inventory(Some(true));
        let pooled: Vec<&Gpu> = inv.iter().collect();
        let terms = OfferTerms {
            provider: [1; 28],
            bond_gpus: 8,
            score: 1,
            uplink_mbps: 1,
            direct_capable: false,
        };
        let offer = limits().offer(terms, &pooled, &[]);
        let pool = mixed_pool(Some(true));
        let free = |o: &Offer| -> Vec<(String, u32)> {
            o.gpus
                .iter()
                .map(|g| (g.model.name.clone(), g.free))
                .collect()
        };
        // The H100 held: its group is not free, the 4090's still is (a count taken out
        // first group first took the 4090 instead).
        let held = with_held(&offer, &pool, &[H100.into()]);
        assert_eq!(
            free(&held)[..2],
            [
                ("NVIDIA GeForce RTX 4090".to_string(), 1),
                ("NVIDIA H100 80GB HBM3".to_string(), 0),
            ]
        );
        // The card held (a record naming it): none of its slices is free.
        let held = with_held(&offer, &pool, &[A100.into()]);
        assert_eq!(free(&held).iter().map(|g| g.1).sum::<u32>(), 2);
        // It is what `ProviderLimits::offer` gives with those GPUs in use.
        let in_use = vec![H100.to_string(), SLICES[1].0.to_string()];
        assert_eq!(
            with_held(&offer, &pool, &in_use),
            limits().offer(terms, &pooled, &in_use)
        );
    }

    #[test]
    fn an_interconnect_requirement_picks_within_one_nvlink_domain() {
        let mut inv: Vec<Gpu> = (0..4)
            .map(|i| {
                let mut g = nvidia(
                    i,
                    "NVIDIA H100 80GB HBM3",
                    &format!("GPU-{i}"),
                    81_559,
                    (9, 0),
                );
                g.pci_bus_id = Some(format!("0000:0{i}:00.0"));
                g
            })
            .collect();
        // 0–1 and 2–3 are two NVLink pairs.
        inv[0].nvlink_peers = vec!["0000:01:00.0".into()];
        inv[2].nvlink_peers = vec!["0000:03:00.0".into()];
        let pooled: Vec<&Gpu> = inv.iter().collect();
        let att = inv
            .iter()
            .map(|g| GpuAttachment::Declared {
                id: g.uuid.clone().expect("uuid"),
            })
            .collect();
        let pool = pool(&limits(), &pooled, att);
        let r = req(
            serde_json::json!({ "count": 2, "interconnect": "nvlink" }),
            "torch",
        );
        assert_eq!(
            ids(&pool, &pick(&pool, &r, &[], 2).expect("fits")),
            ["GPU-0", "GPU-1"]
        );
        let got = ids(&pool, &pick(&pool, &r, &["GPU-1".into()], 2).expect("fits"));
        assert_eq!(got, ["GPU-2", "GPU-3"]);
        let why = pick(&pool, &r, &["GPU-1".into(), "GPU-3".into()], 2).expect_err("split");
        assert!(
            matches!(
                why,
                PickRefusal::OneDomain {
                    usable: 2,
                    largest: 1,
                    ..
                }
            ),
            "{why:?}"
        );
    }
}
