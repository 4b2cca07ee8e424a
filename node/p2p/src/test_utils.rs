//! Helpers shared by this crate's tests, the node's tests and the p2p bench (feature
//! `test-utils`): deterministic identities of test nodes, their live bonds, and a wait on the
//! node's events under a timeout. Not for production: the keys are derived from small seeds.

use std::time::Duration;

use ed25519_dalek::SigningKey;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::tx::TxoRef;
use libp2p::PeerId;
use libp2p::identity::Keypair;
use tokio::sync::mpsc::Receiver;

use crate::Event;
use crate::offers::LiveBond;

/// Upper bound on any single wait of a test: generous for a loaded 2-core CI machine; a
/// healthy run takes well under a second per wait.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Identity of test node `i` ([`ident`]): its libp2p key and peer id, its bond's attest key,
/// provider key hash and bond UTxO.
#[derive(Clone)]
pub struct Ident {
    /// The libp2p key (ed25519, seed `[i + 1; 32]`).
    pub key: Keypair,
    /// Its peer id.
    pub peer: PeerId,
    /// The bond's attest key (seed `[0x80 + i; 32]`).
    pub attest: SigningKey,
    /// The provider's key hash, `[i; 28]`.
    pub provider: KeyHash,
    /// The bond UTxO, `[i; 32]#0`.
    pub bond: TxoRef,
}

/// The identity of test node `i` (`i < 0x7f`).
///
/// # Panics
/// Never for `i < 255` (the libp2p seed is 32 bytes).
pub fn ident(i: u8) -> Ident {
    let key = Keypair::ed25519_from_bytes([i + 1; 32]).expect("32-byte seed");
    Ident {
        peer: key.public().to_peer_id(),
        key,
        attest: SigningKey::from_bytes(&[0x80 + i; 32]),
        provider: [i; 28],
        bond: TxoRef {
            tx_hash: [i; 32],
            index: 0,
        },
    }
}

impl Ident {
    /// This node's live bond with `free_gpus` GPUs free, as the indexer would report it.
    pub fn live_bond(&self, free_gpus: u64) -> LiveBond {
        LiveBond {
            bond: self.bond,
            provider: self.provider,
            attest_key: self.attest.verifying_key().to_bytes(),
            peer_id: self.peer.to_bytes(),
            free_gpus,
        }
    }
}

/// Waits for the first event `f` maps to `Some`, under [`TIMEOUT`].
///
/// # Panics
/// When the event loop ended or nothing matched in time (a test failure).
pub async fn wait_for<T>(
    events: &mut Receiver<Event>,
    mut f: impl FnMut(&Event) -> Option<T>,
) -> T {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let e = events.recv().await.expect("event loop alive");
            if let Some(t) = f(&e) {
                return t;
            }
        }
    })
    .await
    .expect("timed out waiting for an event")
}

/// An unsigned offer of `provider` at `peer` carrying `links`, valid `issued_ms..expires_ms`:
/// one bond of one GPU's worth, no GPUs, the unmeasured defaults (for the link matrix's
/// tests; its signature is empty, so no swarm accepts it).
pub fn signed_offer(
    provider: KeyHash,
    peer: PeerId,
    links: Vec<crate::links::Link>,
    issued_ms: u64,
    expires_ms: u64,
) -> crate::offers::SignedOffer {
    crate::offers::SignedOffer {
        body: crate::offers::OfferBody {
            network_magic: 42,
            bond: TxoRef {
                tx_hash: [provider[0]; 32],
                index: 0,
            },
            peer_id: peer.to_bytes(),
            addrs: vec![],
            market: ganglion_market::snapshot::Offer {
                provider,
                bond_gpus: 1,
                price_per_gpu_hour: 1,
                score: 1,
                uplink_mbps: 1000,
                max_job_duration_s: None,
                max_job_nodes: None,
                gpus: vec![],
                direct_capable: false,
                compute: ganglion_market::snapshot::Compute::Unmeasured,
            },
            issued_ms,
            expires_ms,
            links,
        },
        signature: vec![],
    }
}
