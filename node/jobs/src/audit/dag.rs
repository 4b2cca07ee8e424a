//! A DAG held in memory (CID → bytes), checked block by block: every block must hash to its
//! CID (sha2-256 or identity multihash) and every link must be present. A UnixFS file can
//! also be re-imported from its content to re-derive its root CID (DESIGN §7: CIDv1 raw
//! leaves, 256 KiB chunks, 174 links; `Qm…` roots with Kubo's defaults).

use std::collections::{BTreeMap, BTreeSet};

use cid::Cid;
use ganglion_storage::block::{self, IDENTITY};
use ganglion_storage::blockstore::{Blockstore, MemoryBlockstore};
use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};

/// The blocks an audit found, by CID.
pub type Blocks = BTreeMap<Cid, Vec<u8>>;

/// What a successful walk saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walked {
    /// Distinct blocks in the DAG.
    pub blocks: usize,
    /// Their bytes in total.
    pub bytes: u64,
}

fn bytes_of<'a>(blocks: &'a Blocks, cid: &Cid) -> Option<std::borrow::Cow<'a, [u8]>> {
    if cid.hash().code() == IDENTITY {
        Some(std::borrow::Cow::Owned(cid.hash().digest().to_vec()))
    } else {
        blocks
            .get(cid)
            .map(|b| std::borrow::Cow::Borrowed(b.as_slice()))
    }
}

/// Walks the DAG under `root` in `blocks`, checking each block against its CID.
///
/// # Errors
/// A readable reason naming the first block that is missing, does not hash to its CID, or
/// does not decode (dag-pb) / has an unsupported codec.
pub fn verify_dag(blocks: &Blocks, root: &Cid) -> Result<Walked, String> {
    let mut stack = vec![*root];
    let mut seen = BTreeSet::new();
    let mut walked = Walked {
        blocks: 0,
        bytes: 0,
    };
    while let Some(cid) = stack.pop() {
        if !seen.insert(cid) {
            continue;
        }
        let data = bytes_of(blocks, &cid).ok_or_else(|| format!("block {cid} is missing"))?;
        block::verify(&cid, &data).map_err(|e| format!("block {cid}: {e}"))?;
        let links = ganglion_storage::dag::links(&cid, &data).map_err(|e| e.to_string())?;
        walked.blocks += 1;
        walked.bytes += data.len() as u64;
        stack.extend(links.into_iter().rev());
    }
    Ok(walked)
}

/// The import options that produce `root`'s kind of CID: Kubo's defaults for CIDv0, the
/// project's CIDv1 raw-leaves options otherwise.
pub fn options_for(root: &Cid) -> ImportOptions {
    match root.version() {
        cid::Version::V0 => ImportOptions::kubo_default(),
        cid::Version::V1 => ImportOptions::cid_v1(),
    }
}

/// Reads the UnixFS file `root` from `blocks` and re-imports its content: returns the content
/// and the root CID the import produces.
///
/// # Errors
/// A readable reason when `root` is not a readable UnixFS file (a directory, a missing
/// block) or the import fails.
pub fn reimport_file(blocks: &Blocks, root: &Cid) -> Result<(Vec<u8>, Cid), String> {
    let store = MemoryBlockstore::new();
    // Only blocks that match their CID (the store refuses others); a DAG that needs a bad
    // one then reads as missing it.
    for (cid, data) in blocks {
        if block::verify(cid, data).is_ok() {
            store.put(cid, data).map_err(|e| e.to_string())?;
        }
    }
    let mut content = Vec::new();
    unixfs::cat(&store, root, &mut content).map_err(|e| e.to_string())?;
    let imported = unixfs::import_bytes(&content, &options_for(root), HashOnly::default())
        .map_err(|e| e.to_string())?;
    Ok((content, imported.root))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(data: &[u8]) -> (Blocks, Cid) {
        let store = MemoryBlockstore::new();
        let root = unixfs::import_bytes(data, &ImportOptions::cid_v1(), &store)
            .expect("import")
            .root;
        let mut walk = ganglion_storage::dag::Walker::new(root);
        let mut blocks = Blocks::new();
        while let Some((c, b)) = walk.next_block(&store).expect("walk") {
            blocks.insert(c, b);
        }
        (blocks, root)
    }

    #[test]
    fn a_multi_block_file_verifies_and_reimports_to_its_root() {
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let (blocks, root) = imported(&data);
        let w = verify_dag(&blocks, &root).expect("verifies");
        assert_eq!(w.blocks, 4, "three 256 KiB leaves and a root");
        let (content, again) = reimport_file(&blocks, &root).expect("re-imports");
        assert_eq!(content, data);
        assert_eq!(again, root);
    }

    #[test]
    fn a_changed_or_missing_leaf_is_named() {
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 13) as u8).collect();
        let (mut blocks, root) = imported(&data);
        let leaf = *blocks.keys().find(|c| **c != root).expect("a leaf");
        blocks.get_mut(&leaf).expect("leaf")[0] ^= 1;
        let e = verify_dag(&blocks, &root).expect_err("tampered");
        assert!(e.contains(&leaf.to_string()), "{e}");
        blocks.remove(&leaf);
        let e = verify_dag(&blocks, &root).expect_err("missing");
        assert!(
            e.contains("missing") && e.contains(&leaf.to_string()),
            "{e}"
        );
    }
}
