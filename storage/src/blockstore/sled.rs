//! The node's disk blockstore on sled: tree `blocks` (multihash → bytes), tree `pins` (CID bytes →
//! empty) and tree `meta` (`size` → total block bytes, u64 big-endian), the size updated in the
//! same transaction as the block so the accounting survives a crash.

use std::path::{Path, PathBuf};

use ::sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
use cid::Cid;

use super::{Blockstore, Error, block_key, cid_from_key};

const SIZE_KEY: &[u8] = b"size";

/// Limits of a [`SledBlockstore`] (the node's `storage` config section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SledOptions {
    /// Most bytes of block data to hold; `None` = no limit. Past it `put` fails with
    /// [`Error::Full`].
    pub capacity_bytes: Option<u64>,
    /// Free space, in bytes, to leave on the filesystem: a `put` that would go below it fails
    /// with [`Error::DiskFull`]. It must exceed what sled buffers before writing (two 8 MiB I/O
    /// buffers) so sled itself never meets `ENOSPC`. Default 64 MiB.
    pub min_free_bytes: u64,
}

impl Default for SledOptions {
    fn default() -> Self {
        Self {
            capacity_bytes: None,
            min_free_bytes: 64 << 20,
        }
    }
}

/// A [`Blockstore`] in a sled database.
#[derive(Clone)]
pub struct SledBlockstore {
    db: ::sled::Db,
    blocks: ::sled::Tree,
    pins: ::sled::Tree,
    meta: ::sled::Tree,
    dir: PathBuf,
    options: SledOptions,
}

impl SledBlockstore {
    /// Opens (or creates) the store in directory `path` with [`SledOptions::default`].
    ///
    /// # Errors
    /// [`Error::Sled`] when the directory cannot be opened (permissions, another process holds it).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, SledOptions::default())
    }

    /// Opens the store with a limit on block bytes (`None`: none) and the default reserve.
    ///
    /// # Errors
    /// [`Error::Sled`] when the directory cannot be opened.
    pub fn open_with_capacity(
        path: impl AsRef<Path>,
        capacity_bytes: Option<u64>,
    ) -> Result<Self, Error> {
        Self::open_with(
            path,
            SledOptions {
                capacity_bytes,
                ..SledOptions::default()
            },
        )
    }

    /// Opens the store with `options`.
    ///
    /// # Errors
    /// [`Error::Sled`] when the directory cannot be opened.
    pub fn open_with(path: impl AsRef<Path>, options: SledOptions) -> Result<Self, Error> {
        let dir = path.as_ref().to_path_buf();
        let db = ganglion_sled::open(&dir)?;
        let blocks = db.open_tree("blocks")?;
        let pins = db.open_tree("pins")?;
        let meta = db.open_tree("meta")?;
        Ok(Self {
            db,
            blocks,
            pins,
            meta,
            dir,
            options,
        })
    }

    fn check_free_space(&self, needed: u64) -> Result<(), Error> {
        let free = free_bytes(&self.dir).map_err(Error::FreeSpace)?;
        let reserve = self.options.min_free_bytes;
        if free < needed.saturating_add(reserve) {
            return Err(Error::DiskFull {
                needed,
                free,
                reserve,
            });
        }
        Ok(())
    }
}

/// Bytes available to unprivileged users on the filesystem holding `dir` (`statvfs(3)`).
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and outlives the call; `stat` is a valid out-pointer that
    // statvfs fully initialises when it returns 0.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: rc == 0, so statvfs initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    // The field types differ between platforms (u32/u64).
    #[allow(clippy::useless_conversion)]
    let (blocks, block_size) = (u64::from(stat.f_bavail), u64::from(stat.f_frsize));
    Ok(blocks.saturating_mul(block_size))
}

fn read_size(raw: Option<::sled::IVec>) -> Result<u64, Error> {
    match raw {
        None => Ok(0),
        Some(v) => {
            let bytes: [u8; 8] = v
                .as_ref()
                .try_into()
                .map_err(|_| Error::CorruptRecord("meta/size is not 8 bytes".into()))?;
            Ok(u64::from_be_bytes(bytes))
        }
    }
}

fn tx_error(e: TransactionError<Error>) -> Error {
    match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => Error::Sled(e),
    }
}

impl Blockstore for SledBlockstore {
    fn put(&self, cid: &Cid, data: &[u8]) -> Result<bool, Error> {
        crate::block::verify(cid, data)?;
        let key = block_key(cid);
        if self.blocks.contains_key(&key)? {
            return Ok(false);
        }
        let needed = data.len() as u64;
        self.check_free_space(needed)?;
        let capacity = self.options.capacity_bytes;
        (&self.blocks, &self.meta)
            .transaction(|(blocks, meta)| {
                if blocks.get(&key)?.is_some() {
                    return Ok(false);
                }
                let size =
                    read_size(meta.get(SIZE_KEY)?).map_err(ConflictableTransactionError::Abort)?;
                if let Some(capacity) = capacity {
                    let available = capacity.saturating_sub(size);
                    if needed > available {
                        return Err(ConflictableTransactionError::Abort(Error::Full {
                            needed,
                            available,
                            capacity,
                        }));
                    }
                }
                blocks.insert(key.as_slice(), data)?;
                meta.insert(SIZE_KEY, &(size + needed).to_be_bytes())?;
                Ok(true)
            })
            .map_err(tx_error)
    }

    fn get(&self, cid: &Cid) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.blocks.get(block_key(cid))?.map(|v| v.to_vec()))
    }

    fn has(&self, cid: &Cid) -> Result<bool, Error> {
        Ok(self.blocks.contains_key(block_key(cid))?)
    }

    fn delete(&self, cid: &Cid) -> Result<bool, Error> {
        let key = block_key(cid);
        (&self.blocks, &self.meta)
            .transaction(|(blocks, meta)| {
                let Some(old) = blocks.remove(key.as_slice())? else {
                    return Ok(false);
                };
                let size =
                    read_size(meta.get(SIZE_KEY)?).map_err(ConflictableTransactionError::Abort)?;
                let size = size.saturating_sub(old.len() as u64);
                meta.insert(SIZE_KEY, &size.to_be_bytes())?;
                Ok(true)
            })
            .map_err(tx_error)
    }

    fn size_bytes(&self) -> Result<u64, Error> {
        read_size(self.meta.get(SIZE_KEY)?)
    }

    fn block_count(&self) -> Result<u64, Error> {
        Ok(self.blocks.len() as u64)
    }

    fn all_blocks(&self) -> Result<Vec<Cid>, Error> {
        self.blocks
            .iter()
            .keys()
            .map(|k| cid_from_key(&k?))
            .collect()
    }

    fn insert_pin(&self, cid: &Cid) -> Result<(), Error> {
        self.pins.insert(cid.to_bytes(), &[])?;
        Ok(())
    }

    fn remove_pin(&self, cid: &Cid) -> Result<bool, Error> {
        Ok(self.pins.remove(cid.to_bytes())?.is_some())
    }

    fn pins(&self) -> Result<Vec<Cid>, Error> {
        self.pins
            .iter()
            .keys()
            .map(|k| {
                let k = k?;
                Cid::try_from(k.as_ref())
                    .map_err(|e| Error::CorruptRecord(format!("pin record is not a CID: {e}")))
            })
            .collect()
    }

    fn flush(&self) -> Result<(), Error> {
        self.db.flush()?;
        Ok(())
    }
}
