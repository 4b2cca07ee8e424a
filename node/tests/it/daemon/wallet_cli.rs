//! `ganglion wallet …` as a user runs it: the binary, GANGLION_* variables, --json output.

use super::support::{self, devnet, json};

fn ganglion(data_dir: &std::path::Path, n2c: &str, args: &[&str]) -> std::process::Output {
    support::ganglion(Some(data_dir), n2c, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wallet_cli_new_address_send_balance() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let n2c = h.n2c_tcp_addr().expect("tcp").to_string();
    let (a, b) = (t.path().join("a"), t.path().join("b"));

    let made = ganglion(&a, &n2c, &["wallet", "new", "--devnet-seed", "3", "--json"]);
    assert!(
        !String::from_utf8_lossy(&made.stderr).contains("holds nothing"),
        "key 3 is funded at genesis"
    );
    let made = json(&made);
    // A seed past the funded ones is a valid key, and the user is told it is empty.
    let empty = ganglion(
        &t.path().join("c"),
        &n2c,
        &["wallet", "new", "--devnet-seed", "4", "--json"],
    );
    json(&empty);
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("devnet key 4 holds nothing at genesis"),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );
    let addr = json(&ganglion(&a, &n2c, &["wallet", "address", "--json"]));
    assert_eq!(made["address"], addr["address"]);
    let dest = json(&ganglion(&b, &n2c, &["wallet", "new", "--json"]))["address"]
        .as_str()
        .expect("address")
        .to_string();
    assert!(dest.starts_with("addr_test1"), "{dest}");

    let again = ganglion(&b, &n2c, &["wallet", "new"]);
    assert!(!again.status.success(), "a second `new` must refuse");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("refusing to overwrite"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    let sent = json(&ganglion(
        &a,
        &n2c,
        &[
            "wallet",
            "send",
            "--to",
            &dest,
            "--lovelace",
            "3000000",
            "--json",
        ],
    ));
    assert_eq!(sent["tx_id"].as_str().map(str::len), Some(64));
    h.forge_now().await.expect("forge");
    let bal = json(&ganglion(&b, &n2c, &["wallet", "balance", "--json"]));
    assert_eq!(bal["lovelace"], 3_000_000);
    assert_eq!(bal["utxos"], 1);
    h.shutdown().await;
}
