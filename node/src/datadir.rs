//! The node's data directory: one root, a fixed layout, secrets written owner-only.
//!
//! ```text
//! <root>/                 0700
//!   indexer.sled/         chain index (ganglion-indexer SledKv)
//!   executor.sled/        dispatch state (executor)
//!   keys/                 0700
//!     payment.skey        0600  wallet signing key (cardano-cli text envelope)
//!   rpc.cookie            0600  bearer token for mutating JSON-RPC calls, new per daemon start
//!   overlay/              0700  per job while it runs: the x25519 secret and plan it announced
//!     <job id>.json       0600  (`daemon::overlay`: a restart announces the same)
//! ```
//!
//! Secrets are written to a temporary file created with mode 0600, synced, then renamed over
//! the target, so a crash (even `kill -9`) leaves either the old or the new file, never a
//! partial one, and the secret is never readable by others, not even briefly.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use ganglion_wallet::secret::io;
use rand::RngCore;

pub use ganglion_wallet::secret::{Error, SECRET_MODE, read_secret, write_secret};

/// Mode of the root and key directories (owner only).
pub const DIR_MODE: u32 = 0o700;
/// Bytes of randomness in the RPC cookie (hex-encoded in the file: 64 characters).
pub const COOKIE_BYTES: usize = 32;

/// A data directory (the layout above).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// Opens `root`, creating it and `keys/` (mode 0700) when missing.
    ///
    /// # Errors
    /// [`Error::Io`] when a directory cannot be created.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let root = root.into();
        for dir in [root.clone(), root.join("keys")] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(&dir)
                .map_err(io("create directory", &dir))?;
        }
        Ok(Self { root })
    }

    /// The data dir at `root` as it is: nothing is created (for read-only callers such as
    /// `ganglion doctor`).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The indexer's sled database.
    pub fn indexer_db(&self) -> PathBuf {
        self.root.join("indexer.sled")
    }

    /// The node's blockstore (pins, specs, inputs, outputs, logs; served over bitswap).
    pub fn blockstore_db(&self) -> PathBuf {
        self.root.join("blocks.sled")
    }

    /// The executor's sled database.
    pub fn executor_db(&self) -> PathBuf {
        self.root.join("executor.sled")
    }

    /// What a provider's overlay announced for each running job (`daemon::overlay`).
    pub fn overlay_jobs(&self) -> PathBuf {
        self.root.join("overlay")
    }

    /// The wallet's payment signing key.
    pub fn payment_key(&self) -> PathBuf {
        self.root.join("keys").join("payment.skey")
    }

    /// The RPC cookie.
    pub fn rpc_cookie(&self) -> PathBuf {
        self.root.join("rpc.cookie")
    }

    /// Writes a fresh random RPC cookie (64 hex characters, mode 0600) and returns the token.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn new_rpc_cookie(&self) -> Result<String, Error> {
        let mut bytes = [0u8; COOKIE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let token = hex::encode(bytes);
        write_secret(&self.rpc_cookie(), token.as_bytes())?;
        Ok(token)
    }

    /// Reads the RPC cookie's token (for clients on this machine).
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::InsecureMode`].
    pub fn read_rpc_cookie(&self) -> Result<String, Error> {
        let bytes = read_secret(&self.rpc_cookie())?;
        Ok(String::from_utf8_lossy(&bytes).trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn layout_directories_are_owner_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = DataDir::open(t.path().join("node")).expect("open");
        assert_eq!(mode(d.root()), DIR_MODE);
        assert_eq!(mode(&d.root().join("keys")), DIR_MODE);
        assert!(d.payment_key().starts_with(d.root().join("keys")));
        assert_ne!(d.indexer_db(), d.executor_db());
    }

    #[test]
    fn cookies_are_random_0600_and_read_back() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = DataDir::open(t.path()).expect("open");
        let a = d.new_rpc_cookie().expect("cookie");
        assert_eq!(mode(&d.rpc_cookie()), SECRET_MODE);
        assert_eq!(a.len(), 2 * COOKIE_BYTES);
        assert_eq!(d.read_rpc_cookie().expect("read"), a);
        let b = d.new_rpc_cookie().expect("second cookie");
        assert_ne!(a, b, "a new daemon start gets a new token");
        assert_eq!(mode(&d.rpc_cookie()), SECRET_MODE);
    }

    #[test]
    fn secrets_readable_by_others_are_refused() {
        let t = tempfile::tempdir().expect("tempdir");
        let p = t.path().join("s");
        write_secret(&p, b"k").expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).expect("chmod");
        match read_secret(&p) {
            Err(Error::InsecureMode { mode, .. }) => assert_eq!(mode, 0o644),
            other => panic!("expected InsecureMode, got {other:?}"),
        }
    }
}
