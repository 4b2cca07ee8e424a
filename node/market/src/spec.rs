//! The ensemble spec: what an orchestrator asks for, parsed strictly.
//!
//! The schema is documented field by field in `docs/ensemble-spec.md`; this module is its
//! executable form. YAML is the field's convention (Kubernetes, Compose, Slurm front-ends);
//! JSON is accepted too. Units are in the field names: GiB, ms, seconds (`_s`), Mbit/s
//! (`_mbps`) and NTX base units (`_ntx`).
//!
//! YAML goes through [`serde_norway`], the maintained fork of `serde_yaml` 0.9 (same API and
//! error positions; `serde_yaml` itself is archived and `serde_yml` now declares itself
//! deprecated). Both formats are read through `serde_path_to_error`, so a syntax or type error
//! names the field path (`gpus.min_vram_gib`) as well as the reason. Every struct is
//! `deny_unknown_fields`: a misspelt key is an error, never silently ignored.
//!
//! Parsing is two steps: serde builds an [`Ensemble`], then [`Ensemble::validate`] rejects what
//! cannot be satisfied (rules listed on [`Rule`]); [`Ensemble::parse`] does both.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::{EscrowDatum, JobId, JobState};
use serde::{Deserialize, Serialize};

use crate::service::{JobKind, Replicas, Scale, Serve};

/// Environment variables the node sets itself for every rank (DESIGN §6); a spec may not.
pub const RESERVED_ENV: &[&str] = &[
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
];

/// A job's complete request: image, command, GPUs, placement, I/O, limits and payment terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ensemble {
    /// `batch` (the default: runs to completion) or `service` (replicas behind a gateway,
    /// with [`Ensemble::serve`], [`Ensemble::replicas`] and [`Ensemble::scale`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub kind: JobKind,
    /// The container image to run on every node.
    pub image: Image,
    /// argv of the workload; the first element is the program. Must not be empty.
    pub command: Vec<String>,
    /// Extra environment; names must match `[A-Za-z_][A-Za-z0-9_]*` and not be in [`RESERVED_ENV`].
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Which GPUs and how many.
    pub gpus: GpuRequest,
    /// How the GPUs may be spread over provider machines.
    #[serde(default)]
    pub placement: Placement,
    /// Host resources reserved per GPU.
    #[serde(default)]
    pub resources_per_gpu: ResourcesPerGpu,
    /// Collective framework and rendezvous port.
    #[serde(default)]
    pub distributed: Distributed,
    /// Content-addressed inputs, mounted read-only under `/inputs`.
    #[serde(default)]
    pub inputs: Vec<Input>,
    /// Directories under `/outputs` to collect, pin and optionally deal to Filecoin.
    #[serde(default)]
    pub outputs: Vec<Output>,
    /// Wall-clock and price ceilings.
    pub limits: Limits,
    /// NTX base units locked in the escrow; must be > 0. Maps to `EscrowDatum::budget`.
    pub budget_ntx: u64,
    /// POSIX time in ms after which the job can only expire; must be in the future.
    /// Maps to `EscrowDatum::deadline_ms`. In a spec file, [`Ensemble::deadline`] may give it
    /// instead (0 here until [`Ensemble::resolve_deadline`] does).
    #[serde(default)]
    pub deadline_ms: u64,
    /// The deadline as a person writes it, instead of `deadline_ms`: `+<n><unit>…` from now
    /// (units `d`, `h`, `m`, `s`, e.g. `+2h30m`) or an RFC 3339 time
    /// (`2026-12-24T18:00:00Z`). Read from spec files only: [`Ensemble::resolve_deadline`]
    /// turns it into `deadline_ms`, and it is never written out (the pinned spec and the escrow
    /// carry `deadline_ms`).
    #[serde(default, skip_serializing)]
    pub deadline: Option<String>,
    /// What each replica of a service serves (`kind: service` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<Serve>,
    /// How many replicas a service runs (`kind: service` only); `gpus` is then per replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Replicas>,
    /// When a service's replica count changes (`kind: service` only; needed when
    /// `replicas.max > replicas.min`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
}

/// Where the image comes from: exactly one of `local` and `archive`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Image {
    /// An image the provider's engine already has, e.g. `pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// An image archive fetched by CID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ImageArchive>,
}

/// An image archive by CID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageArchive {
    /// CID of the archive file (CIDv0 or CIDv1).
    pub cid: ContentId,
    /// How the archive was made.
    pub format: ArchiveFormat,
}

/// Kind of image archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArchiveFormat {
    /// `docker save` output, loaded with `docker load` (Engine API `import_image`).
    DockerSave,
    /// A root filesystem tarball, loaded with `docker import` (`create_image` from `-`).
    Rootfs,
}

/// A CID, parsed on input (so an invalid one fails naming its field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ContentId(pub cid::Cid);

impl TryFrom<String> for ContentId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        cid::Cid::try_from(s.as_str())
            .map(ContentId)
            .map_err(|e| format!("invalid CID `{s}`: {e}"))
    }
}

impl From<ContentId> for String {
    fn from(c: ContentId) -> String {
        c.0.to_string()
    }
}

/// GPU vendor.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// Either vendor.
    #[default]
    Any,
    /// NVIDIA (CUDA).
    Nvidia,
    /// AMD (ROCm).
    Amd,
}

/// Required link between the GPUs of one node.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Interconnect {
    /// No requirement (PCIe is enough).
    #[default]
    Any,
    /// All of a node's GPUs for this job share one NVLink/NVSwitch domain (NVIDIA only).
    Nvlink,
    /// All of a node's GPUs for this job share one Infinity Fabric (xGMI) hive (AMD only).
    Xgmi,
}

/// CUDA compute capability `MAJOR.MINOR`, e.g. `8.0` (A100), `9.0` (H100); ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ComputeCapability {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
}

impl FromStr for ComputeCapability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a compute capability (expected MAJOR.MINOR, e.g. 8.0)");
        let (maj, min) = s.trim().split_once('.').ok_or_else(bad)?;
        Ok(Self {
            major: maj.parse().map_err(|_| bad())?,
            minor: min.parse().map_err(|_| bad())?,
        })
    }
}

impl TryFrom<String> for ComputeCapability {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<ComputeCapability> for String {
    fn from(c: ComputeCapability) -> String {
        c.to_string()
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Which GPUs and how many.
///
/// Serialized without its defaults, so an imported or echoed spec shows what was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRequest {
    /// Total GPUs for the job (≥ 1). Maps to `EscrowDatum::gpus`.
    pub count: u32,
    /// Vendor; `any` by default.
    #[serde(default, skip_serializing_if = "is_default")]
    pub vendor: Vendor,
    /// Minimum marketed VRAM class per GPU ("80 GB" cards), GiB; 0 = no minimum. Compared
    /// with the reported total by [`super::vram::meets_class`] (reported bytes ≥ N × 10⁹), so an
    /// H100 80GB reporting 81 559 MiB satisfies 80.
    #[serde(default, skip_serializing_if = "is_default")]
    pub min_vram_gib: u32,
    /// Minimum CUDA compute capability (NVIDIA only), e.g. `"8.0"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compute_capability: Option<ComputeCapability>,
    /// Accepted AMD gfx targets, e.g. `[gfx90a, gfx942]` (AMD only); empty = any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rocm_arch: Vec<String>,
    /// Model names: a glob (`*` any run, `?` one char, case-insensitive) on the driver's name,
    /// e.g. `"*A100*"`, or a bare model word (Akash's `a100`, `t4`) that must equal one word of
    /// the name ([`super::glob::matches_model`]); empty = any model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// Per-model memory (Akash's `- model: h100` / `ram: 80Gi` pairs): a GPU must match one
    /// entry, its model *and* (when given) its exact VRAM class; empty = no such rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_model: Vec<PerModel>,
    /// Link between a node's GPUs.
    #[serde(default, skip_serializing_if = "is_default")]
    pub interconnect: Interconnect,
    /// Module form factor (Akash's `interface`): `sxm` (SXM/HGX boards) or `pcie` (cards);
    /// absent = either. A GPU whose form factor is unknown never matches a given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form_factor: Option<FormFactor>,
    /// Interconnect group (Akash's `gpu.attributes.interconnect.group`): the job's GPUs must
    /// attach to an RDMA fabric their provider declares, every node of the plan to the same
    /// one. The value is the tenant's label for the group; absent = no fabric needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect_group: Option<String>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// GPU module form factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FormFactor {
    /// SXM module on an HGX/DGX board (NVLink/NVSwitch between the modules).
    Sxm,
    /// PCIe card (H100 NVL and H200 NVL included: PCIe cards with NVLink bridges).
    Pcie,
}

/// One per-model memory entry of [`GpuRequest::per_model`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerModel {
    /// Model name or glob, as in [`GpuRequest::models`].
    pub model: String,
    /// Exact marketed VRAM class, GiB ([`super::vram::is_class`]); absent = any memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_class_gib: Option<u32>,
}

/// How GPUs may be spread over provider machines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Placement {
    /// Never place fewer than this many GPUs on one node (≥ 1, ≤ `gpus.count`). Default 1.
    pub min_gpus_per_node: u32,
    /// Never place more than this many GPUs on one node; absent = no cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpus_per_node: Option<u32>,
    /// Most provider machines the job may span (≥ 1); absent = no cap beyond `gpus.count`
    /// (a gang may span machines; the matcher still prefers one machine, then the fewest).
    /// Was 1 once: an 8-GPU job over four 2-GPU machines then found no plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
    /// Highest round-trip time between any two chosen nodes, ms; absent = no bound. With
    /// [`Placement::groups`] it bounds the pairs *across* groups (the looser bound, ≥ the
    /// groups' own `max_rtt_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rtt_ms: Option<u32>,
    /// Lowest throughput between any two nodes of a multi-node plan, Mbit/s: a pair's measured
    /// throughput where there is one, else both ends' advertised uplinks; absent = none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bandwidth_mbps: Option<u32>,
    /// Latency groups for hierarchical parallelism (e.g. tensor parallelism inside a group,
    /// data parallelism across groups); absent = one flat gang.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<LatencyGroups>,
}

/// `placement.groups`: the GPUs split into `count` groups of `gpus` each, every group a set of
/// whole nodes pairwise within `max_rtt_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyGroups {
    /// Number of groups (≥ 1).
    pub count: u32,
    /// GPUs in each group (≥ 1); `count × gpus` must equal `gpus.count`.
    pub gpus: u32,
    /// Highest round-trip time between two nodes of one group, ms (≥ 1).
    pub max_rtt_ms: u32,
}

impl Default for Placement {
    fn default() -> Self {
        Self {
            min_gpus_per_node: 1,
            max_gpus_per_node: None,
            max_nodes: None,
            max_rtt_ms: None,
            min_bandwidth_mbps: None,
            groups: None,
        }
    }
}

impl Placement {
    /// `max_nodes`, or its default for a job of `count` GPUs: `count` (at least one GPU per
    /// node), i.e. no cap of its own.
    pub fn max_nodes_or_default(&self, count: u32) -> u32 {
        self.max_nodes.unwrap_or(count.max(1))
    }
}

/// Host resources reserved per GPU (a node with `g` GPUs of the job reserves `g ×` these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ResourcesPerGpu {
    /// CPU cores (may be fractional).
    pub cpu_cores: f64,
    /// Memory, GiB.
    pub mem_gib: f64,
    /// `/dev/shm` size, GiB (collectives use it).
    pub shm_gib: f64,
    /// Scratch disk, GiB.
    pub disk_gib: f64,
}

/// Collective framework; decides which rendezvous environment the node writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    /// torch.distributed (`torchrun` env: RANK, WORLD_SIZE, MASTER_ADDR…).
    Torch,
    /// Horovod with the gloo controller.
    Horovod,
    /// JAX (`coordinator_address`, `num_processes`, `process_id`).
    Jax,
    /// MPI.
    Mpi,
    /// No collectives: independent ranks.
    #[default]
    None,
}

/// Collective framework and rendezvous port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Distributed {
    /// Framework.
    pub framework: Framework,
    /// TCP port of rank 0's rendezvous on the overlay; 1024–65535. Default 29500 (torch's).
    pub master_port: u16,
}

impl Default for Distributed {
    fn default() -> Self {
        Self {
            framework: Framework::None,
            master_port: 29500,
        }
    }
}

/// One content-addressed input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// CID of a file or UnixFS directory.
    pub cid: ContentId,
    /// Absolute mount path under `/inputs/`.
    pub path: String,
}

/// Where a finished output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinTarget {
    /// The provider node's embedded blockstore.
    Embedded,
    /// A Kubo node over its HTTP RPC.
    Kubo,
}

/// One output directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Absolute path under `/outputs/`.
    pub path: String,
    /// Pin targets; default `[embedded]`.
    #[serde(default = "default_pin")]
    pub pin: Vec<PinTarget>,
    /// Also compute the Filecoin piece CID (CommP) for a storage deal.
    #[serde(default)]
    pub filecoin: bool,
}

fn default_pin() -> Vec<PinTarget> {
    vec![PinTarget::Embedded]
}

/// Wall-clock and price ceilings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Longest run, seconds (> 0); stragglers are killed.
    pub max_duration_s: u64,
    /// Highest acceptable rate, NTX base units per GPU-hour (> 0). Maps to `EscrowDatum::max_rate`.
    pub max_rate_ntx_per_gpu_hour: u64,
}

/// Why a spec is rejected. Every variant names the field (a dotted path such as
/// `placement.min_gpus_per_node`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// Not valid YAML/JSON for the schema: syntax, wrong type, unknown or missing field.
    /// Shown as `field: reason`, the field once ([`FormatError::reason`]). The parser's
    /// message is part of this one, so it is kept here and not chained again as `source()`
    /// (an error chain would print it twice).
    #[error("{field}: {}", .parser.reason(.field))]
    Syntax {
        /// Dotted path of the field (`.` = the document itself).
        field: String,
        /// The parser's error.
        parser: FormatError,
    },
    /// Well-formed but impossible or forbidden.
    #[error("{field}: {rule}")]
    Invalid {
        /// Dotted path of the field.
        field: String,
        /// The rule broken.
        rule: Rule,
    },
}

impl SpecError {
    /// The field the error is about.
    pub fn field(&self) -> &str {
        match self {
            Self::Syntax { field, .. } | Self::Invalid { field, .. } => field,
        }
    }
}

/// The underlying parser error.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// From the YAML parser.
    #[error(transparent)]
    Yaml(#[from] serde_norway::Error),
    /// From the JSON parser.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl FormatError {
    /// The parser's message without a leading `field: `: the YAML parser names the path
    /// itself (`placement.max_rtt_ms: invalid type: …`), which [`SpecError::Syntax`] already
    /// shows, so the field is printed once.
    pub fn reason(&self, field: &str) -> String {
        let text = self.to_string();
        match text.strip_prefix(field).and_then(|t| t.strip_prefix(": ")) {
            Some(rest) => rest.to_string(),
            None => text,
        }
    }
}

/// A validation rule that a spec broke.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Rule {
    /// Must be greater than zero.
    #[error("must be greater than 0")]
    Zero,
    /// Must not be empty.
    #[error("must not be empty")]
    Empty,
    /// Exceeds `gpus.count`.
    #[error("{value} is more than gpus.count ({count})")]
    ExceedsCount {
        /// The value given.
        value: u32,
        /// `gpus.count`.
        count: u32,
    },
    /// `min_gpus_per_node` above `max_gpus_per_node`.
    #[error("{min} is more than placement.max_gpus_per_node ({max})")]
    MinAboveMax {
        /// `min_gpus_per_node`.
        min: u32,
        /// `max_gpus_per_node`.
        max: u32,
    },
    /// `max_nodes × max_gpus_per_node` cannot hold `gpus.count`.
    #[error("{max_nodes} nodes × {per_node} GPUs per node cannot hold gpus.count ({count})")]
    MaxNodesTooSmall {
        /// `placement.max_nodes`.
        max_nodes: u32,
        /// GPUs per node at most.
        per_node: u32,
        /// `gpus.count`.
        count: u32,
    },
    /// Neither `deadline` nor `deadline_ms` is given.
    #[error("no deadline: give `deadline` (`+2h10m`, an RFC 3339 time) or `deadline_ms`")]
    NoDeadline,
    /// Both `deadline` and `deadline_ms` are given.
    #[error("give `deadline` or `deadline_ms`, not both")]
    DeadlineTwice,
    /// `deadline` is neither `+<n><unit>…` nor an RFC 3339 time.
    #[error(
        "{value:?} is neither a time from now (`+2h`, `+1d12h`, `+90m`: units d, h, m, s) nor an \
         RFC 3339 time (`2026-12-24T18:00:00Z`)"
    )]
    BadDeadline {
        /// As written.
        value: String,
    },
    /// The deadline is not in the future.
    #[error("deadline {deadline_ms} ms is not after now ({now_ms} ms POSIX)")]
    DeadlineInPast {
        /// Given, POSIX ms.
        deadline_ms: u64,
        /// Now, POSIX ms.
        now_ms: u64,
    },
    /// The field only makes sense for another vendor than the one asked for.
    #[error("only applies to {needs:?} GPUs, but gpus.vendor is {vendor:?}")]
    WrongVendor {
        /// Vendor the field needs.
        needs: Vendor,
        /// `gpus.vendor`.
        vendor: Vendor,
    },
    /// Two fields exclude each other.
    #[error("cannot be combined with {other}")]
    Conflicts {
        /// The other field.
        other: &'static str,
    },
    /// Not a gfx target name.
    #[error("`{0}` is not a gfx target (expected e.g. gfx90a, gfx942, gfx1100)")]
    BadGfxTarget(String),
    /// Path not under the required root, not absolute, or containing `..`.
    #[error("`{path}` must be an absolute path under {root} without `..`")]
    BadPath {
        /// Given.
        path: String,
        /// Required root.
        root: &'static str,
    },
    /// Same path twice.
    #[error("`{0}` appears twice")]
    Duplicate(String),
    /// Not a POSIX environment variable name.
    #[error("`{0}` is not a valid environment variable name")]
    BadEnvName(String),
    /// Set by the node for every rank.
    #[error("`{0}` is set by the node (rank environment) and may not be overridden")]
    ReservedEnv(String),
    /// Port out of range.
    #[error("port {0} must be between 1024 and 65535")]
    BadPort(u16),
    /// Negative or not finite.
    #[error("{0} must be a finite number ≥ 0")]
    Negative(f64),
    /// `placement.groups`: `count × gpus` is not `gpus.count`.
    #[error("{groups} groups × {gpus} GPUs is {product}, not gpus.count ({count})")]
    GroupsMismatch {
        /// `placement.groups.count`.
        groups: u32,
        /// `placement.groups.gpus`.
        gpus: u32,
        /// Their product, computed in 64 bits (never saturated).
        product: u64,
        /// `gpus.count`.
        count: u32,
    },
    /// `placement.max_rtt_ms` (the bound across groups) is tighter than the groups' own.
    #[error(
        "{max_rtt_ms} ms is below placement.groups.max_rtt_ms ({group_rtt_ms} ms): with groups it \
         bounds the pairs across groups, the looser bound"
    )]
    BelowGroupRtt {
        /// `placement.max_rtt_ms`.
        max_rtt_ms: u32,
        /// `placement.groups.max_rtt_ms`.
        group_rtt_ms: u32,
    },
    /// More groups than `placement.max_nodes` machines (a group is a set of whole nodes).
    #[error(
        "{groups} groups need at least {groups} machines, but placement.max_nodes is {max_nodes}"
    )]
    GroupsAboveMaxNodes {
        /// `placement.groups.count`.
        groups: u32,
        /// `placement.max_nodes`.
        max_nodes: u32,
    },
    /// A group smaller than `placement.min_gpus_per_node` cannot hold one node.
    #[error("{gpus} GPUs per group is below placement.min_gpus_per_node ({min})")]
    GroupBelowMinPerNode {
        /// `placement.groups.gpus`.
        gpus: u32,
        /// `placement.min_gpus_per_node`.
        min: u32,
    },
    /// A service field (`serve`, `replicas`, `scale`) in a batch job.
    #[error("only a `kind: service` job has this field")]
    ServiceOnly,
    /// A batch job's field in a service: its replicas are placed one per machine
    /// (`replicas`), never talk to each other and have no rendezvous.
    #[error(
        "not for a `kind: service` job: each replica is placed on its own machine and replicas \
         do not rendezvous (leave it out)"
    )]
    NotForService,
    /// A field every service needs is missing.
    #[error("required for `kind: service`")]
    ServiceNeeds,
    /// `replicas.max` above `replicas.min` with no `scale` to move between them.
    #[error("required when replicas.max ({max}) is above replicas.min ({min})")]
    ScaleNeeded {
        /// `replicas.max`.
        max: u32,
        /// `replicas.min`.
        min: u32,
    },
    /// `scale` names no target.
    #[error("needs one target: target_in_flight_per_replica or target_p90_ms")]
    ScaleTarget,
    /// More entries than allowed.
    #[error("{count} entries, at most {limit}")]
    TooMany {
        /// Entries given.
        count: usize,
        /// The most allowed.
        limit: usize,
    },
    /// Not a libp2p peer id in its text form.
    #[error("`{0}` is not a libp2p peer id (base58btc, e.g. 12D3KooW…)")]
    BadPeerId(String),
    /// Not an absolute URL path.
    #[error("`{0}` is not an absolute URL path (starts with `/`, no spaces or `#`)")]
    BadUrlPath(String),
    /// A number above the field that bounds it.
    #[error("{value} is more than {other} ({limit})")]
    AboveField {
        /// The value given.
        value: u32,
        /// The bounding field.
        other: &'static str,
        /// Its value.
        limit: u32,
    },
}

/// Payment terms of a spec as they go on chain (`EscrowDatum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EscrowTerms {
    /// GPUs the job needs in total.
    pub gpus: u64,
    /// NTX base units per GPU-hour, at most.
    pub max_rate: u64,
    /// NTX base units locked.
    pub budget: u64,
    /// POSIX ms.
    pub deadline_ms: u64,
}

impl Ensemble {
    /// Parses YAML or JSON (a document whose first non-blank character is `{` is read as
    /// JSON), then validates it against `now_ms` (POSIX ms).
    ///
    /// # Errors
    /// [`SpecError::Syntax`] or [`SpecError::Invalid`], naming the field.
    pub fn parse(text: &str, now_ms: u64) -> Result<Self, SpecError> {
        let spec = if text.trim_start().starts_with('{') {
            Self::from_json_str(text)?
        } else {
            Self::from_yaml_str(text)?
        };
        let mut spec = spec;
        spec.resolve_deadline(now_ms)?;
        spec.validate(now_ms)?;
        Ok(spec)
    }

    /// Turns [`Ensemble::deadline`], when given, into `deadline_ms` at `now_ms` (POSIX ms), and
    /// clears it. [`Ensemble::parse`] calls it; a spec read otherwise (JSON-RPC `job_submit`)
    /// calls it before [`Ensemble::validate`].
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming `deadline`: [`Rule::DeadlineTwice`] when `deadline_ms` is
    /// given too, [`Rule::BadDeadline`] when it does not parse.
    pub fn resolve_deadline(&mut self, now_ms: u64) -> Result<(), SpecError> {
        let Some(text) = self.deadline.take() else {
            return Ok(());
        };
        let invalid = |rule| SpecError::Invalid {
            field: "deadline".into(),
            rule,
        };
        if self.deadline_ms != 0 {
            return Err(invalid(Rule::DeadlineTwice));
        }
        let bad = || {
            invalid(Rule::BadDeadline {
                value: text.clone(),
            })
        };
        self.deadline_ms = match text.trim().strip_prefix('+') {
            Some(relative) => now_ms.saturating_add(duration_ms(relative).ok_or_else(bad)?),
            None => {
                let at = time::OffsetDateTime::parse(
                    text.trim(),
                    &time::format_description::well_known::Rfc3339,
                )
                .map_err(|_| bad())?;
                u64::try_from(at.unix_timestamp_nanos() / 1_000_000).map_err(|_| bad())?
            }
        };
        Ok(())
    }

    /// Deserializes YAML without validating.
    ///
    /// # Errors
    /// [`SpecError::Syntax`] naming the field.
    pub fn from_yaml_str(text: &str) -> Result<Self, SpecError> {
        let de = serde_norway::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| SpecError::Syntax {
            field: e.path().to_string(),
            parser: FormatError::Yaml(e.into_inner()),
        })
    }

    /// Deserializes JSON without validating.
    ///
    /// # Errors
    /// [`SpecError::Syntax`] naming the field.
    pub fn from_json_str(text: &str) -> Result<Self, SpecError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let spec = serde_path_to_error::deserialize(&mut de).map_err(|e| SpecError::Syntax {
            field: e.path().to_string(),
            parser: FormatError::Json(e.into_inner()),
        })?;
        de.end().map_err(|e| SpecError::Syntax {
            field: ".".into(),
            parser: FormatError::Json(e),
        })?;
        Ok(spec)
    }

    /// Checks every rule of [`Rule`]; returns the first broken one, in document order.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming the field.
    pub fn validate(&self, now_ms: u64) -> Result<(), SpecError> {
        let bad = |field: &str, rule: Rule| {
            Err(SpecError::Invalid {
                field: field.to_string(),
                rule,
            })
        };
        match (&self.image.local, &self.image.archive) {
            (Some(name), None) if name.trim().is_empty() => return bad("image.local", Rule::Empty),
            (Some(_), Some(_)) => {
                return bad(
                    "image.local",
                    Rule::Conflicts {
                        other: "image.archive",
                    },
                );
            }
            (None, None) => return bad("image", Rule::Empty),
            _ => {}
        }
        if self.command.is_empty() || self.command[0].trim().is_empty() {
            return bad("command", Rule::Empty);
        }
        for name in self.env.keys() {
            let mut chars = name.chars();
            let ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return bad(&format!("env.{name}"), Rule::BadEnvName(name.clone()));
            }
            if RESERVED_ENV.contains(&name.as_str()) {
                return bad(&format!("env.{name}"), Rule::ReservedEnv(name.clone()));
            }
        }
        self.validate_gpus()?;
        self.validate_placement()?;
        if self.kind == JobKind::Service {
            if self.placement != Placement::default() {
                return bad("placement", Rule::NotForService);
            }
            if self.distributed != Distributed::default() {
                return bad("distributed", Rule::NotForService);
            }
        }
        crate::service::validate(
            self.kind,
            self.serve.as_ref(),
            self.replicas.as_ref(),
            self.scale.as_ref(),
        )
        .map_err(|(field, rule)| SpecError::Invalid { field, rule })?;
        let r = &self.resources_per_gpu;
        for (field, v) in [
            ("resources_per_gpu.cpu_cores", r.cpu_cores),
            ("resources_per_gpu.mem_gib", r.mem_gib),
            ("resources_per_gpu.shm_gib", r.shm_gib),
            ("resources_per_gpu.disk_gib", r.disk_gib),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(field, Rule::Negative(v));
            }
        }
        if self.distributed.master_port < 1024 {
            return bad(
                "distributed.master_port",
                Rule::BadPort(self.distributed.master_port),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, input) in self.inputs.iter().enumerate() {
            let field = format!("inputs[{i}].path");
            if !path_under(&input.path, "/inputs/") {
                return bad(
                    &field,
                    Rule::BadPath {
                        path: input.path.clone(),
                        root: "/inputs/",
                    },
                );
            }
            if !seen.insert(input.path.as_str()) {
                return bad(&field, Rule::Duplicate(input.path.clone()));
            }
        }
        for (i, output) in self.outputs.iter().enumerate() {
            let field = format!("outputs[{i}].path");
            if !path_under(&output.path, "/outputs/") {
                return bad(
                    &field,
                    Rule::BadPath {
                        path: output.path.clone(),
                        root: "/outputs/",
                    },
                );
            }
            if !seen.insert(output.path.as_str()) {
                return bad(&field, Rule::Duplicate(output.path.clone()));
            }
            if output.pin.is_empty() {
                return bad(&format!("outputs[{i}].pin"), Rule::Empty);
            }
        }
        if self.limits.max_duration_s == 0 {
            return bad("limits.max_duration_s", Rule::Zero);
        }
        if self.limits.max_rate_ntx_per_gpu_hour == 0 {
            return bad("limits.max_rate_ntx_per_gpu_hour", Rule::Zero);
        }
        if self.budget_ntx == 0 {
            return bad("budget_ntx", Rule::Zero);
        }
        if self.deadline_ms == 0 {
            return bad("deadline_ms", Rule::NoDeadline);
        }
        if self.deadline_ms <= now_ms {
            return bad(
                "deadline_ms",
                Rule::DeadlineInPast {
                    deadline_ms: self.deadline_ms,
                    now_ms,
                },
            );
        }
        Ok(())
    }

    fn validate_gpus(&self) -> Result<(), SpecError> {
        let g = &self.gpus;
        let bad = |field: &str, rule: Rule| {
            Err(SpecError::Invalid {
                field: field.to_string(),
                rule,
            })
        };
        if g.count == 0 {
            return bad("gpus.count", Rule::Zero);
        }
        if g.min_compute_capability.is_some() {
            if g.vendor == Vendor::Amd {
                return bad(
                    "gpus.min_compute_capability",
                    Rule::WrongVendor {
                        needs: Vendor::Nvidia,
                        vendor: g.vendor,
                    },
                );
            }
            if !g.rocm_arch.is_empty() {
                return bad(
                    "gpus.min_compute_capability",
                    Rule::Conflicts {
                        other: "gpus.rocm_arch",
                    },
                );
            }
        }
        if !g.rocm_arch.is_empty() && g.vendor == Vendor::Nvidia {
            return bad(
                "gpus.rocm_arch",
                Rule::WrongVendor {
                    needs: Vendor::Amd,
                    vendor: g.vendor,
                },
            );
        }
        for (i, arch) in g.rocm_arch.iter().enumerate() {
            let ok = arch.strip_prefix("gfx").is_some_and(|rest| {
                !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit())
            });
            if !ok {
                return bad(
                    &format!("gpus.rocm_arch[{i}]"),
                    Rule::BadGfxTarget(arch.clone()),
                );
            }
        }
        for (i, glob) in g.models.iter().enumerate() {
            if glob.trim().is_empty() {
                return bad(&format!("gpus.models[{i}]"), Rule::Empty);
            }
        }
        for (i, pm) in g.per_model.iter().enumerate() {
            if pm.model.trim().is_empty() {
                return bad(&format!("gpus.per_model[{i}].model"), Rule::Empty);
            }
            if pm.vram_class_gib == Some(0) {
                return bad(&format!("gpus.per_model[{i}].vram_class_gib"), Rule::Zero);
            }
        }
        if g.form_factor.is_some() && g.vendor == Vendor::Amd {
            return bad(
                "gpus.form_factor",
                Rule::WrongVendor {
                    needs: Vendor::Nvidia,
                    vendor: g.vendor,
                },
            );
        }
        if g.interconnect_group
            .as_deref()
            .is_some_and(|n| n.trim().is_empty())
        {
            return bad("gpus.interconnect_group", Rule::Empty);
        }
        match (g.interconnect, g.vendor) {
            (Interconnect::Nvlink, Vendor::Amd) => bad(
                "gpus.interconnect",
                Rule::WrongVendor {
                    needs: Vendor::Nvidia,
                    vendor: g.vendor,
                },
            ),
            (Interconnect::Xgmi, Vendor::Nvidia) => bad(
                "gpus.interconnect",
                Rule::WrongVendor {
                    needs: Vendor::Amd,
                    vendor: g.vendor,
                },
            ),
            _ => Ok(()),
        }
    }

    fn validate_placement(&self) -> Result<(), SpecError> {
        let p = &self.placement;
        let count = self.gpus.count;
        let bad = |field: &str, rule: Rule| {
            Err(SpecError::Invalid {
                field: field.to_string(),
                rule,
            })
        };
        if p.min_gpus_per_node == 0 {
            return bad("placement.min_gpus_per_node", Rule::Zero);
        }
        if p.min_gpus_per_node > count {
            return bad(
                "placement.min_gpus_per_node",
                Rule::ExceedsCount {
                    value: p.min_gpus_per_node,
                    count,
                },
            );
        }
        if let Some(max) = p.max_gpus_per_node {
            if max == 0 {
                return bad("placement.max_gpus_per_node", Rule::Zero);
            }
            if p.min_gpus_per_node > max {
                return bad(
                    "placement.min_gpus_per_node",
                    Rule::MinAboveMax {
                        min: p.min_gpus_per_node,
                        max,
                    },
                );
            }
        }
        if p.max_nodes == Some(0) {
            return bad("placement.max_nodes", Rule::Zero);
        }
        let per_node = p.max_gpus_per_node.unwrap_or(count).min(count);
        let max_nodes = p.max_nodes_or_default(count);
        if u64::from(max_nodes) * u64::from(per_node) < u64::from(count) {
            return bad(
                "placement.max_nodes",
                Rule::MaxNodesTooSmall {
                    max_nodes,
                    per_node,
                    count,
                },
            );
        }
        if p.max_rtt_ms == Some(0) {
            return bad("placement.max_rtt_ms", Rule::Zero);
        }
        if p.min_bandwidth_mbps == Some(0) {
            return bad("placement.min_bandwidth_mbps", Rule::Zero);
        }
        match &p.groups {
            Some(groups) => self.validate_groups(groups),
            None => Ok(()),
        }
    }

    /// `placement.groups`: each number ≥ 1, `count × gpus = gpus.count`, `placement.max_rtt_ms`
    /// (across groups) no tighter than the groups' bound, enough nodes and GPUs per group.
    fn validate_groups(&self, groups: &LatencyGroups) -> Result<(), SpecError> {
        let p = &self.placement;
        let bad = |field: &str, rule: Rule| {
            Err(SpecError::Invalid {
                field: field.to_string(),
                rule,
            })
        };
        for (field, v) in [
            ("placement.groups.count", groups.count),
            ("placement.groups.gpus", groups.gpus),
            ("placement.groups.max_rtt_ms", groups.max_rtt_ms),
        ] {
            if v == 0 {
                return bad(field, Rule::Zero);
            }
        }
        let product = u64::from(groups.count) * u64::from(groups.gpus);
        if product != u64::from(self.gpus.count) {
            return bad(
                "placement.groups",
                Rule::GroupsMismatch {
                    groups: groups.count,
                    gpus: groups.gpus,
                    product,
                    count: self.gpus.count,
                },
            );
        }
        if let Some(max_rtt_ms) = p.max_rtt_ms
            && max_rtt_ms < groups.max_rtt_ms
        {
            return bad(
                "placement.max_rtt_ms",
                Rule::BelowGroupRtt {
                    max_rtt_ms,
                    group_rtt_ms: groups.max_rtt_ms,
                },
            );
        }
        let max_nodes = p.max_nodes_or_default(self.gpus.count);
        if max_nodes < groups.count {
            return bad(
                "placement.groups.count",
                Rule::GroupsAboveMaxNodes {
                    groups: groups.count,
                    max_nodes,
                },
            );
        }
        if groups.gpus < p.min_gpus_per_node {
            return bad(
                "placement.groups.gpus",
                Rule::GroupBelowMinPerNode {
                    gpus: groups.gpus,
                    min: p.min_gpus_per_node,
                },
            );
        }
        Ok(())
    }

    /// The spec's payment terms in escrow units. A service's GPU count is the most it may
    /// hold at once: `replicas.max × gpus.count` (`gpus` is per replica).
    pub fn escrow_terms(&self) -> EscrowTerms {
        let replicas = match (self.kind, self.replicas) {
            (JobKind::Service, Some(r)) => u64::from(r.max),
            _ => 1,
        };
        EscrowTerms {
            gpus: u64::from(self.gpus.count) * replicas,
            max_rate: self.limits.max_rate_ntx_per_gpu_hour,
            budget: self.budget_ntx,
            deadline_ms: self.deadline_ms,
        }
    }

    /// The `Open` escrow datum for this spec, given the job id, the orchestrator's key hash
    /// and receipt verification key, the binary CID of the pinned spec and the receipt
    /// interval.
    pub fn escrow_datum(
        &self,
        job_id: JobId,
        orchestrator: KeyHash,
        receipt_key: [u8; 32],
        spec_cid: Vec<u8>,
        receipt_interval_ms: u64,
    ) -> EscrowDatum {
        let t = self.escrow_terms();
        EscrowDatum {
            job_id,
            orchestrator,
            receipt_key,
            spec: spec_cid,
            gpus: t.gpus,
            max_rate: t.max_rate,
            budget: t.budget,
            deadline_ms: t.deadline_ms,
            receipt_interval_ms,
            state: JobState::Open,
        }
    }
}

/// `path` is absolute, strictly below `root` (which ends in `/`), and has no `..` or `.` part.
fn path_under(path: &str, root: &str) -> bool {
    path.strip_prefix(root).is_some_and(|rest| {
        let rest = rest.trim_end_matches('/');
        !rest.is_empty()
            && rest
                .split('/')
                .all(|c| !c.is_empty() && c != ".." && c != ".")
    })
}

/// Milliseconds in `text`, a run of `<n><unit>` with units `d`, `h`, `m`, `s` (e.g. `2h30m`);
/// `None` when it is empty, has another unit or a number without one, or overflows.
fn duration_ms(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut any = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit_ms: u64 = match c {
            'd' => 86_400_000,
            'h' => 3_600_000,
            'm' => 60_000,
            's' => 1_000,
            _ => return None,
        };
        let n: u64 = digits.parse().ok()?;
        digits.clear();
        total = total.checked_add(n.checked_mul(unit_ms)?)?;
        any = true;
    }
    (any && digits.is_empty()).then_some(total)
}
