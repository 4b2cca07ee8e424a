//! The start-up GPU check: one real smoke container with the provider's device request.
//!
//! `/info` can say a runtime or CDI device exists; only a container start proves the engine
//! gives a GPU to a container (a missing GPU runtime fails at *start*, not create: DESIGN §6).
//! A provider runs [`check`] once at start-up, before it posts its bond, and offers no NVIDIA
//! GPU when it fails; `ganglion gpus` and `ganglion doctor` run the same check and show the
//! reason. The container is hardened like a job's (no network, all capabilities dropped,
//! read-only root), runs the probe image (`scripts/build-probe-image.sh`, entrypoint `/probe`)
//! with `echo gpu-smoke`, and is removed afterwards whatever happened.

use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures::StreamExt as _;

use super::docker::{GpuRequest, NvidiaAccess, SmokeOutcome, confirm, smoke_request};
use super::{Gpu, Source};

/// How long the smoke container may take from create to exit.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Label on every smoke container (so a crashed check's leftovers can be found).
pub const LABEL: &str = "ganglion.gpu-smoke";

/// The start-up check's result: the request made, what the container did, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuCheck {
    /// The device request the smoke container carried.
    pub request: GpuRequest,
    /// What the container did.
    pub smoke: SmokeOutcome,
    /// `/info` refined by the smoke ([`confirm`]).
    pub access: NvidiaAccess,
}

/// The bollard form of `r` (Engine API `DeviceRequest`).
pub fn device_request(r: &GpuRequest) -> DeviceRequest {
    DeviceRequest {
        driver: Some(r.driver.clone()),
        device_ids: Some(r.device_ids.clone()),
        capabilities: (!r.capabilities.is_empty()).then(|| r.capabilities.clone()),
        ..Default::default()
    }
}

/// Runs one smoke container of `image` carrying `request` and reports what happened; never
/// fails (an engine error is an outcome) and always removes the container.
pub async fn run(docker: &Docker, image: &str, request: &GpuRequest) -> SmokeOutcome {
    if let Err(e) = docker.inspect_image(image).await {
        return SmokeOutcome::NotRun {
            why: format!(
                "no smoke image {image} ({e}); build it with `bash scripts/build-probe-image.sh`"
            ),
        };
    }
    let name = format!(
        "ganglion-gpu-smoke-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(vec!["echo".into(), "gpu-smoke".into()]),
        labels: Some([(LABEL.to_string(), "1".to_string())].into()),
        host_config: Some(HostConfig {
            device_requests: Some(vec![device_request(request)]),
            network_mode: Some("none".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    let id = match docker.create_container(Some(options), body).await {
        Ok(c) => c.id,
        Err(e) => {
            return SmokeOutcome::EngineError {
                message: e.to_string(),
            };
        }
    };
    let outcome = match tokio::time::timeout(TIMEOUT, start_and_wait(docker, &id)).await {
        Ok(o) => o,
        Err(_) => SmokeOutcome::NotRun {
            why: format!("the smoke container did not finish within {TIMEOUT:?}"),
        },
    };
    let remove = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    if let Err(e) = docker.remove_container(&id, Some(remove)).await {
        tracing::warn!(container = %id, error = %e, "removing the GPU smoke container");
    }
    outcome
}

async fn start_and_wait(docker: &Docker, id: &str) -> SmokeOutcome {
    if let Err(e) = docker.start_container(id, None).await {
        return SmokeOutcome::EngineError {
            message: e.to_string(),
        };
    }
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    // A non-zero exit is reported as an error value by bollard (DESIGN §6).
    match docker.wait_container(id, Some(options)).next().await {
        Some(Ok(r)) if r.status_code == 0 => SmokeOutcome::Passed,
        Some(Ok(r)) => SmokeOutcome::Exited {
            code: r.status_code,
        },
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
            if code == 0 {
                SmokeOutcome::Passed
            } else {
                SmokeOutcome::Exited { code }
            }
        }
        Some(Err(e)) => SmokeOutcome::EngineError {
            message: e.to_string(),
        },
        None => SmokeOutcome::NotRun {
            why: "the wait stream ended without a status".into(),
        },
    }
}

/// The (UUID, CDI index name, [`super::docker::cdi_index_name`]) of each NVIDIA GPU or MIG
/// device of `gpus` that would be offered.
pub fn nvidia_targets(gpus: &[Gpu]) -> Vec<(String, String)> {
    gpus.iter()
        .filter(|g| g.source == Source::Nvml && g.not_offered.is_none())
        .filter_map(|g| {
            g.uuid
                .clone()
                .map(|u| (u, super::docker::cdi_index_name(g)))
        })
        .collect()
}

/// The start-up check: `/info`'s verdict ([`super::docker::nvidia_access`], given as `from_info`), one smoke
/// container with the request for `targets` ([`nvidia_targets`]) on `docker` using `image`, and
/// the verdict they give together ([`confirm`]).
pub async fn check(
    docker: &Docker,
    from_info: &NvidiaAccess,
    image: &str,
    targets: &[(String, String)],
) -> GpuCheck {
    let request = smoke_request(from_info, targets);
    let smoke = run(docker, image, &request).await;
    let access = confirm(from_info, &request, &smoke);
    if let NvidiaAccess::Missing { missing, .. } = &access {
        tracing::warn!(reason = %missing, "NVIDIA GPUs present but not usable in containers");
    }
    GpuCheck {
        request,
        smoke,
        access,
    }
}
