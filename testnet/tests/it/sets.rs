//! Inputs, collateral inputs, reference inputs and required signers are sets.
//!
//! The attack: after a payment of 100 ADA to the wallet's own address, a
//! transaction listing that output twice in a tag-258 input set, paying out 199.8 ADA with
//! a 0.2 ADA fee, signed by the wallet key. Conway refuses it while decoding
//! (`decodeSetEnforceNoDuplicates`, protocol version ≥ 9); the devnet refuses it with
//! `DuplicateSetElement` and the wallet's balance does not move. The same transaction with
//! the input once (paying 99.8 ADA) is valid and included.

use ganglion_cardano::client::{ClientError, N2cClient};
use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::genesis::encode_output;
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::{Rejection, decode_tx, phase1, tx_hash};
use pallas_addresses::Network;
use pallas_codec::minicbor::{self, Encoder};
use pallas_crypto::hash::{Hash, Hasher};

use crate::common::*;

const ADA: u64 = 1_000_000;

type EncResult = Result<(), minicbor::encode::Error<std::convert::Infallible>>;

/// One encoded input `[txid, index]`.
pub(crate) fn input(r: &TxoRef) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    e.array(2)
        .and_then(|e| e.bytes(r.tx_hash.as_ref()))
        .and_then(|e| e.u64(r.index))
        .expect("encode");
    buf
}

/// `#6.258([items…])`, items given as raw CBOR (so a repeat can be written).
pub(crate) fn tagged_set(items: &[Vec<u8>]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    e.tag(minicbor::data::Tag::new(258))
        .and_then(|e| e.array(items.len() as u64))
        .expect("encode");
    for i in items {
        buf.extend_from_slice(i);
    }
    buf
}

/// A body `{0: inputs, 1: outputs, 2: fee, extra…}` from raw CBOR parts, keys ascending.
pub(crate) fn body(
    inputs: Vec<u8>,
    outputs: &[Vec<u8>],
    fee: u64,
    extra: &[(u8, Vec<u8>)],
) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    e.map(3 + extra.len() as u64)
        .and_then(|e| e.u8(0))
        .expect("encode");
    buf.extend_from_slice(&inputs);
    let mut e = Encoder::new(&mut buf);
    e.u8(1)
        .and_then(|e| e.array(outputs.len() as u64))
        .expect("encode");
    for o in outputs {
        buf.extend_from_slice(o);
    }
    let mut e = Encoder::new(&mut buf);
    e.u8(2).and_then(|e| e.u64(fee)).expect("encode");
    for (k, v) in extra {
        let mut e = Encoder::new(&mut buf);
        e.u8(*k).expect("encode");
        buf.extend_from_slice(v);
    }
    buf
}

/// `[body, {0: [[vkey, sig]]}, true, null]` signed by `key`.
pub(crate) fn signed(body: &[u8], key: &DevKey) -> Vec<u8> {
    let hash = Hasher::<256>::hash(body);
    let mut tx = vec![0x84];
    tx.extend_from_slice(body);
    let mut wit = Vec::new();
    let mut e = Encoder::new(&mut wit);
    e.map(1)
        .and_then(|e| e.u8(0))
        .and_then(|e| e.array(1))
        .and_then(|e| e.array(2))
        .and_then(|e| e.bytes(&key.public_key()))
        .and_then(|e| e.bytes(&key.sign(hash.as_ref())))
        .expect("encode");
    tx.extend_from_slice(&wit);
    tx.extend_from_slice(&[0xf5, 0xf6]);
    tx
}

fn balance(h: &ganglion_testnet::devnet::DevnetHandle, addr: &[u8]) -> u64 {
    h.chain()
        .utxos_at(addr)
        .expect("utxos")
        .iter()
        .map(|(_, raw)| phase1::output_facts(raw).expect("output").value.coin as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_listed_twice_is_refused_and_the_balance_does_not_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let mut events = h.events();
    let mut c = N2cClient::connect_unix(h.n2c_socket().expect("socket"), h.magic())
        .await
        .expect("n2c connect");
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let policy = Hash::<28>::new([0; 28]);

    // 100 ADA to the wallet's own address (output 0).
    let (pay, _) = payment(&h, 1, 1, 100 * ADA);
    c.submit(&pay).await.expect("payment accepted");
    let paid = tx_hash(&decode_tx(&pay).expect("tx"));
    wait_included(&mut events, paid).await;
    let hundred = TxoRef {
        tx_hash: *paid,
        index: 0,
    };
    let before = balance(&h, &me);

    // The attack: the same input twice, 2 × 100 ADA − 0.2 ADA out, 0.2 ADA fee.
    let fee = 200_000;
    let out = encode_output(&me, 200 * ADA - fee, &policy, &[], 0);
    let twice = tagged_set(&[input(&hundred), input(&hundred)]);
    let attack = signed(&body(twice, &[out], fee, &[]), &key);
    match c.submit(&attack).await {
        Err(ClientError::Rejected(r)) => {
            assert_eq!(r.rule, "DuplicateSetElement", "{}", r.message);
            assert!(r.message.contains(&hundred.to_string()), "{}", r.message);
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(balance(&h, &me), before, "no ADA was created");
    assert!(
        h.chain()
            .utxos_at(&me)
            .expect("utxos")
            .iter()
            .any(|(r, _)| *r == hundred),
        "the 100 ADA output is still unspent"
    );

    // The same transaction with the input once is valid: only the repeat was wrong.
    let once = tagged_set(&[input(&hundred)]);
    let out = encode_output(&me, 100 * ADA - fee, &policy, &[], 0);
    let honest = signed(&body(once, &[out], fee, &[]), &key);
    c.submit(&honest).await.expect("the input once is accepted");
    wait_included(&mut events, tx_hash(&decode_tx(&honest).expect("tx"))).await;
    assert_eq!(
        balance(&h, &me),
        before - fee,
        "only the fee left the wallet"
    );
    c.close().await;
    h.shutdown().await;
}

#[test]
fn a_repeat_in_collateral_reference_inputs_or_required_signers_does_not_decode() {
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let policy = Hash::<28>::new([0; 28]);
    let a = TxoRef {
        tx_hash: [1; 32],
        index: 0,
    };
    let b = TxoRef {
        tx_hash: [1; 32],
        index: 1,
    };
    let out = encode_output(&me, 5 * ADA, &policy, &[], 0);
    let inputs = tagged_set(&[input(&a)]);
    let signer = {
        let mut buf = Vec::new();
        Encoder::new(&mut buf)
            .bytes(key.key_hash().as_ref())
            .expect("encode");
        buf
    };
    let cases: [(u8, Vec<u8>, &str); 3] = [
        (13, tagged_set(&[input(&b), input(&b)]), "collateral"),
        (
            14,
            tagged_set(&[signer.clone(), signer]),
            "required_signers",
        ),
        (18, tagged_set(&[input(&b), input(&b)]), "reference_inputs"),
    ];
    for (k, set, field) in cases {
        let tx = signed(
            &body(
                inputs.clone(),
                std::slice::from_ref(&out),
                200_000,
                &[(k, set)],
            ),
            &key,
        );
        match decode_tx(&tx) {
            Err(Rejection::DuplicateSetElement { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected DuplicateSetElement, got {other:?}"),
        }
    }
    // Distinct elements decode (the check is about repeats, not about the tag).
    let tx = signed(
        &body(
            inputs,
            &[out],
            200_000,
            &[(18, tagged_set(&[input(&a), input(&b)]))],
        ),
        &key,
    );
    assert!(decode_tx(&tx).is_ok());
}

/// Withdrawals and votes need state the devnet never has (registered reward accounts,
/// DReps, committee members, pools), so the real rules refuse them too and the devnet names
/// those rules; certificates it cannot judge are refused as `Unsupported`.
#[test]
fn withdrawals_votes_and_certificates_are_refused_by_name() {
    use ganglion_testnet::genesis::Genesis;
    use ganglion_testnet::ledger::utxo::UtxoSet;
    use ganglion_testnet::ledger::{Rules, validate};

    let g = Genesis::devnet().expect("genesis");
    let rules = Rules::new(g.protocol_params.clone(), g.slot_config(), g.network_id);
    let empty = UtxoSet::from_entries([]);
    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let out = encode_output(&me, 5 * ADA, &Hash::new([0; 28]), &[], 0);
    let inputs = tagged_set(&[input(&TxoRef {
        tx_hash: [1; 32],
        index: 0,
    })]);
    let raw = |f: &dyn Fn(&mut Encoder<&mut Vec<u8>>) -> EncResult| {
        let mut buf = Vec::new();
        f(&mut Encoder::new(&mut buf)).expect("encode");
        buf
    };
    // {reward_account: 0}: a testnet stake-key account (header 0xe0).
    let mut account = vec![0xe0];
    account.extend_from_slice(key.key_hash().as_ref());
    let withdrawals = raw(&|e| {
        e.map(1)?.bytes(&account)?.u8(0)?;
        Ok(())
    });
    // {[2, drep key hash]: {[txid, 0]: [yes, null]}}
    let votes = raw(&|e| {
        e.map(1)?.array(2)?.u8(2)?.bytes(key.key_hash().as_ref())?;
        e.map(1)?.array(2)?.bytes(&[7; 32])?.u8(0)?;
        e.array(2)?.u8(1)?.null()?;
        Ok(())
    });
    // [[0, [0, key hash]]]: a stake registration.
    let certs = raw(&|e| {
        e.array(1)?
            .array(2)?
            .u8(0)?
            .array(2)?
            .u8(0)?
            .bytes(key.key_hash().as_ref())?;
        Ok(())
    });
    let cases: [(u8, Vec<u8>, &str); 3] = [
        (4, certs, "Unsupported"),
        (5, withdrawals, "WithdrawalsNotInRewardsCERTS"),
        (19, votes, "VotersDoNotExist"),
    ];
    for (k, field, rule) in cases {
        let tx = signed(
            &body(
                inputs.clone(),
                std::slice::from_ref(&out),
                200_000,
                &[(k, field)],
            ),
            &key,
        );
        match validate(&rules, &empty, &tx, 1) {
            Err(r) => assert_eq!(r.rule(), rule, "body key {k}: {r}"),
            Ok(_) => panic!("body key {k} accepted"),
        }
    }
}

/// `[body, witnesses, true, null]` with the witness set given as raw CBOR.
fn with_witnesses(body: &[u8], witnesses: &[u8]) -> Vec<u8> {
    let mut tx = vec![0x84];
    tx.extend_from_slice(body);
    tx.extend_from_slice(witnesses);
    tx.extend_from_slice(&[0xf5, 0xf6]);
    tx
}

/// `[vkey, signature]` by `key` over `body`'s hash.
fn vkey_witness(body: &[u8], key: &DevKey) -> Vec<u8> {
    let hash = Hasher::<256>::hash(body);
    let mut buf = Vec::new();
    Encoder::new(&mut buf)
        .array(2)
        .and_then(|e| e.bytes(&key.public_key()))
        .and_then(|e| e.bytes(&key.sign(hash.as_ref())))
        .expect("encode");
    buf
}

/// In the witness set, Conway (protocol version ≥ 9) decodes each Plutus script set with
/// `scriptDecoderV9`, which refuses a repeat; vkey witnesses are merged until version 12, so
/// at the devnet's version 10 a signature given twice counts once and the transaction is
/// valid.
#[test]
fn a_repeated_plutus_script_does_not_decode_and_a_repeated_signature_counts_once() {
    use ganglion_testnet::genesis::Genesis;
    use ganglion_testnet::ledger::utxo::UtxoSet;
    use ganglion_testnet::ledger::{Rules, validate};

    let key = DevKey::from_seed(1);
    let me = key.address(Network::Testnet).to_vec();
    let policy = Hash::<28>::new([0; 28]);
    let spent = TxoRef {
        tx_hash: [3; 32],
        index: 0,
    };
    let fee = 300_000;
    let out = encode_output(&me, 10 * ADA - fee, &policy, &[], 0);
    let b = body(tagged_set(&[input(&spent)]), &[out], fee, &[]);
    let wit = vkey_witness(&b, &key);
    // A Plutus V3 script (the bytes need not run: decoding fails first).
    let script = {
        let mut buf = Vec::new();
        Encoder::new(&mut buf)
            .bytes(&[0x46, 0x01, 0x00, 0x00, 0x22, 0x49, 0x01])
            .expect("encode");
        buf
    };
    // {0: [w], 7: #6.258([s, s])}
    let mut ws = vec![0xa2, 0x00, 0x81];
    ws.extend_from_slice(&wit);
    ws.push(0x07);
    ws.extend_from_slice(&tagged_set(&[script.clone(), script]));
    match decode_tx(&with_witnesses(&b, &ws)) {
        Err(Rejection::DuplicateSetElement { field, .. }) => assert_eq!(field, "plutus_v3_script"),
        other => panic!("expected DuplicateSetElement, got {other:?}"),
    }

    // {0: #6.258([w, w])}: decodes, the key signed once, the payment is valid.
    let mut ws = vec![0xa1, 0x00];
    ws.extend_from_slice(&tagged_set(&[wit.clone(), wit]));
    let tx = with_witnesses(&b, &ws);
    let g = Genesis::devnet().expect("genesis");
    let rules = Rules::new(g.protocol_params.clone(), g.slot_config(), g.network_id);
    let utxo = UtxoSet::from_entries([(spent, encode_output(&me, 10 * ADA, &policy, &[], 0))]);
    let ok = validate(&rules, &utxo, &tx, 1).expect("a repeated vkey witness is merged");
    assert_eq!(ok.delta.consumed.len(), 1);
}
