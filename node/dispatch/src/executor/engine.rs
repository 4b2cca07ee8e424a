//! The Docker Engine connection: connect over the unix socket, negotiate the API version (Debian
//! bookworm's engine speaks 1.41, bollard 0.21 defaults higher), and probe runtimes and CDI
//! devices so a missing GPU runtime is reported before any container starts (DESIGN §6).

use std::path::{Path, PathBuf};

use bollard::{API_DEFAULT_VERSION, Docker};

use super::ExecError;
use super::plan::{GpuAttachment, JobPlan};
use crate::gpu::docker::{EngineInfo, NvidiaAccess, nvidia_access};

/// The default engine socket.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// A connected engine and what it can do.
#[derive(Clone)]
pub struct DockerEngine {
    /// The client, at the negotiated API version.
    pub docker: Docker,
    /// The socket it talks to.
    pub socket: PathBuf,
    /// `ServerVersion`, e.g. `20.10.24+dfsg1`.
    pub server_version: String,
    /// The negotiated API version, e.g. `1.41`.
    pub api_version: String,
    /// Runtime names (`runc`, `nvidia`…).
    pub runtimes: Vec<String>,
    /// How NVIDIA GPUs can reach containers here.
    pub nvidia: NvidiaAccess,
}

impl std::fmt::Debug for DockerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerEngine")
            .field("socket", &self.socket)
            .field("server_version", &self.server_version)
            .field("api_version", &self.api_version)
            .field("runtimes", &self.runtimes)
            .field("nvidia", &self.nvidia)
            .finish()
    }
}

impl DockerEngine {
    /// Connects to the engine at `socket`, negotiates the API version and probes `/info`.
    /// `timeout_s` bounds every request (streams such as logs and wait are not bounded by it;
    /// the executor bounds those itself).
    ///
    /// # Errors
    /// [`ExecError::NoEngine`] when the socket is missing or nothing answers.
    pub async fn connect(socket: &Path, timeout_s: u64) -> Result<Self, ExecError> {
        let no_engine = |detail: String| ExecError::NoEngine {
            socket: socket.display().to_string(),
            detail,
        };
        let path = socket
            .to_str()
            .ok_or_else(|| no_engine("socket path is not UTF-8".into()))?;
        let docker = Docker::connect_with_unix(path, timeout_s, API_DEFAULT_VERSION)
            .map_err(|e| no_engine(e.to_string()))?
            .negotiate_version()
            .await
            .map_err(|e| no_engine(e.to_string()))?;
        let version = docker
            .version()
            .await
            .map_err(|e| no_engine(e.to_string()))?;
        let info = docker.info().await.map_err(|e| no_engine(e.to_string()))?;
        // Judge with the same rules as `ganglion gpu` (gpu::docker), from the same JSON.
        let info: EngineInfo = serde_json::to_value(&info)
            .and_then(serde_json::from_value)
            .unwrap_or_default();
        let mut runtimes: Vec<String> = info.runtimes.keys().cloned().collect();
        runtimes.sort();
        Ok(Self {
            api_version: docker.client_version().to_string(),
            server_version: version.version.unwrap_or_default(),
            nvidia: nvidia_access(&info),
            runtimes,
            socket: socket.to_path_buf(),
            docker,
        })
    }

    /// Checks that every GPU the plan attaches here can reach a container.
    ///
    /// # Errors
    /// [`ExecError::NoGpuRuntime`] naming the missing piece (no `nvidia` runtime, CDI device not
    /// listed, AMD `/dev/kfd` absent).
    pub fn check_gpu_access(&self, plan: &JobPlan) -> Result<(), ExecError> {
        let gpus = plan
            .local
            .iter()
            .filter_map(|r| plan.slot(*r))
            .flat_map(|s| s.gpus.iter());
        for gpu in gpus {
            match gpu {
                GpuAttachment::NvidiaRuntime { uuid } => {
                    if !self.runtimes.iter().any(|r| r == "nvidia") {
                        let why = match &self.nvidia {
                            NvidiaAccess::Missing { missing, .. } => missing.clone(),
                            _ => "the engine has no `nvidia` runtime (use CDI instead)".into(),
                        };
                        return Err(ExecError::NoGpuRuntime(format!("GPU {uuid}: {why}")));
                    }
                }
                GpuAttachment::NvidiaCdi { device } => {
                    let listed = matches!(&self.nvidia, NvidiaAccess::Cdi { devices } if devices.contains(device));
                    if !listed {
                        let why = match &self.nvidia {
                            NvidiaAccess::Missing { missing, .. } => missing.clone(),
                            _ => "the engine does not list it among its CDI devices".into(),
                        };
                        return Err(ExecError::NoGpuRuntime(format!(
                            "CDI device {device}: {why}"
                        )));
                    }
                }
                GpuAttachment::Amd { render_node } => {
                    for node in ["/dev/kfd", render_node.as_str()] {
                        if !Path::new(node).exists() {
                            return Err(ExecError::NoGpuRuntime(format!(
                                "AMD GPU {render_node}: {node} does not exist (amdgpu driver with KFD not loaded)"
                            )));
                        }
                    }
                }
                GpuAttachment::Declared { .. } => {}
            }
        }
        Ok(())
    }
}
