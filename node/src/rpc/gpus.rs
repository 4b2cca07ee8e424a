//! The GPU report of `node_gpus` (JSON-RPC) from the inventory and the start-up GPU check.

use ganglion_rpc::types::{ContainerGpus, GpuEntry, GpuReport};

use ganglion_dispatch::gpu::Inventory;
use ganglion_dispatch::gpu::docker::NvidiaAccess;
use ganglion_dispatch::gpu::smoke::GpuCheck;

/// The RPC form of `inv` and, when it ran, the container check `check`.
pub fn to_rpc(inv: &Inventory, check: Option<&GpuCheck>) -> GpuReport {
    GpuReport {
        gpus: inv
            .gpus
            .iter()
            .map(|g| GpuEntry {
                index: g.index,
                source: named(&g.source),
                vendor: named(&g.vendor),
                name: g.name.clone(),
                uuid: g.uuid.clone(),
                vram_total_mib: g.vram_total_mib,
                mig_parent_uuid: g.mig.as_ref().and_then(|m| m.parent_uuid.clone()),
                shared_memory: g.shared_memory,
                offered: g.not_offered.is_none(),
                not_offered: g.not_offered.as_ref().map(ToString::to_string),
            })
            .collect(),
        notes: inv.notes.clone(),
        containers: check.map(|c| containers(&c.access)),
    }
}

/// The RPC form of a container verdict.
pub fn containers(access: &NvidiaAccess) -> ContainerGpus {
    match access {
        NvidiaAccess::Cdi { .. } => ContainerGpus {
            usable: true,
            driver: Some("cdi".into()),
            reason: None,
            detail: None,
        },
        NvidiaAccess::Runtime => ContainerGpus {
            usable: true,
            driver: Some("nvidia".into()),
            reason: None,
            detail: None,
        },
        NvidiaAccess::Missing { reason, missing } => ContainerGpus {
            usable: false,
            driver: None,
            reason: Some(named(reason)),
            detail: Some(missing.clone()),
        },
    }
}

/// The serde name of a unit enum variant (`nvml`, `toolkit_missing`).
fn named<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_dispatch::gpu::docker::{GpuRequest, SmokeOutcome, Unusable};
    use ganglion_dispatch::gpu::{Gpu, NotOffered, Source};
    use ganglion_market::spec::Vendor;

    #[test]
    fn the_rpc_report_carries_the_not_offered_reasons_and_the_container_verdict() {
        let mut a = Gpu::bare(0, Source::Nvml, Vendor::Nvidia, "NVIDIA L4".into());
        a.uuid = Some("GPU-aa".into());
        let reason = Unusable::ToolkitMissing.reason(Some("could not select device driver \"\""));
        a.not_offered = Some(NotOffered::NotUsableInContainers {
            reason: reason.clone(),
        });
        let inv = Inventory {
            gpus: vec![a],
            notes: vec!["NVML: note".into()],
        };
        let check = GpuCheck {
            request: GpuRequest {
                driver: String::new(),
                device_ids: vec!["GPU-aa".into()],
                capabilities: vec![vec!["gpu".into()]],
            },
            smoke: SmokeOutcome::EngineError {
                message: "could not select device driver \"\"".into(),
            },
            access: NvidiaAccess::Missing {
                reason: Unusable::ToolkitMissing,
                missing: reason.clone(),
            },
        };
        let r = to_rpc(&inv, Some(&check));
        assert_eq!(r.gpus.len(), 1);
        assert_eq!(
            (r.gpus[0].source.as_str(), r.gpus[0].vendor.as_str()),
            ("nvml", "nvidia")
        );
        assert!(!r.gpus[0].offered);
        assert_eq!(
            r.gpus[0].not_offered.as_deref(),
            Some(format!("present but not usable in containers: {reason}").as_str())
        );
        let c = r.containers.expect("checked");
        assert!(!c.usable);
        assert_eq!(c.reason.as_deref(), Some("toolkit_missing"));
        assert_eq!(c.detail.as_deref(), Some(reason.as_str()));
        assert_eq!(to_rpc(&inv, None).containers, None);
        assert_eq!(
            containers(&NvidiaAccess::Runtime).driver.as_deref(),
            Some("nvidia")
        );
    }
}
