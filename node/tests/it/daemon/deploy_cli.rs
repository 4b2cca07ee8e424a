//! `ganglion devnet deploy` on a devnet started by hand (issue 18): it deploys the validator
//! once (a second run finds it and changes nothing), and a node whose config has no
//! `[validator]` finds the reference script at the validator's address itself; before any
//! deploy, the node's error says to run `ganglion devnet deploy`.

use std::process::Command;

use ganglion_node::daemon::chain;
use ganglion_node::network::NetworkPreset;
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::genesis::Genesis;

fn deploy(n2c: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["devnet", "deploy", "--json"])
        .env("GANGLION_NETWORK", "devnet")
        .env("GANGLION_N2C", n2c)
        .env_remove("GANGLION_CONFIG")
        .output()
        .expect("runs")
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devnet_deploy_once_and_nodes_find_the_reference_script() {
    let t = tempfile::tempdir().expect("tempdir");
    // Blocks forged on the slot clock, as `ganglion-devnet up` runs it.
    let h = devnet::start(DevnetConfig::new(
        Genesis::devnet().expect("genesis"),
        t.path().join("devnet"),
    ))
    .await
    .expect("devnet starts");
    let settings = super::support::settings(&h, &t.path().join("node"));
    let n2c = h.n2c_tcp_addr().expect("tcp").to_string();
    let preset = NetworkPreset::of(settings.network()).expect("preset");
    let endpoint = settings.n2c().expect("n2c");
    assert!(settings.validator.is_none());

    let e = chain::resolve(&settings, &preset, &endpoint)
        .await
        .expect_err("nothing deployed yet");
    assert!(e.to_string().contains("ganglion devnet deploy"), "{e}");

    let first = json(&deploy(&n2c));
    assert_eq!(first["deployed_now"], true, "{first}");
    let again = json(&deploy(&n2c));
    assert_eq!(again["deployed_now"], false, "{again}");
    assert_eq!(again["reference"], first["reference"]);

    let (_, deployment) = chain::resolve(&settings, &preset, &endpoint)
        .await
        .expect("found without [validator]");
    let found = format!(
        "{}#{}",
        hex::encode(deployment.reference.reference.tx_hash),
        deployment.reference.reference.index
    );
    assert_eq!(first["reference"], found.as_str());
    assert_eq!(
        first["script_hash"],
        hex::encode(deployment.script.hash).as_str()
    );
    h.shutdown().await;
}
