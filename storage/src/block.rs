//! CIDs and blocks: parsing CID strings, the codecs and hash this crate understands, and the one
//! rule every stored block obeys (its bytes hash to its CID).

use cid::Cid;
use cid::multihash::Multihash;
use sha2::{Digest, Sha256};

/// Multicodec `dag-pb` (0x70): UnixFS files and directories.
pub const DAG_PB: u64 = 0x70;
/// Multicodec `raw` (0x55): UnixFS raw leaves (`--raw-leaves`).
pub const RAW: u64 = 0x55;
/// Multihash `sha2-256` (0x12), the only hash UnixFS import produces (Kubo's default `--hash`).
pub const SHA2_256: u64 = 0x12;
/// Multihash `identity` (0x00): the digest is the data itself (Kubo's inlined blocks).
pub const IDENTITY: u64 = 0x00;

/// A CID string or byte string that is not a CID.
#[derive(Debug, thiserror::Error)]
#[error("not a CID: {input:?}")]
pub struct InvalidCid {
    /// What was given (a string, or the hex of bytes).
    pub input: String,
    /// Why the `cid` crate refused it.
    #[source]
    pub source: cid::Error,
}

/// A block whose bytes do not match its CID, or a CID this crate cannot check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// The multihash of the bytes differs from the digest in the CID.
    #[error("block bytes do not match CID {cid} (they hash to {actual_hex})")]
    HashMismatch {
        /// The CID the block claimed.
        cid: Cid,
        /// Hex of the digest the bytes actually have.
        actual_hex: String,
    },
    /// The CID uses a multihash other than sha2-256 or identity.
    #[error("unsupported multihash 0x{code:x} in CID {cid}")]
    UnsupportedMultihash {
        /// The CID.
        cid: Cid,
        /// Its multihash code.
        code: u64,
    },
}

/// Parses a CID in any multibase Kubo prints (base58btc `Qm…` for v0, base32 `b…` for v1, …).
///
/// An `/ipfs/` prefix, as Kubo's RPC accepts, is stripped.
///
/// # Errors
/// [`InvalidCid`] when the string is not a CID.
pub fn parse_cid(input: &str) -> Result<Cid, InvalidCid> {
    let trimmed = input.trim();
    let trimmed = trimmed.strip_prefix("/ipfs/").unwrap_or(trimmed);
    Cid::try_from(trimmed).map_err(|source| InvalidCid {
        input: input.to_owned(),
        source,
    })
}

/// SHA-256 multihash (code 0x12, 32-byte digest) of `data`.
pub fn sha256_multihash(data: &[u8]) -> Multihash<64> {
    let digest = Sha256::digest(data);
    // A 32-byte digest always fits the 64-byte multihash buffer.
    Multihash::wrap(SHA2_256, &digest).expect("32-byte digest fits a 64-byte multihash")
}

/// CIDv1 of `data` with the given codec and sha2-256.
pub fn cid_v1(codec: u64, data: &[u8]) -> Cid {
    Cid::new_v1(codec, sha256_multihash(data))
}

/// Checks that `data` hashes to `cid` (sha2-256 or identity multihash).
///
/// # Errors
/// [`BlockError::HashMismatch`] or [`BlockError::UnsupportedMultihash`].
pub fn verify(cid: &Cid, data: &[u8]) -> Result<(), BlockError> {
    let mh = cid.hash();
    let actual: Vec<u8> = match mh.code() {
        SHA2_256 => Sha256::digest(data).to_vec(),
        IDENTITY => data.to_vec(),
        code => return Err(BlockError::UnsupportedMultihash { cid: *cid, code }),
    };
    if actual.as_slice() == mh.digest() {
        Ok(())
    } else {
        Err(BlockError::HashMismatch {
            cid: *cid,
            actual_hex: hex::encode(actual),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v0_and_v1_and_ipfs_paths() {
        let v0 = parse_cid("QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o").expect("v0");
        assert_eq!(v0.version(), cid::Version::V0);
        let v1 = parse_cid("/ipfs/bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4")
            .expect("v1");
        assert_eq!(v1.codec(), RAW);
    }

    #[test]
    fn rejects_a_string_that_is_not_a_cid() {
        assert!(parse_cid("hello").is_err());
        assert!(parse_cid("").is_err());
        assert!(parse_cid("QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5").is_err());
    }

    #[test]
    fn verify_accepts_own_bytes_and_rejects_others() {
        let cid = cid_v1(RAW, b"hello world\n");
        assert_eq!(
            cid.to_string(),
            "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
        );
        verify(&cid, b"hello world\n").expect("own bytes");
        assert!(matches!(
            verify(&cid, b"hello world!"),
            Err(BlockError::HashMismatch { .. })
        ));
    }
}
