//! A market snapshot: the live offers and the RTT matrix, indexed once for many match decisions.
//!
//! Built from gossip offers (DESIGN §5) whose bond the indexer confirmed, and from the ping
//! RTTs (and, where measured, throughputs) between providers. Building sorts providers into
//! *rank order* — price per GPU-hour ascending, measured compute ([`Compute::Measured`]) before
//! unmeasured, score descending, direct-capable ([`Offer::direct_capable`]) before relay-only,
//! provider key hash ascending — interns identical GPU models, and
//! turns the RTT samples into per-provider neighbour lists sorted by rank. Pair throughputs are
//! kept apart, in per-provider lists of the (few) measured pairs packed into one array, so the
//! neighbour lists stay at 8 bytes an entry (a flag bit marks a measured pair) and a provider
//! without measured pairs costs nothing. The matcher then never allocates anything
//! proportional to the market.

use std::collections::HashMap;

use ganglion_contracts::params::KeyHash;
use serde::{Deserialize, Serialize};

use super::spec::{ComputeCapability, FormFactor, Interconnect, Vendor};

/// A provider, named by its payment key hash (the `provider` of its bond and assignments).
pub type ProviderId = KeyHash;

/// One GPU model as offered: every GPU of an [`OfferedGpus`] group shares it.
///
/// Fields added after the first release are `#[serde(default)]`, so older offers still parse.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct GpuModel {
    /// Vendor ([`Vendor::Nvidia`] or [`Vendor::Amd`]; `Any` = unknown vendor, matches only `any`).
    pub vendor: Vendor,
    /// Marketing name as the driver reports it, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: String,
    /// Total VRAM per GPU as the driver reports it, MiB (2^20 bytes), rounded down.
    pub vram_mib: u64,
    /// The same total in exact bytes when the driver gives them (NVML `memory.total`); `None`
    /// = `vram_mib × 2^20`. See [`GpuModel::vram_total_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_bytes: Option<u64>,
    /// CUDA compute capability (NVIDIA).
    pub compute_capability: Option<ComputeCapability>,
    /// gfx target, e.g. `gfx90a` (AMD).
    pub gfx_target: Option<String>,
    /// Link shared by all GPUs of the group: `Nvlink`/`Xgmi` = one fabric domain, `Any` = PCIe.
    pub interconnect: Interconnect,
    /// For a MIG slice (a GPU instance with its own `MIG-…` UUID and memory): the UUID of the
    /// physical GPU it is carved from (`GPU-…`); `None` for a whole GPU. Slices of one card have
    /// no peer path between them (NVIDIA MIG user guide: no GPU-to-GPU P2P for MIG devices), so a
    /// collective job never gets two of them ([`super::Requirements::collective`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_parent: Option<String>,
    /// Module form factor as the provider knows it; `None` = read from the name
    /// ([`GpuModel::form_factor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form_factor: Option<FormFactor>,
    /// The RDMA fabric (InfiniBand or RoCE network) the GPUs' node attaches to, as the provider
    /// declares it; `None` = none. What a spec's `gpus.interconnect_group` needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<String>,
}

impl GpuModel {
    /// The module form factor: [`GpuModel::form_factor`] when the provider gave it, else read
    /// from the driver's name: `SXM` in it (`A100-SXM4-80GB`, `V100-SXM2`) or the SXM5 H100's
    /// name `H100 80GB HBM3` (PCI 10de:2330, `shared/fixtures/field/vram`) → SXM; `PCIe`, `NVL`
    /// (H100/H200 NVL are PCIe cards), `GeForce` or `RTX` → PCIe; else unknown (`None`).
    pub fn form_factor(&self) -> Option<FormFactor> {
        if self.form_factor.is_some() {
            return self.form_factor;
        }
        let name = self.name.to_ascii_uppercase();
        let words: Vec<&str> = name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        if words.iter().any(|w| w.starts_with("SXM")) || name.contains("H100 80GB HBM3") {
            Some(FormFactor::Sxm)
        } else if words
            .iter()
            .any(|w| matches!(*w, "PCIE" | "NVL" | "GEFORCE" | "RTX"))
        {
            Some(FormFactor::Pcie)
        } else {
            None
        }
    }

    /// Total VRAM per GPU, bytes: [`GpuModel::vram_bytes`] when known, else `vram_mib × 2^20`.
    /// Exact, for fit checks; class comparisons go through [`super::vram`].
    pub fn vram_total_bytes(&self) -> u64 {
        self.vram_bytes
            .unwrap_or_else(|| self.vram_mib.saturating_mul(super::vram::MIB))
    }
}

/// A group of identical GPUs in one offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferedGpus {
    /// The model.
    pub model: GpuModel,
    /// GPUs of this group free for new jobs (after the provider's pooling limits).
    pub free: u32,
    /// Declared (not detected) GPUs: only usable on a devnet, see [`SnapshotOptions`].
    pub declared: bool,
}

/// Where an offer's [`Offer::score`] comes from.
///
/// Absent in older offers = [`Compute::Unmeasured`]. Not written when unmeasured, so such an
/// offer encodes (and is signed) exactly as before the field existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Compute {
    /// No benchmark behind the score: declared GPUs, no GPU at all, a devnet, or a node whose
    /// onboarding benchmark gave no CUDA score. The score is the neutral one the node offers.
    #[default]
    Unmeasured,
    /// The score is the node's own onboarding benchmark: CUDA kernels run on its GPUs, of this
    /// benchmark version (scores of different versions are not comparable).
    Measured {
        /// Version of the onboarding benchmark that produced the score.
        bench_version: u32,
    },
}

impl Compute {
    /// Whether the score comes from a benchmark run.
    pub fn is_measured(&self) -> bool {
        matches!(self, Self::Measured { .. })
    }

    /// Whether nothing was measured (serde's `skip_serializing_if`).
    pub fn is_unmeasured(&self) -> bool {
        !self.is_measured()
    }
}

/// The matcher's view of one signed offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The provider.
    pub provider: ProviderId,
    /// GPUs the provider's live bond covers for one job (`stake / min_bond_per_gpu`); 0 = no
    /// live bond. The escrow's `Assign` rule requires stake ≥ min bond × gpus.
    pub bond_gpus: u32,
    /// Price, NTX base units per GPU-hour (becomes the assignment's `rate`).
    pub price_per_gpu_hour: u64,
    /// Unified benchmark score per GPU (`gpu::score`), higher is better. Where it comes from:
    /// [`Offer::compute`].
    pub score: u32,
    /// Advertised uplink, Mbit/s.
    pub uplink_mbps: u32,
    /// Longest job the provider accepts, seconds; `None` = any.
    pub max_job_duration_s: Option<u64>,
    /// Most nodes of a job the provider joins; `None` = any.
    pub max_job_nodes: Option<u32>,
    /// GPUs by model.
    pub gpus: Vec<OfferedGpus>,
    /// Reachable without a relay: AutoNAT confirmed a public address, or the operator declared
    /// it (`[overlay] direct = true`: a public IP or a forwarded WireGuard port). Overlay links
    /// to such a provider go direct; between two providers that are both behind NATs they may
    /// need the libp2p relay (DESIGN §6). At equal price and score the matcher ranks these
    /// providers first. Absent in older offers = false.
    #[serde(default)]
    pub direct_capable: bool,
    /// Where [`Offer::score`] comes from. At equal price the matcher prefers plans on measured
    /// offers ([`super::matching`], objective key 3). Absent in older offers = unmeasured.
    #[serde(default, skip_serializing_if = "Compute::is_unmeasured")]
    pub compute: Compute,
}

/// A measured round trip between two providers (libp2p ping), µs, and optionally the measured
/// throughput between them, Mbit/s. Symmetric: if a pair is given more than once, the larger
/// RTT and the lower throughput count. A pair without a sample is treated as out of any RTT
/// bound; a pair without a throughput falls back to both ends' advertised uplinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RttSample {
    /// One end.
    pub a: ProviderId,
    /// The other end.
    pub b: ProviderId,
    /// Round-trip time, µs.
    pub rtt_us: u32,
    /// Measured throughput between the two, Mbit/s; `None` = not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps: Option<u32>,
}

/// A provider's running jobs against its `max_concurrent_jobs` ([`super::limits::ProviderLimits`]),
/// as its offer or the dispatcher reports them. A provider at its limit takes no new job: the
/// matcher excludes it and the no-fit report charges its GPUs to
/// [`super::Constraint::ConcurrentJobs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderLoad {
    /// The provider.
    pub provider: ProviderId,
    /// Jobs it runs now.
    pub active_jobs: u32,
    /// Most jobs it runs at once.
    pub max_concurrent_jobs: u32,
}

/// How offers are admitted into a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotOptions {
    /// Keep declared GPUs (devnet only). On any other network declared GPUs are dropped, so they
    /// can never be matched as real hardware.
    pub allow_declared: bool,
}

/// Why a snapshot could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Two offers from one provider.
    #[error("provider {} has two offers", hex::encode(.0))]
    DuplicateProvider(ProviderId),
    /// More GPU groups than the index holds (2^32).
    #[error("too many GPU groups in one snapshot")]
    TooLarge,
}

/// A provider in rank order.
#[derive(Debug, Clone)]
pub(crate) struct Provider {
    pub id: ProviderId,
    pub bond_gpus: u32,
    pub price: u64,
    pub score: u32,
    /// The score is measured ([`Compute::Measured`]).
    pub measured: bool,
    pub uplink_mbps: u32,
    /// The highest measured throughput of any of its pairs, Mbit/s (0 = none measured).
    pub best_pair_mbps: u32,
    /// The lowest RTT of its pairs with a measured throughput, µs (`u32::MAX` = none): a
    /// tighter RTT bound leaves it no measured pair, with no look-up.
    pub min_pair_rtt_us: u32,
    pub max_job_duration_s: u64,
    pub max_job_nodes: u32,
    /// At its `max_concurrent_jobs` ([`ProviderLoad`]): takes no new job.
    pub jobs_full: bool,
    /// Range into `MarketSnapshot::groups`.
    pub groups: (u32, u32),
    /// Free GPUs over all groups (before filters).
    pub free_total: u32,
}

/// An interned GPU group: model index and free count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub model: u32,
    pub free: u32,
}

/// Offers and RTTs, indexed for matching. Immutable once built.
#[derive(Debug, Clone)]
pub struct MarketSnapshot {
    pub(crate) models: Vec<GpuModel>,
    /// Providers in rank order; a provider's rank is its index here.
    pub(crate) providers: Vec<Provider>,
    pub(crate) groups: Vec<Group>,
    /// Per rank: (neighbour rank, RTT µs | [`MBPS_FLAG`] when the pair's throughput is measured),
    /// sorted by neighbour rank; read the RTT through [`RTT_MASK`].
    pub(crate) neighbours: Vec<Vec<(u32, u32)>>,
    /// Measured pair throughputs, both directions: rank `r`'s are
    /// `mbps_pairs[mbps_start[r]..mbps_start[r + 1]]` as (neighbour rank, Mbit/s, RTT µs),
    /// sorted by neighbour rank; only pairs with a measured figure (usually few), the lowest
    /// throughput of duplicate samples (the RTT as in the neighbour lists).
    pub(crate) mbps_pairs: Vec<(u32, u32, u32)>,
    /// Per rank, the start of its measured pairs in `mbps_pairs` (one more entry than ranks).
    pub(crate) mbps_start: Vec<u32>,
    /// Per rank: bit `min(model, 63)` set for each offered model (bit 63 = "model ≥ 63").
    pub(crate) model_masks: Vec<u64>,
    /// `by_free[j]`: ranks (ascending) of providers with `free_total ≥ 2^j`.
    pub(crate) by_free: Vec<Vec<u32>>,
    /// `by_model[m]`: ranks of providers offering model `m`, by free GPUs descending, then rank.
    pub(crate) by_model: Vec<Vec<u32>>,
    /// `model_ranks[m]`: ranks (ascending) of providers offering model `m`.
    pub(crate) model_ranks: Vec<Vec<u32>>,
    /// `mig_card[m]`: an id of the physical card model `m`'s MIG slices belong to (equal ids =
    /// one card), [`NOT_MIG`] for whole GPUs.
    pub(crate) mig_card: Vec<u32>,
    /// Whether any model is a MIG slice (the matcher skips the per-card count otherwise).
    pub(crate) has_mig: bool,
}

/// Indexes the measured throughputs `pairs` ((rank, neighbour rank, Mbit/s), both directions,
/// sorted and without duplicates): returns [`MarketSnapshot::mbps_pairs`] and
/// [`MarketSnapshot::mbps_start`], flags the pairs in the (sorted) `neighbours` lists and sets
/// each provider's best measured throughput and lowest measured-pair RTT.
fn index_pairs(
    pairs: &[(u32, u32, u32)],
    neighbours: &mut [Vec<(u32, u32)>],
    providers: &mut [Provider],
) -> PairIndex {
    let mut out: Vec<(u32, u32, u32)> = Vec::with_capacity(pairs.len());
    let mut start = Vec::with_capacity(providers.len() + 1);
    let mut at = 0usize;
    for (rank, p) in providers.iter_mut().enumerate() {
        start.push(out.len() as u32);
        while let Some(&(a, b, mbps)) = pairs.get(at)
            && a as usize == rank
        {
            at += 1;
            let list = &mut neighbours[rank];
            // Every measured pair came with an RTT sample, so it has an entry.
            let Ok(i) = list.binary_search_by_key(&b, |e| e.0) else {
                continue;
            };
            let rtt = list[i].1;
            out.push((b, mbps, rtt));
            list[i].1 |= MBPS_FLAG;
            p.best_pair_mbps = p.best_pair_mbps.max(mbps);
            p.min_pair_rtt_us = p.min_pair_rtt_us.min(rtt);
        }
    }
    start.push(out.len() as u32);
    PairIndex { pairs: out, start }
}

/// [`index_pairs`]' result: [`MarketSnapshot::mbps_pairs`] and [`MarketSnapshot::mbps_start`].
struct PairIndex {
    pairs: Vec<(u32, u32, u32)>,
    start: Vec<u32>,
}

/// Flag in a neighbour entry's second half: the pair has a measured throughput (look it up in
/// [`MarketSnapshot::pair_mbps`]); without it the ends' uplinks count, with no look-up.
pub(crate) const MBPS_FLAG: u32 = 1 << 31;
/// The RTT in a neighbour entry's second half, µs. RTTs are capped at 2^31 − 1 µs (about 36
/// minutes), far beyond any bound.
pub(crate) const RTT_MASK: u32 = MBPS_FLAG - 1;

/// [`MarketSnapshot::mig_card`] of a whole GPU.
pub(crate) const NOT_MIG: u32 = u32::MAX;

impl MarketSnapshot {
    /// Indexes `offers` and `rtts`. Offers without a live bond or free GPUs are kept (the
    /// no-fit report counts them); RTT samples naming unknown providers are ignored.
    ///
    /// # Errors
    /// [`SnapshotError::DuplicateProvider`] when a provider appears twice.
    pub fn build(
        offers: &[Offer],
        rtts: &[RttSample],
        options: SnapshotOptions,
    ) -> Result<Self, SnapshotError> {
        Self::build_with_loads(offers, rtts, &[], options)
    }

    /// [`MarketSnapshot::build`] plus the providers' job loads: a provider whose load says
    /// `active_jobs ≥ max_concurrent_jobs` is kept but never matched. Loads naming unknown
    /// providers are ignored; a provider without a load is taken to have room.
    ///
    /// # Errors
    /// [`SnapshotError::DuplicateProvider`] when a provider appears twice in `offers`.
    pub fn build_with_loads(
        offers: &[Offer],
        rtts: &[RttSample],
        loads: &[ProviderLoad],
        options: SnapshotOptions,
    ) -> Result<Self, SnapshotError> {
        let full: std::collections::HashSet<ProviderId> = loads
            .iter()
            .filter(|l| l.active_jobs >= l.max_concurrent_jobs)
            .map(|l| l.provider)
            .collect();
        let mut order: Vec<&Offer> = offers.iter().collect();
        order.sort_by_key(|o| {
            (
                o.price_per_gpu_hour,
                std::cmp::Reverse(o.compute.is_measured()),
                std::cmp::Reverse(o.score),
                std::cmp::Reverse(o.direct_capable),
                o.provider,
            )
        });
        if let Some(w) = order.windows(2).find(|w| w[0].provider == w[1].provider) {
            return Err(SnapshotError::DuplicateProvider(w[0].provider));
        }
        let mut model_ids: HashMap<&GpuModel, u32> = HashMap::new();
        let mut models = Vec::new();
        let mut groups = Vec::new();
        let mut providers = Vec::with_capacity(order.len());
        let mut rank_of: HashMap<ProviderId, u32> = HashMap::with_capacity(order.len());
        let mut max_free = 0;
        for (rank, offer) in order.iter().enumerate() {
            let start = u32::try_from(groups.len()).map_err(|_| SnapshotError::TooLarge)?;
            let mut free_total = 0u32;
            for g in &offer.gpus {
                if (g.declared && !options.allow_declared) || g.free == 0 {
                    continue;
                }
                let next = u32::try_from(models.len()).map_err(|_| SnapshotError::TooLarge)?;
                let id = *model_ids.entry(&g.model).or_insert_with(|| {
                    models.push(g.model.clone());
                    next
                });
                groups.push(Group {
                    model: id,
                    free: g.free,
                });
                free_total = free_total.saturating_add(g.free);
            }
            let end = u32::try_from(groups.len()).map_err(|_| SnapshotError::TooLarge)?;
            max_free = max_free.max(free_total);
            rank_of.insert(offer.provider, rank as u32);
            providers.push(Provider {
                id: offer.provider,
                bond_gpus: offer.bond_gpus,
                price: offer.price_per_gpu_hour,
                score: offer.score,
                measured: offer.compute.is_measured(),
                uplink_mbps: offer.uplink_mbps,
                best_pair_mbps: 0,
                min_pair_rtt_us: u32::MAX,
                max_job_duration_s: offer.max_job_duration_s.unwrap_or(u64::MAX),
                max_job_nodes: offer.max_job_nodes.unwrap_or(u32::MAX),
                jobs_full: full.contains(&offer.provider),
                groups: (start, end),
                free_total,
            });
        }
        let mut neighbours: Vec<Vec<(u32, u32)>> = vec![Vec::new(); providers.len()];
        let mut pair_mbps: Vec<(u32, u32, u32)> = Vec::new();
        for s in rtts {
            let (Some(&a), Some(&b)) = (rank_of.get(&s.a), rank_of.get(&s.b)) else {
                continue;
            };
            if a == b {
                continue;
            }
            let rtt = s.rtt_us.min(RTT_MASK);
            neighbours[a as usize].push((b, rtt));
            neighbours[b as usize].push((a, rtt));
            if let Some(mbps) = s.mbps {
                pair_mbps.push((a, b, mbps));
                pair_mbps.push((b, a, mbps));
            }
        }
        for list in &mut neighbours {
            // Sort by rank, then keep the larger RTT of duplicate samples.
            list.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
            list.dedup_by_key(|e| e.0);
            list.shrink_to_fit();
        }
        // Sort by pair, then keep the lower throughput of duplicate samples.
        pair_mbps.sort_unstable();
        pair_mbps.dedup_by_key(|e| (e.0, e.1));
        let index = index_pairs(&pair_mbps, &mut neighbours, &mut providers);
        let model_masks = providers
            .iter()
            .map(|p| {
                groups[p.groups.0 as usize..p.groups.1 as usize]
                    .iter()
                    .fold(0u64, |m, g| m | 1 << g.model.min(63))
            })
            .collect();
        let levels = (u32::BITS - max_free.leading_zeros()) as usize;
        let mut by_free: Vec<Vec<u32>> = vec![Vec::new(); levels];
        for (rank, p) in providers.iter().enumerate() {
            for (j, list) in by_free.iter_mut().enumerate() {
                if p.free_total >= 1 << j {
                    list.push(rank as u32);
                }
            }
        }
        let mut by_model: Vec<Vec<u32>> = vec![Vec::new(); models.len()];
        for (rank, p) in providers.iter().enumerate() {
            for g in &groups[p.groups.0 as usize..p.groups.1 as usize] {
                let list = &mut by_model[g.model as usize];
                if list.last() != Some(&(rank as u32)) {
                    list.push(rank as u32);
                }
            }
        }
        let model_ranks = by_model.clone();
        for list in &mut by_model {
            list.sort_by_key(|&r| (std::cmp::Reverse(providers[r as usize].free_total), r));
        }
        let mut cards: HashMap<&str, u32> = HashMap::new();
        let mig_card: Vec<u32> = models
            .iter()
            .map(|m| match &m.mig_parent {
                Some(parent) => {
                    let next = cards.len() as u32;
                    *cards.entry(parent.as_str()).or_insert(next)
                }
                None => NOT_MIG,
            })
            .collect();
        let has_mig = !cards.is_empty();
        Ok(Self {
            mig_card,
            has_mig,
            models,
            providers,
            groups,
            neighbours,
            mbps_pairs: index.pairs,
            mbps_start: index.start,
            model_masks,
            by_free,
            by_model,
            model_ranks,
        })
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// Free GPUs over all providers (declared ones only when admitted).
    pub fn free_gpus(&self) -> u64 {
        self.providers.iter().map(|p| u64::from(p.free_total)).sum()
    }

    /// Whether there are no providers.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// Ranks (ascending) of every provider with at least `gpus` free GPUs, and possibly some
    /// with fewer (down to the power of two below `gpus`).
    pub(crate) fn with_free(&self, gpus: u32) -> &[u32] {
        let j = (u32::BITS - 1 - gpus.max(1).leading_zeros()) as usize;
        self.by_free.get(j).map_or(&[], Vec::as_slice)
    }

    /// RTT between two ranks, µs, if measured.
    pub(crate) fn rtt_us(&self, a: u32, b: u32) -> Option<u32> {
        self.rtt_entry(a, b).map(|e| e & RTT_MASK)
    }

    /// The second half of `a`'s neighbour entry for `b` (RTT and [`MBPS_FLAG`]), if measured.
    pub(crate) fn rtt_entry(&self, a: u32, b: u32) -> Option<u32> {
        let list = &self.neighbours[a as usize];
        list.binary_search_by_key(&b, |e| e.0)
            .ok()
            .map(|i| list[i].1)
    }

    /// How many of `a`'s measured pairs reach `min_mbps` Mbit/s within `max_rtt_us` µs (any
    /// RTT when `None`).
    pub(crate) fn fast_pairs(&self, a: u32, min_mbps: u32, max_rtt_us: Option<u32>) -> usize {
        (self.measured_pairs(a).iter())
            .filter(|p| p.1 >= min_mbps && max_rtt_us.is_none_or(|b| p.2 <= b))
            .count()
    }

    /// Rank `a`'s measured pairs: (neighbour rank, Mbit/s, RTT µs), sorted by neighbour rank.
    pub(crate) fn measured_pairs(&self, a: u32) -> &[(u32, u32, u32)] {
        let (s, e) = (self.mbps_start[a as usize], self.mbps_start[a as usize + 1]);
        &self.mbps_pairs[s as usize..e as usize]
    }

    /// Measured throughput between two ranks, Mbit/s, if measured.
    pub(crate) fn pair_mbps(&self, a: u32, b: u32) -> Option<u32> {
        let list = self.measured_pairs(a);
        list.binary_search_by_key(&b, |e| e.0)
            .ok()
            .map(|i| list[i].1)
    }

    /// Whether any pair has a measured throughput.
    pub(crate) fn has_pair_mbps(&self) -> bool {
        !self.mbps_pairs.is_empty()
    }
}
