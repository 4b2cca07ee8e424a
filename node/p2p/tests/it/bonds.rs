//! Offers are checked against the indexer's active bonds: real Conway blocks (the contracts
//! harness's bond and unbond transactions, assembled by the testnet producer) applied to an
//! indexer over `MemoryKv`, read through `p2p::bonds`.

use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_indexer::store::MemoryKv;
use ganglion_indexer::{Indexer, Watch};
use ganglion_market::snapshot::Offer as MarketOffer;
use ganglion_p2p::offers::{OfferBody, OfferRejection, verify_offer};
use ganglion_p2p::{self as p2p, bonds};
use libp2p::PeerId;
use libp2p::identity::Keypair;

const MAGIC: u64 = 42;

/// Each transaction in its own Conway block, chained from block 1.
fn blocks_of(txs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    ganglion_testnet::producer::chain_of(txs).expect("blocks assemble")
}

fn offer(h: &Harness, i: usize, peer: PeerId, now_ms: u64) -> OfferBody {
    let p = &h.providers[i];
    OfferBody {
        network_magic: MAGIC,
        bond: p.bond.as_ref().expect("bonded").reference,
        peer_id: peer.to_bytes(),
        addrs: vec![],
        market: MarketOffer {
            provider: p.party.hash,
            bond_gpus: u32::try_from(p.gpus).expect("few GPUs"),
            price_per_gpu_hour: 1_000_000,
            score: 100,
            uplink_mbps: 1000,
            max_job_duration_s: None,
            max_job_nodes: None,
            gpus: vec![],
            direct_capable: false,
            compute: ganglion_market::snapshot::Compute::Unmeasured,
        },
        issued_ms: now_ms,
        expires_ms: now_ms + 60_000,
        links: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_offers_are_checked_against_the_indexers_active_bonds() {
    let mut h = Harness::new(2);
    let peers: Vec<PeerId> = (0..2u8)
        .map(|i| {
            Keypair::ed25519_from_bytes([i + 1; 32])
                .expect("seed")
                .public()
                .to_peer_id()
        })
        .collect();
    for (i, peer) in peers.iter().enumerate() {
        // The minimum stake for the provider's GPUs, with the offer's peer id.
        let mut req = h.bond_request(i);
        req.peer_id = peer.to_bytes();
        h.post_bond_with(i, &req).expect("bond posts");
    }
    let bonded_txs = h.world.applied.len();
    // Provider 1 starts unbonding: its bond stops counting.
    let bond1 = h.providers[1].bond.clone().expect("bond");
    h.unbond(1).expect("unbond");
    // Its offers keep naming the bond it posted (now spent by the unbond).
    h.providers[1].bond = Some(bond1.clone());
    let blocks = blocks_of(&h.world.applied);

    let watch = Watch::v2(h.dep.script.hash, h.dep.params.clone());
    let ix = Indexer::new(MemoryKv::new(), watch, 10);
    for b in &blocks[..bonded_txs] {
        ix.apply_block(b).expect("block applies");
    }

    // Both bonds are live, and the snapshot carries what the datum says.
    let snap = bonds::snapshot(&ix).expect("snapshot");
    assert_eq!(snap.len(), 2);
    for (i, peer) in peers.iter().enumerate() {
        let p = &h.providers[i];
        let live = snap
            .get(&p.bond.as_ref().expect("bond").reference)
            .expect("bond in the snapshot");
        assert_eq!(live.provider, p.party.hash);
        assert_eq!(live.attest_key, p.attest_key());
        assert_eq!(live.peer_id, peer.to_bytes());
        assert_eq!(live.free_gpus, p.gpus);
    }
    let now = 1_000_000;
    for (i, peer) in peers.iter().enumerate() {
        let signed = offer(&h, i, *peer, now).sign(&h.providers[i].attest);
        verify_offer(&signed, MAGIC, Some(peer), &snap, now).expect("bonded offer verifies");
    }
    // Signed with another provider's key: refused.
    let forged = offer(&h, 0, peers[0], now).sign(&h.providers[1].attest);
    assert!(matches!(
        verify_offer(&forged, MAGIC, Some(&peers[0]), &snap, now),
        Err(OfferRejection::BadSignature)
    ));

    // After the unbond block, provider 1's offers are unbonded; provider 0's still pass.
    for b in &blocks[bonded_txs..] {
        ix.apply_block(b).expect("block applies");
    }
    let snap = bonds::snapshot(&ix).expect("snapshot");
    assert_eq!(snap.len(), 1);
    let signed = offer(&h, 1, peers[1], now).sign(&h.providers[1].attest);
    assert!(matches!(
        verify_offer(&signed, MAGIC, Some(&peers[1]), &snap, now),
        Err(OfferRejection::Unbonded(r)) if r == bond1.reference
    ));
    let signed = offer(&h, 0, peers[0], now).sign(&h.providers[0].attest);
    verify_offer(&signed, MAGIC, Some(&peers[0]), &snap, now).expect("still bonded");

    // `refresh` hands the indexer's view to a running p2p layer.
    let (client, event_loop, _events, _inbound) = p2p::new(
        Keypair::generate_ed25519(),
        p2p::Config {
            listen: vec![],
            ..p2p::Config::default()
        },
        Default::default(),
    )
    .expect("swarm builds");
    tokio::spawn(event_loop.run());
    assert_eq!(bonds::refresh(&ix, &client).await.expect("refresh"), 1);
}
