//! The container a rank runs in: image, env, GPUs, limits and the sandbox, as one
//! `ContainerCreateBody` (pure; checked by the inspection tests).
//!
//! Sandbox (DESIGN §6): not privileged, `CapDrop: [ALL]`, `no-new-privileges`,
//! read-only root with a tmpfs `/tmp`, pids/memory/CPU limits (swap = memory: no swap), a large
//! `ShmSize` for collectives, a non-root user unless the plan says otherwise, private IPC and
//! PID namespaces, the job network only (never `host`), and exactly two bind mounts:
//! `/inputs` (read-only) and `/outputs`, both under the job's work dir (so never the Docker
//! socket).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use bollard::models::{
    ContainerCreateBody, DeviceMapping, DeviceRequest, HostConfig, NetworkingConfig,
};

use super::labels;
use super::network::Endpoint;
use super::plan::{ContainerSlot, GpuAttachment, JobPlan, Resources, RunAs};

/// Size of the tmpfs at `/tmp`, bytes.
pub const TMP_BYTES: u64 = 256 << 20;

/// Host group ids that own AMD's device nodes (`/dev/kfd` and the render nodes): added to the
/// container's groups so a non-root user can open them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmdGroups {
    /// Numeric gids, deduplicated.
    pub gids: Vec<u32>,
}

impl AmdGroups {
    /// Reads the owning groups of `/dev/kfd` and `render_nodes` from the host (stat).
    /// Nodes that do not exist are skipped (creating the container then fails at start, which
    /// the GPU probe reports up front).
    pub fn from_host(render_nodes: &[&str]) -> Self {
        use std::os::unix::fs::MetadataExt;
        let mut gids: Vec<u32> = std::iter::once("/dev/kfd")
            .chain(render_nodes.iter().copied())
            .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.gid()))
            .collect();
        gids.sort_unstable();
        gids.dedup();
        Self { gids }
    }
}

/// Host paths mounted into the container.
#[derive(Debug, Clone)]
pub struct Mounts<'a> {
    /// Filled from the input CIDs; mounted read-only at `/inputs`.
    pub inputs: &'a Path,
    /// Empty, writable by the container user; mounted at `/outputs`.
    pub outputs: &'a Path,
}

/// Everything [`container_body`] needs for one container.
#[derive(Debug, Clone)]
pub struct ContainerSpec<'a> {
    /// The plan.
    pub plan: &'a JobPlan,
    /// This container's slot.
    pub slot: &'a ContainerSlot,
    /// The image id to run (resolved, `sha256:…`).
    pub image: &'a str,
    /// Resources from the plan.
    pub resources: Resources,
    /// The job network endpoint.
    pub endpoint: &'a Endpoint,
    /// Rendezvous env (wins over the spec's env).
    pub rank_env: &'a BTreeMap<String, String>,
    /// Host mounts.
    pub mounts: Mounts<'a>,
    /// AMD device groups (only used when the slot has AMD GPUs).
    pub amd_groups: &'a AmdGroups,
}

/// The create request for one rank's container.
pub fn container_body(spec: &ContainerSpec<'_>) -> ContainerCreateBody {
    let mut env: BTreeMap<String, String> = spec.plan.env.clone();
    if matches!(spec.plan.run_as, RunAs::User(_)) {
        // A non-root user has no writable home on a read-only root.
        env.entry("HOME".into()).or_insert_with(|| "/tmp".into());
    }
    env.extend(spec.rank_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let r = &spec.resources;
    let (device_requests, devices, group_add) = gpu_devices(&spec.slot.gpus, spec.amd_groups);
    let host_config = HostConfig {
        privileged: Some(false),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges:true".into()]),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_string(),
            format!("rw,nosuid,nodev,size={TMP_BYTES}"),
        )])),
        nano_cpus: Some((r.cpu_cores * 1e9) as i64),
        memory: Some(clamp_i64(r.memory_bytes)),
        memory_swap: Some(clamp_i64(r.memory_bytes)),
        pids_limit: Some(r.pids),
        shm_size: Some(clamp_i64(r.shm_bytes)),
        ipc_mode: Some("private".into()),
        pid_mode: Some(String::new()),
        network_mode: Some(spec.endpoint.network_mode.clone()),
        extra_hosts: Some(spec.endpoint.extra_hosts.clone()),
        binds: Some(vec![
            format!("{}:/inputs:ro", spec.mounts.inputs.display()),
            format!("{}:/outputs:rw", spec.mounts.outputs.display()),
        ]),
        device_requests,
        devices,
        group_add,
        init: Some(false),
        auto_remove: Some(false),
        ..Default::default()
    };
    let networking_config = if spec.endpoint.endpoints.is_empty() {
        None
    } else {
        Some(NetworkingConfig {
            endpoints_config: Some(spec.endpoint.endpoints.clone()),
        })
    };
    ContainerCreateBody {
        image: Some(spec.image.to_string()),
        cmd: if spec.plan.command.is_empty() {
            None
        } else {
            Some(spec.plan.command.clone())
        },
        env: Some(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()),
        user: match &spec.plan.run_as {
            RunAs::User(u) => Some(u.clone()),
            RunAs::ImageDefault => None,
        },
        hostname: Some(spec.endpoint.hostname.clone()),
        labels: Some(labels::for_job(&spec.plan.job, Some(spec.slot.node_rank))),
        network_disabled: Some(false),
        host_config: Some(host_config),
        networking_config,
        ..Default::default()
    }
}

fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

type GpuDevices = (
    Option<Vec<DeviceRequest>>,
    Option<Vec<DeviceMapping>>,
    Option<Vec<String>>,
);

/// Device requests (NVIDIA runtime / CDI), device nodes and groups (AMD) for `gpus`. Declared
/// GPUs add nothing here (they only appear in the env).
pub fn gpu_devices(gpus: &[GpuAttachment], amd_groups: &AmdGroups) -> GpuDevices {
    let mut nvidia = vec![];
    let mut cdi = vec![];
    let mut render = vec![];
    for gpu in gpus {
        match gpu {
            GpuAttachment::NvidiaRuntime { uuid } => nvidia.push(uuid.clone()),
            GpuAttachment::NvidiaCdi { device } => cdi.push(device.clone()),
            GpuAttachment::Amd { render_node } => render.push(render_node.clone()),
            GpuAttachment::Declared { .. } => {}
        }
    }
    let mut requests = vec![];
    if !nvidia.is_empty() {
        requests.push(DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(nvidia),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        });
    }
    if !cdi.is_empty() {
        requests.push(DeviceRequest {
            driver: Some("cdi".into()),
            device_ids: Some(cdi),
            ..Default::default()
        });
    }
    let (devices, groups) = if render.is_empty() {
        (None, None)
    } else {
        let node = |p: &str| DeviceMapping {
            path_on_host: Some(p.to_string()),
            path_in_container: Some(p.to_string()),
            cgroup_permissions: Some("rwm".into()),
        };
        let devices = std::iter::once(node("/dev/kfd"))
            .chain(render.iter().map(|p| node(p)))
            .collect();
        let groups = amd_groups.gids.iter().map(u32::to_string).collect();
        (Some(devices), Some(groups))
    };
    (
        if requests.is_empty() {
            None
        } else {
            Some(requests)
        },
        devices,
        groups,
    )
}

/// Checks a created container as the engine reports it (`GET /containers/{id}/json`) against
/// the sandbox rules; returns every violation (empty when sandboxed). The executor runs this
/// on every container it creates, so an engine that drops a setting fails the job before it
/// starts.
pub fn violations(container: &bollard::models::ContainerInspectResponse) -> Vec<String> {
    let mut bad = vec![];
    let Some(host) = container.host_config.as_ref() else {
        return vec!["no HostConfig".into()];
    };
    if host.privileged != Some(false) {
        bad.push(format!("Privileged = {:?}", host.privileged));
    }
    if host.cap_drop.as_deref() != Some(&["ALL".to_string()][..]) {
        bad.push(format!("CapDrop = {:?}", host.cap_drop));
    }
    if host.cap_add.as_ref().is_some_and(|c| !c.is_empty()) {
        bad.push(format!("CapAdd = {:?}", host.cap_add));
    }
    let nnp = host
        .security_opt
        .iter()
        .flatten()
        .any(|o| o == "no-new-privileges" || o == "no-new-privileges:true");
    if !nnp {
        bad.push(format!("SecurityOpt = {:?}", host.security_opt));
    }
    if host.readonly_rootfs != Some(true) {
        bad.push("ReadonlyRootfs is not set".into());
    }
    if !host.tmpfs.as_ref().is_some_and(|t| t.contains_key("/tmp")) {
        bad.push("no tmpfs at /tmp".into());
    }
    if host.memory.unwrap_or(0) <= 0 {
        bad.push("no memory limit".into());
    }
    if host.nano_cpus.unwrap_or(0) <= 0 {
        bad.push("no CPU limit".into());
    }
    if host.pids_limit.unwrap_or(0) <= 0 {
        bad.push("no pids limit".into());
    }
    let network = host.network_mode.as_deref().unwrap_or("default");
    if network == "host" || network == "default" || network == "bridge" {
        bad.push(format!("NetworkMode = {network} (must be the job network)"));
    }
    if host.pid_mode.as_deref().is_some_and(|m| !m.is_empty()) {
        bad.push(format!("PidMode = {:?}", host.pid_mode));
    }
    if !matches!(host.ipc_mode.as_deref(), Some("private") | Some("none")) {
        bad.push(format!("IpcMode = {:?}", host.ipc_mode));
    }
    if host.userns_mode.as_deref() == Some("host") || host.uts_mode.as_deref() == Some("host") {
        bad.push("host user or UTS namespace".into());
    }
    for mount in container.mounts.iter().flatten() {
        let source = mount.source.as_deref().unwrap_or("");
        let target = mount.destination.as_deref().unwrap_or("");
        if source.ends_with("docker.sock") || target.ends_with("docker.sock") {
            bad.push(format!("Docker socket mounted: {source} -> {target}"));
        }
        if target != "/inputs" && target != "/outputs" {
            bad.push(format!("unexpected mount {source} -> {target}"));
        }
        if target == "/inputs" && mount.rw != Some(false) {
            bad.push("/inputs is writable".into());
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_cdi_amd_and_declared_map_to_their_devices() {
        let gpus = vec![
            GpuAttachment::NvidiaRuntime {
                uuid: "GPU-aaaa".into(),
            },
            GpuAttachment::NvidiaRuntime {
                uuid: "GPU-bbbb".into(),
            },
            GpuAttachment::NvidiaCdi {
                device: "nvidia.com/gpu=0".into(),
            },
            GpuAttachment::Amd {
                render_node: "/dev/dri/renderD128".into(),
            },
            GpuAttachment::Declared { id: "d0".into() },
        ];
        let (requests, devices, groups) = gpu_devices(
            &gpus,
            &AmdGroups {
                gids: vec![44, 105],
            },
        );
        let requests = requests.expect("requests");
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].driver.as_deref(), Some("nvidia"));
        assert_eq!(
            requests[0].device_ids.as_deref(),
            Some(&["GPU-aaaa".to_string(), "GPU-bbbb".to_string()][..])
        );
        assert_eq!(
            requests[0].capabilities,
            Some(vec![vec!["gpu".to_string()]])
        );
        assert_eq!(requests[1].driver.as_deref(), Some("cdi"));
        assert_eq!(
            requests[1].device_ids.as_deref(),
            Some(&["nvidia.com/gpu=0".to_string()][..])
        );
        // Only the granted GPUs, by name: never `Count: -1` (all GPUs) for a subset (field
        // README, docker-gpu G1/G2).
        assert!(requests.iter().all(|r| r.count.is_none()), "{requests:?}");
        let paths: Vec<_> = devices
            .expect("devices")
            .into_iter()
            .filter_map(|d| d.path_on_host)
            .collect();
        assert_eq!(paths, ["/dev/kfd", "/dev/dri/renderD128"]);
        assert_eq!(groups, Some(vec!["44".to_string(), "105".to_string()]));
    }

    #[test]
    fn declared_gpus_get_no_devices() {
        let (r, d, g) = gpu_devices(
            &[GpuAttachment::Declared { id: "d".into() }],
            &AmdGroups::default(),
        );
        assert!(r.is_none() && d.is_none() && g.is_none());
    }
}
