//! Signed offers: the gossipsub payload, its signature, its checks, and the live market.
//!
//! An offer is CBOR (`ciborium`, serde) of [`SignedOffer`]. The signature is ed25519 by the
//! bond's `attest_key` over [`OfferBody::signed_bytes`]: CBOR of the pair
//! `("ganglion/offer/v1", body)`, the domain tag keeping offer signatures apart from the
//! PlutusData messages the same key signs for the escrow (`Acceptance`, `AttestationBody`).
//!
//! A received offer counts only when [`verify_offer`] passes: right network, not expired, the
//! author is the peer the offer names, the bond is live in the [`BondSnapshot`] (taken from the
//! indexer's `active_bonds()`), the bond names the same provider, attest key and peer id, and the
//! signature verifies.

use std::collections::HashMap;

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::tx::TxoRef;
use libp2p::PeerId;
use serde::{Deserialize, Serialize};

use ganglion_market::snapshot::Offer as MarketOffer;

use super::links::{Link, MAX_OFFER_LINKS};

/// Largest encoded [`SignedOffer`] accepted, bytes. An offer with 16 addresses and 16 GPU
/// groups encodes to about 3 KiB, and [`MAX_OFFER_LINKS`] links add about 8 KiB: 16 KiB leaves
/// room and is also gossipsub's transmit cap. A publisher whose offer would exceed it (every
/// other cap reached) drops its last links ([`super::links::fit`]).
pub const MAX_OFFER_BYTES: usize = 16 * 1024;
/// Most listen addresses an offer may carry.
pub const MAX_OFFER_ADDRS: usize = 16;
/// Most GPU groups an offer may carry.
pub const MAX_OFFER_GPU_GROUPS: usize = 64;
/// Longest validity an offer may claim, ms (1 hour): a provider re-publishes well before.
pub const MAX_OFFER_TTL_MS: u64 = 3_600_000;
/// Gossipsub P4 weight for an invalid offer (score −10 × count² per offence; graylisted at −80).
pub const INVALID_OFFER_WEIGHT: f64 = -10.0;

const OFFER_DOMAIN: &str = "ganglion/offer/v1";

/// What a provider advertises. CBOR map (serde field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferBody {
    /// Cardano network magic the offer is for (the gossipsub topic is per magic, see
    /// [`super::protocols::offer_topic`]).
    pub network_magic: u64,
    /// The bond backing the offer (a live bond UTxO).
    pub bond: TxoRef,
    /// The provider's libp2p peer id, as bytes (`PeerId::to_bytes`).
    pub peer_id: Vec<u8>,
    /// Multiaddrs (binary form) the provider listens on.
    pub addrs: Vec<Vec<u8>>,
    /// Inventory summary, free GPUs, price and score, as the matcher reads them.
    pub market: MarketOffer,
    /// When the offer was made, POSIX ms.
    pub issued_ms: u64,
    /// When the offer stops counting, POSIX ms.
    pub expires_ms: u64,
    /// What the provider measured of its paths to other peers (ping RTT window, throughput),
    /// at most [`MAX_OFFER_LINKS`], signed with the rest: the orchestrator's latency matrix
    /// ([`super::matrix`]). Absent in older offers = none; an offer without links encodes as
    /// one made before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
}

/// An offer and its signature. This is the gossipsub message payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedOffer {
    /// The offer.
    pub body: OfferBody,
    /// ed25519 signature (64 bytes) by the bond's attest key over [`OfferBody::signed_bytes`].
    pub signature: Vec<u8>,
}

/// Why an offer payload was refused. One variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OfferRejection {
    /// The payload is larger than [`MAX_OFFER_BYTES`].
    #[error("offer is {size} bytes, more than {max}")]
    TooLarge {
        /// Payload size, bytes.
        size: usize,
        /// The cap, bytes.
        max: usize,
    },
    /// The payload is not a CBOR `SignedOffer`: the decoder's message (text: rejections are
    /// cloned and compared, which ciborium's error is not).
    #[error("offer does not decode: {0}")]
    Malformed(String),
    /// Too many addresses, GPU groups or links.
    #[error("offer has too many entries in {field}")]
    TooManyEntries {
        /// The field.
        field: &'static str,
    },
    /// For another network.
    #[error("offer is for network {got}, this node is on {expected}")]
    WrongNetwork {
        /// This node's magic.
        expected: u64,
        /// The offer's magic.
        got: u64,
    },
    /// Past its expiry, or claiming a validity longer than [`MAX_OFFER_TTL_MS`].
    #[error("offer expired at {expires_ms} ms (now {now_ms} ms)")]
    Expired {
        /// The offer's expiry, POSIX ms.
        expires_ms: u64,
        /// Now, POSIX ms.
        now_ms: u64,
    },
    /// Validity window longer than allowed.
    #[error("offer valid for {ttl_ms} ms, more than {max_ms} ms")]
    TooLong {
        /// Claimed validity, ms.
        ttl_ms: u64,
        /// The cap, ms.
        max_ms: u64,
    },
    /// The offer's peer id is not the gossip author's.
    #[error("offer names another peer than its author")]
    NotAuthor,
    /// Neither the bond nor a continuation of it (the same provider's live bond for the same
    /// peer) is among the live bonds.
    #[error("bond {}#{} is not live", hex::encode(.0.tx_hash), .0.index)]
    Unbonded(TxoRef),
    /// The bond is live but belongs to another provider, attest key or peer.
    #[error("bond does not match the offer's {field}")]
    BondMismatch {
        /// The field that differs.
        field: &'static str,
    },
    /// The signature is missing, malformed or does not verify.
    #[error("bad offer signature")]
    BadSignature,
}

/// A bond as the p2p layer needs it: a projection of the indexer's `ActiveBond`
/// (`bond`, `datum.provider`, `datum.attest_key`, `datum.peer_id`, `free_gpus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBond {
    /// The bond UTxO.
    pub bond: TxoRef,
    /// The provider's payment key hash.
    pub provider: KeyHash,
    /// The ed25519 key that signs offers, acceptances and attestations.
    pub attest_key: [u8; 32],
    /// The libp2p peer id bytes the bond names.
    pub peer_id: Vec<u8>,
    /// GPUs the bond backs that are not in assigned jobs.
    pub free_gpus: u64,
}

/// The live bonds at one moment, keyed by bond UTxO. Replace it whenever the indexer moves.
#[derive(Debug, Clone, Default)]
pub struct BondSnapshot {
    by_ref: HashMap<TxoRef, LiveBond>,
}

impl BondSnapshot {
    /// Indexes `bonds` (a later duplicate of a bond reference wins).
    pub fn new(bonds: impl IntoIterator<Item = LiveBond>) -> Self {
        Self {
            by_ref: bonds.into_iter().map(|b| (b.bond, b)).collect(),
        }
    }

    /// The live bond at `bond`, if any.
    pub fn get(&self, bond: &TxoRef) -> Option<&LiveBond> {
        self.by_ref.get(bond)
    }

    /// The live bond backing an offer: the one it names, or — when that UTxO was spent by a
    /// transaction that continued the bond (escrow v2: every assign that commits it and every
    /// claim that releases it) — the live bond of the same provider for the same peer. An
    /// offer stays in the market across its provider's jobs instead of dropping out until
    /// the provider's next offer names the new UTxO; its signature is still checked against
    /// the live bond's attest key.
    pub fn backing(&self, offer: &OfferBody) -> Option<&LiveBond> {
        self.by_ref.get(&offer.bond).or_else(|| {
            self.by_ref
                .values()
                .filter(|b| b.provider == offer.market.provider && b.peer_id == offer.peer_id)
                .min_by_key(|b| b.bond)
        })
    }

    /// Number of live bonds.
    pub fn len(&self) -> usize {
        self.by_ref.len()
    }

    /// Whether there is no live bond.
    pub fn is_empty(&self) -> bool {
        self.by_ref.is_empty()
    }
}

impl OfferBody {
    /// The exact bytes signed: CBOR of `("ganglion/offer/v1", self)`.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        // Writing into a Vec cannot fail, and every field serialises.
        if ciborium::into_writer(&(OFFER_DOMAIN, self), &mut out).is_err() {
            out.clear();
        }
        out
    }

    /// Signs the offer with the bond's attest key.
    pub fn sign(self, attest: &ed25519_dalek::SigningKey) -> SignedOffer {
        let signature = ganglion_contracts::v2::signed::sign(attest, &self.signed_bytes());
        SignedOffer {
            body: self,
            signature,
        }
    }
}

impl SignedOffer {
    /// CBOR bytes, the gossipsub payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(768);
        if ciborium::into_writer(self, &mut out).is_err() {
            out.clear();
        }
        out
    }

    /// Decodes a gossipsub payload; checks only the shape (size, CBOR, entry caps).
    ///
    /// # Errors
    /// [`OfferRejection::TooLarge`], [`OfferRejection::Malformed`],
    /// [`OfferRejection::TooManyEntries`].
    pub fn decode(bytes: &[u8]) -> Result<Self, OfferRejection> {
        if bytes.len() > MAX_OFFER_BYTES {
            return Err(OfferRejection::TooLarge {
                size: bytes.len(),
                max: MAX_OFFER_BYTES,
            });
        }
        let offer: SignedOffer =
            ciborium::from_reader(bytes).map_err(|e| OfferRejection::Malformed(e.to_string()))?;
        if offer.body.addrs.len() > MAX_OFFER_ADDRS {
            return Err(OfferRejection::TooManyEntries { field: "addrs" });
        }
        if offer.body.market.gpus.len() > MAX_OFFER_GPU_GROUPS {
            return Err(OfferRejection::TooManyEntries { field: "gpus" });
        }
        if offer.body.links.len() > MAX_OFFER_LINKS {
            return Err(OfferRejection::TooManyEntries { field: "links" });
        }
        Ok(offer)
    }
}

/// Checks a decoded offer against the network, the clock, its gossip author and the live bonds.
/// Cheap checks first; the signature last.
///
/// `author` is the gossipsub message source (gossipsub signs it with the peer's identity key).
///
/// # Errors
/// The first [`OfferRejection`] rule broken.
pub fn verify_offer(
    offer: &SignedOffer,
    network_magic: u64,
    author: Option<&PeerId>,
    bonds: &BondSnapshot,
    now_ms: u64,
) -> Result<(), OfferRejection> {
    let b = &offer.body;
    if b.network_magic != network_magic {
        return Err(OfferRejection::WrongNetwork {
            expected: network_magic,
            got: b.network_magic,
        });
    }
    if b.expires_ms <= now_ms {
        return Err(OfferRejection::Expired {
            expires_ms: b.expires_ms,
            now_ms,
        });
    }
    let ttl_ms = b.expires_ms.saturating_sub(b.issued_ms.min(now_ms));
    if ttl_ms > MAX_OFFER_TTL_MS {
        return Err(OfferRejection::TooLong {
            ttl_ms,
            max_ms: MAX_OFFER_TTL_MS,
        });
    }
    if let Some(author) = author
        && author.to_bytes() != b.peer_id
    {
        return Err(OfferRejection::NotAuthor);
    }
    let bond = bonds.backing(b).ok_or(OfferRejection::Unbonded(b.bond))?;
    if bond.provider != b.market.provider {
        return Err(OfferRejection::BondMismatch { field: "provider" });
    }
    if bond.peer_id != b.peer_id {
        return Err(OfferRejection::BondMismatch { field: "peer_id" });
    }
    ganglion_contracts::v2::signed::verify(&bond.attest_key, &b.signed_bytes(), &offer.signature)
        .map_err(|_| OfferRejection::BadSignature)
}

/// The live market: the newest verified offer per provider, dropped at expiry.
///
/// Bounded by the bond snapshot: only bonded providers get in, one entry each.
#[derive(Debug, Clone, Default)]
pub struct Market {
    by_provider: HashMap<KeyHash, SignedOffer>,
}

impl Market {
    /// Inserts a verified offer; keeps the newer one (by `issued_ms`) when the provider already
    /// has one. Returns whether the offer was stored.
    pub fn insert(&mut self, offer: SignedOffer) -> bool {
        let key = offer.body.market.provider;
        match self.by_provider.get(&key) {
            Some(old) if old.body.issued_ms >= offer.body.issued_ms => false,
            _ => {
                self.by_provider.insert(key, offer);
                true
            }
        }
    }

    /// Drops expired offers and offers whose bond left `bonds`; returns the providers dropped.
    pub fn prune(&mut self, now_ms: u64, bonds: &BondSnapshot) -> Vec<KeyHash> {
        let mut gone = Vec::new();
        self.by_provider.retain(|k, o| {
            let keep = o.body.expires_ms > now_ms && bonds.backing(&o.body).is_some();
            if !keep {
                gone.push(*k);
            }
            keep
        });
        gone
    }

    /// The signed offers, in no particular order.
    pub fn offers(&self) -> impl Iterator<Item = &SignedOffer> {
        self.by_provider.values()
    }

    /// The matcher's view: one [`MarketOffer`] per provider, ready for
    /// [`ganglion_market::snapshot::MarketSnapshot::build`].
    pub fn market_offers(&self) -> Vec<MarketOffer> {
        self.by_provider
            .values()
            .map(|o| o.body.market.clone())
            .collect()
    }

    /// Number of providers with a live offer.
    pub fn len(&self) -> usize {
        self.by_provider.len()
    }

    /// Whether no offer is live.
    pub fn is_empty(&self) -> bool {
        self.by_provider.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    struct World {
        key: SigningKey,
        peer: PeerId,
        bonds: BondSnapshot,
    }

    fn world() -> World {
        let key = SigningKey::from_bytes(&[9; 32]);
        let peer = PeerId::random();
        let bonds = BondSnapshot::new([LiveBond {
            bond: TxoRef {
                tx_hash: [1; 32],
                index: 0,
            },
            provider: [2; 28],
            attest_key: key.verifying_key().to_bytes(),
            peer_id: peer.to_bytes(),
            free_gpus: 8,
        }]);
        World { key, peer, bonds }
    }

    fn body(w: &World) -> OfferBody {
        OfferBody {
            network_magic: 42,
            bond: TxoRef {
                tx_hash: [1; 32],
                index: 0,
            },
            peer_id: w.peer.to_bytes(),
            addrs: vec![],
            market: MarketOffer {
                provider: [2; 28],
                bond_gpus: 8,
                price_per_gpu_hour: 10,
                score: 1,
                uplink_mbps: 100,
                max_job_duration_s: None,
                max_job_nodes: None,
                gpus: vec![],
                direct_capable: false,
                compute: ganglion_market::snapshot::Compute::Unmeasured,
            },
            issued_ms: 1_000,
            expires_ms: 61_000,
            links: vec![],
        }
    }

    fn check(w: &World, o: &SignedOffer, now: u64) -> Result<(), OfferRejection> {
        let decoded = SignedOffer::decode(&o.encode())?;
        assert_eq!(&decoded, o);
        verify_offer(&decoded, 42, Some(&w.peer), &w.bonds, now)
    }

    #[test]
    fn a_signed_bonded_offer_passes() {
        let w = world();
        check(&w, &body(&w).sign(&w.key), 2_000).unwrap();
    }

    #[test]
    fn an_offer_follows_its_bond_to_the_utxo_an_assign_or_claim_continued_it_at() {
        let w = world();
        // The offer names the bond's previous UTxO; the live bond (same provider, same peer)
        // backs it, in verification and in the market.
        let mut moved = body(&w);
        moved.bond.tx_hash = [7; 32];
        let o = moved.sign(&w.key);
        check(&w, &o, 2_000).unwrap();
        let mut m = Market::default();
        assert!(m.insert(o));
        assert!(m.prune(2_000, &w.bonds).is_empty());
        assert_eq!(m.market_offers().len(), 1);
        assert_eq!(m.prune(2_000, &BondSnapshot::default()), vec![[2; 28]]);
    }

    #[test]
    fn each_rule_rejects() {
        let w = world();
        let ok = body(&w).sign(&w.key);
        assert!(matches!(
            check(&w, &ok, 61_000),
            Err(OfferRejection::Expired { .. })
        ));
        assert!(matches!(
            verify_offer(&ok, 1, Some(&w.peer), &w.bonds, 2_000),
            Err(OfferRejection::WrongNetwork { .. })
        ));
        assert_eq!(
            verify_offer(&ok, 42, Some(&PeerId::random()), &w.bonds, 2_000),
            Err(OfferRejection::NotAuthor)
        );
        let mut long = body(&w);
        long.expires_ms = long.issued_ms + MAX_OFFER_TTL_MS + 1;
        assert!(matches!(
            check(&w, &long.sign(&w.key), 2_000),
            Err(OfferRejection::TooLong { .. })
        ));
        let mut moved = body(&w);
        moved.bond.index = 1;
        let gone = BondSnapshot::new(Vec::new());
        assert!(matches!(
            verify_offer(&moved.clone().sign(&w.key), 42, Some(&w.peer), &gone, 2_000),
            Err(OfferRejection::Unbonded(_))
        ));
        let mut elsewhere = moved.clone();
        elsewhere.peer_id = PeerId::random().to_bytes();
        assert!(matches!(
            verify_offer(&elsewhere.sign(&w.key), 42, None, &w.bonds, 2_000),
            Err(OfferRejection::Unbonded(_))
        ));
        let mut other = body(&w);
        other.market.provider = [3; 28];
        assert_eq!(
            check(&w, &other.sign(&w.key), 2_000),
            Err(OfferRejection::BondMismatch { field: "provider" })
        );
        let forged = body(&w).sign(&SigningKey::from_bytes(&[8; 32]));
        assert_eq!(check(&w, &forged, 2_000), Err(OfferRejection::BadSignature));
        let mut unsigned = ok.clone();
        unsigned.signature.clear();
        assert_eq!(
            check(&w, &unsigned, 2_000),
            Err(OfferRejection::BadSignature)
        );
        let mut tampered = ok.clone();
        tampered.body.market.price_per_gpu_hour = 1;
        assert_eq!(
            check(&w, &tampered, 2_000),
            Err(OfferRejection::BadSignature)
        );
        let mut many = body(&w);
        many.addrs = vec![vec![0]; MAX_OFFER_ADDRS + 1];
        assert_eq!(
            SignedOffer::decode(&many.sign(&w.key).encode()),
            Err(OfferRejection::TooManyEntries { field: "addrs" })
        );
        assert!(matches!(
            SignedOffer::decode(&vec![0u8; MAX_OFFER_BYTES + 1]),
            Err(OfferRejection::TooLarge { .. })
        ));
    }

    fn full_link(i: u64) -> Link {
        Link {
            peer: PeerId::random().to_bytes(),
            rtt_p50_us: u32::MAX - 1,
            rtt_p90_us: u32::MAX,
            mbps: Some(u32::MAX),
            measured_ms: u64::MAX - i,
        }
    }

    #[test]
    fn links_are_signed_capped_and_fit_the_size_cap() {
        let w = world();
        let mut b = body(&w);
        b.links = (0..MAX_OFFER_LINKS as u64).map(full_link).collect();
        let o = b.clone().sign(&w.key);
        let size = o.encode().len();
        // Every link at its widest: about 150 bytes each, under 10 KiB for the 64.
        assert!(size < 10 * 1024, "{size} bytes");
        check(&w, &o, 2_000).unwrap();
        let mut tampered = o.clone();
        tampered.body.links[3].rtt_p50_us = 1;
        assert_eq!(
            check(&w, &tampered, 2_000),
            Err(OfferRejection::BadSignature)
        );
        let mut too_many = b.clone();
        too_many.links.push(full_link(99));
        assert_eq!(
            SignedOffer::decode(&too_many.sign(&w.key).encode()),
            Err(OfferRejection::TooManyEntries { field: "links" })
        );
        // An offer without links encodes as one made before the field existed.
        let bare = body(&w).sign(&w.key);
        assert!(!String::from_utf8_lossy(&bare.encode()).contains("links"));
        check(&w, &bare, 2_000).unwrap();
    }

    #[test]
    fn an_offer_at_every_other_cap_drops_its_last_links_to_fit() {
        let w = world();
        let mut b = body(&w);
        b.addrs = vec![vec![0xff; 40]; MAX_OFFER_ADDRS];
        b.market.gpus = (0..MAX_OFFER_GPU_GROUPS)
            .map(|i| ganglion_market::snapshot::OfferedGpus {
                model: ganglion_market::snapshot::GpuModel {
                    name: format!("NVIDIA H100 80GB HBM3 #{i}"),
                    vram_mib: u64::MAX,
                    gfx_target: Some("gfx942".into()),
                    fabric: Some("fabric-of-a-long-name".into()),
                    ..Default::default()
                },
                free: u32::MAX,
                declared: false,
            })
            .collect();
        b.links = (0..MAX_OFFER_LINKS as u64).map(full_link).collect();
        assert!(b.clone().sign(&w.key).encode().len() > MAX_OFFER_BYTES);
        let dropped = super::super::links::fit(&mut b);
        assert!(dropped > 0 && !b.links.is_empty(), "{dropped}");
        let o = b.sign(&w.key);
        assert!(o.encode().len() <= MAX_OFFER_BYTES);
        check(&w, &o, 2_000).unwrap();
        // A body that fits keeps every link.
        let mut small = body(&w);
        small.links = (0..MAX_OFFER_LINKS as u64).map(full_link).collect();
        assert_eq!(super::super::links::fit(&mut small), 0);
    }

    #[test]
    fn the_market_keeps_the_newest_offer_and_prunes_expired_and_unbonded() {
        let w = world();
        let mut m = Market::default();
        let old = body(&w).sign(&w.key);
        let mut newer = body(&w);
        newer.issued_ms += 1;
        newer.expires_ms += 1;
        assert!(m.insert(newer.clone().sign(&w.key)));
        assert!(!m.insert(old));
        assert_eq!(m.market_offers().len(), 1);
        assert!(m.prune(61_000, &w.bonds).is_empty());
        assert_eq!(m.prune(61_001, &w.bonds), vec![[2; 28]]);
        assert!(m.is_empty());
        m.insert(newer.sign(&w.key));
        assert_eq!(m.prune(0, &BondSnapshot::default()).len(), 1);
    }
}
