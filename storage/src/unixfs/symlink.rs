//! Symlinks as Kubo stores them: a UnixFS `Symlink` node (dag-pb, `Type = 4`) whose `Data` is
//! the link's target text, byte for byte. The link is never followed (a dangling one is fine),
//! the node is never a raw leaf and has no links (boxo `files.Symlink` →
//! `unixfs.SymlinkData`; Kubo's `ipfs add` without `--dereference-args`).

use std::path::Path;

use cid::Cid;

use super::{BlockSink, CidVersion, Error, ImportOptions, Imported};
use crate::block::{DAG_PB, sha256_multihash};

/// The block of a symlink to `target` and its CID (CIDv0, or CIDv1 dag-pb: `raw_leaves` does
/// not apply to symlinks).
pub fn symlink_block(target: &str, cid_version: CidVersion) -> (Cid, Vec<u8>) {
    let mut block = Vec::new();
    rust_unixfs::symlink::serialize_symlink_block(target, &mut block);
    let hash = sha256_multihash(&block);
    let cid = match cid_version {
        // A sha2-256 multihash is always a valid CIDv0; the fallback is never taken.
        CidVersion::V0 => Cid::new_v0(hash).unwrap_or_else(|_| Cid::new_v1(DAG_PB, hash)),
        CidVersion::V1 => Cid::new_v1(DAG_PB, hash),
    };
    (cid, block)
}

/// The target text of the symlink at `path`, as a UnixFS string.
///
/// # Errors
/// [`Error::ReadPath`] when the link cannot be read, [`Error::NonUtf8SymlinkTarget`] when its
/// target is not UTF-8.
pub(super) fn read_target(path: &Path) -> Result<String, Error> {
    let target = std::fs::read_link(path).map_err(|source| Error::ReadPath {
        path: path.to_path_buf(),
        source,
    })?;
    target
        .into_os_string()
        .into_string()
        .map_err(|_| Error::NonUtf8SymlinkTarget(path.to_path_buf()))
}

/// Imports the symlink at `path` itself (not what it points to) as one `Symlink` node, as
/// `ipfs add PATH` does for a link given as the argument.
///
/// # Errors
/// As [`read_target`], and [`Error::Store`] when the sink refuses the block.
pub fn import_symlink(
    path: &Path,
    options: &ImportOptions,
    mut sink: impl BlockSink,
) -> Result<Imported, Error> {
    let target = read_target(path)?;
    let (root, block) = symlink_block(&target, options.cid_version);
    sink.put_block(&root, &block)?;
    Ok(Imported {
        root,
        content_bytes: 0,
        cumulative_size: block.len() as u64,
        blocks: 1,
    })
}
