//! Shared set-up: the real Docker Engine (required: a missing engine fails the test loudly),
//! the FROM-scratch probe image and the PyTorch CPU image (built by their scripts when absent,
//! cached by tag), executors over a sled blockstore in a temp dir.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use ganglion_dispatch::executor::docker::{DockerExecutor, ExecutorConfig};
use ganglion_dispatch::executor::engine::{DEFAULT_SOCKET, DockerEngine};
use ganglion_dispatch::executor::plan::RunId;
use ganglion_storage::blockstore::SledBlockstore;
use ganglion_storage::pin::Embedded;

pub(crate) type Exec = DockerExecutor<SledBlockstore>;

/// The engine socket: `GANGLION_DOCKER_SOCKET` or `/var/run/docker.sock`.
pub(crate) fn socket() -> PathBuf {
    std::env::var_os("GANGLION_DOCKER_SOCKET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// Connects to the engine or panics with what to do: these tests need Docker (CI starts it
/// with scripts/ensure-docker.sh); they never skip silently.
pub(crate) async fn engine() -> DockerEngine {
    match DockerEngine::connect(&socket(), 120).await {
        Ok(e) => e,
        Err(e) => panic!(
            "executor tests need a running Docker Engine: {e}\n\
             start one with `bash scripts/ensure-docker.sh` (CI does this in .ci/run)"
        ),
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run_script(script: &str) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts").join(script))
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{script}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The probe image's tag (built from scripts/images/probe/probe.c when absent).
pub(crate) fn probe_image() -> String {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        run_script("build-probe-image.sh")
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    })
    .clone()
}

/// The PyTorch CPU image (built by scripts/build-torch-image.sh when absent: ~3 minutes once).
pub(crate) fn torch_image() -> String {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        run_script("build-torch-image.sh")
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    })
    .clone()
}

/// A fresh job id (unique across concurrent test processes).
pub(crate) fn job_id(prefix: &str) -> RunId {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    RunId::new(format!("{prefix}-{}-{nanos:x}", std::process::id())).expect("valid job id")
}

/// A node's state: work dir (job table, job dirs) and blockstore, kept across executor
/// restarts.
pub(crate) struct Node {
    pub dir: tempfile::TempDir,
}

impl Node {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("ganglion-exec-")
                .tempdir_in("/var/tmp")
                .expect("temp dir"),
        }
    }

    pub(crate) fn pinner(&self) -> Embedded<SledBlockstore> {
        pinner_at(self.dir.path())
    }

    pub(crate) fn config(&self) -> ExecutorConfig {
        config_at(self.dir.path())
    }

    /// An executor on the default engine.
    pub(crate) async fn executor(&self, pinner: Embedded<SledBlockstore>) -> Exec {
        DockerExecutor::new(engine().await, pinner, self.config()).expect("executor")
    }
}

/// The blockstore of the node whose state lives in `dir`.
pub(crate) fn pinner_at(dir: &Path) -> Embedded<SledBlockstore> {
    let store = SledBlockstore::open(dir.join("blocks")).expect("blockstore");
    Embedded::new(Arc::new(store))
}

/// The executor config of the node whose state lives in `dir`.
pub(crate) fn config_at(dir: &Path) -> ExecutorConfig {
    ExecutorConfig::new(dir.join("work"))
}

pub(crate) use ganglion_dispatch::test_utils::plan;

/// Ids of containers labelled with `job` (any state), straight from the engine.
pub(crate) async fn leftovers(exec: &Exec, job: &RunId) -> Vec<String> {
    exec.job_containers(job).await.expect("list containers")
}

/// Whether the job network still exists.
pub(crate) async fn network_exists(exec: &Exec, job: &RunId) -> bool {
    exec.engine()
        .docker
        .inspect_network(
            &ganglion_dispatch::executor::network::DockerBridge::network_name(job),
            None::<bollard::query_parameters::InspectNetworkOptions>,
        )
        .await
        .is_ok()
}

/// Asserts nothing of `job` is left: containers, network, per-rank dirs.
pub(crate) async fn assert_no_leftovers(exec: &Exec, job: &RunId) {
    assert!(leftovers(exec, job).await.is_empty(), "containers left");
    assert!(!network_exists(exec, job).await, "network left");
    let root = exec.dirs(job).root().to_path_buf();
    if root.exists() {
        for entry in std::fs::read_dir(&root).expect("job dir") {
            let name = entry.expect("entry").file_name();
            assert_eq!(
                name,
                "artifacts",
                "only artifacts stay in {}",
                root.display()
            );
        }
    }
}

/// The log text of `rank`.
pub(crate) fn log(exec: &Exec, job: &RunId, rank: u32) -> String {
    std::fs::read_to_string(exec.dirs(job).log(rank)).unwrap_or_default()
}
