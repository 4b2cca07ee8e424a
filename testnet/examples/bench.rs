//! Devnet numbers on this machine:
//! - transactions validated per second, without scripts (a signed payment) and with a
//!   Plutus V3 spend;
//! - a "4-provider settle"-shaped validation: one Plutus V3 spend whose script checks four
//!   ed25519 signatures (the attestation checks of a settle), timed against one slot;
//! - blocks served per second over N2N (chainsync headers + blockfetch) to one follower,
//!   and over N2C chainsync.
//!
//! Run: `cargo run --release -p ganglion-testnet --example bench`

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ganglion_cardano::protocol::ExUnits;
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::utxo::UtxoSet;
use ganglion_testnet::ledger::{self, Rules, phase1};
use ganglion_testnet::txbuild::{self, RedeemerSpec, TxSpec};
use pallas_addresses::{Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart};
use pallas_crypto::hash::Hash;
use pallas_network::facades::{NodeClient, PeerClient};
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::chainsync::NextResponse;
use pallas_traverse::MultiEraHeader;
use uplc::ast::{DeBruijn, Program};

fn script(src: &str) -> Vec<u8> {
    let p = uplc::parser::program(src).expect("parses");
    let p: Program<DeBruijn> = p.try_into().expect("debruijn");
    p.to_cbor().expect("cbor")
}

/// A V3 script checking `n` ed25519 signatures, then returning unit.
fn sig_checker(n: usize) -> Vec<u8> {
    let mut body = "(con unit ())".to_string();
    for i in 0..n {
        let k = DevKey::from_seed(100 + i as u32);
        let msg = [i as u8; 32];
        let sig = k.sign(&msg);
        body = format!(
            "(force [(force (builtin ifThenElse)) [(builtin verifyEd25519Signature) (con bytestring #{}) (con bytestring #{}) (con bytestring #{})] (delay {body}) (delay (error))])",
            hex::encode(k.public_key()),
            hex::encode(msg),
            hex::encode(sig)
        );
    }
    script(&format!("(program 1.1.0 (lam ctx {body}))"))
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn payment_fixture(g: &Genesis) -> (UtxoSet, Vec<u8>) {
    let utxos = g.initial_utxos().expect("utxos");
    let set = UtxoSet::from_entries(utxos.clone());
    let key = DevKey::from_seed(1);
    let (input, _) = utxos[1].clone();
    let policy = g.ntx_policy_id().expect("policy");
    let name = g.ntx_asset_name().expect("name");
    let me = key.address(Network::Testnet).to_vec();
    let to = DevKey::from_seed(2).address(Network::Testnet).to_vec();
    let mut spec = TxSpec {
        inputs: vec![input],
        ..Default::default()
    };
    let fund = g.funds[1].clone();
    let tx = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![
            encode_output(&to, 5_000_000, &policy, &name, 0),
            encode_output(
                &me,
                fund.lovelace - 5_000_000 - fee,
                &policy,
                &name,
                fund.ntx,
            ),
        ];
    });
    (set, tx)
}

/// A UTxO set with a script output + a collateral output, and a signed spend of it.
fn script_fixture(g: &Genesis, script: Vec<u8>, budget: ExUnits) -> (UtxoSet, Vec<u8>) {
    let (hash, _, _) = phase1::plutus(2, &script);
    let addr = ShelleyAddress::new(
        Network::Testnet,
        ShelleyPaymentPart::script_hash(hash),
        ShelleyDelegationPart::Null,
    )
    .to_vec();
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let locked = TxoRef {
        tx_hash: [1; 32],
        index: 0,
    };
    let coll = TxoRef {
        tx_hash: [1; 32],
        index: 1,
    };
    let set = UtxoSet::from_entries([
        (
            locked,
            txbuild::output_with_datum(&addr, 10_000_000, &[0x18, 0x2a]),
        ),
        (
            coll,
            encode_output(&me, 50_000_000, &Hash::new([0; 28]), &[], 0),
        ),
    ]);
    let redeemers = vec![RedeemerSpec {
        tag: 0,
        index: 0,
        data: vec![0xd8, 0x79, 0x80],
        ex_units: budget,
    }];
    let sdh = phase1::integrity_hash(
        Some(&txbuild::redeemers_cbor(&redeemers)),
        None,
        &g.protocol_params,
        &BTreeSet::from([2u8]),
    );
    let mut spec = TxSpec {
        inputs: vec![locked],
        collateral: vec![coll],
        plutus_v3_scripts: vec![script],
        redeemers,
        script_data_hash: Some(sdh),
        ..Default::default()
    };
    let tx = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![encode_output(
            &me,
            10_000_000 - fee,
            &Hash::new([0; 28]),
            &[],
            0,
        )];
    });
    (set, tx)
}

fn time_validation(rules: &Rules, set: &UtxoSet, tx: &[u8], min: Duration) -> (usize, Duration) {
    ledger::validate(rules, set, tx, 1).expect("fixture is valid");
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < min {
        ledger::validate(rules, set, tx, 1).expect("valid");
        n += 1;
    }
    (n, start.elapsed())
}

#[tokio::main]
async fn main() {
    let g = Genesis::devnet().expect("genesis");
    let rules = Rules::new(g.protocol_params.clone(), g.slot_config(), g.network_id);
    let window = Duration::from_secs(2);

    let (set, tx) = payment_fixture(&g);
    let (n, d) = time_validation(&rules, &set, &tx, window);
    println!(
        "validate payment (no scripts): {:.0} tx/s ({} B)",
        rate(n, d),
        tx.len()
    );

    let big = ExUnits {
        mem: 2_000_000,
        steps: 2_000_000_000,
    };
    let (set, tx) = script_fixture(&g, script("(program 1.1.0 (lam ctx (con unit ())))"), big);
    let (n, d) = time_validation(&rules, &set, &tx, window);
    println!(
        "validate Plutus V3 always-succeeds spend: {:.0} tx/s",
        rate(n, d)
    );

    let (set, tx) = script_fixture(&g, sig_checker(4), big);
    let v = ledger::validate(&rules, &set, &tx, 1).expect("settle-shaped tx is valid");
    let (n, d) = time_validation(&rules, &set, &tx, window);
    let per = d / n as u32;
    println!(
        "validate settle-shaped tx (V3, 4 ed25519 checks): {:.0} tx/s, {:?} each = {:.2}% of a {} ms slot; ExUnits mem {} steps {}",
        rate(n, d),
        per,
        per.as_secs_f64() * 100_000.0 / f64::from(g.slot_length_ms),
        g.slot_length_ms,
        v.ex_units.mem,
        v.ex_units.steps
    );

    // Blocks served over N2N / N2C.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gg = g.clone();
    gg.slot_length_ms = 1000;
    gg.security_param = 10;
    let mut config = DevnetConfig::new(gg, dir.path());
    config.auto_forge = false;
    let h = devnet::start(config).await.expect("devnet");
    let blocks = 300usize;
    let start = Instant::now();
    let key = DevKey::from_seed(0);
    let me = key.address(Network::Testnet).to_vec();
    let policy = h.genesis().ntx_policy_id().expect("policy");
    let name = h.genesis().ntx_asset_name().expect("name");
    let (mut input, mut lovelace) = (
        h.genesis().initial_utxos().expect("u")[0].0,
        h.genesis().funds[0].lovelace,
    );
    let ntx = h.genesis().funds[0].ntx;
    for _ in 0..blocks {
        let mut spec = TxSpec {
            inputs: vec![input],
            ..Default::default()
        };
        let mut change = 0;
        let tx = txbuild::build_balanced(
            &h.genesis().protocol_params,
            &mut spec,
            &[&key],
            0,
            |s, fee| {
                change = lovelace - 2_000_000 - fee;
                s.outputs = vec![
                    encode_output(&me, change, &policy, &name, ntx),
                    encode_output(&me, 2_000_000, &policy, &name, 0),
                ];
            },
        );
        let id = h.submit(tx).await.expect("accepted");
        // Each block's slot must be after the previous one; the devnet uses wall slot + 1,
        // so force distinct slots by forging at increasing slots.
        let slot = h
            .chain()
            .next_block_slot()
            .max(h.tip().map_or(0, |t| t.slot + 1));
        let c = h.chain().clone();
        tokio::task::spawn_blocking(move || c.forge(slot))
            .await
            .expect("task")
            .expect("forged");
        input = TxoRef {
            tx_hash: *id,
            index: 0,
        };
        lovelace = change;
    }
    println!(
        "produce {blocks} blocks (validate + assemble + sled flush): {:.0} blocks/s",
        rate(blocks, start.elapsed())
    );

    let mut peer = PeerClient::connect(h.n2n_addr(), h.magic())
        .await
        .expect("n2n");
    peer.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    let start = Instant::now();
    let mut got = 0;
    while got < blocks {
        if let NextResponse::RollForward(hd, _) =
            peer.chainsync().request_next().await.expect("next")
        {
            let hdr = MultiEraHeader::decode(hd.variant, None, &hd.cbor).expect("header");
            let _ = peer
                .blockfetch()
                .fetch_single(Point::Specific(hdr.slot(), hdr.hash().to_vec()))
                .await
                .expect("fetch");
            got += 1;
        }
    }
    println!(
        "N2N serve (chainsync header + blockfetch per block): {:.0} blocks/s",
        rate(blocks, start.elapsed())
    );

    let mut node = NodeClient::connect(h.n2c_socket().expect("socket"), h.magic())
        .await
        .expect("n2c");
    node.chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    let start = Instant::now();
    let mut got = 0;
    while got < blocks {
        if let NextResponse::RollForward(..) = node.chainsync().request_next().await.expect("next")
        {
            got += 1;
        }
    }
    println!(
        "N2C serve (chainsync whole blocks): {:.0} blocks/s",
        rate(blocks, start.elapsed())
    );
    h.shutdown().await;
}
