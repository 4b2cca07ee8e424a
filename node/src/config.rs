//! Sections of the node's configuration file (TOML) read by more than one part of the node:
//! the network and `[gpus]`; [`crate::settings::Settings`] is the root that holds them with
//! every other section (each defined by the module that reads it, STYLE §3).
//!
//! ```toml
//! network = "devnet"            # devnet | preprod | mainnet
//!
//! [[gpus.declared]]             # devnet/tests only: see ganglion_market::declared
//! name = "NVIDIA A100-SXM4-80GB"
//! vendor = "nvidia"
//! vram_gib = 80
//! compute_capability = "8.0"
//! count = 2
//!
//! [provider]                    # optional: this node offers GPUs (ganglion_market::limits)
//! price_ntx_per_gpu_hour = 1500000
//! max_concurrent_jobs = 2
//!
//! [overlay]                     # optional: job networks (ganglion_dispatch::overlay::config, defaults shown)
//! pool = "100.96.0.0/12"
//! job_prefix = 24
//! listen_port = 51820
//! mtu = 1420                    # bytes
//! keepalive_s = 25              # seconds, 0 = off
//! relay_fallback_s = 10         # seconds
//! link_timeout_s = 60           # seconds for a job's links to work before its ranks start
//! relay = true                  # false: no relay fallback for job links
//! ```

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use ganglion_dispatch::gpu::{Gpu, Inventory};
use ganglion_market::declared::DeclaredGpu;

/// Which chain the node is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The embedded devnet (testnet crate). Declared GPUs are allowed only here.
    #[default]
    Devnet,
    /// Cardano preprod.
    Preprod,
    /// Cardano preview.
    Preview,
    /// Cardano mainnet.
    Mainnet,
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Devnet => "devnet",
            Self::Preprod => "preprod",
            Self::Preview => "preview",
            Self::Mainnet => "mainnet",
        })
    }
}

/// Declared GPUs offered on a network that is not the devnet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{count} declared GPU(s) in [gpus.declared] cannot be offered as real hardware on {network}; only the devnet accepts them"
)]
pub struct DeclaredOnRealNetwork {
    /// Declared GPUs.
    pub count: usize,
    /// The network configured.
    pub network: Network,
}

/// The GPUs of `inv` that may be offered on `network` ([`Inventory::offerable`]).
///
/// # Errors
/// [`DeclaredOnRealNetwork`] when declared GPUs are present on a network other than the
/// devnet (remove them from the config there).
pub fn offerable_on(inv: &Inventory, network: Network) -> Result<Vec<Gpu>, DeclaredOnRealNetwork> {
    let count = inv.declared_count();
    if count > 0 && network != Network::Devnet {
        return Err(DeclaredOnRealNetwork { count, network });
    }
    Ok(inv.offerable())
}

/// `[gpus]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpusConfig {
    /// Root of sysfs for AMD detection; default `/sys`.
    pub sysfs_root: PathBuf,
    /// `[[gpus.declared]]`: GPUs written by hand (devnet and tests only).
    pub declared: Vec<DeclaredGpu>,
}

impl Default for GpusConfig {
    fn default() -> Self {
        Self {
            sysfs_root: PathBuf::from("/sys"),
            declared: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Error, Settings};
    use ganglion_dispatch::gpu;
    use ganglion_dispatch::overlay::config::OverlayConfig;

    const DEVNET: &str = r#"
network = "devnet"
[[gpus.declared]]
name = "NVIDIA A100-SXM4-80GB"
vendor = "nvidia"
vram_gib = 80
compute_capability = "8.0"
count = 2
"#;

    #[test]
    fn declared_gpus_are_marked_and_allowed_on_devnet_only() {
        let cfg = Settings::from_toml(DEVNET).expect("valid");
        let gpus = ganglion_market::declared::to_gpus(&cfg.gpus.declared);
        assert_eq!(gpus.len(), 2);
        assert!(
            gpus.iter()
                .all(|g| g.is_declared() && g.vram_total_mib == 80 * 1024)
        );
        let inv = gpu::Inventory {
            gpus,
            notes: vec![],
        };
        assert_eq!(
            offerable_on(&inv, Network::Devnet).expect("devnet").len(),
            2
        );
        let err = offerable_on(&inv, Network::Mainnet).expect_err("mainnet refuses");
        assert!(err.to_string().contains("2 declared GPU(s)"), "{err}");
    }

    #[test]
    fn provider_section_parses_and_is_validated() {
        let text = format!(
            "{DEVNET}\n[provider]\nprice_ntx_per_gpu_hour = 1500000\nmax_concurrent_jobs = 2\n\
             max_job_duration_s = 86400\nmax_job_nodes = 4\npool = [\"declared:1\"]\n\
             allow_images = [\"pytorch/*\"]\nrefuse_images = [\"*:latest\"]\n"
        );
        let cfg = Settings::from_toml(&text).expect("valid provider section");
        let p = cfg.provider.expect("present");
        assert_eq!(p.max_concurrent_jobs, 2);
        assert_eq!(p.max_job_nodes, Some(4));
        let gpus = ganglion_market::declared::to_gpus(&cfg.gpus.declared);
        assert_eq!(p.pooled(&gpus).expect("declared:1 exists").len(), 1);

        let zero = text.replace("max_concurrent_jobs = 2", "max_concurrent_jobs = 0");
        let err = Settings::from_toml(&zero).expect_err("zero jobs");
        assert!(
            err.to_string().contains("provider.max_concurrent_jobs"),
            "{err}"
        );
        let typo = text.replace("max_job_nodes", "max_jobs_nodes");
        let err = Settings::from_toml(&typo).expect_err("unknown key");
        assert!(err.to_string().contains("max_jobs_nodes"), "{err}");
        assert!(
            Settings::from_toml(DEVNET)
                .expect("no provider")
                .provider
                .is_none()
        );
    }

    #[test]
    fn overlay_section_defaults_parses_and_is_validated() {
        let cfg = Settings::from_toml(DEVNET).expect("no overlay section");
        assert_eq!(cfg.overlay, OverlayConfig::default());
        let text = format!(
            "{DEVNET}\n[overlay]\npool = \"100.64.0.0/16\"\njob_prefix = 26\nlisten_port = 0\n\
             mtu = 1380\nkeepalive_s = 15\nrelay_fallback_s = 5\n"
        );
        let cfg = Settings::from_toml(&text).expect("valid overlay section");
        assert_eq!(cfg.overlay.pool().slots(), 1024);
        assert_eq!(
            (
                cfg.overlay.listen_port,
                cfg.overlay.mtu,
                cfg.overlay.keepalive_s
            ),
            (0, Some(1380), 15)
        );
        assert_eq!(cfg.overlay.relay_fallback_s, 5);

        let docker = text.replace("100.64.0.0/16", "172.17.0.0/16");
        let err = Settings::from_toml(&docker).expect_err("docker range");
        assert!(matches!(err, Error::Overlay { .. }), "{err}");
        let mtu = text.replace("mtu = 1380", "mtu = 65000");
        let err = Settings::from_toml(&mtu).expect_err("mtu");
        assert!(err.to_string().contains("overlay.mtu"), "{err}");
        let pool = text.replace("100.64.0.0/16", "not-a-net");
        assert!(matches!(
            Settings::from_toml(&pool),
            Err(Error::Parse { .. })
        ));
        let typo = text.replace("keepalive_s", "keep_alive_s");
        let err = Settings::from_toml(&typo).expect_err("unknown key");
        assert!(err.to_string().contains("keep_alive_s"), "{err}");
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let err = Settings::from_toml("[gpus]\ndeclard = []\n").expect_err("typo");
        assert!(err.to_string().contains("declard"), "{err}");
    }

    #[test]
    fn bad_compute_capability_in_declared_gpu_rejected() {
        let text = DEVNET.replace("\"8.0\"", "\"eight\"");
        let err = Settings::from_toml(&text).expect_err("bad cc");
        assert!(err.to_string().contains("compute capability"), "{err}");
    }
}
