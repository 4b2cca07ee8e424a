//! A devnet per test and settings pointing at it.

use std::path::Path;

use ganglion_node::settings::Settings;
use ganglion_testnet::devnet::{self, DevnetConfig, DevnetHandle};
use ganglion_testnet::genesis::Genesis;

/// Starts a devnet with manual forging (the test decides when blocks happen).
pub(crate) async fn devnet(dir: &Path) -> DevnetHandle {
    let mut cfg = DevnetConfig::new(Genesis::devnet().expect("genesis"), dir.join("devnet"));
    cfg.auto_forge = false;
    devnet::start(cfg).await.expect("devnet starts")
}

/// `ganglion ARGS` as a user runs it against the devnet at `n2c` (`GANGLION_NETWORK=devnet`,
/// `GANGLION_N2C`, `GANGLION_DATA_DIR` when given, no config file).
pub(crate) fn ganglion(data_dir: Option<&Path>, n2c: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ganglion"));
    cmd.args(args)
        .env("GANGLION_NETWORK", "devnet")
        .env("GANGLION_N2C", n2c)
        .env_remove("GANGLION_CONFIG");
    if let Some(dir) = data_dir {
        cmd.env("GANGLION_DATA_DIR", dir);
    }
    cmd.output().expect("runs")
}

/// The JSON a successful command printed on stdout (fails with its stderr otherwise).
pub(crate) fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

/// Devnet settings with `data_dir` and the devnet's N2C TCP port.
pub(crate) fn settings(h: &DevnetHandle, data_dir: &Path) -> Settings {
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

/// The bond methods over `indexer`, with a deployment and key built offline (the contracts'
/// test harness): enough to serve them; nothing here reaches a chain.
pub(crate) fn offline_bonds<S: ganglion_indexer::store::Kv + Send + Sync + 'static>(
    indexer: std::sync::Arc<ganglion_indexer::Indexer<S>>,
) -> ganglion_node::rpc::bond::BondRpc<S> {
    let h = ganglion_contracts::test_utils::harness_v2::Harness::new(1);
    let access = ganglion_node::job::chain::ChainAccess::new(
        ganglion_node::settings::N2cEndpoint::Tcp("127.0.0.1:9".parse().expect("addr")),
        42,
        h.env().clone(),
        h.dep.clone(),
        ed25519_dalek::SigningKey::from_bytes(&[7; 32]),
    );
    ganglion_node::rpc::bond::BondRpc::new(indexer, access, 10)
}

/// `api` with the namespaces `node run` attaches besides the core ones: audit over an empty
/// index and blockstore, and the bond methods ([`offline_bonds`]).
pub(crate) fn with_offline_namespaces(api: ganglion_node::rpc::Api) -> ganglion_node::rpc::Api {
    let watch = ganglion_indexer::watch::Watch::v2(
        [0; 28],
        ganglion_contracts::v2::params::Params {
            ntx: ganglion_contracts::params::AssetClass {
                policy: [0; 28],
                name: b"NTX".to_vec(),
            },
            min_bond_per_gpu: 1,
            unbonding_delay_ms: 1,
            claim_window_ms: 1,
        },
    );
    let indexer = std::sync::Arc::new(ganglion_indexer::Indexer::new(
        ganglion_indexer::store::MemoryKv::new(),
        watch,
        10,
    ));
    let blocks: std::sync::Arc<dyn ganglion_storage::blockstore::Blockstore> =
        std::sync::Arc::new(ganglion_storage::blockstore::MemoryBlockstore::new());
    api.with_audit(ganglion_node::audit::service::AuditService::new(
        indexer.clone(),
        blocks,
    ))
    .with_bonds(offline_bonds(indexer))
}
