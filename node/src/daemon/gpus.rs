//! How a provider's pooled GPUs reach its containers (DESIGN §6): each detected or declared
//! [`Gpu`] becomes the executor's [`GpuAttachment`].
//!
//! | GPU | attachment |
//! |---|---|
//! | NVIDIA (NVML), engine with CDI devices | `nvidia.com/gpu=<UUID>`, else `nvidia.com/gpu=<index>` (a MIG device: `<parent index>:<MIG index>`, never the parent's index), when listed |
//! | NVIDIA (NVML), engine with the `nvidia` runtime | a device request for its UUID |
//! | AMD (sysfs) | `/dev/kfd` and its render node |
//! | declared (devnet) | none: only the rank env names it |

use ganglion_dispatch::executor::engine::DockerEngine;
use ganglion_dispatch::executor::plan::GpuAttachment;
use ganglion_dispatch::gpu::docker::{NvidiaAccess, cdi_index_name};
use ganglion_dispatch::gpu::smoke::{self, GpuCheck};
use ganglion_dispatch::gpu::{Gpu, Inventory, Source};

/// The start-up GPU check of a provider, run before its bond is posted (field README,
/// docker-gpu): when NVIDIA GPUs (or MIG devices) would be offered, `/info`'s verdict
/// (`docker.nvidia`) is confirmed by one smoke container of `image` carrying their device
/// request ([`smoke::check`]); when containers cannot get them, every NVIDIA entry of
/// `inventory` is marked "present but not usable in containers" with the reason, so none is
/// offered. Returns the verdict to attach GPUs with and the check, when it ran.
pub async fn startup_check(
    docker: &DockerEngine,
    inventory: &mut Inventory,
    image: &str,
) -> (NvidiaAccess, Option<GpuCheck>) {
    let targets = smoke::nvidia_targets(&inventory.gpus);
    if targets.is_empty() {
        return (docker.nvidia.clone(), None);
    }
    let check = smoke::check(&docker.docker, &docker.nvidia, image, &targets).await;
    inventory.apply_container_access(&check.access);
    (check.access.clone(), Some(check))
}

/// [`startup_check`] against the engine at `socket` (what `ganglion gpus` runs): `None` when no
/// NVIDIA GPU would be offered (nothing to check); an engine that does not answer within
/// `timeout` counts as a failed smoke ([`ganglion_dispatch::gpu::docker::Unusable::SmokeFailed`]).
pub async fn container_check(
    socket: &std::path::Path,
    timeout: std::time::Duration,
    inventory: &mut Inventory,
    image: &str,
) -> Option<GpuCheck> {
    let targets = smoke::nvidia_targets(&inventory.gpus);
    if targets.is_empty() {
        return None;
    }
    let engine =
        tokio::time::timeout(timeout, DockerEngine::connect(socket, timeout.as_secs())).await;
    let why = match engine {
        Ok(Ok(docker)) => return startup_check(&docker, inventory, image).await.1,
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("{} did not answer within {timeout:?}", socket.display()),
    };
    let smoke = ganglion_dispatch::gpu::docker::SmokeOutcome::NotRun { why };
    let from_info = NvidiaAccess::Missing {
        reason: ganglion_dispatch::gpu::docker::Unusable::SmokeFailed,
        missing: String::new(),
    };
    let request = ganglion_dispatch::gpu::docker::smoke_request(&from_info, &targets);
    let access = ganglion_dispatch::gpu::docker::confirm(&from_info, &request, &smoke);
    inventory.apply_container_access(&access);
    Some(GpuCheck {
        request,
        smoke,
        access,
    })
}

/// Why a pooled GPU cannot be given to containers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// NVIDIA GPUs are pooled but the engine has neither CDI devices nor the `nvidia` runtime.
    #[error("NVIDIA GPU {gpu} is pooled but containers cannot reach it: {missing}")]
    NoNvidiaRuntime {
        /// The GPU (name and index).
        gpu: String,
        /// What is missing, as the engine check says it.
        missing: String,
    },
    /// The engine lists CDI devices, none of them this GPU.
    #[error("NVIDIA GPU {gpu} is not among the engine's CDI devices {devices:?}")]
    NotInCdi {
        /// The GPU (name and index).
        gpu: String,
        /// The devices listed.
        devices: Vec<String>,
    },
    /// A detected GPU lacks the field its attachment needs (UUID, render node).
    #[error("GPU {gpu}: the driver reported no {field}")]
    Missing {
        /// The GPU (name and index).
        gpu: String,
        /// `UUID` or `render node`.
        field: &'static str,
    },
}

/// The attachment of each GPU in `pooled`, in order, given how the engine reaches NVIDIA GPUs.
///
/// # Errors
/// [`AttachError`] for the first GPU that cannot be attached: the provider should not offer
/// what it cannot run.
pub fn attachments(
    pooled: &[&Gpu],
    nvidia: &NvidiaAccess,
) -> Result<Vec<GpuAttachment>, AttachError> {
    pooled.iter().map(|g| attachment(g, nvidia)).collect()
}

fn attachment(g: &Gpu, nvidia: &NvidiaAccess) -> Result<GpuAttachment, AttachError> {
    let label = || format!("{} #{}", g.name, g.index);
    match g.source {
        Source::Declared => Ok(GpuAttachment::Declared {
            id: g
                .uuid
                .clone()
                .unwrap_or_else(|| format!("declared-{}", g.index)),
        }),
        Source::Sysfs => g
            .render_node
            .clone()
            .map(|render_node| GpuAttachment::Amd { render_node })
            .ok_or(AttachError::Missing {
                gpu: label(),
                field: "render node",
            }),
        Source::Nvml => {
            let uuid = g.uuid.clone().ok_or(AttachError::Missing {
                gpu: label(),
                field: "UUID",
            })?;
            match nvidia {
                NvidiaAccess::Runtime => Ok(GpuAttachment::NvidiaRuntime { uuid }),
                NvidiaAccess::Cdi { devices } => {
                    let by_uuid = format!("nvidia.com/gpu={uuid}");
                    let by_index = format!("nvidia.com/gpu={}", cdi_index_name(g));
                    [by_uuid, by_index]
                        .into_iter()
                        .find(|d| devices.contains(d))
                        .map(|device| GpuAttachment::NvidiaCdi { device })
                        .ok_or_else(|| AttachError::NotInCdi {
                            gpu: label(),
                            devices: devices.clone(),
                        })
                }
                NvidiaAccess::Missing { missing, .. } => Err(AttachError::NoNvidiaRuntime {
                    gpu: label(),
                    missing: missing.clone(),
                }),
            }
        }
    }
}

/// Benchmark score advertised when no GPU of the offer was measured on CUDA: declared GPUs
/// (no benchmark) and NVIDIA GPUs whose CUDA benchmark could not run (a neutral value).
pub const UNMEASURED_SCORE: u32 = 100;

/// Whether the onboarding benchmark should run for `pooled`: only NVIDIA GPUs found by NVML
/// can be measured (declared GPUs are never measured; AMD GPUs have no benchmark kernels).
pub fn wants_benchmark(pooled: &[&Gpu]) -> bool {
    pooled.iter().any(|g| g.source == Source::Nvml)
}

/// The score an offer of `pooled` advertises, given the onboarding benchmark's results
/// (`gpu::bench::measure_onboarding`): when NVML GPUs are pooled and CUDA devices were
/// measured, the lowest CUDA score (one score stands for every GPU of the offer, so the
/// slowest one sets it); otherwise [`UNMEASURED_SCORE`] — a CPU fallback's figures are never
/// advertised for a GPU.
pub fn offer_score(pooled: &[&Gpu], bench: &[ganglion_dispatch::gpu::bench::Measured]) -> u32 {
    use ganglion_dispatch::gpu::bench::Device;
    if !wants_benchmark(pooled) {
        return UNMEASURED_SCORE;
    }
    bench
        .iter()
        .filter(|m| matches!(m.device, Device::Cuda(_)))
        .map(|m| m.score)
        .min()
        .unwrap_or(UNMEASURED_SCORE)
}

/// Where the score [`offer_score`] gives comes from: the onboarding benchmark
/// ([`ganglion_dispatch::gpu::bench::BENCH_VERSION`]) when it measured NVML GPUs on CUDA,
/// else unmeasured (the neutral [`UNMEASURED_SCORE`]).
pub fn offer_compute(
    pooled: &[&Gpu],
    bench: &[ganglion_dispatch::gpu::bench::Measured],
) -> ganglion_market::snapshot::Compute {
    use ganglion_dispatch::gpu::bench::{BENCH_VERSION, Device};
    use ganglion_market::snapshot::Compute;
    if wants_benchmark(pooled) && bench.iter().any(|m| matches!(m.device, Device::Cuda(_))) {
        Compute::Measured {
            bench_version: BENCH_VERSION,
        }
    } else {
        Compute::Unmeasured
    }
}

/// The offer a provider advertises for `pooled` (see [`ProviderLimits::offer`]): `limits`'
/// grouping, prices and caps, the score and compute of the onboarding benchmark's results
/// `bench` ([`offer_score`], [`offer_compute`]), and the uplink fallback until the
/// throughput probes measure one. `ganglion node run` and `ganglion gpus --offer` both
/// advertise this.
///
/// [`ProviderLimits::offer`]: ganglion_market::limits::ProviderLimits::offer
pub fn benchmarked_offer(
    limits: &ganglion_market::limits::ProviderLimits,
    provider: ganglion_market::snapshot::ProviderId,
    bond_gpus: u32,
    direct_capable: bool,
    pooled: &[&Gpu],
    bench: &[ganglion_dispatch::gpu::bench::Measured],
) -> ganglion_market::snapshot::Offer {
    let mut offer = limits.offer(
        ganglion_market::limits::OfferTerms {
            provider,
            bond_gpus,
            score: offer_score(pooled, bench),
            uplink_mbps: super::node::UPLINK_MBPS,
            direct_capable,
        },
        pooled,
        &[],
    );
    offer.compute = offer_compute(pooled, bench);
    offer
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_market::spec::Vendor;

    fn gpu(source: Source, index: u32, uuid: Option<&str>, render: Option<&str>) -> Gpu {
        let vendor = match source {
            Source::Sysfs => Vendor::Amd,
            _ => Vendor::Nvidia,
        };
        let mut g = Gpu::bare(index, source, vendor, "g".into());
        g.uuid = uuid.map(str::to_string);
        g.vram_total_mib = 80 * 1024;
        g.render_node = render.map(str::to_string);
        g
    }

    #[test]
    fn each_source_gets_its_attachment() {
        let nv = gpu(Source::Nvml, 1, Some("GPU-aa"), None);
        let amd = gpu(Source::Sysfs, 0, None, Some("/dev/dri/renderD129"));
        let declared = gpu(Source::Declared, 2, None, None);
        let got = attachments(&[&nv, &amd, &declared], &NvidiaAccess::Runtime).expect("all");
        assert_eq!(
            got,
            [
                GpuAttachment::NvidiaRuntime {
                    uuid: "GPU-aa".into()
                },
                GpuAttachment::Amd {
                    render_node: "/dev/dri/renderD129".into()
                },
                GpuAttachment::Declared {
                    id: "declared-2".into()
                },
            ]
        );
    }

    #[test]
    fn cdi_names_the_uuid_when_listed_else_the_index_else_refuses() {
        let nv = gpu(Source::Nvml, 1, Some("GPU-aa"), None);
        let cdi = |devices: &[&str]| NvidiaAccess::Cdi {
            devices: devices.iter().map(|d| d.to_string()).collect(),
        };
        assert_eq!(
            attachments(&[&nv], &cdi(&["nvidia.com/gpu=1", "nvidia.com/gpu=GPU-aa"])),
            Ok(vec![GpuAttachment::NvidiaCdi {
                device: "nvidia.com/gpu=GPU-aa".into()
            }])
        );
        assert_eq!(
            attachments(&[&nv], &cdi(&["nvidia.com/gpu=0", "nvidia.com/gpu=1"])),
            Ok(vec![GpuAttachment::NvidiaCdi {
                device: "nvidia.com/gpu=1".into()
            }])
        );
        assert!(matches!(
            attachments(&[&nv], &cdi(&["nvidia.com/gpu=0"])),
            Err(AttachError::NotInCdi { .. })
        ));
    }

    /// A MIG device on a CDI host that lists devices by index: its own `<parent>:<MIG index>`
    /// name; where only the parent's index is listed, refused rather than given the whole card.
    #[test]
    fn cdi_names_a_mig_device_by_its_own_index_never_the_parents() {
        let mut slice = gpu(
            Source::Nvml,
            0,
            Some("MIG-5f16849a-8ae9-571a-bc2c-486916c4a324"),
            None,
        );
        slice.mig = Some(ganglion_dispatch::gpu::MigSlice {
            parent_uuid: Some("GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078".into()),
            parent_index: 0,
            slot: 2,
            profile: Some("1g.5gb".into()),
        });
        let cdi = |devices: &[&str]| NvidiaAccess::Cdi {
            devices: devices.iter().map(|d| d.to_string()).collect(),
        };
        assert_eq!(
            attachments(
                &[&slice],
                &cdi(&[
                    "nvidia.com/gpu=0",
                    "nvidia.com/gpu=0:0",
                    "nvidia.com/gpu=0:2"
                ])
            ),
            Ok(vec![GpuAttachment::NvidiaCdi {
                device: "nvidia.com/gpu=0:2".into()
            }])
        );
        assert!(matches!(
            attachments(&[&slice], &cdi(&["nvidia.com/gpu=0"])),
            Err(AttachError::NotInCdi { .. })
        ));
    }

    #[test]
    fn unreachable_or_incomplete_gpus_are_refused() {
        let nv = gpu(Source::Nvml, 0, Some("GPU-aa"), None);
        let missing = NvidiaAccess::Missing {
            reason: ganglion_dispatch::gpu::docker::Unusable::ToolkitMissing,
            missing: "no nvidia runtime".into(),
        };
        assert!(matches!(
            attachments(&[&nv], &missing),
            Err(AttachError::NoNvidiaRuntime { .. })
        ));
        let no_uuid = gpu(Source::Nvml, 0, None, None);
        assert!(matches!(
            attachments(&[&no_uuid], &NvidiaAccess::Runtime),
            Err(AttachError::Missing { field: "UUID", .. })
        ));
        let no_render = gpu(Source::Sysfs, 0, None, None);
        assert!(matches!(
            attachments(&[&no_render], &NvidiaAccess::Runtime),
            Err(AttachError::Missing {
                field: "render node",
                ..
            })
        ));
        // Declared GPUs need nothing from the engine.
        let declared = gpu(Source::Declared, 0, Some("d-0"), None);
        assert_eq!(
            attachments(&[&declared], &missing),
            Ok(vec![GpuAttachment::Declared { id: "d-0".into() }])
        );
    }

    #[test]
    fn offer_score_is_the_slowest_cuda_score_of_nvml_gpus_never_a_cpu_one() {
        use ganglion_dispatch::gpu::bench::{Device, Measured};
        let m = |device, score| Measured {
            device,
            fp32_tflops: 1.0,
            fp16_tflops: None,
            bf16_tflops: None,
            mem_gbps: 1.0,
            h2d_gbps: None,
            score,
        };
        let nv = gpu(Source::Nvml, 0, Some("GPU-1"), None);
        let declared = gpu(Source::Declared, 0, None, None);
        let cuda = [m(Device::Cuda(0), 1210), m(Device::Cuda(1), 1190)];
        assert_eq!(offer_score(&[&nv], &cuda), 1190);
        assert_eq!(offer_score(&[&nv], &[m(Device::Cpu, 2)]), UNMEASURED_SCORE);
        assert_eq!(offer_score(&[&nv], &[]), UNMEASURED_SCORE);
        assert_eq!(offer_score(&[&declared], &cuda), UNMEASURED_SCORE);
        assert!(wants_benchmark(&[&declared, &nv]) && !wants_benchmark(&[&declared]));
        // The score's source goes with it.
        use ganglion_market::snapshot::Compute;
        let measured = Compute::Measured {
            bench_version: ganglion_dispatch::gpu::bench::BENCH_VERSION,
        };
        assert_eq!(offer_compute(&[&nv], &cuda), measured);
        assert_eq!(
            offer_compute(&[&nv], &[m(Device::Cpu, 2)]),
            Compute::Unmeasured
        );
        assert_eq!(offer_compute(&[&nv], &[]), Compute::Unmeasured);
        assert_eq!(offer_compute(&[&declared], &cuda), Compute::Unmeasured);
    }
}
