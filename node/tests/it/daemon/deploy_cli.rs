//! `ganglion devnet deploy` on a devnet started by hand (issue 18): it deploys the validator
//! once (a second run finds it and changes nothing), and a node whose config has no
//! `[validator]` finds the reference script at the validator's address itself; before any
//! deploy, the node's error says to run `ganglion devnet deploy`. `ganglion devnet up
//! --deploy` starts a devnet with the validator on it in one command.

use std::process::Command;

use ganglion_node::daemon::chain;
use ganglion_node::network::NetworkPreset;
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::genesis::Genesis;

use super::support::{self, json};

fn deploy(n2c: &str) -> std::process::Output {
    support::ganglion(None, n2c, &["devnet", "deploy", "--json"])
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
    let preset = NetworkPreset::of(settings.network());
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

/// Two free loopback TCP ports.
fn free_ports() -> (std::net::SocketAddr, std::net::SocketAddr) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let b = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    (a.local_addr().expect("addr"), b.local_addr().expect("addr"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devnet_up_with_deploy_serves_a_chain_with_the_validator() {
    use std::io::BufRead as _;
    let t = tempfile::tempdir().expect("tempdir");
    let (n2n, n2c) = free_ports();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ganglion"))
        .args(["devnet", "up", "--deploy", "--data-dir"])
        .arg(t.path().join("devnet"))
        .args(["--n2n", &n2n.to_string(), "--n2c-tcp", &n2c.to_string()])
        .args(["--http", "127.0.0.1:0"])
        .env_remove("GANGLION_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runs");
    let stdout = child.stdout.take().expect("stdout");
    let lines = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .take(2)
            .collect::<Result<Vec<_>, _>>()
    });
    let lines = tokio::time::timeout(std::time::Duration::from_secs(120), lines)
        .await
        .expect("the addresses and the deployment within 120 s")
        .expect("task")
        .expect("stdout");
    let addrs: serde_json::Value = serde_json::from_str(&lines[0]).expect("one JSON line");
    assert_eq!(addrs["n2c_tcp"], n2c.to_string().as_str(), "{addrs}");
    assert!(
        addrs["http"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:") && !u.ends_with(":0")),
        "the HTTP API's base URL: {addrs}"
    );
    assert!(lines[1].starts_with("validator deployed at "), "{lines:?}");
    // The chain it serves holds the reference script where nodes look for it.
    let settings = ganglion_node::settings::Settings::from_toml(&format!(
        "network = \"devnet\"\n[chain]\nn2c = \"{n2c}\"\n"
    ))
    .expect("settings");
    let preset = NetworkPreset::of(settings.network());
    let (_, deployment) = chain::resolve(&settings, &preset, &settings.n2c().expect("n2c"))
        .await
        .expect("the validator is found");
    let found = format!(
        "{}#{}",
        hex::encode(deployment.reference.reference.tx_hash),
        deployment.reference.reference.index
    );
    assert!(lines[1].ends_with(&found), "{lines:?} vs {found}");
    let _ = child.kill();
    let _ = child.wait();
}
