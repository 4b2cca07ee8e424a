//! What the executor runs: a job's containers (one per provider), their GPUs, resources, image,
//! inputs and limits, derived from the ensemble spec and the assignment.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use cid::Cid;
use serde::{Deserialize, Serialize};

use super::ExecError;
use ganglion_market::spec::{ArchiveFormat, Ensemble, Framework};

/// The executor's name for one provider's run of a job, used in container names, labels and
/// the job table: 1–64 of `[a-z0-9-]`, not starting with `-`. Not the on-chain job id (the job
/// token's asset name, `ganglion_contracts::v2::datum::JobId`): the node derives one run id per
/// rank and node from it (`job::provider::executor_job`), so two providers on one Docker
/// Engine never share a name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    /// Validates `id`.
    ///
    /// # Errors
    /// [`ExecError::InvalidPlan`] naming the rule.
    pub fn new(id: impl Into<String>) -> Result<Self, ExecError> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 64
            && !id.starts_with('-')
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Self(id))
        } else {
            Err(ExecError::InvalidPlan(format!(
                "job id `{id}` must be 1-64 of [a-z0-9-], not starting with `-`"
            )))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        RunId::new(s).map_err(|e| e.to_string())
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the image comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ImageSource {
    /// An image the engine already has (`docker image inspect` must find it; never pulled).
    Local {
        /// Name or id, e.g. `ganglion/torch-cpu:bookworm-1`.
        name: String,
    },
    /// A root filesystem tarball by CID, imported with `docker import` (`create_image` from `-`).
    Rootfs {
        /// The archive's CID in the node's blockstore.
        #[serde(with = "cid_string")]
        cid: Cid,
    },
    /// A `docker save` archive by CID, loaded with `docker load` (`import_image`).
    DockerSave {
        /// The archive's CID in the node's blockstore.
        #[serde(with = "cid_string")]
        cid: Cid,
    },
}

/// How one GPU reaches the container (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum GpuAttachment {
    /// NVIDIA through the `nvidia` runtime: a device request of driver `nvidia` with this UUID.
    NvidiaRuntime {
        /// `GPU-…` UUID from NVML.
        uuid: String,
    },
    /// NVIDIA through CDI: a device request of driver `cdi` with this device name.
    NvidiaCdi {
        /// Fully qualified CDI name, e.g. `nvidia.com/gpu=0` or `nvidia.com/gpu=GPU-…`.
        device: String,
    },
    /// AMD: `/dev/kfd` plus this render node, with the nodes' numeric group ids added.
    Amd {
        /// e.g. `/dev/dri/renderD128`.
        render_node: String,
    },
    /// A declared GPU (devnet, tests): no device, only the rank env.
    Declared {
        /// The declared id.
        id: String,
    },
}

impl GpuAttachment {
    /// The id written into `GANGLION_GPUS`.
    pub fn id(&self) -> &str {
        match self {
            Self::NvidiaRuntime { uuid } => uuid,
            Self::NvidiaCdi { device } => device,
            Self::Amd { render_node } => render_node,
            Self::Declared { id } => id,
        }
    }
}

/// One container of the job: one provider's share, holding all of that provider's GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSlot {
    /// Index of this container in the job (torchrun's node rank), 0-based, dense.
    pub node_rank: u32,
    /// The GPUs this container holds; its local world size is `max(1, gpus.len())`.
    pub gpus: Vec<GpuAttachment>,
}

impl ContainerSlot {
    /// Processes (ranks) this container runs: one per GPU, at least one.
    pub fn local_world_size(&self) -> u32 {
        u32::try_from(self.gpus.len()).unwrap_or(u32::MAX).max(1)
    }
}

/// Host resources for one container (already multiplied by its GPU count).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU cores (`NanoCpus` = cores × 10⁹).
    pub cpu_cores: f64,
    /// Memory limit, bytes (swap limited to the same: no swap).
    pub memory_bytes: u64,
    /// `/dev/shm` size, bytes.
    pub shm_bytes: u64,
    /// Largest process count.
    pub pids: i64,
    /// Largest total size of `/outputs`, bytes.
    pub outputs_bytes: u64,
}

/// Defaults where the spec leaves a resource at 0, and fixed sandbox sizes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResourceDefaults {
    /// CPU cores per GPU (or per GPU-less container).
    pub cpu_cores: f64,
    /// Memory per GPU, bytes.
    pub memory_bytes: u64,
    /// Shared memory per GPU, bytes.
    pub shm_bytes: u64,
    /// Process limit per container.
    pub pids: i64,
    /// Output allowance per GPU, bytes.
    pub outputs_bytes: u64,
}

impl Default for ResourceDefaults {
    fn default() -> Self {
        Self {
            cpu_cores: 1.0,
            memory_bytes: 2 << 30,
            shm_bytes: 256 << 20,
            pids: 4096,
            outputs_bytes: 1 << 30,
        }
    }
}

/// One content-addressed input, placed at `/inputs/<path>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFile {
    /// The UnixFS file's CID in the node's blockstore.
    #[serde(with = "cid_string")]
    pub cid: Cid,
    /// Relative path under `/inputs` (no `..`).
    pub path: PathBuf,
}

/// Who the workload runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunAs {
    /// `uid:gid` (default `65534:65534`, nobody): needs nothing from the image.
    User(String),
    /// The image's own `USER` (root for most images): only when the image needs it.
    ImageDefault,
}

impl Default for RunAs {
    fn default() -> Self {
        Self::User("65534:65534".to_string())
    }
}

/// Everything needed to run one job's containers on this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPlan {
    /// The job id (labels, names, table key).
    pub job: RunId,
    /// The image.
    pub image: ImageSource,
    /// argv; empty means the image's entrypoint/cmd.
    pub command: Vec<String>,
    /// The spec's env (rendezvous env is added per rank and wins).
    pub env: BTreeMap<String, String>,
    /// Collective framework.
    pub framework: Framework,
    /// Rendezvous port of rank 0.
    pub master_port: u16,
    /// Every container of the job, in node-rank order (all providers').
    pub world: Vec<ContainerSlot>,
    /// Node ranks this executor runs (this provider's; the tests run all on one host).
    pub local: Vec<u32>,
    /// Per-GPU resources from the spec (0 = use defaults).
    pub per_gpu: ganglion_market::spec::ResourcesPerGpu,
    /// Inputs.
    pub inputs: Vec<InputFile>,
    /// The spec's declared output directories, relative to `/outputs` (no `..`): created, empty
    /// and writable by the workload, before it starts (`outputs[].path` of the spec).
    #[serde(default)]
    pub outputs: Vec<PathBuf>,
    /// Wall-clock limit, seconds.
    pub max_duration_s: u64,
    /// Who the workload runs as.
    pub run_as: RunAs,
    /// Latency groups (`placement.groups` of the spec): every `gpus_per_group` consecutive
    /// global ranks form one group, so the containers of a group are consecutive in node
    /// rank and no container straddles two groups ([`JobPlan::validate`] checks). The
    /// orchestrator lists a grouped plan's assignments group by group, so every provider
    /// derives the same membership from the on-chain assignment order. `None` = no groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_group: Option<u32>,
    /// A service replica's HTTP port (`serve.port` of a `kind: service` spec), where its
    /// node reaches it ([`super::Executor::connect`]); `None` for a batch job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_port: Option<u16>,
}

/// Where one container sits in the job's latency groups ([`JobPlan::group_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupPlace {
    /// The group, 0-based (groups ordered by their first global rank).
    pub group: u32,
    /// The container's first process's rank within its group (its other processes follow,
    /// one per local rank).
    pub first_rank_in_group: u32,
    /// Processes per group.
    pub group_size: u32,
    /// Groups in the job.
    pub groups: u32,
}

impl JobPlan {
    /// The plan for `spec` with the assignment's containers `world`, of which this node runs
    /// `local`.
    ///
    /// # Errors
    /// [`ExecError::InvalidPlan`] for input paths outside `/inputs`, non-dense node ranks or
    /// unknown local ranks.
    pub fn from_ensemble(
        job: RunId,
        spec: &Ensemble,
        world: Vec<ContainerSlot>,
        local: Vec<u32>,
    ) -> Result<Self, ExecError> {
        let image = match (&spec.image.local, &spec.image.archive) {
            (Some(name), _) => ImageSource::Local { name: name.clone() },
            (None, Some(a)) => match a.format {
                ArchiveFormat::Rootfs => ImageSource::Rootfs { cid: a.cid.0 },
                ArchiveFormat::DockerSave => ImageSource::DockerSave { cid: a.cid.0 },
            },
            (None, None) => {
                return Err(ExecError::InvalidPlan(
                    "image: neither `local` nor `archive`".into(),
                ));
            }
        };
        let inputs = spec
            .inputs
            .iter()
            .map(|i| {
                let rel = Path::new(&i.path)
                    .strip_prefix("/inputs")
                    .map_err(|_| {
                        ExecError::InvalidPlan(format!("inputs: `{}` is not under /inputs", i.path))
                    })?
                    .to_path_buf();
                Ok(InputFile {
                    cid: i.cid.0,
                    path: rel,
                })
            })
            .collect::<Result<Vec<_>, ExecError>>()?;
        let outputs = spec
            .outputs
            .iter()
            .map(|o| {
                Path::new(&o.path)
                    .strip_prefix("/outputs")
                    .map(Path::to_path_buf)
                    .map_err(|_| {
                        ExecError::InvalidPlan(format!(
                            "outputs: `{}` is not under /outputs",
                            o.path
                        ))
                    })
            })
            .filter(|p| !matches!(p, Ok(p) if p.as_os_str().is_empty()))
            .collect::<Result<Vec<_>, ExecError>>()?;
        let plan = Self {
            job,
            image,
            command: spec.command.clone(),
            env: spec.env.clone(),
            framework: spec.distributed.framework,
            master_port: spec.distributed.master_port,
            world,
            local,
            per_gpu: spec.resources_per_gpu.clone(),
            inputs,
            outputs,
            max_duration_s: spec.limits.max_duration_s,
            run_as: RunAs::default(),
            gpus_per_group: spec.placement.groups.as_ref().map(|g| g.gpus),
            serve_port: spec.serve.as_ref().map(|s| s.port),
        };
        plan.validate()?;
        Ok(plan)
    }

    /// The global rank of the first process of container `node_rank` (the ranks of the
    /// containers before it, one per GPU, at least one each).
    pub fn first_rank(&self, node_rank: u32) -> u32 {
        self.world
            .iter()
            .take(node_rank as usize)
            .map(ContainerSlot::local_world_size)
            .sum()
    }

    /// Where container `node_rank` sits in the latency groups; `None` without groups or for an
    /// unknown rank. Meaningful on a validated plan (no container straddles groups).
    pub fn group_of(&self, node_rank: u32) -> Option<GroupPlace> {
        let size = self.gpus_per_group.filter(|n| *n > 0)?;
        self.slot(node_rank)?;
        let first = self.first_rank(node_rank);
        Some(GroupPlace {
            group: first / size,
            first_rank_in_group: first % size,
            group_size: size,
            groups: self.world_size() / size,
        })
    }

    /// With latency groups: the world splits into groups of `gpus_per_group` ranks at container
    /// boundaries.
    fn validate_groups(&self) -> Result<(), ExecError> {
        let Some(size) = self.gpus_per_group else {
            return Ok(());
        };
        if size == 0 {
            return Err(ExecError::InvalidPlan(
                "gpus_per_group: a group of 0 GPUs".into(),
            ));
        }
        let mut first = 0u32;
        for slot in &self.world {
            let next = first.saturating_add(slot.local_world_size());
            // The container's ranks first..next must lie in one group.
            if first / size != (next - 1) / size {
                return Err(ExecError::InvalidPlan(format!(
                    "groups of {size} GPUs: container {} (ranks {first}..{next}) straddles two groups; \
                     assignments must be listed group by group in whole containers",
                    slot.node_rank
                )));
            }
            first = next;
        }
        if !first.is_multiple_of(size) {
            return Err(ExecError::InvalidPlan(format!(
                "groups of {size} GPUs: the world of {first} ranks does not split into whole groups"
            )));
        }
        Ok(())
    }

    /// Checks ranks and paths.
    ///
    /// # Errors
    /// [`ExecError::InvalidPlan`] naming what is wrong.
    pub fn validate(&self) -> Result<(), ExecError> {
        for (i, slot) in self.world.iter().enumerate() {
            if slot.node_rank as usize != i {
                return Err(ExecError::InvalidPlan(format!(
                    "world: node ranks must be 0..{} in order, found {} at {i}",
                    self.world.len(),
                    slot.node_rank
                )));
            }
        }
        self.validate_groups()?;
        if self.local.is_empty() {
            return Err(ExecError::InvalidPlan("local: no container to run".into()));
        }
        if let Some(r) = self.local.iter().find(|r| **r as usize >= self.world.len()) {
            return Err(ExecError::InvalidPlan(format!(
                "local: node rank {r} not in world"
            )));
        }
        if self.max_duration_s == 0 {
            return Err(ExecError::InvalidPlan("max_duration_s must be > 0".into()));
        }
        for input in &self.inputs {
            let bad = input.path.as_os_str().is_empty()
                || input
                    .path
                    .components()
                    .any(|c| !matches!(c, Component::Normal(_)));
            if bad {
                return Err(ExecError::InvalidPlan(format!(
                    "inputs: `{}` must be a relative path without `..`",
                    input.path.display()
                )));
            }
        }
        for output in &self.outputs {
            let bad = output.as_os_str().is_empty()
                || output
                    .components()
                    .any(|c| !matches!(c, Component::Normal(_)));
            if bad {
                return Err(ExecError::InvalidPlan(format!(
                    "outputs: `{}` must be a relative path without `..`",
                    output.display()
                )));
            }
        }
        Ok(())
    }

    /// The slot with `node_rank`.
    pub fn slot(&self, node_rank: u32) -> Option<&ContainerSlot> {
        self.world.get(node_rank as usize)
    }

    /// Total processes over all containers (torch `WORLD_SIZE`).
    pub fn world_size(&self) -> u32 {
        self.world.iter().map(ContainerSlot::local_world_size).sum()
    }

    /// Resources of the container `slot`: per-GPU spec values × its GPUs (at least one unit),
    /// defaults where the spec says 0.
    pub fn resources(&self, slot: &ContainerSlot, defaults: &ResourceDefaults) -> Resources {
        let units = f64::from(slot.local_world_size());
        let gib = |v: f64, default: u64| -> u64 {
            if v > 0.0 {
                (v * units * f64::from(1u32 << 30)) as u64
            } else {
                (default as f64 * units) as u64
            }
        };
        Resources {
            cpu_cores: if self.per_gpu.cpu_cores > 0.0 {
                self.per_gpu.cpu_cores * units
            } else {
                defaults.cpu_cores * units
            },
            memory_bytes: gib(self.per_gpu.mem_gib, defaults.memory_bytes),
            shm_bytes: gib(self.per_gpu.shm_gib, defaults.shm_bytes),
            pids: defaults.pids,
            outputs_bytes: gib(self.per_gpu.disk_gib, defaults.outputs_bytes),
        }
    }

    /// GPUs held by this node's containers.
    pub fn local_gpus(&self) -> usize {
        self.local
            .iter()
            .filter_map(|r| self.slot(*r))
            .map(|s| s.gpus.len())
            .sum()
    }
}

/// CIDs as their string form in the job table (JSON).
pub(crate) mod cid_string {
    use cid::Cid;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(cid: &Cid, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(cid)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Cid, D::Error> {
        let text = String::deserialize(d)?;
        Cid::try_from(text.as_str()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ensemble() -> Ensemble {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/ensembles/cpu-devnet-2.json"),
        )
        .expect("example spec");
        Ensemble::from_json_str(&text).expect("valid spec")
    }

    fn world(gpus: &[usize]) -> Vec<ContainerSlot> {
        gpus.iter()
            .enumerate()
            .map(|(i, n)| ContainerSlot {
                node_rank: i as u32,
                gpus: (0..*n)
                    .map(|g| GpuAttachment::Declared {
                        id: format!("d{i}{g}"),
                    })
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn plan_from_the_spec_maps_image_inputs_framework_and_limits() {
        let spec = ensemble();
        let plan = JobPlan::from_ensemble(
            RunId::new("j1").expect("id"),
            &spec,
            world(&[1, 1]),
            vec![1],
        )
        .expect("plan");
        assert!(matches!(plan.image, ImageSource::Rootfs { .. }));
        assert_eq!(plan.inputs[0].path, PathBuf::from("code"));
        assert_eq!(plan.outputs, [PathBuf::from("result")], "/outputs/result");
        assert_eq!(plan.framework, Framework::Torch);
        assert_eq!(plan.max_duration_s, 600);
        assert_eq!(plan.world_size(), 2);
        assert_eq!(plan.run_as, RunAs::User("65534:65534".into()));
        // JSON round trip (the job table) keeps CIDs as strings.
        let json = serde_json::to_string(&plan).expect("json");
        assert!(json.contains("\"cid\":\"Qm"), "{json}");
        assert_eq!(
            serde_json::from_str::<JobPlan>(&json).expect("decode"),
            plan
        );
    }

    #[test]
    fn resources_scale_with_gpus_and_fall_back_to_defaults() {
        let mut spec = ensemble();
        spec.resources_per_gpu.cpu_cores = 2.0;
        spec.resources_per_gpu.mem_gib = 8.0;
        let plan = JobPlan::from_ensemble(
            RunId::new("j2").expect("id"),
            &spec,
            world(&[4, 0]),
            vec![0, 1],
        )
        .expect("plan");
        let d = ResourceDefaults::default();
        let r = plan.resources(&plan.world[0], &d);
        assert_eq!(r.cpu_cores, 8.0);
        assert_eq!(r.memory_bytes, 32 << 30);
        assert_eq!(r.shm_bytes, 4 * d.shm_bytes, "shm: default per GPU");
        assert_eq!(r.outputs_bytes, 4 * d.outputs_bytes);
        let r = plan.resources(&plan.world[1], &d);
        assert_eq!(r.cpu_cores, 2.0, "a GPU-less container counts as one unit");
    }

    #[test]
    fn bad_plans_are_refused_with_the_reason() {
        let spec = ensemble();
        let id = || RunId::new("j3").expect("id");
        let err = |r: Result<JobPlan, ExecError>| r.expect_err("refused").to_string();
        assert!(
            err(JobPlan::from_ensemble(id(), &spec, world(&[1]), vec![2])).contains("not in world")
        );
        assert!(
            err(JobPlan::from_ensemble(id(), &spec, world(&[1]), vec![])).contains("no container")
        );
        let mut w = world(&[1, 1]);
        w[1].node_rank = 5;
        assert!(err(JobPlan::from_ensemble(id(), &spec, w, vec![0])).contains("node ranks"));
        let mut bad = spec.clone();
        bad.inputs[0].path = "/etc/passwd".into();
        assert!(
            err(JobPlan::from_ensemble(id(), &bad, world(&[1]), vec![0]))
                .contains("not under /inputs")
        );
        let mut bad = spec.clone();
        bad.inputs[0].path = "/inputs/../etc".into();
        assert!(
            err(JobPlan::from_ensemble(id(), &bad, world(&[1]), vec![0])).contains("without `..`")
        );
        let mut bad = spec;
        bad.outputs = vec![
            serde_json::from_value(serde_json::json!({"path": "/outputs/../x"})).expect("output"),
        ];
        assert!(
            err(JobPlan::from_ensemble(id(), &bad, world(&[1]), vec![0])).contains("without `..`")
        );
        for bad_id in ["", "Upper", "-lead", &"x".repeat(65), "a/b"] {
            assert!(RunId::new(bad_id).is_err(), "{bad_id:?}");
        }
    }
}
