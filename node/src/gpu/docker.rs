//! Can containers on this node get its GPUs? A pure probe over the Docker Engine's `GET /info`
//! JSON (what `docker info --format '{{json .}}'` prints).
//!
//! A missing GPU runtime makes `docker start` fail, not `docker create` (DESIGN §6), so the node
//! checks up front and says which piece is missing. Fetching `/info` (bollard,
//! `negotiate_version()`) belongs to the dispatch issue; this module only judges the answer.
//!
//! NVIDIA GPUs reach a container in one of two ways:
//! - the `nvidia` runtime (`Runtimes.nvidia`, registered by `nvidia-ctk runtime configure`),
//!   used with `device_requests` of driver `nvidia`;
//! - CDI: the engine lists `DiscoveredDevices` of kind `nvidia.com/gpu` (Engine API ≥ 1.48,
//!   spec files under `CDISpecDirs`, written by `nvidia-ctk cdi generate`), used with driver `cdi`.
//!
//! AMD GPUs need no runtime: the node passes `/dev/kfd` and the render nodes as devices.
//! Fields: Docker Engine API reference, `SystemInfo` (`Runtimes`, `CDISpecDirs`,
//! `DiscoveredDevices`).

use serde::{Deserialize, Serialize};

/// The parts of `GET /info` the probe reads; everything else is ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EngineInfo {
    /// `Runtimes`: name → runtime (only names matter here).
    #[serde(default)]
    pub runtimes: std::collections::BTreeMap<String, serde_json::Value>,
    /// `CDISpecDirs`: empty or absent when CDI is disabled.
    #[serde(default, rename = "CDISpecDirs")]
    pub cdi_spec_dirs: Option<Vec<String>>,
    /// `DiscoveredDevices` (API ≥ 1.48): absent on older engines.
    #[serde(default)]
    pub discovered_devices: Option<Vec<DiscoveredDevice>>,
    /// `ServerVersion`.
    #[serde(default)]
    pub server_version: Option<String>,
}

/// One `DiscoveredDevices` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DiscoveredDevice {
    /// `cdi` for CDI devices.
    pub source: String,
    /// Fully qualified device name, e.g. `nvidia.com/gpu=0`.
    #[serde(rename = "ID")]
    pub id: String,
}

/// How NVIDIA GPUs can be given to containers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "path")]
pub enum NvidiaAccess {
    /// `device_requests` with driver `cdi` and these device names.
    Cdi {
        /// e.g. `nvidia.com/gpu=0`, `nvidia.com/gpu=GPU-…`.
        devices: Vec<String>,
    },
    /// `device_requests` with driver `nvidia` through the `nvidia` runtime.
    Runtime,
    /// Neither: the missing piece, in words an operator can act on.
    Missing {
        /// What is missing and how to add it.
        missing: String,
    },
}

/// Judges whether NVIDIA GPUs can reach containers, preferring CDI when it lists GPUs.
pub fn nvidia_access(info: &EngineInfo) -> NvidiaAccess {
    let devices: Vec<String> = info
        .discovered_devices
        .iter()
        .flatten()
        .filter(|d| d.source == "cdi" && d.id.starts_with("nvidia.com/gpu="))
        .map(|d| d.id.clone())
        .collect();
    if !devices.is_empty() {
        return NvidiaAccess::Cdi { devices };
    }
    if info.runtimes.contains_key("nvidia") {
        return NvidiaAccess::Runtime;
    }
    let cdi = match (&info.discovered_devices, &info.cdi_spec_dirs) {
        (None, _) => "this engine does not list CDI devices (Engine API < 1.48)".to_string(),
        (Some(_), None) => "CDI is disabled in the engine".to_string(),
        (Some(_), Some(dirs)) if dirs.is_empty() => {
            "CDI is disabled in the engine (no CDISpecDirs)".to_string()
        }
        (Some(_), Some(dirs)) => format!(
            "no nvidia.com/gpu CDI spec in {} (run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)",
            dirs.join(", ")
        ),
    };
    NvidiaAccess::Missing {
        missing: format!(
            "the engine has no `nvidia` runtime (install nvidia-container-toolkit and run \
             `nvidia-ctk runtime configure --runtime=docker`, then restart dockerd), and {cdi}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(json: &str) -> EngineInfo {
        serde_json::from_str(json).expect("sample parses")
    }

    #[test]
    fn plain_debian_engine_says_what_is_missing() {
        // Trimmed from Debian bookworm's docker.io 20.10 (API 1.41): runc only, no CDI fields.
        let i = info(
            r#"{"ServerVersion":"20.10.24+dfsg1","Runtimes":{"io.containerd.runc.v2":{"path":"runc"},"runc":{"path":"runc"}},"DefaultRuntime":"runc"}"#,
        );
        match nvidia_access(&i) {
            NvidiaAccess::Missing { missing } => {
                assert!(missing.contains("no `nvidia` runtime"), "{missing}");
                assert!(missing.contains("API < 1.48"), "{missing}");
            }
            other => panic!("expected missing, got {other:?}"),
        }
    }

    #[test]
    fn nvidia_runtime_found() {
        let i = info(
            r#"{"Runtimes":{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}},"CDISpecDirs":[]}"#,
        );
        assert_eq!(nvidia_access(&i), NvidiaAccess::Runtime);
    }

    #[test]
    fn cdi_devices_preferred() {
        let i = info(
            r#"{"Runtimes":{"nvidia":{"path":"nvidia-container-runtime"}},"CDISpecDirs":["/etc/cdi","/var/run/cdi"],
            "DiscoveredDevices":[{"Source":"cdi","ID":"nvidia.com/gpu=0"},{"Source":"cdi","ID":"nvidia.com/gpu=all"},{"Source":"cdi","ID":"amd.com/gpu=0"}]}"#,
        );
        assert_eq!(
            nvidia_access(&i),
            NvidiaAccess::Cdi {
                devices: vec!["nvidia.com/gpu=0".into(), "nvidia.com/gpu=all".into()]
            }
        );
    }

    #[test]
    fn cdi_enabled_without_nvidia_spec() {
        let i = info(
            r#"{"Runtimes":{"runc":{"path":"runc"}},"CDISpecDirs":["/etc/cdi","/var/run/cdi"],"DiscoveredDevices":[]}"#,
        );
        match nvidia_access(&i) {
            NvidiaAccess::Missing { missing } => {
                assert!(missing.contains("nvidia-ctk cdi generate"), "{missing}")
            }
            other => panic!("expected missing, got {other:?}"),
        }
    }
}
