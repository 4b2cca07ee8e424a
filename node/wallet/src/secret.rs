//! Secret files (signing keys, cookies): written atomically with mode 0600, read only when
//! no one else may read or write them.
//!
//! A secret is written to a temporary file created with mode 0600, synced, then renamed over
//! the target, so a crash (even `kill -9`) leaves either the old or the new file, never a
//! partial one, and the secret is never readable by others, not even briefly.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of secret files (owner read/write).
pub const SECRET_MODE: u32 = 0o600;
/// Failures reading or writing a secret (or any other data-dir file); each names the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A secret file is readable or writable by group or others.
    #[error("{path} has mode {mode:o}; secrets must be 0600 (chmod 600 it)")]
    InsecureMode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// Maps an I/O failure of `action` on `path` to [`Error::Io`].
pub fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` atomically with mode 0600 (temporary file, fsync, rename).
///
/// # Errors
/// [`Error::Io`].
pub fn write_secret(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let tmp = path.with_extension("tmp");
    // A stale temporary from a crash may exist; it is ours to replace.
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(SECRET_MODE)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    f.write_all(bytes).map_err(io("write", &tmp))?;
    f.sync_all().map_err(io("sync", &tmp))?;
    fs::rename(&tmp, path).map_err(io("rename into", path))?;
    if let Some(parent) = path.parent()
        && let Ok(d) = fs::File::open(parent)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads a secret file, refusing one that group or others may read or write.
///
/// # Errors
/// [`Error::Io`], [`Error::InsecureMode`].
pub fn read_secret(path: &Path) -> Result<Vec<u8>, Error> {
    let meta = fs::metadata(path).map_err(io("stat", path))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::InsecureMode {
            path: path.to_path_buf(),
            mode,
        });
    }
    fs::read(path).map_err(io("read", path))
}
