//! Submission over N2C: a valid payment is included; each invalid case names its rule.

use ganglion_cardano::client::{ClientError, N2cClient};
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::Rejection;
use ganglion_testnet::txbuild;
use pallas_addresses::Network;

use crate::common::*;

async fn client(h: &ganglion_testnet::devnet::DevnetHandle) -> N2cClient {
    N2cClient::connect_unix(h.n2c_socket().expect("socket"), h.magic())
        .await
        .expect("n2c connect")
}

async fn rejected_rule(c: &mut N2cClient, tx: &[u8]) -> String {
    match c.submit(tx).await {
        Err(ClientError::Rejected(r)) => {
            assert!(!r.message.is_empty());
            r.rule
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_payment_is_included_in_the_next_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut events = h.events();
    let (tx, _) = payment(&h, 1, 2, 5_000_000);
    let mut c = client(&h).await;
    c.submit(&tx).await.expect("accepted");
    let id =
        ganglion_testnet::ledger::tx_hash(&ganglion_testnet::ledger::decode_tx(&tx).expect("tx"));
    let number = wait_included(&mut events, id).await;
    assert_eq!(number, 1, "the first block holds the payment");
    let to = DevKey::from_seed(2).address(Network::Testnet).to_vec();
    let paid = h.chain().utxos_at(&to).expect("utxos");
    assert!(paid.iter().any(|(r, _)| r.tx_hash == *id && r.index == 0));
    c.close().await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_transactions_are_rejected_with_the_rule_they_break() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut c = client(&h).await;
    let g = h.genesis().clone();

    // Malformed bytes.
    assert_eq!(
        rejected_rule(&mut c, &[0x84, 0x01, 0x02]).await,
        "Malformed"
    );

    // Missing signature: the same payment, signed by nobody.
    let (_, spec) = payment(&h, 1, 2, 5_000_000);
    let unsigned = txbuild::build(&spec, &[]);
    assert_eq!(
        rejected_rule(&mut c, &unsigned).await,
        "MissingVKeyWitnessesUTXOW"
    );

    // Wrong signer is a missing witness too; a forged signature is an invalid witness.
    let other = DevKey::from_seed(3);
    let wrong = txbuild::build(&spec, &[&other]);
    assert_eq!(
        rejected_rule(&mut c, &wrong).await,
        "MissingVKeyWitnessesUTXOW"
    );

    // Fee too low: one lovelace less than the exact minimum (value still balanced).
    let key = DevKey::from_seed(1);
    let mut low = spec.clone();
    low.fee -= 1;
    let fund = &g.funds[1];
    let policy = g.ntx_policy_id().expect("policy");
    let name = g.ntx_asset_name().expect("name");
    let from_addr = key.address(Network::Testnet).to_vec();
    low.outputs[1] = ganglion_testnet::genesis::encode_output(
        &from_addr,
        fund.lovelace - 5_000_000 - low.fee,
        &policy,
        &name,
        fund.ntx,
    );
    let low_bytes = txbuild::build(&low, &[&key]);
    assert_eq!(rejected_rule(&mut c, &low_bytes).await, "FeeTooSmallUTxO");

    // Expired validity interval.
    let mut expired = spec.clone();
    expired.ttl = Some(0);
    let expired_bytes = txbuild::build(&expired, &[&key]);
    let rule = rejected_rule(&mut c, &expired_bytes).await;
    assert_eq!(rule, "OutsideValidityIntervalUTxO");

    // Value not conserved: pay one lovelace more than the input holds.
    let mut unbalanced = spec.clone();
    unbalanced.outputs[0] = ganglion_testnet::genesis::encode_output(
        &DevKey::from_seed(2).address(Network::Testnet).to_vec(),
        5_000_001,
        &policy,
        &name,
        0,
    );
    let unbalanced_bytes = txbuild::build(&unbalanced, &[&key]);
    assert_eq!(
        rejected_rule(&mut c, &unbalanced_bytes).await,
        "ValueNotConservedUTxO"
    );

    // Double spend: the valid payment is accepted, a second spend of its input is not.
    // (Whether the first spend is still pending or already forged, the input is gone.)
    let (tx, first) = payment(&h, 1, 2, 5_000_000);
    c.submit(&tx).await.expect("first spend accepted");
    let mut second = first.clone();
    second.outputs.swap(0, 1);
    let tx2 = txbuild::build(&second, &[&key]);
    assert_eq!(rejected_rule(&mut c, &tx2).await, "BadInputsUTxO");

    // Unknown input.
    let mut unknown = spec.clone();
    unknown.inputs = vec![TxoRef {
        tx_hash: [9; 32],
        index: 0,
    }];
    let unknown_bytes = txbuild::build(&unknown, &[&key]);
    assert_eq!(rejected_rule(&mut c, &unknown_bytes).await, "BadInputsUTxO");

    // The library path returns the typed rejection.
    match h.submit(tx2).await {
        Err(ganglion_testnet::chain::SubmitError::Rejected(Rejection::BadInputsUTxO {
            inputs,
        })) => {
            assert_eq!(inputs.len(), 1)
        }
        other => panic!("expected BadInputsUTxO, got {other:?}"),
    }
    c.close().await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_script_mints_need_the_policy_key_and_the_script() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let g = h.genesis().clone();
    let policy = g.ntx_policy_id().expect("policy");
    let name = g.ntx_asset_name().expect("name");
    let script =
        pallas_codec::minicbor::to_vec(g.ntx_policy_script().expect("script")).expect("cbor");

    // Key 1 mints 100 NTX: needs the policy script and the minter's (key 0) signature.
    let (input, lovelace, ntx) = richest_utxo(&h, 1);
    let me = DevKey::from_seed(1).address(Network::Testnet).to_vec();
    let mint = |native: bool, signers: &[&DevKey]| {
        let mut spec = txbuild::TxSpec {
            inputs: vec![input],
            mint: vec![(policy, name.clone(), 100)],
            native_scripts: if native { vec![script.clone()] } else { vec![] },
            ..Default::default()
        };
        txbuild::build_balanced(&g.protocol_params, &mut spec, signers, 0, |s, fee| {
            s.outputs = vec![ganglion_testnet::genesis::encode_output(
                &me,
                lovelace - fee,
                &policy,
                &name,
                ntx + 100,
            )];
        })
    };
    let k0 = DevKey::from_seed(0);
    let k1 = DevKey::from_seed(1);
    let rule = |r: Result<_, ganglion_testnet::chain::SubmitError>| match r {
        Err(ganglion_testnet::chain::SubmitError::Rejected(r)) => r.rule().to_string(),
        other => panic!("expected a rejection, got {other:?}"),
    };
    assert_eq!(
        rule(h.submit(mint(false, &[&k1, &k0])).await),
        "MissingScriptWitnessesUTXOW"
    );
    assert_eq!(
        rule(h.submit(mint(true, &[&k1])).await),
        "ScriptWitnessNotValidatingUTXOW"
    );
    let mut events = h.events();
    let id = h
        .submit(mint(true, &[&k1, &k0]))
        .await
        .expect("mint accepted");
    wait_included(&mut events, id).await;
    let (_, _, after) = richest_utxo(&h, 1);
    assert_eq!(after, ntx + 100);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_below_min_utxo_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    // 100 000 lovelace is far below (160 + ~65 B) × 4310.
    let (tx, _) = payment(&h, 1, 2, 100_000);
    match h.submit(tx).await {
        Err(ganglion_testnet::chain::SubmitError::Rejected(
            Rejection::BabbageOutputTooSmallUTxO {
                index,
                required,
                provided,
            },
        )) => {
            assert_eq!(index, 0);
            assert_eq!(provided, 100_000);
            let to = DevKey::from_seed(2).address(Network::Testnet).to_vec();
            let out = ganglion_testnet::genesis::encode_output(
                &to,
                100_000,
                &pallas_crypto::hash::Hash::new([0; 28]),
                &[],
                0,
            );
            assert_eq!(required, (160 + out.len() as u64) * 4310);
        }
        other => panic!("expected BabbageOutputTooSmallUTxO, got {other:?}"),
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_state_query_answers_tip_era_and_system_start() {
    use pallas_network::miniprotocols::localstate::queries_v16;
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut events = h.events();
    let (tx, _) = payment(&h, 1, 2, 5_000_000);
    let id = h.submit(tx).await.expect("accepted");
    wait_included(&mut events, id).await;
    let tip = h.tip().expect("tip");
    let mut node =
        pallas_network::facades::NodeClient::connect(h.n2c_socket().expect("socket"), h.magic())
            .await
            .expect("n2c");
    let sq = node.statequery();
    sq.acquire(None).await.expect("acquire");
    let point = queries_v16::get_chain_point(sq).await.expect("chain point");
    assert_eq!(
        point,
        pallas_network::miniprotocols::Point::Specific(tip.slot, tip.hash.to_vec())
    );
    let n = queries_v16::get_chain_block_no(sq).await.expect("block no");
    assert_eq!(u64::from(n.block_number), tip.number);
    assert_eq!(queries_v16::get_current_era(sq).await.expect("era"), 6);
    let start = queries_v16::get_system_start(sq)
        .await
        .expect("system start");
    let (y, d, _) = ganglion_cardano::localstate::ordinal_date(h.genesis().system_start_ms);
    assert_eq!(start.day_of_year, d);
    assert_eq!(
        pallas_codec::minicbor::to_vec(&start.year).expect("cbor"),
        pallas_codec::minicbor::to_vec(y).expect("cbor"),
        "year"
    );
    let pp = queries_v16::get_current_pparams(sq, 6)
        .await
        .expect("pparams");
    assert_eq!(
        pp,
        ganglion_cardano::localstate::conway_pparams(&h.genesis().protocol_params)
    );
    assert_eq!(pp.minfee_a, Some(44));
    assert_eq!(
        pp.cost_models_for_script_languages
            .expect("cost models")
            .plutus_v3
            .map(|m| m.len()),
        Some(350)
    );
    let to = DevKey::from_seed(2).address(Network::Testnet).to_vec();
    let utxos = queries_v16::get_utxo_by_address(sq, 6, vec![to.into()])
        .await
        .expect("utxos");
    assert_eq!(utxos.len(), 2, "genesis output + the payment");
    assert!(utxos.iter().any(|(u, _)| u.transaction_id == id));
    node.abort().await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stock_pallas_node_client_can_submit_valid_transactions() {
    use pallas_network::miniprotocols::localtxsubmission::{EraTx, Response};
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut node =
        pallas_network::facades::NodeClient::connect(h.n2c_socket().expect("socket"), h.magic())
            .await
            .expect("n2c");
    let (tx, _) = payment(&h, 2, 1, 2_000_000);
    match node
        .submission()
        .submit_tx(EraTx(6, tx))
        .await
        .expect("submit")
    {
        Response::Accepted => {}
        Response::Rejected(r) => panic!("rejected: {r:?}"),
    }
    // Rejections use the devnet's own payload; the stock client cannot decode them
    // (that is why `ganglion_cardano::client::N2cClient` exists) but the devnet survives.
    let (again, _) = payment(&h, 2, 1, 2_000_000);
    let _ = node.submission().submit_tx(EraTx(6, again)).await;
    node.abort().await;
    let c =
        ganglion_cardano::client::N2cClient::connect_unix(h.n2c_socket().expect("s"), h.magic())
            .await
            .expect("still serving");
    c.close().await;
    h.shutdown().await;
}
