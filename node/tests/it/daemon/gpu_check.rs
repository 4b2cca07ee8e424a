//! The provider's start-up GPU check against this machine's real Docker Engine: one smoke
//! container carrying an NVIDIA device request. This machine has no NVIDIA GPU and no NVIDIA
//! Container Toolkit, so the engine refuses the request at start, and the check must say the
//! GPUs are present but not usable in containers, with the reason and its fix. (On a GPU host
//! `scripts/gpu-check` runs the passing case.)

use std::path::Path;
use std::process::Command;

use ganglion_dispatch::executor::engine::{DEFAULT_SOCKET, DockerEngine};
use ganglion_dispatch::gpu::docker::{NvidiaAccess, SmokeOutcome, Unusable};
use ganglion_dispatch::gpu::{self, Gpu, Inventory, NotOffered, Source, smoke};
use ganglion_market::spec::Vendor;

/// The two tests share this process id, which the leftover check filters on: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A UUID no GPU has: what the request names (never "all GPUs").
const UUID: &str = "GPU-00000000-0000-4000-8000-000000000000";

async fn engine() -> DockerEngine {
    DockerEngine::connect(Path::new(DEFAULT_SOCKET), 120)
        .await
        .unwrap_or_else(|e| {
            panic!("needs a running Docker Engine ({e}): bash scripts/ensure-docker.sh")
        })
}

fn probe_image() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-probe-image.sh");
    let out = Command::new("bash").arg(script).output().expect("runs");
    assert!(
        out.status.success(),
        "build-probe-image.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn has_nvidia_toolkit(e: &DockerEngine) -> bool {
    !matches!(e.nvidia, NvidiaAccess::Missing { .. }) || Path::new("/dev/nvidiactl").exists()
}

async fn leftover_smoke_containers(e: &DockerEngine) -> usize {
    let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&std::collections::HashMap::from([(
            "label",
            vec![smoke::LABEL],
        )]))
        .build();
    e.docker
        .list_containers(Some(options))
        .await
        .expect("list containers")
        .iter()
        .filter(|c| {
            c.names
                .iter()
                .flatten()
                .any(|n| n.contains(&format!("-{}-", std::process::id())))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_container_on_an_engine_without_gpu_support_reports_not_usable_with_the_reason() {
    let _one = ONE_AT_A_TIME.lock().await;
    let e = engine().await;
    if has_nvidia_toolkit(&e) {
        eprintln!("SKIPPED: this engine can give containers NVIDIA GPUs");
        return;
    }
    let image = probe_image();
    let targets = [(UUID.to_string(), "0".to_string())];
    let check = smoke::check(&e.docker, &e.nvidia, &image, &targets).await;
    assert_eq!(check.request.device_ids, [UUID], "only the granted GPU");
    let SmokeOutcome::EngineError { message } = &check.smoke else {
        panic!(
            "the engine must refuse the device request: {:?}",
            check.smoke
        );
    };
    assert!(
        message.contains("could not select device driver"),
        "the engine's words: {message}"
    );
    let NvidiaAccess::Missing { reason, missing } = &check.access else {
        panic!("not usable expected: {:?}", check.access);
    };
    let NvidiaAccess::Missing {
        reason: from_info, ..
    } = &e.nvidia
    else {
        unreachable!("checked above");
    };
    assert_eq!(reason, from_info, "the smoke confirms /info's reason");
    assert!(
        matches!(reason, Unusable::ToolkitMissing | Unusable::CdiDisabled),
        "{reason:?}"
    );
    assert!(
        missing.contains(message.as_str()) && missing.contains("fix: "),
        "{missing}"
    );
    assert_eq!(
        leftover_smoke_containers(&e).await,
        0,
        "the smoke container is removed"
    );
}

/// The daemon's start-up step on the same engine: an NVML GPU (a test double of what NVML
/// would have listed: there is no GPU here) is marked not offered with the reason, so a
/// provider has nothing to bond for; declared GPUs are untouched and no smoke runs for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_check_marks_nvidia_gpus_not_usable_and_leaves_declared_ones() {
    let _one = ONE_AT_A_TIME.lock().await;
    let e = engine().await;
    if has_nvidia_toolkit(&e) {
        eprintln!("SKIPPED: this engine can give containers NVIDIA GPUs");
        return;
    }
    let image = probe_image();
    let mut nv = Gpu::bare(0, Source::Nvml, Vendor::Nvidia, "NVIDIA L4".into());
    nv.uuid = Some(UUID.into());
    nv.vram_total_mib = 23034;
    let declared = gpu::declared::to_gpus(&[gpu::declared::DeclaredGpu {
        name: "NVIDIA A100-SXM4-80GB".into(),
        vendor: Vendor::Nvidia,
        vram_gib: 80,
        compute_capability: None,
        gfx_target: None,
        count: 1,
    }]);
    let mut inv = Inventory {
        gpus: std::iter::once(nv).chain(declared).collect(),
        notes: vec![],
    };
    let (access, check) = ganglion_node::daemon::gpus::startup_check(&e, &mut inv, &image).await;
    assert!(check.is_some(), "a smoke container ran");
    assert!(matches!(access, NvidiaAccess::Missing { .. }), "{access:?}");
    assert!(
        matches!(&inv.gpus[0].not_offered, Some(NotOffered::NotUsableInContainers { reason }) if reason.contains("fix: ")),
        "{:?}",
        inv.gpus[0].not_offered
    );
    let offered = ganglion_node::config::offerable_on(&inv, ganglion_node::config::Network::Devnet)
        .expect("devnet");
    assert_eq!(offered.len(), 1);
    assert!(offered[0].is_declared());
    let report = ganglion_node::rpc::gpus::to_rpc(&inv, check.as_ref());
    let c = report.containers.expect("checked");
    assert!(
        !c.usable && c.reason.is_some() && c.detail.is_some(),
        "{c:?}"
    );
    // Only declared GPUs: nothing to smoke.
    let mut only_declared = Inventory {
        gpus: inv.gpus[1..].to_vec(),
        notes: vec![],
    };
    let (_, none) =
        ganglion_node::daemon::gpus::startup_check(&e, &mut only_declared, &image).await;
    assert!(none.is_none());
}
