//! The default pinner: the node's own [`Blockstore`] with its recursive pin set.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cid::Cid;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::RwLock;

use super::{Added, Error, Pinner};
use crate::blockstore::{self, Blockstore, GcStats};
use crate::unixfs::{self, FileChunks, ImportOptions};

/// A [`Pinner`] over a local blockstore.
///
/// Imports hold a shared lock from the first block to the pin, and [`Embedded::gc`] an exclusive
/// one, so GC never sweeps the blocks of an import in flight. Blocking work (hashing, sled) runs
/// on tokio's blocking pool.
pub struct Embedded<S> {
    store: Arc<S>,
    gc_lock: Arc<RwLock<()>>,
}

impl<S> Clone for Embedded<S> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            gc_lock: Arc::clone(&self.gc_lock),
        }
    }
}

impl<S: Blockstore + 'static> Embedded<S> {
    /// A pinner over `store`.
    pub fn new(store: Arc<S>) -> Self {
        Self {
            store,
            gc_lock: Arc::new(RwLock::new(())),
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// Removes every block no pin keeps (`ipfs repo gc`).
    ///
    /// # Errors
    /// Store failures.
    pub async fn gc(&self) -> Result<GcStats, Error> {
        let _exclusive = self.gc_lock.write().await;
        let store = Arc::clone(&self.store);
        Ok(tokio::task::spawn_blocking(move || blockstore::gc(&*store)).await??)
    }
}

impl<S: Blockstore + 'static> Embedded<S> {
    /// Imports the directory at `path` (`ipfs add -r`) and pins its root recursively.
    ///
    /// # Errors
    /// Import or store failures.
    pub async fn add_dir(&self, path: &Path, options: &ImportOptions) -> Result<Added, Error> {
        self.add_with(path, options, |p, o, s| unixfs::import_dir(p, o, s))
            .await
    }

    /// Imports what is at `path` (`ipfs add [-r] PATH`: a symlink as its own `Symlink` node, a
    /// directory recursively, else a file; [`unixfs::import_path`]) and pins its root.
    ///
    /// # Errors
    /// Import or store failures.
    pub async fn add_path(&self, path: &Path, options: &ImportOptions) -> Result<Added, Error> {
        self.add_with(path, options, |p, o, s| unixfs::import_path(p, o, s))
            .await
    }

    async fn add_with(
        &self,
        path: &Path,
        options: &ImportOptions,
        import: fn(&Path, &ImportOptions, &S) -> Result<unixfs::Imported, unixfs::Error>,
    ) -> Result<Added, Error> {
        let _shared = self.gc_lock.read().await;
        let store = Arc::clone(&self.store);
        let path: PathBuf = path.to_owned();
        let options = options.clone();
        tokio::task::spawn_blocking(move || {
            let imported = import(&path, &options, &*store)?;
            blockstore::pin_recursive(&*store, &imported.root)?;
            store.flush()?;
            Ok(Added {
                root: imported.root,
                content_bytes: imported.content_bytes,
                cumulative_size: imported.cumulative_size,
            })
        })
        .await?
    }
}

impl<S: Blockstore + 'static> Pinner for Embedded<S> {
    async fn add_file(&self, path: &Path, options: &ImportOptions) -> Result<Added, Error> {
        let _shared = self.gc_lock.read().await;
        let store = Arc::clone(&self.store);
        let path: PathBuf = path.to_owned();
        let options = options.clone();
        tokio::task::spawn_blocking(move || {
            let file = std::fs::File::open(&path)?;
            let imported = unixfs::import_file(file, &options, &*store)?;
            blockstore::pin_recursive(&*store, &imported.root)?;
            store.flush()?;
            Ok(Added {
                root: imported.root,
                content_bytes: imported.content_bytes,
                cumulative_size: imported.cumulative_size,
            })
        })
        .await?
    }

    async fn pin(&self, cid: &Cid) -> Result<(), Error> {
        let store = Arc::clone(&self.store);
        let cid = *cid;
        tokio::task::spawn_blocking(move || {
            blockstore::pin_recursive(&*store, &cid)?;
            store.flush()?;
            Ok(())
        })
        .await?
    }

    async fn unpin(&self, cid: &Cid) -> Result<(), Error> {
        match blockstore::unpin(&*self.store, cid) {
            Ok(()) => Ok(()),
            Err(blockstore::Error::NotPinned(cid)) => Err(Error::NotPinned(cid)),
            Err(e) => Err(e.into()),
        }
    }

    async fn pins(&self) -> Result<Vec<Cid>, Error> {
        Ok(self.store.pins()?)
    }

    async fn cat<W: AsyncWrite + Send + Unpin>(&self, cid: &Cid, mut out: W) -> Result<u64, Error> {
        let mut chunks = FileChunks::new(*cid);
        let mut written = 0u64;
        while let Some(content) = chunks.next_chunk(&*self.store)? {
            out.write_all(&content).await?;
            written += content.len() as u64;
        }
        out.flush().await?;
        Ok(written)
    }

    async fn export_car<W: AsyncWrite + Send + Unpin>(
        &self,
        cid: &Cid,
        out: W,
    ) -> Result<u64, Error> {
        Ok(crate::car::export(&*self.store, cid, out).await?.bytes)
    }
}
