//! `ipfs cat`: the bytes of a UnixFS file, block by block from a blockstore.

use std::io::Write;

use cid::Cid;

use super::Error;
use crate::block::{DAG_PB, RAW};
use crate::blockstore::{self, Blockstore};
use crate::dagpb::{self, UnixFsType};

/// The content of a UnixFS file as a sequence of pieces, one per block, in file order.
///
/// Memory: one block at a time plus the pending links. Repeated chunks (a file of zeros) are
/// yielded each time they occur.
pub struct FileChunks {
    root: Cid,
    stack: Vec<Cid>,
}

impl FileChunks {
    /// Reads the file `root`.
    pub fn new(root: Cid) -> Self {
        Self {
            root,
            stack: vec![root],
        }
    }

    /// The next piece of content (possibly empty for parent nodes), or `None` at the end.
    ///
    /// # Errors
    /// [`Error::Store`] with [`blockstore::Error::IncompleteDag`] when a block is missing,
    /// [`Error::NotAFile`] for directories and other node types.
    pub fn next_chunk(&mut self, store: &impl Blockstore) -> Result<Option<Vec<u8>>, Error> {
        let Some(cid) = self.stack.pop() else {
            return Ok(None);
        };
        let data = store
            .get(&cid)?
            .ok_or_else(|| blockstore::Error::IncompleteDag {
                root: Box::new(self.root),
                missing: cid,
            })?;
        match cid.codec() {
            RAW => Ok(Some(data)),
            DAG_PB => {
                let node = dagpb::decode(&data)
                    .map_err(|source| blockstore::Error::CorruptNode { cid, source })?;
                match node.unixfs_type {
                    Some(UnixFsType::File | UnixFsType::Raw) => {}
                    other => {
                        return Err(Error::NotAFile {
                            cid,
                            kind: format!("{other:?}"),
                        });
                    }
                }
                self.stack.extend(node.links.iter().rev().map(|l| l.cid));
                Ok(Some(node.data))
            }
            codec => Err(blockstore::Error::UnsupportedCodec { cid, codec }.into()),
        }
    }
}

/// Writes the content of the UnixFS file `root` to `out`; returns the bytes written.
///
/// # Errors
/// As [`FileChunks::next_chunk`], plus [`Error::Write`].
pub fn cat(store: &impl Blockstore, root: &Cid, mut out: impl Write) -> Result<u64, Error> {
    let mut chunks = FileChunks::new(*root);
    let mut written = 0u64;
    while let Some(content) = chunks.next_chunk(store)? {
        out.write_all(&content).map_err(Error::Write)?;
        written += content.len() as u64;
    }
    out.flush().map_err(Error::Write)?;
    Ok(written)
}
