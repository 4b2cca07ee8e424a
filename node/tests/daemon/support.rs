//! A devnet per test and settings pointing at it.

use std::path::Path;

use ganglion_node::settings::Settings;
use ganglion_testnet::devnet::{self, DevnetConfig, DevnetHandle};
use ganglion_testnet::genesis::Genesis;

/// Starts a devnet with manual forging (the test decides when blocks happen).
pub async fn devnet(dir: &Path) -> DevnetHandle {
    let mut cfg = DevnetConfig::new(Genesis::devnet().expect("genesis"), dir.join("devnet"));
    cfg.auto_forge = false;
    devnet::start(cfg).await.expect("devnet starts")
}

/// Devnet settings with `data_dir` and the devnet's N2C TCP port.
pub fn settings(h: &DevnetHandle, data_dir: &Path) -> Settings {
    let mut s = Settings::from_toml("network = \"devnet\"").expect("settings");
    let n2c = h.n2c_tcp_addr().expect("n2c tcp").to_string();
    let dir = data_dir.display().to_string();
    s.apply_env(|k| match k {
        "GANGLION_DATA_DIR" => Some(dir.clone()),
        "GANGLION_N2C" => Some(n2c.clone()),
        _ => None,
    })
    .expect("overrides");
    s
}
