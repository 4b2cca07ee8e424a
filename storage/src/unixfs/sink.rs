//! Where imported blocks go: a [`Blockstore`] or nowhere ([`HashOnly`], `ipfs add --only-hash`).

use cid::Cid;

use crate::blockstore::{Blockstore, Error};

/// Receives the blocks of an import, leaves first, the root last.
pub trait BlockSink {
    /// Takes one block. The bytes hash to `cid` by construction.
    ///
    /// # Errors
    /// Whatever the destination refuses (full store, I/O).
    fn put_block(&mut self, cid: &Cid, data: &[u8]) -> Result<(), Error>;
}

impl<T: Blockstore + ?Sized> BlockSink for &T {
    fn put_block(&mut self, cid: &Cid, data: &[u8]) -> Result<(), Error> {
        self.put(cid, data).map(drop)
    }
}

/// Discards blocks and counts their bytes (`ipfs add --only-hash`).
#[derive(Debug, Default, Clone, Copy)]
pub struct HashOnly {
    /// Bytes of all blocks seen.
    pub block_bytes: u64,
}

impl BlockSink for HashOnly {
    fn put_block(&mut self, _cid: &Cid, data: &[u8]) -> Result<(), Error> {
        self.block_bytes += data.len() as u64;
        Ok(())
    }
}

impl<S: BlockSink + ?Sized> BlockSink for &mut S {
    fn put_block(&mut self, cid: &Cid, data: &[u8]) -> Result<(), Error> {
        (**self).put_block(cid, data)
    }
}
