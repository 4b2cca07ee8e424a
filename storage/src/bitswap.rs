//! The bridge between this crate's [`Blockstore`] and bitswap:
//! [`BitswapStore`] implements the `blockstore` crate's trait, which `beetswap` (bitswap for
//! rust-libp2p, DESIGN §9) serves blocks from and stores fetched blocks into.
//!
//! The node puts `beetswap::Behaviour<MAX_MULTIHASH_SIZE, BitswapStore>` into its one swarm
//! (`node/p2p/src/bitswap.rs`); this module holds no networking.
//!
//! Rules kept here:
//! - every block written through the bridge is checked against its CID by the wrapped store
//!   ([`crate::block::verify`]): a mismatch is refused and nothing is written;
//! - CIDs are keyed by multihash, as in the wrapped store, so a CIDv0 want (`Qm…`, Kubo's
//!   default) is answered from a block stored under its CIDv1 and the other way round;
//! - the wrapped store is synchronous (sled): each call runs on tokio's blocking pool
//!   (`spawn_blocking`), so a slow disk never stalls the swarm's poll. A tokio runtime is
//!   therefore required (the node has one).

use std::sync::Arc;

use blockstore::block::CidError;
use cid::{Cid, CidGeneric};

use crate::blockstore::{Blockstore, Error};

/// Largest multihash digest the bridge handles, in bytes (SHA2-512 and BLAKE2b-512 fit). The
/// `S` of `beetswap::Behaviour<S, _>`.
pub const MAX_MULTIHASH_SIZE: usize = 64;

/// A shared [`Blockstore`] seen through the `blockstore` crate's trait (the one `beetswap`
/// needs). Cheap to clone.
#[derive(Clone)]
pub struct BitswapStore {
    inner: Arc<dyn Blockstore>,
}

impl std::fmt::Debug for BitswapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitswapStore").finish_non_exhaustive()
    }
}

impl BitswapStore {
    /// Wraps `store` (usually a [`crate::blockstore::SledBlockstore`]).
    pub fn new(store: Arc<dyn Blockstore>) -> Self {
        Self { inner: store }
    }

    /// The wrapped store.
    pub fn store(&self) -> &Arc<dyn Blockstore> {
        &self.inner
    }
}

/// Re-reads a CID of any multihash capacity as this crate's [`Cid`] (capacity 64).
///
/// # Errors
/// `CidTooLarge` when the digest is longer than [`MAX_MULTIHASH_SIZE`].
pub fn to_cid<const S: usize>(cid: &CidGeneric<S>) -> Result<Cid, blockstore::Error> {
    let hash = cid::multihash::Multihash::<MAX_MULTIHASH_SIZE>::wrap(
        cid.hash().code(),
        cid.hash().digest(),
    )
    .map_err(|_| blockstore::Error::CidTooLarge)?;
    Cid::new(cid.version(), cid.codec(), hash)
        .map_err(|e| blockstore::Error::CidError(CidError::InvalidCid(e.to_string())))
}

/// Maps a storage error onto the `blockstore` crate's error (which beetswap logs and reports).
fn bridge_error(e: Error) -> blockstore::Error {
    match e {
        Error::InvalidBlock(b) => {
            blockstore::Error::CidError(CidError::InvalidDataFormat(b.to_string()))
        }
        Error::CorruptRecord(m) => blockstore::Error::StoredDataError(m),
        other => blockstore::Error::FatalDatabaseError(other.to_string()),
    }
}

impl BitswapStore {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Blockstore) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, blockstore::Error> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(inner.as_ref()))
            .await
            .map_err(|e| blockstore::Error::ExecutorError(e.to_string()))?
            .map_err(bridge_error)
    }
}

impl blockstore::Blockstore for BitswapStore {
    async fn get<const S: usize>(
        &self,
        cid: &CidGeneric<S>,
    ) -> Result<Option<Vec<u8>>, blockstore::Error> {
        let cid = to_cid(cid)?;
        self.blocking(move |s| s.get(&cid)).await
    }

    async fn put_keyed<const S: usize>(
        &self,
        cid: &CidGeneric<S>,
        data: &[u8],
    ) -> Result<(), blockstore::Error> {
        let cid = to_cid(cid)?;
        let data = data.to_vec();
        self.blocking(move |s| s.put(&cid, &data).map(|_| ())).await
    }

    async fn remove<const S: usize>(&self, cid: &CidGeneric<S>) -> Result<(), blockstore::Error> {
        let cid = to_cid(cid)?;
        self.blocking(move |s| s.delete(&cid).map(|_| ())).await
    }

    async fn has<const S: usize>(&self, cid: &CidGeneric<S>) -> Result<bool, blockstore::Error> {
        let cid = to_cid(cid)?;
        self.blocking(move |s| s.has(&cid)).await
    }

    async fn close(self) -> Result<(), blockstore::Error> {
        self.blocking(|s| s.flush()).await
    }
}

#[cfg(test)]
mod tests {
    use blockstore::Blockstore as _;

    use super::*;
    use crate::block::{DAG_PB, RAW, cid_v1};
    use crate::blockstore::MemoryBlockstore;

    fn bridge() -> BitswapStore {
        BitswapStore::new(Arc::new(MemoryBlockstore::new()))
    }

    #[tokio::test]
    async fn put_get_has_remove_round_trip() {
        let store = bridge();
        let cid = cid_v1(RAW, b"hello bitswap");
        assert!(!store.has(&cid).await.expect("has"));
        store.put_keyed(&cid, b"hello bitswap").await.expect("put");
        assert!(store.has(&cid).await.expect("has"));
        assert_eq!(
            store.get(&cid).await.expect("get").as_deref(),
            Some(&b"hello bitswap"[..])
        );
        store.remove(&cid).await.expect("remove");
        assert_eq!(store.get(&cid).await.expect("get"), None);
    }

    #[tokio::test]
    async fn a_block_that_does_not_match_its_cid_is_refused_and_not_stored() {
        let store = bridge();
        let cid = cid_v1(RAW, b"the real bytes");
        let err = store
            .put_keyed(&cid, b"forged bytes")
            .await
            .expect_err("mismatch refused");
        assert!(matches!(err, blockstore::Error::CidError(_)), "{err:?}");
        assert!(!store.has(&cid).await.expect("has"));
        assert_eq!(store.store().block_count().expect("count"), 0);
    }

    #[tokio::test]
    async fn a_cid_v0_want_is_answered_from_a_block_stored_under_cid_v1() {
        let store = bridge();
        let v1 = cid_v1(DAG_PB, b"\x0a\x02\x08\x01");
        store
            .put_keyed(&v1, b"\x0a\x02\x08\x01")
            .await
            .expect("put");
        let v0 = Cid::new_v0(*v1.hash()).expect("sha2-256 digest");
        assert!(store.has(&v0).await.expect("has"));
    }

    #[tokio::test]
    async fn a_multihash_longer_than_the_bridge_takes_is_a_typed_error() {
        let store = bridge();
        let mh = cid::multihash::Multihash::<128>::wrap(0x12, &[7u8; 100]).expect("fits 128");
        let cid = CidGeneric::<128>::new_v1(RAW, mh);
        assert!(matches!(
            store.get(&cid).await,
            Err(blockstore::Error::CidTooLarge)
        ));
    }
}
