//! Walking a DAG held in a [`Blockstore`]: depth-first pre-order in link order, each CID visited
//! once. This is the block order of Kubo's `dag export` / go-car's `selective` walk (and of the
//! CAR vectors in `shared/fixtures/ipfs`), also used by pinning, GC and `cat`.

use std::collections::HashSet;

use cid::Cid;

use crate::block::{DAG_PB, IDENTITY, RAW};
use crate::blockstore::{Blockstore, Error};
use crate::dagpb;

/// The CIDs a block links to, in link order. Raw blocks have none.
///
/// # Errors
/// [`Error::CorruptNode`] for a dag-pb block that does not decode, [`Error::UnsupportedCodec`]
/// for codecs other than dag-pb and raw.
pub fn links(cid: &Cid, block: &[u8]) -> Result<Vec<Cid>, Error> {
    match cid.codec() {
        RAW => Ok(Vec::new()),
        DAG_PB => Ok(dagpb::decode(block)
            .map_err(|source| Error::CorruptNode { cid: *cid, source })?
            .links
            .into_iter()
            .map(|l| l.cid)
            .collect()),
        codec => Err(Error::UnsupportedCodec { cid: *cid, codec }),
    }
}

/// A resumable depth-first pre-order walk; call [`Walker::next_block`] until it returns `None`.
///
/// Memory: one entry per visited CID plus the pending links (at most 174 per tree level for
/// UnixFS), never the block data of more than one block.
pub struct Walker {
    root: Cid,
    stack: Vec<Cid>,
    seen: HashSet<Cid>,
}

impl Walker {
    /// A walk from `root`.
    pub fn new(root: Cid) -> Self {
        Self {
            root,
            stack: vec![root],
            seen: HashSet::new(),
        }
    }

    /// The next block not yet visited, with its bytes.
    ///
    /// Identity-hash CIDs (inlined data) are yielded like any block, their bytes being the digest.
    ///
    /// # Errors
    /// [`Error::IncompleteDag`] when a block is missing; errors of [`links`].
    pub fn next_block(&mut self, store: &impl Blockstore) -> Result<Option<(Cid, Vec<u8>)>, Error> {
        while let Some(cid) = self.stack.pop() {
            if !self.seen.insert(cid) {
                continue;
            }
            let data = if cid.hash().code() == IDENTITY {
                cid.hash().digest().to_vec()
            } else {
                store.get(&cid)?.ok_or_else(|| Error::IncompleteDag {
                    root: Box::new(self.root),
                    missing: cid,
                })?
            };
            let children = links(&cid, &data)?;
            self.stack.extend(children.into_iter().rev());
            return Ok(Some((cid, data)));
        }
        Ok(None)
    }
}
