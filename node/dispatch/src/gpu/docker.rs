//! Can containers on this node get its GPUs? A pure classifier over the Docker Engine's
//! `GET /info` JSON (what `docker info --format '{{json .}}'` prints) and over the engine's
//! answer to one smoke container ([`super::smoke`]).
//!
//! A missing GPU runtime makes `docker start` fail, not `docker create` (DESIGN §6), so a
//! provider decides at start-up, before its bond is posted, from `/info` ([`nvidia_access`])
//! plus one smoke container ([`confirm`]), and says which piece is missing ([`Unusable`]: the
//! cases of `shared/fixtures/field/docker-gpu/engine-states.json`).
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

/// Why NVIDIA GPUs are present but not usable in containers (`shared/fixtures/field/docker-gpu/`
/// hosts H1–H4). Each comes with its fix ([`Unusable::fix`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unusable {
    /// The NVIDIA Container Toolkit is missing: no `nvidia` runtime and no CDI (the engine
    /// answers `could not select device driver "" with capabilities: [[gpu]]`, or `"nvidia"`;
    /// hosts H1, H2).
    ToolkitMissing,
    /// CDI is disabled in the engine (Docker ≥ 25 with empty `CDISpecDirs`; a CDI request gets
    /// `could not select device driver "cdi" with capabilities: []`; host H3). Not an API-version
    /// problem.
    CdiDisabled,
    /// CDI is enabled but no NVIDIA CDI spec was generated (`DiscoveredDevices` without
    /// `nvidia.com/gpu`; a request gets `unresolvable CDI devices nvidia.com/gpu=…`; host H4).
    NoCdiSpec,
    /// CDI is enabled but the engine (API < 1.48) does not list CDI devices, and there is no
    /// `nvidia` runtime: nothing confirms an NVIDIA spec.
    CdiUnlisted,
    /// The start-up smoke container failed otherwise (its words are in the reason).
    SmokeFailed,
}

impl Unusable {
    /// The reason in words.
    pub fn summary(self) -> &'static str {
        match self {
            Self::ToolkitMissing => {
                "NVIDIA Container Toolkit missing (the engine has no `nvidia` runtime and no NVIDIA CDI devices)"
            }
            Self::CdiDisabled => {
                "CDI is disabled in the Docker Engine (no CDISpecDirs) and it has no `nvidia` runtime"
            }
            Self::NoCdiSpec => {
                "no NVIDIA CDI spec: CDI is enabled but the engine lists no nvidia.com/gpu device"
            }
            Self::CdiUnlisted => {
                "CDI is enabled but this engine (API < 1.48) does not list CDI devices, and it has no `nvidia` runtime"
            }
            Self::SmokeFailed => "the start-up GPU smoke container failed",
        }
    }

    /// What the operator runs to fix it.
    pub fn fix(self) -> &'static str {
        match self {
            Self::ToolkitMissing => {
                "install nvidia-container-toolkit, run `nvidia-ctk runtime configure --runtime=docker` \
                 and restart dockerd"
            }
            Self::CdiDisabled => {
                "enable CDI (`\"features\": {\"cdi\": true}` in /etc/docker/daemon.json; on by default \
                 from Docker 28), run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` and \
                 restart dockerd, or register the `nvidia` runtime (`nvidia-ctk runtime configure \
                 --runtime=docker`)"
            }
            Self::NoCdiSpec => {
                "run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (after each driver \
                 upgrade) and restart dockerd"
            }
            Self::CdiUnlisted => {
                "upgrade Docker to ≥ 28 (API 1.48, lists CDI devices) or register the `nvidia` \
                 runtime (`nvidia-ctk runtime configure --runtime=docker`)"
            }
            Self::SmokeFailed => {
                "run `docker run --rm --gpus all ubuntu nvidia-smi` to see the engine's error; \
                 `ganglion doctor` lists the GPU checks"
            }
        }
    }

    /// `summary — fix: fix`, plus the engine's own words when there are some.
    pub fn reason(self, engine_said: Option<&str>) -> String {
        match engine_said {
            Some(said) => format!("{} (engine: {said}); fix: {}", self.summary(), self.fix()),
            None => format!("{}; fix: {}", self.summary(), self.fix()),
        }
    }
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
    /// Neither: present but not usable in containers.
    Missing {
        /// Which piece is missing.
        reason: Unusable,
        /// The reason and its fix in words an operator can act on.
        missing: String,
    },
}

impl NvidiaAccess {
    fn missing(reason: Unusable, engine_said: Option<&str>) -> Self {
        Self::Missing {
            reason,
            missing: reason.reason(engine_said),
        }
    }
}

/// The engine's major version from `ServerVersion` (`26.0.0` → 26, `20.10.24+dfsg1` → 20).
fn major_version(info: &EngineInfo) -> Option<u32> {
    info.server_version
        .as_deref()?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// First Docker Engine release with CDI device requests (Docker 25.0 release notes).
pub const CDI_MIN_DOCKER: u32 = 25;

/// Whether the engine could take a CDI request if CDI were enabled: Docker ≥
/// [`CDI_MIN_DOCKER`]. An empty `CDISpecDirs` alone says nothing (host H1 has one).
fn cdi_capable(info: &EngineInfo) -> bool {
    major_version(info).is_some_and(|v| v >= CDI_MIN_DOCKER)
}

/// Judges from `/info` alone whether NVIDIA GPUs can reach containers, preferring CDI when it
/// lists GPUs. Rules (DESIGN §6; Docker Engine API `SystemInfo`; the field README's
/// docker-gpu hosts): `DiscoveredDevices` with `nvidia.com/gpu=…` → CDI; a `nvidia` runtime →
/// runtime; CDI enabled (non-empty `CDISpecDirs`) with devices listed but none NVIDIA → no CDI
/// spec; CDI enabled on an engine that cannot list → unlisted; a CDI-capable engine (Docker ≥ 25)
/// with CDI off → CDI disabled (never reported as an API-version problem); otherwise the toolkit
/// is missing. [`confirm`] then refines the verdict with the smoke container's outcome.
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
    let cdi_enabled = info.cdi_spec_dirs.as_ref().is_some_and(|d| !d.is_empty());
    let reason = match (cdi_enabled, &info.discovered_devices) {
        (true, Some(_)) => Unusable::NoCdiSpec,
        (true, None) => Unusable::CdiUnlisted,
        (false, _) if cdi_capable(info) => Unusable::CdiDisabled,
        (false, _) => Unusable::ToolkitMissing,
    };
    NvidiaAccess::missing(reason, None)
}

/// Which piece an engine error names, from the texts engines answer to a GPU device request
/// (moby `daemon/devices.go` and `daemon/cdi.go`, quoted in the field README's sources).
pub fn classify_engine_error(error: &str) -> Option<Unusable> {
    if error.contains("could not select device driver \"cdi\"") {
        Some(Unusable::CdiDisabled)
    } else if error.contains("unresolvable CDI devices") {
        Some(Unusable::NoCdiSpec)
    } else if error.contains("could not select device driver") {
        Some(Unusable::ToolkitMissing)
    } else {
        None
    }
}

/// What the start-up smoke container did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum SmokeOutcome {
    /// It started and exited 0: the engine gave it the GPUs.
    Passed,
    /// The engine refused to create or start it (its message).
    EngineError {
        /// The engine's message.
        message: String,
    },
    /// It ran and exited non-zero.
    Exited {
        /// The exit code.
        code: i64,
    },
    /// It could not be run at all (no smoke image, engine gone).
    NotRun {
        /// Why.
        why: String,
    },
}

/// The verdict from `/info` ([`nvidia_access`]) refined by the smoke container that used
/// `request` ([`smoke_request`]): a pass confirms the request's path; an engine error is
/// classified ([`classify_engine_error`]) and quoted; anything else is [`Unusable::SmokeFailed`].
pub fn confirm(
    from_info: &NvidiaAccess,
    request: &GpuRequest,
    smoke: &SmokeOutcome,
) -> NvidiaAccess {
    match smoke {
        SmokeOutcome::Passed => match from_info {
            NvidiaAccess::Missing { .. } if request.driver == "cdi" => NvidiaAccess::Cdi {
                devices: request.device_ids.clone(),
            },
            NvidiaAccess::Missing { .. } => NvidiaAccess::Runtime,
            ok => ok.clone(),
        },
        SmokeOutcome::EngineError { message } => {
            let reason = classify_engine_error(message).unwrap_or(Unusable::SmokeFailed);
            NvidiaAccess::missing(reason, Some(message))
        }
        SmokeOutcome::Exited { code } => NvidiaAccess::missing(
            Unusable::SmokeFailed,
            Some(&format!("the smoke container exited {code}")),
        ),
        SmokeOutcome::NotRun { why } => NvidiaAccess::missing(Unusable::SmokeFailed, Some(why)),
    }
}

/// A Docker `DeviceRequest` as the smoke container (and the executor) sends it: field names of
/// the Engine API (`Driver`, `DeviceIDs`, `Capabilities`); never `Count: -1` ("all GPUs").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuRequest {
    /// `Driver`: `cdi`, `nvidia`, or `""` (what `docker run --gpus` sends).
    pub driver: String,
    /// `DeviceIDs`: CDI names for `cdi`, GPU UUIDs otherwise.
    pub device_ids: Vec<String>,
    /// `Capabilities`: `[["gpu"]]` except for CDI.
    pub capabilities: Vec<Vec<String>>,
}

/// The name `nvidia-ctk cdi generate` gives `gpu` in the `nvidia.com/gpu` CDI kind under its
/// index strategy: `<index>` for a whole GPU, `<parent index>:<MIG index>` for a MIG device,
/// the MIG index being the one `nvmlDeviceGetMigDeviceHandleByIndex` answered for (source:
/// nvidia-container-toolkit `pkg/nvcdi`, `deviceNameIndex.GetMigDeviceName` = `%d:%d`, over
/// go-nvlib's `VisitMigDevices`, which skips NotFound indices without renumbering). A slice
/// never gets its parent's bare index: `nvidia.com/gpu=0` is the whole card, slices in use or not.
pub fn cdi_index_name(gpu: &super::Gpu) -> String {
    match &gpu.mig {
        Some(m) => format!("{}:{}", m.parent_index, m.slot),
        None => gpu.index.to_string(),
    }
}

/// The request the smoke container makes for the pooled NVIDIA GPUs `gpus` (UUID, CDI index
/// name from [`cdi_index_name`]):
/// CDI → driver `cdi` with each GPU's listed name (`nvidia.com/gpu=<UUID>`, else `=<index>`);
/// runtime → driver `nvidia` with the UUIDs; missing → what would be tried (a CDI request on a
/// CDI-capable engine, else driver `""`), so the engine's own refusal is quoted. Only the granted
/// GPUs are named: never `nvidia.com/gpu=all` nor `Count: -1` for a subset.
pub fn smoke_request(access: &NvidiaAccess, gpus: &[(String, String)]) -> GpuRequest {
    let gpu_caps = || vec![vec!["gpu".to_string()]];
    let uuids = || gpus.iter().map(|(u, _)| u.clone()).collect::<Vec<_>>();
    match access {
        NvidiaAccess::Cdi { devices } => GpuRequest {
            driver: "cdi".into(),
            device_ids: gpus
                .iter()
                .map(|(uuid, index)| {
                    let by_uuid = format!("nvidia.com/gpu={uuid}");
                    if devices.contains(&by_uuid) {
                        by_uuid
                    } else {
                        format!("nvidia.com/gpu={index}")
                    }
                })
                .collect(),
            capabilities: vec![],
        },
        NvidiaAccess::Runtime => GpuRequest {
            driver: "nvidia".into(),
            device_ids: uuids(),
            capabilities: gpu_caps(),
        },
        NvidiaAccess::Missing { reason, .. } => match reason {
            Unusable::CdiDisabled | Unusable::NoCdiSpec | Unusable::CdiUnlisted => GpuRequest {
                driver: "cdi".into(),
                device_ids: gpus
                    .iter()
                    .map(|(uuid, _)| format!("nvidia.com/gpu={uuid}"))
                    .collect(),
                capabilities: vec![],
            },
            Unusable::ToolkitMissing | Unusable::SmokeFailed => GpuRequest {
                driver: String::new(),
                device_ids: uuids(),
                capabilities: gpu_caps(),
            },
        },
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
            NvidiaAccess::Missing { reason, missing } => {
                assert_eq!(reason, Unusable::ToolkitMissing);
                assert!(missing.contains("no `nvidia` runtime"), "{missing}");
                assert!(
                    missing.contains("nvidia-ctk runtime configure"),
                    "{missing}"
                );
            }
            other => panic!("expected missing, got {other:?}"),
        }
    }

    fn field_hosts() -> serde_json::Value {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures/field/docker-gpu/engine-states.json");
        serde_json::from_str(&std::fs::read_to_string(p).expect("fixture")).expect("JSON")
    }

    /// H1–H4 of the field fixture: present but not usable, each with its named reason, from
    /// `/info` alone and from the engine's answer to the host's request; H3 never as an API
    /// version problem.
    #[test]
    fn field_hosts_h1_to_h4_are_not_usable_with_the_named_reason() {
        let v = field_hosts();
        let hosts = v["hosts"].as_array().expect("hosts");
        let want = [
            (
                "H1-no-toolkit",
                Unusable::ToolkitMissing,
                "Container Toolkit missing",
            ),
            (
                "H2-driver-named-nvidia",
                Unusable::ToolkitMissing,
                "Container Toolkit missing",
            ),
            ("H3-cdi-disabled", Unusable::CdiDisabled, "CDI is disabled"),
            (
                "H4-cdi-enabled-no-spec",
                Unusable::NoCdiSpec,
                "no NVIDIA CDI spec",
            ),
        ];
        assert_eq!(hosts.len(), want.len());
        for (h, (id, reason, words)) in hosts.iter().zip(want) {
            assert_eq!(h["id"], id);
            let i: EngineInfo = serde_json::from_value(h["info"].clone()).expect("info");
            let from_info = nvidia_access(&i);
            let NvidiaAccess::Missing { reason: r, missing } = &from_info else {
                panic!("{id}: expected not usable, got {from_info:?}");
            };
            assert_eq!(*r, reason, "{id} from /info");
            assert!(missing.contains(words), "{id}: {missing}");
            assert!(
                !missing.contains("1.48"),
                "{id} is not an API version problem: {missing}"
            );
            // The engine's error for the host's request, as the smoke container would get it.
            let said = format!(
                "Error response from daemon: {}",
                h["engine_error_contains"].as_str().expect("error text")
            );
            assert_eq!(classify_engine_error(&said), Some(reason), "{id}: {said}");
            let req = smoke_request(&from_info, &[("GPU-aa".into(), "0".into())]);
            let confirmed = confirm(
                &from_info,
                &req,
                &SmokeOutcome::EngineError {
                    message: said.clone(),
                },
            );
            let NvidiaAccess::Missing { reason: r, missing } = confirmed else {
                panic!("{id}: the smoke error keeps it not usable");
            };
            assert_eq!(r, reason, "{id} after the smoke");
            assert!(
                missing.contains(&said) && missing.contains("fix: "),
                "{missing}"
            );
        }
        // The smoke on H3 asks by CDI name (a CDI-capable engine), on H1 the classic way.
        let h3: EngineInfo = serde_json::from_value(hosts[2]["info"].clone()).expect("info");
        assert_eq!(
            smoke_request(&nvidia_access(&h3), &[("GPU-aa".into(), "0".into())]).driver,
            "cdi"
        );
        let h1: EngineInfo = serde_json::from_value(hosts[0]["info"].clone()).expect("info");
        assert_eq!(
            smoke_request(&nvidia_access(&h1), &[("GPU-aa".into(), "0".into())]).driver,
            ""
        );
    }

    /// G1 (CDI) and G2 (classic runtime): requests name exactly the granted GPUs.
    #[test]
    fn field_good_hosts_request_exactly_the_granted_gpus() {
        let v = field_hosts();
        let good = v["good_host_examples"].as_array().expect("good hosts");
        let g1: EngineInfo = serde_json::from_value(good[0]["info"].clone()).expect("G1");
        let g2: EngineInfo = serde_json::from_value(good[1]["info"].clone()).expect("G2");
        let granted = [(
            "GPU-8d2c0000-0000-0000-0000-000000000000".to_string(),
            "0".to_string(),
        )];
        let r1 = smoke_request(&nvidia_access(&g1), &granted);
        assert_eq!(r1.driver, good[0]["request"]["Driver"]);
        assert_eq!(
            serde_json::json!(r1.device_ids),
            good[0]["request"]["DeviceIDs"],
            "the granted name, never nvidia.com/gpu=all"
        );
        assert!(r1.capabilities.is_empty());
        let r2 = smoke_request(&nvidia_access(&g2), &granted);
        assert_eq!(r2.driver, good[1]["request"]["Driver"]);
        assert_eq!(r2.device_ids, [granted[0].0.clone()], "the granted UUIDs");
        assert_eq!(
            serde_json::json!(r2.capabilities),
            good[1]["request"]["Capabilities"]
        );
        // A subset of a two-GPU CDI host names only the one granted.
        let two = info(
            r#"{"CDISpecDirs":["/etc/cdi"],"DiscoveredDevices":[{"Source":"cdi","ID":"nvidia.com/gpu=0"},{"Source":"cdi","ID":"nvidia.com/gpu=1"},{"Source":"cdi","ID":"nvidia.com/gpu=all"}]}"#,
        );
        let r = smoke_request(&nvidia_access(&two), &[("GPU-bb".into(), "1".into())]);
        assert_eq!(r.device_ids, ["nvidia.com/gpu=1"]);
        // A MIG device on a CDI host listed by index only: its own `<parent>:<MIG index>`,
        // never the parent's `nvidia.com/gpu=0` (the whole card).
        let mig = info(
            r#"{"CDISpecDirs":["/etc/cdi"],"DiscoveredDevices":[{"Source":"cdi","ID":"nvidia.com/gpu=0"},{"Source":"cdi","ID":"nvidia.com/gpu=0:1"},{"Source":"cdi","ID":"nvidia.com/gpu=all"}]}"#,
        );
        let mut slice = super::super::Gpu::bare(
            0,
            super::super::Source::Nvml,
            ganglion_market::spec::Vendor::Nvidia,
            "NVIDIA A100-PCIE-40GB MIG 2g.10gb".into(),
        );
        slice.uuid = Some("MIG-9d822d55-dc61-5acb-8c24-544828b47b03".into());
        slice.mig = Some(super::super::MigSlice {
            parent_uuid: Some("GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078".into()),
            parent_index: 0,
            slot: 1,
            profile: Some("2g.10gb".into()),
        });
        let targets = crate::gpu::smoke::nvidia_targets(std::slice::from_ref(&slice));
        assert_eq!(targets[0].1, "0:1");
        let r = smoke_request(&nvidia_access(&mig), &targets);
        assert_eq!(r.device_ids, ["nvidia.com/gpu=0:1"]);
        // A passing smoke confirms the path.
        assert_eq!(
            confirm(&NvidiaAccess::Runtime, &r2, &SmokeOutcome::Passed),
            NvidiaAccess::Runtime
        );
        assert!(matches!(
            confirm(
                &NvidiaAccess::Runtime,
                &r2,
                &SmokeOutcome::Exited { code: 1 }
            ),
            NvidiaAccess::Missing {
                reason: Unusable::SmokeFailed,
                ..
            }
        ));
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
            NvidiaAccess::Missing { reason, missing } => {
                assert_eq!(reason, Unusable::NoCdiSpec);
                assert!(missing.contains("nvidia-ctk cdi generate"), "{missing}")
            }
            other => panic!("expected missing, got {other:?}"),
        }
    }
}
