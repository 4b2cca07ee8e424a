//! Bitswap in the node's one swarm: serve the blockstore's blocks to IPFS peers and
//! fetch whole DAGs from them.
//!
//! The behaviour is `beetswap` 0.5 (bitswap 1.2.0/1.1.0/1.0.0 for rust-libp2p 0.56, protocol ids
//! `/ipfs/bitswap/…`, so Kubo and any other IPFS node speak it) over the storage crate's
//! blockstore ([`ganglion_storage::bitswap::BitswapStore`]). It sits in the
//! [`Behaviour`](super::behaviour::Behaviour)'s `bitswap` slot and is on when
//! [`Config::blockstore`](super::Config::blockstore) is set.
//!
//! **Serving** is beetswap's server: any block in the store is sent to a peer that wants it.
//! **Fetching** ([`super::Client::fetch_dag`]) is `DagFetches`: from a root CID, want the
//! root, decode each block that arrives ([`ganglion_storage::dag::links`]: dag-pb and raw), want
//! its children, until the whole DAG is stored. Every block is checked against its CID here
//! ([`ganglion_storage::block::verify`]) before it is stored or its links are followed, whatever
//! beetswap did (it rebuilds the CID from the bytes it got, so a forged block never matches a want
//! in the first place; the second check keeps this module's promise independent of that).
//!
//! beetswap 0.5 sends each want to every connected peer (bitswap has no per-peer query): the
//! peer named in a fetch is dialled when not connected, and the blocks may come from any
//! connected peer that has them: they are verified all the same.
//!
//! **Caps** (beetswap): messages ≤ 4 MiB (the bitswap spec), ≤ 1024 wantlist entries served per
//! peer. Here: at most [`MAX_WANTS_IN_FLIGHT`] wants per fetch; a fetch fails with
//! [`FetchError::Stalled`] when no block arrived for [`Config::fetch_timeout`](super::Config::fetch_timeout).
//!
//! **Interop with Kubo** (tested against Kubo v0.22's core, `node/p2p/tests/it/bitswap.rs`): the
//! node fetches and serves CIDv0 and CIDv1 DAGs. beetswap 0.5.0 wrote a CIDv0 block prefix as the
//! bare multihash prefix `12 20`, where go-cid's `PrefixFromBytes` expects `00 70 12 20`, so Kubo
//! dropped the CIDv0 blocks we served; the workspace patches beetswap with that one fix
//! (`vendor/beetswap`, `[patch.crates-io]`). beetswap peers read either form.
//!
//! Artifacts (job inputs, image archives, outputs) are handed over this way: the node needs no
//! separate `fetch` protocol.

// `FetchError` carries CIDs by value (96 bytes each) so callers can match on them; it is the
// cold path (the p2p `Error` boxes it).
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use beetswap::QueryId;
use cid::Cid;
use ganglion_storage::bitswap::{BitswapStore, MAX_MULTIHASH_SIZE};
use ganglion_storage::block::IDENTITY;
use ganglion_storage::blockstore::Blockstore;

/// The bitswap behaviour of the node's swarm.
pub type Bitswap = beetswap::Behaviour<MAX_MULTIHASH_SIZE, BitswapStore>;

/// Most blocks one DAG fetch wants at once. 64 × 256 KiB chunks = 16 MiB in flight, enough to
/// fill a loopback or LAN link without flooding the peer's wantlist (1024 entries in beetswap).
pub const MAX_WANTS_IN_FLIGHT: usize = 64;

/// Builds the bitswap behaviour over `store`, hashing received blocks with [`Sha256Hasher`].
pub fn behaviour(store: BitswapStore) -> Bitswap {
    beetswap::Behaviour::builder(Arc::new(store))
        .register_multihasher(Sha256Hasher)
        .build()
}

/// SHA2-256 (multihash code 0x12) for beetswap, which names a received block by hashing it.
///
/// beetswap's built-in table (`multihash-codetable` 0.1) enables no hash function unless a
/// crate turns on its features, so without this hasher every block is dropped as "unknown
/// multihash code 18". SHA2-256 is the hash of every UnixFS block Kubo and this node make
/// (`ipfs add` default, [`ganglion_storage::block::sha256_multihash`]); other codes are
/// refused as unknown.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sha256Hasher;

impl beetswap::multihasher::Multihasher<MAX_MULTIHASH_SIZE> for Sha256Hasher {
    async fn hash(
        &self,
        multihash_code: u64,
        input: &[u8],
    ) -> Result<
        cid::multihash::Multihash<MAX_MULTIHASH_SIZE>,
        beetswap::multihasher::MultihasherError,
    > {
        if multihash_code != ganglion_storage::block::SHA2_256 {
            return Err(beetswap::multihasher::MultihasherError::UnknownMultihashCode);
        }
        Ok(ganglion_storage::block::sha256_multihash(input))
    }
}

/// A DAG fetched into the blockstore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedDag {
    /// The root CID asked for.
    pub root: Cid,
    /// Blocks in the DAG (each counted once; identity-hash CIDs excluded: they hold their data).
    pub blocks: u64,
    /// Sum of their sizes, in bytes.
    pub bytes: u64,
}

/// Why a DAG fetch failed. The blocks fetched before the failure stay in the store (they are
/// verified); pin the root only after a fetch succeeded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The node runs without a blockstore, so bitswap is off ([`super::Config::blockstore`]).
    #[error("bitswap is off: the node has no blockstore")]
    NoBlockstore,
    /// No block arrived for the configured timeout.
    #[error(
        "fetch of {root} stalled: no block for {after:?}; still wanted: {missing} (and {more} more)"
    )]
    Stalled {
        /// The root.
        root: Cid,
        /// One block still wanted.
        missing: Cid,
        /// How many other blocks were wanted.
        more: usize,
        /// The timeout.
        after: Duration,
    },
    /// beetswap reported an error for a want (its blockstore failed, or the CID is too long).
    #[error("bitswap error for {cid}: {reason}")]
    Bitswap {
        /// The block.
        cid: Cid,
        /// beetswap's message.
        reason: String,
    },
    /// A block's bytes do not match its CID (never stored).
    #[error(transparent)]
    InvalidBlock(#[from] ganglion_storage::block::BlockError),
    /// Storing a block or decoding its links failed (full store, corrupt dag-pb, codec we cannot
    /// walk).
    #[error(transparent)]
    Store(#[from] ganglion_storage::blockstore::Error),
}

type Reply = tokio::sync::oneshot::Sender<Result<FetchedDag, super::Error>>;

struct DagFetch {
    root: Cid,
    reply: Reply,
    /// Wanted but not yet asked for (beyond the in-flight cap).
    queued: Vec<Cid>,
    in_flight: HashMap<QueryId, Cid>,
    seen: HashSet<Cid>,
    blocks: u64,
    bytes: u64,
    last_progress: Instant,
}

/// The DAG fetches in progress, keyed by beetswap query.
pub(crate) struct DagFetches {
    store: Option<Arc<dyn Blockstore>>,
    fetches: HashMap<u64, DagFetch>,
    by_query: HashMap<QueryId, u64>,
    next_id: u64,
}

impl DagFetches {
    pub(crate) fn new(store: Option<Arc<dyn Blockstore>>) -> Self {
        Self {
            store,
            fetches: HashMap::new(),
            by_query: HashMap::new(),
            next_id: 0,
        }
    }

    /// Starts fetching the DAG under `root`; the answer goes to `reply`.
    pub(crate) fn start(
        &mut self,
        root: Cid,
        reply: Reply,
        bitswap: Option<&mut Bitswap>,
        now: Instant,
    ) {
        let (Some(_), Some(bitswap)) = (&self.store, bitswap) else {
            let _ = reply.send(Err(FetchError::NoBlockstore.into()));
            return;
        };
        let id = self.next_id;
        self.next_id += 1;
        let mut fetch = DagFetch {
            root,
            reply,
            queued: Vec::new(),
            in_flight: HashMap::new(),
            seen: HashSet::new(),
            blocks: 0,
            bytes: 0,
            last_progress: now,
        };
        fetch.want(root);
        self.fetches.insert(id, fetch);
        self.pump(id, bitswap);
    }

    /// Handles a beetswap event (a block, or an error for a want).
    pub(crate) fn on_event(&mut self, event: beetswap::Event, bitswap: &mut Bitswap, now: Instant) {
        let (query_id, outcome) = match event {
            beetswap::Event::GetQueryResponse { query_id, data } => (query_id, Ok(data)),
            beetswap::Event::GetQueryError { query_id, error } => (query_id, Err(error)),
        };
        let Some(id) = self.by_query.remove(&query_id) else {
            return;
        };
        let Some(fetch) = self.fetches.get_mut(&id) else {
            return;
        };
        let Some(cid) = fetch.in_flight.remove(&query_id) else {
            return;
        };
        let result = match outcome {
            Ok(data) => self
                .store
                .as_ref()
                .ok_or(FetchError::NoBlockstore)
                .and_then(|store| fetch.accept_block(store.as_ref(), &cid, &data, now)),
            Err(error) => Err(FetchError::Bitswap {
                cid,
                reason: error.to_string(),
            }),
        };
        match result {
            Ok(()) => self.pump(id, bitswap),
            Err(e) => self.fail(id, e, bitswap),
        }
    }

    /// Fails the fetches that saw no block for `timeout`.
    pub(crate) fn expire(
        &mut self,
        now: Instant,
        timeout: Duration,
        bitswap: Option<&mut Bitswap>,
    ) {
        let Some(bitswap) = bitswap else { return };
        let stalled: Vec<u64> = self
            .fetches
            .iter()
            .filter(|(_, f)| now.saturating_duration_since(f.last_progress) >= timeout)
            .map(|(id, _)| *id)
            .collect();
        for id in stalled {
            let Some(f) = self.fetches.get(&id) else {
                continue;
            };
            let mut wanted = f.in_flight.values().chain(f.queued.iter());
            let missing = wanted.next().copied().unwrap_or(f.root);
            let more = wanted.count();
            let error = FetchError::Stalled {
                root: f.root,
                missing,
                more,
                after: timeout,
            };
            self.fail(id, error, bitswap);
        }
    }

    /// Fetches in progress.
    pub(crate) fn len(&self) -> usize {
        self.fetches.len()
    }

    /// Asks for queued blocks up to the cap; completes the fetch when nothing is left.
    fn pump(&mut self, id: u64, bitswap: &mut Bitswap) {
        let Some(fetch) = self.fetches.get_mut(&id) else {
            return;
        };
        while fetch.in_flight.len() < MAX_WANTS_IN_FLIGHT {
            let Some(cid) = fetch.queued.pop() else { break };
            let query = bitswap.get(&cid);
            fetch.in_flight.insert(query, cid);
            self.by_query.insert(query, id);
        }
        if fetch.in_flight.is_empty()
            && let Some(done) = self.fetches.remove(&id)
        {
            let _ = done.reply.send(Ok(FetchedDag {
                root: done.root,
                blocks: done.blocks,
                bytes: done.bytes,
            }));
        }
    }

    fn fail(&mut self, id: u64, error: FetchError, bitswap: &mut Bitswap) {
        if let Some(fetch) = self.fetches.remove(&id) {
            for query in fetch.in_flight.keys() {
                bitswap.cancel(*query);
                self.by_query.remove(query);
            }
            let _ = fetch.reply.send(Err(error.into()));
        }
    }
}

impl DagFetch {
    /// Queues `cid` unless already seen; identity-hash CIDs carry their bytes and need no want.
    fn want(&mut self, cid: Cid) {
        if cid.hash().code() != IDENTITY && self.seen.insert(cid) {
            self.queued.push(cid);
        }
    }

    /// Verifies, stores and follows the links of one block.
    fn accept_block(
        &mut self,
        store: &dyn Blockstore,
        cid: &Cid,
        data: &[u8],
        now: Instant,
    ) -> Result<(), FetchError> {
        ganglion_storage::block::verify(cid, data)?;
        store.put(cid, data)?;
        self.blocks += 1;
        self.bytes += data.len() as u64;
        self.last_progress = now;
        for child in ganglion_storage::dag::links(cid, data)? {
            self.want(child);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ganglion_storage::block::{DAG_PB, RAW, cid_v1};
    use ganglion_storage::blockstore::MemoryBlockstore;
    use proptest::prelude::*;

    use super::*;

    fn fetch(root: Cid) -> DagFetch {
        let (reply, _rx) = tokio::sync::oneshot::channel();
        let mut f = DagFetch {
            root,
            reply,
            queued: Vec::new(),
            in_flight: HashMap::new(),
            seen: HashSet::new(),
            blocks: 0,
            bytes: 0,
            last_progress: Instant::now(),
        };
        f.want(root);
        f
    }

    #[test]
    fn a_block_that_does_not_match_its_cid_is_refused_and_nothing_is_stored() {
        let store = MemoryBlockstore::new();
        let cid = cid_v1(RAW, b"the real bytes");
        let mut f = fetch(cid);
        let err = f
            .accept_block(&store, &cid, b"forged bytes", Instant::now())
            .expect_err("mismatch");
        assert!(matches!(err, FetchError::InvalidBlock(_)), "{err:?}");
        assert_eq!(store.block_count().expect("count"), 0);
        assert_eq!(f.blocks, 0);
    }

    #[test]
    fn a_verified_dag_pb_block_queues_its_links_once() {
        let store = MemoryBlockstore::new();
        let data = vec![7u8; 300_000];
        let imported = ganglion_storage::unixfs::import_bytes(
            &data,
            &ganglion_storage::unixfs::ImportOptions::default(),
            &store,
        )
        .expect("import");
        let root_bytes = store.get(&imported.root).expect("get").expect("root");
        let target = MemoryBlockstore::new();
        let mut f = fetch(imported.root);
        f.queued.clear();
        f.accept_block(&target, &imported.root, &root_bytes, Instant::now())
            .expect("valid root");
        // Two chunks, one of 262 144 bytes and one of 37 856, both distinct raw leaves.
        assert_eq!(f.queued.len(), 2);
        assert!(f.queued.iter().all(|c| c.codec() == RAW));
        assert_eq!(f.blocks, 1);
        assert!(target.has(&imported.root).expect("has"));
    }

    proptest! {
        /// Garbage that hashes to its CID (so it passes verification) but is not dag-pb: a typed
        /// error or an empty link list, never a panic.
        #[test]
        fn garbage_dag_pb_blocks_are_typed_errors(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let store = MemoryBlockstore::new();
            let cid = cid_v1(DAG_PB, &data);
            let mut f = fetch(cid);
            match f.accept_block(&store, &cid, &data, Instant::now()) {
                Ok(()) => prop_assert!(store.has(&cid).expect("has")),
                Err(e) => prop_assert!(matches!(e, FetchError::Store(_)), "{e:?}"),
            }
        }
    }
}
