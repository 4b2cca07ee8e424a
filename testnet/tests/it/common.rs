//! Shared helpers: start a devnet, build payments, wait for events under a timeout.

use std::time::Duration;

use ganglion_cardano::txo::TxoRef;
use ganglion_testnet::chain::ChainEvent;
use ganglion_testnet::devnet::{self, DevnetConfig, DevnetHandle};
use ganglion_testnet::genesis::{Genesis, encode_output};
use ganglion_testnet::keys::DevKey;
use ganglion_testnet::ledger::phase1::output_facts;
use ganglion_testnet::txbuild::{self, TxSpec};
use pallas_addresses::Network;
use pallas_crypto::hash::Hash;
use tokio::sync::broadcast;

/// Upper bound for anything a test waits for.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(20);

/// Test slot length (ms): short so blocks come quickly.
pub(crate) const SLOT_MS: u32 = 100;

pub(crate) fn genesis() -> Genesis {
    let mut g = Genesis::devnet().expect("devnet genesis");
    g.slot_length_ms = SLOT_MS;
    g
}

pub(crate) async fn start(dir: &std::path::Path, g: Genesis) -> DevnetHandle {
    devnet::start(DevnetConfig::new(g, dir))
        .await
        .expect("devnet starts")
}

/// The richest confirmed UTxO of key `seed`: (reference, lovelace, NTX).
pub(crate) fn richest_utxo(h: &DevnetHandle, seed: u32) -> (TxoRef, u64, u64) {
    let g = h.genesis();
    let ntx_id = (
        g.ntx_policy_id().expect("policy").to_vec(),
        g.ntx_asset_name().expect("name"),
    );
    let addr = DevKey::from_seed(seed).address(Network::Testnet).to_vec();
    h.chain()
        .utxos_at(&addr)
        .expect("query")
        .into_iter()
        .map(|(r, raw)| {
            let f = output_facts(&raw).expect("output");
            let ntx = f.value.assets.get(&ntx_id).copied().unwrap_or(0);
            (r, f.value.coin as u64, ntx as u64)
        })
        .max_by_key(|(_, l, _)| *l)
        .expect("funded")
}

/// A payment of `amount` lovelace from key `from`'s richest confirmed UTxO to key `to`,
/// change (with all the NTX) back to `from`, exact fee.
pub(crate) fn payment(h: &DevnetHandle, from: u32, to: u32, amount: u64) -> (Vec<u8>, TxSpec) {
    let g = h.genesis();
    let (input, lovelace, ntx) = richest_utxo(h, from);
    let policy = g.ntx_policy_id().expect("policy");
    let name = g.ntx_asset_name().expect("name");
    let from_addr = DevKey::from_seed(from).address(Network::Testnet).to_vec();
    let to_addr = DevKey::from_seed(to).address(Network::Testnet).to_vec();
    let mut spec = TxSpec {
        inputs: vec![input],
        ..Default::default()
    };
    let key = DevKey::from_seed(from);
    let bytes = txbuild::build_balanced(&g.protocol_params, &mut spec, &[&key], 0, |s, fee| {
        s.outputs = vec![
            encode_output(&to_addr, amount, &policy, &name, 0),
            encode_output(&from_addr, lovelace - amount - fee, &policy, &name, ntx),
        ];
    });
    (bytes, spec)
}

/// Wait (under [`TIMEOUT`]) for a forged block containing `tx`.
pub(crate) async fn wait_included(
    events: &mut broadcast::Receiver<ChainEvent>,
    tx: Hash<32>,
) -> u64 {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            match events.recv().await {
                Ok(ChainEvent::BlockForged { block, txs }) if txs.contains(&tx) => {
                    return block.number;
                }
                Ok(_) => {}
                Err(e) => panic!("event stream failed: {e}"),
            }
        }
    })
    .await
    .expect("transaction included before the timeout")
}
