use std::collections::{BTreeMap, HashMap};

use bollard::models::MountPoint;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use ganglion_dispatch::executor::Executor;
use ganglion_dispatch::executor::labels;
use ganglion_dispatch::executor::network::Endpoint;
use ganglion_dispatch::executor::plan::{GpuAttachment, ResourceDefaults};
use ganglion_dispatch::executor::sandbox::{self, AmdGroups, ContainerSpec, Mounts};

use crate::support::{self, Node};

#[tokio::test]
async fn created_containers_carry_every_sandbox_item_labels_and_limits() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let job = support::job_id("sandbox");
    let plan = support::plan(job.clone(), &support::probe_image(), &["echo", "x"], 2);
    let (record, image, _) = exec
        .create(&plan)
        .await
        .expect("accepted")
        .expect("created");
    assert_eq!(record.containers.len(), 2);
    for (rank, id) in &record.containers {
        let c = exec
            .engine()
            .docker
            .inspect_container(id, None)
            .await
            .expect("inspect");
        assert_eq!(sandbox::violations(&c), Vec::<String>::new());
        let host = c.host_config.clone().expect("host config");
        assert_eq!(host.privileged, Some(false));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert!(host.cap_add.unwrap_or_default().is_empty());
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges:true".to_string()])
        );
        assert_eq!(host.readonly_rootfs, Some(true));
        assert!(host.tmpfs.expect("tmpfs")["/tmp"].contains("size="));
        // 0.5 cores, 0.25 GiB, 64 MiB shm per GPU; one declared GPU each.
        assert_eq!(host.nano_cpus, Some(500_000_000));
        assert_eq!(host.memory, Some(256 << 20));
        assert_eq!(host.memory_swap, Some(256 << 20), "no swap");
        assert_eq!(host.shm_size, Some(64 << 20));
        assert_eq!(host.pids_limit, Some(ResourceDefaults::default().pids));
        assert_eq!(host.ipc_mode.as_deref(), Some("private"));
        assert!(
            host.pid_mode.unwrap_or_default().is_empty(),
            "no host PID namespace"
        );
        let network = host.network_mode.expect("network mode");
        assert_eq!(network, format!("ganglion-{job}"));
        assert_ne!(network, "host");
        let binds = host.binds.expect("binds");
        assert_eq!(binds.len(), 2, "{binds:?}");
        assert!(
            binds.iter().any(|b| b.ends_with(":/inputs:ro")),
            "{binds:?}"
        );
        assert!(
            binds.iter().any(|b| b.ends_with(":/outputs:rw")),
            "{binds:?}"
        );
        assert!(!binds.iter().any(|b| b.contains("docker.sock")));
        assert!(
            host.device_requests.unwrap_or_default().is_empty(),
            "declared GPUs: env only"
        );
        let config = c.config.expect("config");
        assert_eq!(config.user.as_deref(), Some("65534:65534"));
        assert_eq!(config.image.as_deref(), Some(image.id.as_str()));
        assert_eq!(
            config.hostname.as_deref(),
            Some(format!("rank-{rank}").as_str())
        );
        let labels = config.labels.expect("labels");
        assert_eq!(labels[labels::JOB], job.to_string());
        assert_eq!(labels[labels::NODE_RANK], rank.to_string());
        let env = config.env.expect("env");
        for expected in [
            format!("RANK={rank}"),
            "WORLD_SIZE=2".into(),
            "MASTER_ADDR=rank-0".into(),
            "GLOO_SOCKET_IFNAME=eth0".into(),
            format!("GANGLION_GPUS=declared-{rank}"),
            "HOME=/tmp".into(),
        ] {
            assert!(env.contains(&expected), "{expected} missing from {env:?}");
        }
        assert!(!env.iter().any(|e| e.starts_with("CUDA_VISIBLE_DEVICES=")));
        let net = c
            .network_settings
            .and_then(|n| n.networks)
            .expect("networks");
        let endpoint = &net[&format!("ganglion-{job}")];
        assert!(
            endpoint
                .aliases
                .iter()
                .flatten()
                .any(|a| *a == format!("rank-{rank}"))
        );

        // The check itself catches a weakened sandbox.
        let mut weak = exec
            .engine()
            .docker
            .inspect_container(id, None)
            .await
            .expect("inspect");
        let h = weak.host_config.as_mut().expect("host config");
        h.privileged = Some(true);
        h.cap_drop = None;
        h.network_mode = Some("host".into());
        h.readonly_rootfs = Some(false);
        weak.mounts.get_or_insert_with(Vec::new).push(MountPoint {
            source: Some("/var/run/docker.sock".into()),
            destination: Some("/var/run/docker.sock".into()),
            ..Default::default()
        });
        let bad = sandbox::violations(&weak).join("\n");
        for needle in [
            "Privileged",
            "CapDrop",
            "NetworkMode = host",
            "ReadonlyRootfs",
            "Docker socket",
        ] {
            assert!(bad.contains(needle), "{needle} not reported in:\n{bad}");
        }
    }
    let report = exec.abandon(&job).await.expect("abandon");
    assert!(report.failure().is_some());
    support::assert_no_leftovers(&exec, &job).await;
}

#[tokio::test]
async fn a_running_container_is_locked_down_from_the_inside() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    let job = support::job_id("inside");
    let plan = support::plan(
        job.clone(),
        &support::probe_image(),
        &["sandbox", "env", "RANK", "env", "MASTER_ADDR"],
        1,
    );
    let report = exec.run(plan).await.expect("run");
    assert!(report.failure().is_none(), "{:?}", report.outcome);
    let log = support::log(&exec, &job, 0);
    for line in [
        "uid=65534 gid=65534",
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "root=Read-only file system",
        "tmp=writable",
        "outputs=writable",
        "docker_sock=absent",
        "RANK=0",
        "MASTER_ADDR=rank-0",
    ] {
        assert!(log.contains(line), "{line:?} not in log:\n{log}");
    }
    support::assert_no_leftovers(&exec, &job).await;
}

/// NVIDIA (runtime and CDI) and AMD attachments as the engine stores them. These containers
/// are created, inspected and removed, never started: this machine has no GPU.
#[tokio::test]
async fn gpu_attachments_reach_the_host_config() {
    let engine = support::engine().await;
    let job = support::job_id("gpus");
    let mut plan = support::plan(job.clone(), &support::probe_image(), &["echo", "x"], 1);
    plan.world[0].gpus = vec![
        GpuAttachment::NvidiaRuntime {
            uuid: "GPU-11111111-2222-3333-4444-555555555555".into(),
        },
        GpuAttachment::NvidiaCdi {
            device: "nvidia.com/gpu=1".into(),
        },
        GpuAttachment::Amd {
            render_node: "/dev/dri/renderD128".into(),
        },
    ];
    let dir = tempfile::tempdir().expect("tmp");
    let endpoint = Endpoint {
        network_mode: "none".into(),
        hostname: "rank-0".into(),
        endpoints: HashMap::new(),
        extra_hosts: vec![],
    };
    let env = BTreeMap::new();
    let body = sandbox::container_body(&ContainerSpec {
        plan: &plan,
        slot: &plan.world[0],
        image: &support::probe_image(),
        resources: plan.resources(&plan.world[0], &ResourceDefaults::default()),
        endpoint: &endpoint,
        rank_env: &env,
        mounts: Mounts {
            inputs: dir.path(),
            outputs: dir.path(),
        },
        amd_groups: &AmdGroups {
            gids: vec![44, 993],
        },
    });
    let name = format!("ganglion-{job}-gpu");
    let created = engine
        .docker
        .create_container(
            Some(CreateContainerOptionsBuilder::default().name(&name).build()),
            body,
        )
        .await
        .expect("create (a GPU container fails only at start)");
    let inspected = engine.docker.inspect_container(&created.id, None).await;
    engine
        .docker
        .remove_container(
            &created.id,
            Some(RemoveContainerOptionsBuilder::default().force(true).build()),
        )
        .await
        .expect("remove");
    let host = inspected
        .expect("inspect")
        .host_config
        .expect("host config");
    let requests = host.device_requests.expect("device requests");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].driver.as_deref(), Some("nvidia"));
    assert_eq!(
        requests[0].device_ids,
        Some(vec!["GPU-11111111-2222-3333-4444-555555555555".to_string()])
    );
    assert_eq!(
        requests[0].capabilities,
        Some(vec![vec!["gpu".to_string()]])
    );
    assert_eq!(requests[1].driver.as_deref(), Some("cdi"));
    assert_eq!(
        requests[1].device_ids,
        Some(vec!["nvidia.com/gpu=1".to_string()])
    );
    let devices: Vec<String> = host
        .devices
        .expect("devices")
        .into_iter()
        .filter_map(|d| d.path_on_host)
        .collect();
    assert_eq!(devices, ["/dev/kfd", "/dev/dri/renderD128"]);
    assert_eq!(
        host.group_add,
        Some(vec!["44".to_string(), "993".to_string()])
    );
    let env = plan.world[0]
        .gpus
        .iter()
        .map(|g| g.id())
        .collect::<Vec<_>>();
    assert_eq!(env.len(), 3);
}
