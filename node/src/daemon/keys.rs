//! The node's own keys besides the payment key: the attest key (signs offers, acceptances and
//! attestations; named in the bond) and the libp2p identity. Each is 32 raw secret bytes in
//! `<data dir>/keys/` (mode 0600), created at first start and reused after, so a restarted
//! provider keeps its bond and peer id.

use std::path::Path;

use ed25519_dalek::SigningKey;
use libp2p::identity::Keypair;

use super::DaemonError;
use crate::datadir::{self, DataDir};

/// File name of the attest key under `keys/`.
pub const ATTEST_KEY: &str = "attest.key";
/// File name of the libp2p key under `keys/`.
pub const P2P_KEY: &str = "p2p.key";
/// File name of the receipt key under `keys/`.
pub const RECEIPT_KEY: &str = "receipt.key";

fn seed(path: &Path) -> Result<[u8; 32], DaemonError> {
    let err = |source| DaemonError::Key {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        let bytes = datadir::read_secret(path).map_err(err)?;
        bytes.as_slice().try_into().map_err(|_| {
            err(datadir::Error::Io {
                action: "read 32-byte key",
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not 32 bytes"),
            })
        })
    } else {
        let key = SigningKey::generate(&mut rand::rngs::OsRng).to_bytes();
        datadir::write_secret(path, &key).map_err(err)?;
        Ok(key)
    }
}

/// The attest key of the node in `dir` (created when missing).
///
/// # Errors
/// [`DaemonError::Key`].
pub fn attest_key(dir: &DataDir) -> Result<SigningKey, DaemonError> {
    Ok(SigningKey::from_bytes(&seed(
        &dir.root().join("keys").join(ATTEST_KEY),
    )?))
}

/// The receipt key of the node in `dir` (created when missing): it signs this node's receipts
/// as an orchestrator; its verification key is each of its escrows' `receipt_key`.
///
/// # Errors
/// [`DaemonError::Key`].
pub fn receipt_key(dir: &DataDir) -> Result<SigningKey, DaemonError> {
    Ok(SigningKey::from_bytes(&seed(
        &dir.root().join("keys").join(RECEIPT_KEY),
    )?))
}

/// The libp2p identity of the node in `dir` (created when missing).
///
/// # Errors
/// [`DaemonError::Key`].
pub fn p2p_key(dir: &DataDir) -> Result<Keypair, DaemonError> {
    let path = dir.root().join("keys").join(P2P_KEY);
    let s = seed(&path)?;
    Keypair::ed25519_from_bytes(s).map_err(|e| DaemonError::Key {
        path: path.clone(),
        source: datadir::Error::Io {
            action: "decode ed25519 key",
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_created_once_and_reloaded() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = DataDir::open(tmp.path()).expect("dir");
        let a = attest_key(&dir).expect("attest");
        let p = p2p_key(&dir).expect("p2p").public().to_peer_id();
        assert_eq!(attest_key(&dir).expect("again").to_bytes(), a.to_bytes());
        assert_eq!(p2p_key(&dir).expect("again").public().to_peer_id(), p);
        assert_ne!(a.to_bytes(), [0; 32]);
        std::fs::write(dir.root().join("keys").join(ATTEST_KEY), b"short").expect("write");
        assert!(attest_key(&dir).is_err(), "a truncated key file is refused");
    }
}
