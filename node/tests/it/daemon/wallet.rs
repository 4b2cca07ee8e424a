//! The wallet against a real devnet: a funded devnet key pays a fresh wallet ADA and NTX, the
//! fresh wallet pays some back, balances move by the amounts and fees.

use ganglion_node::wallet::{Error, Wallet};

use super::support::{devnet, settings};

const ADA: u64 = 1_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_move_balances_by_amounts_and_fees() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let rich = Wallet::create(settings(&h, &t.path().join("rich")), Some(1)).expect("import");
    let fresh = Wallet::create(settings(&h, &t.path().join("fresh")), None).expect("new");
    let ntx = rich.preset().deployment.clone().expect("devnet NTX").ntx;

    let before = rich.balance().await.expect("balance");
    assert_eq!(before.lovelace, 1_000_000_000_000, "genesis funding");
    assert_eq!(before.asset(&ntx.policy, &ntx.name), 1_000_000_000);
    assert_eq!(fresh.balance().await.expect("balance").utxos, 0);

    let p = rich
        .send(&fresh.address(), 5 * ADA, 7_000)
        .await
        .expect("pays");
    assert!(p.fee > 150_000 && p.fee < 1_000_000, "fee {}", p.fee);
    h.forge_now().await.expect("forge");

    let got = fresh.balance().await.expect("balance");
    assert_eq!(got.lovelace, 5 * ADA);
    assert_eq!(got.asset(&ntx.policy, &ntx.name), 7_000);
    let after = rich.balance().await.expect("balance");
    assert_eq!(after.lovelace, before.lovelace - 5 * ADA - p.fee);
    assert_eq!(after.asset(&ntx.policy, &ntx.name), 1_000_000_000 - 7_000);

    // The fresh key signs its own spend: everything but NTX-carrying change must balance.
    let back = fresh
        .send(&rich.address(), 2 * ADA, 0)
        .await
        .expect("pays back");
    h.forge_now().await.expect("forge");
    let fresh_now = fresh.balance().await.expect("balance");
    assert_eq!(fresh_now.lovelace, 3 * ADA - back.fee);
    assert_eq!(fresh_now.asset(&ntx.policy, &ntx.name), 7_000);
    assert_eq!(
        rich.balance().await.expect("balance").lovelace,
        after.lovelace + 2 * ADA
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_payments_are_typed_errors_and_submit_nothing() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let empty = Wallet::create(settings(&h, &t.path().join("empty")), None).expect("new");
    let rich = Wallet::create(settings(&h, &t.path().join("rich")), Some(2)).expect("import");

    let e = empty
        .send(&rich.address(), 2 * ADA, 0)
        .await
        .expect_err("no funds");
    assert!(matches!(e, Error::Build(_)), "{e}");
    let mainnet = empty
        .key()
        .address(pallas_addresses::Network::Mainnet)
        .to_bech32()
        .expect("bech32");
    let e = rich
        .send(&mainnet, 2 * ADA, 0)
        .await
        .expect_err("wrong network");
    assert!(e.to_string().contains("is for Mainnet"), "{e}");
    assert!(matches!(e, Error::Address { .. }), "{e}");
    let e = rich
        .send("not an address", 2 * ADA, 0)
        .await
        .expect_err("garbage");
    assert!(matches!(e, Error::Address { .. }), "{e}");
    let e = rich
        .send(&empty.address(), 1, 0)
        .await
        .expect_err("below min-UTxO");
    assert!(matches!(e, Error::Build(_)), "{e}");

    assert_eq!(
        h.forge_now().await.expect("forge"),
        None,
        "nothing was submitted"
    );
    assert_eq!(empty.balance().await.expect("balance").utxos, 0);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_without_a_key_or_creating_twice_is_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let s = settings(&h, &t.path().join("w"));
    assert!(matches!(Wallet::open(s.clone()), Err(Error::NoKey(_))));
    let w = Wallet::create(s.clone(), None).expect("new");
    assert!(matches!(
        Wallet::create(s.clone(), None),
        Err(Error::Key(_))
    ));
    assert_eq!(Wallet::open(s).expect("open").address(), w.address());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_parameters_come_from_the_ledger_over_get_current_pparams() {
    use ganglion_node::settings::N2cEndpoint;
    use ganglion_node::wallet::ChainClient;

    let t = tempfile::tempdir().expect("tempdir");
    let h = devnet(t.path()).await;
    let endpoint = N2cEndpoint::Tcp(h.n2c_tcp_addr().expect("n2c tcp"));
    let mut c = ChainClient::connect(&endpoint, h.magic())
        .await
        .expect("connects");
    let got = c.protocol_params().await.expect("GetCurrentPParams");
    c.close().await;
    // The devnet's genesis carries the mainnet parameters of the fixtures: every field the
    // transaction builder uses must survive the ledger's encoding and our decoding.
    let want = ganglion_contracts::protocol::ProtocolParams::mainnet().expect("fixtures");
    assert_eq!(got, want);
    assert_eq!(got.cost_model_v3.len(), want.cost_model_v3.len());
}
