//! The node's libp2p identity: an ed25519 keypair in the data dir (protobuf encoding, mode 0600).

use std::path::Path;

use libp2p::identity::Keypair;

use super::Error;

/// File name of the node key inside the data dir.
pub const KEY_FILE: &str = "p2p.key";

/// Loads the keypair at `path`, or creates a new ed25519 one there (mode 0600) when absent.
///
/// # Errors
/// [`Error::Key`] on I/O failure, [`Error::KeyDecode`] when the file holds no valid key.
pub fn load_or_create(path: &Path) -> Result<Keypair, Error> {
    let key_err = |source| Error::Key {
        path: path.to_owned(),
        source,
    };
    match std::fs::read(path) {
        Ok(bytes) => Keypair::from_protobuf_encoding(&bytes).map_err(|source| Error::KeyDecode {
            path: path.to_owned(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = Keypair::generate_ed25519();
            let bytes = key
                .to_protobuf_encoding()
                .map_err(|e| key_err(std::io::Error::other(e)))?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(key_err)?;
            }
            write_private(path, &bytes).map_err(key_err)?;
            Ok(key)
        }
        Err(e) => Err(key_err(e)),
    }
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_loaded_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let a = load_or_create(&path).unwrap();
        let b = load_or_create(&path).unwrap();
        assert_eq!(a.public().to_peer_id(), b.public().to_peer_id());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, b"garbage").unwrap();
        assert!(matches!(
            load_or_create(&path),
            Err(Error::KeyDecode { .. })
        ));
    }
}
