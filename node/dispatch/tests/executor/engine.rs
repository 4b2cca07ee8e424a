use std::path::Path;

use ganglion_dispatch::executor::ExecError;
use ganglion_dispatch::executor::Executor;
use ganglion_dispatch::executor::engine::DockerEngine;
use ganglion_dispatch::executor::plan::GpuAttachment;
use ganglion_dispatch::gpu::docker::NvidiaAccess;

use crate::support::{self, Node};

#[tokio::test]
async fn connects_and_negotiates_the_api_version() {
    let engine = support::engine().await;
    assert!(!engine.server_version.is_empty());
    let (major, minor) = engine
        .api_version
        .split_once('.')
        .expect("api version major.minor");
    assert_eq!(major, "1");
    let minor: u32 = minor.parse().expect("minor");
    // Negotiated down to what the engine speaks (Debian bookworm: 1.41), never above bollard's.
    assert!((24..=53).contains(&minor), "{}", engine.api_version);
    assert!(
        engine.runtimes.iter().any(|r| r == "runc"),
        "{:?}",
        engine.runtimes
    );
    let version = engine.docker.version().await.expect("version");
    assert_eq!(
        version.api_version.as_deref(),
        Some(engine.api_version.as_str())
    );
}

#[tokio::test]
async fn a_missing_socket_is_a_clear_error() {
    let err = DockerEngine::connect(Path::new("/var/run/ganglion-no-such.sock"), 5)
        .await
        .expect_err("no engine there");
    let text = err.to_string();
    assert!(matches!(err, ExecError::NoEngine { .. }), "{err:?}");
    assert!(text.contains("/var/run/ganglion-no-such.sock"), "{text}");
    assert!(text.contains("start dockerd"), "{text}");
}

#[tokio::test]
async fn nvidia_gpus_without_a_runtime_fail_before_anything_is_created() {
    let node = Node::new();
    let exec = node.executor(node.pinner()).await;
    if !matches!(exec.engine().nvidia, NvidiaAccess::Missing { .. }) {
        eprintln!(
            "SKIPPED nvidia_gpus_without_a_runtime…: this engine has an NVIDIA runtime or CDI GPUs"
        );
        return;
    }
    let job = support::job_id("nogpu");
    let mut plan = support::plan(job.clone(), &support::probe_image(), &["echo", "x"], 1);
    plan.world[0].gpus = vec![GpuAttachment::NvidiaRuntime {
        uuid: "GPU-00000000-1111-2222-3333-444444444444".into(),
    }];
    let err = exec.run(plan.clone()).await.expect_err("no runtime");
    let text = err.to_string();
    assert!(matches!(err, ExecError::NoGpuRuntime(_)), "{err:?}");
    assert!(text.contains("nvidia-ctk"), "says how to fix it: {text}");
    assert!(
        exec.record(&job).expect("table").is_none(),
        "job not accepted"
    );
    assert!(support::leftovers(&exec, &job).await.is_empty());

    plan.world[0].gpus = vec![GpuAttachment::NvidiaCdi {
        device: "nvidia.com/gpu=0".into(),
    }];
    let err = exec.run(plan).await.expect_err("no CDI device");
    assert!(
        err.to_string().contains("CDI device nvidia.com/gpu=0"),
        "{err}"
    );
}
