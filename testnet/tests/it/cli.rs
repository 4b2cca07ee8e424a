//! The `ganglion-devnet` binary: start from the CLI, follow with a pallas client, submit,
//! print the tip, roll back, and survive `kill -9` with its chain intact.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use ganglion_cardano::client::N2cClient;
use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::txbuild::{self, TxSpec};
use pallas_addresses::Network;
use pallas_network::facades::NodeClient;
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::chainsync::NextResponse;
use pallas_traverse::MultiEraBlock;

use crate::common::TIMEOUT;

const BIN: &str = env!("CARGO_BIN_EXE_ganglion-devnet");

struct Devnet {
    child: Child,
    socket: PathBuf,
    control: PathBuf,
}

impl Drop for Devnet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `ganglion-devnet up` on ephemeral ports and read its address line.
fn up(data: &Path, genesis: &Path) -> Devnet {
    let mut child = Command::new(BIN)
        .args([
            "up",
            "--n2n",
            "127.0.0.1:0",
            "--n2c-tcp",
            "127.0.0.1:0",
            // Only blocks with transactions: the rollbacks below count blocks.
            "--idle-block-s",
            "0",
            "--data-dir",
        ])
        .arg(data)
        .arg("--genesis")
        .arg(genesis)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ganglion-devnet");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("address line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("JSON address line");
    Devnet {
        child,
        socket: PathBuf::from(v["n2c_socket"].as_str().expect("socket")),
        control: PathBuf::from(v["control_socket"].as_str().expect("control")),
    }
}

fn cli(args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN).args(args).output().expect("run cli");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn first_block(socket: &Path, magic: u64) -> MultiEraBlockOwned {
    let mut node = NodeClient::connect(socket, magic).await.expect("n2c");
    node.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    let bytes = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let NextResponse::RollForward(b, _) = node
                .chainsync()
                .request_or_await_next()
                .await
                .expect("next")
            {
                return b.0;
            }
        }
    })
    .await
    .expect("a block in time");
    node.abort().await;
    let b = MultiEraBlock::decode(&bytes).expect("decodes");
    MultiEraBlockOwned {
        hash: b.hash().to_string(),
        txs: b.tx_count(),
    }
}

#[derive(Debug, PartialEq)]
struct MultiEraBlockOwned {
    hash: String,
    txs: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_runs_a_devnet_that_survives_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let genesis_path = dir.path().join("genesis.json");
    let (ok, _) = cli(&[
        "genesis",
        "--slot-length-ms",
        "100",
        "--out",
        genesis_path.to_str().expect("utf8"),
    ]);
    assert!(ok, "genesis written");
    let g = Genesis::load(&genesis_path).expect("genesis");
    let data = dir.path().join("data");
    let d = up(&data, &genesis_path);

    // Submit a payment through the CLI (hex file).
    let key = DevKey::from_seed(1);
    let (input, _) = g.initial_utxos().expect("utxos")[1].clone();
    let fund = g.funds[1].clone();
    let (policy, name) = (
        g.ntx_policy_id().expect("p"),
        g.ntx_asset_name().expect("n"),
    );
    let to = DevKey::from_seed(2).address(Network::Testnet).to_vec();
    let me = key.address(Network::Testnet).to_vec();
    let mut spec = TxSpec {
        inputs: vec![input],
        ..Default::default()
    };
    let tx = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![
            encode_output(&to, 3_000_000, &policy, &name, 0),
            encode_output(
                &me,
                fund.lovelace - 3_000_000 - fee,
                &policy,
                &name,
                fund.ntx,
            ),
        ];
    });
    let tx_file = dir.path().join("payment.tx");
    std::fs::write(&tx_file, hex::encode(&tx)).expect("write tx");
    let socket = d.socket.to_str().expect("utf8").to_string();
    let (ok, out) = cli(&[
        "submit",
        "--socket",
        &socket,
        tx_file.to_str().expect("utf8"),
    ]);
    assert!(ok && out.contains("accepted"), "{out}");
    // Resubmitting is a double spend, reported with its rule.
    let out = Command::new(BIN)
        .args([
            "submit",
            "--socket",
            &socket,
            tx_file.to_str().expect("utf8"),
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("BadInputsUTxO"));

    let before = first_block(&d.socket, g.network_magic).await;
    assert_eq!(before.txs, 1);
    let (ok, tip) = cli(&["tip", "--socket", &socket]);
    assert!(ok && tip.contains("\"block_no\":1"), "{tip}");

    // kill -9, restart on the same data: the chain and its UTxO set are intact.
    drop(d);
    let d = up(&data, &genesis_path);
    assert_eq!(first_block(&d.socket, g.network_magic).await, before);
    let mut c = N2cClient::connect_unix(&d.socket, g.network_magic)
        .await
        .expect("n2c");
    match c.submit(&tx).await {
        Err(ganglion_cardano::client::ClientError::Rejected(r)) => {
            assert_eq!(r.rule, "BadInputsUTxO")
        }
        other => panic!("the spent input must stay spent, got {other:?}"),
    }
    c.close().await;

    // Roll back through the CLI.
    let control = d.control.to_str().expect("utf8").to_string();
    let (ok, out) = cli(&["rollback", "--control", &control, "1"]);
    assert!(ok, "{out}");
    assert!(out.contains("\"tip\":null"), "{out}");
    let (ok, _) = cli(&["rollback", "--control", &control, "1"]);
    assert!(!ok, "nothing left to roll back");
}
