//! CAR v1 (`ipld/specs` `transport/car/carv1`): export a DAG from a blockstore and import a CAR
//! into one, checking every block. Framing by `iroh-car` 0.5.
//!
//! Export order is Kubo's `ipfs dag export`: header `{roots: [root], version: 1}` (dag-cbor), then
//! the blocks depth-first pre-order in link order, each CID once. The output is byte-identical to
//! the CAR vectors in `shared/fixtures/ipfs/kubo-cids.json`.

use cid::Cid;
use iroh_car::{CarHeader, CarReader, CarWriter};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::blockstore::{self, Blockstore};
use crate::dag::Walker;

/// Errors of CAR export and import.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CAR framing is broken: bad header, truncated section, section over 4 MiB, bad CID.
    #[error("malformed CAR: {0}")]
    Malformed(#[source] iroh_car::Error),
    /// A block's bytes do not match its CID (the block is not stored).
    #[error("CAR block {index}: {source}")]
    InvalidBlock {
        /// Position of the block in the CAR (0 = first after the header).
        index: u64,
        /// The mismatch.
        #[source]
        source: crate::block::BlockError,
    },
    /// The CAR ended without every block of a root's DAG (a truncated CAR ends this way when the
    /// cut falls between sections).
    #[error("CAR is incomplete: root {root} misses block {missing}")]
    Incomplete {
        /// The root (boxed to keep the error small).
        root: Box<Cid>,
        /// A missing block.
        missing: Cid,
    },
    /// Reading blocks from, or writing them to, the blockstore failed.
    #[error(transparent)]
    Store(#[from] blockstore::Error),
    /// Writing the CAR failed.
    #[error("writing CAR: {0}")]
    Write(#[source] iroh_car::Error),
}

/// What an export or import moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarSummary {
    /// The header's roots.
    pub roots: Vec<Cid>,
    /// Blocks in the CAR.
    pub blocks: u64,
    /// CAR bytes written or read (header included).
    pub bytes: u64,
}

/// Writes the DAG under `root` as a CAR v1 to `out`.
///
/// Memory: one block plus the walk state. Cancel-safe only in the sense that dropping the future
/// leaves a partial CAR in `out`.
///
/// # Errors
/// [`Error::Store`] (with [`blockstore::Error::IncompleteDag`] when a block is missing),
/// [`Error::Write`].
pub async fn export<S, W>(store: &S, root: &Cid, out: W) -> Result<CarSummary, Error>
where
    S: Blockstore,
    W: AsyncWrite + Send + Unpin,
{
    let mut writer = CarWriter::new(CarHeader::new_v1(vec![*root]), out);
    let mut bytes = writer.write_header().await.map_err(Error::Write)? as u64;
    let mut blocks = 0;
    let mut walker = Walker::new(*root);
    while let Some((cid, data)) = walker.next_block(store)? {
        bytes += writer.write(cid, &data).await.map_err(Error::Write)? as u64;
        blocks += 1;
    }
    writer.finish().await.map_err(Error::Write)?;
    Ok(CarSummary {
        roots: vec![*root],
        blocks,
        bytes,
    })
}

/// Reads a CAR v1 from `input` into `store`, verifying each block against its CID, then checks
/// that every root's DAG is complete. Pins nothing.
///
/// On error, the blocks stored before it stay, unpinned, until the next GC; no block that failed
/// verification is stored.
///
/// # Errors
/// [`Error::Malformed`], [`Error::InvalidBlock`], [`Error::Incomplete`], [`Error::Store`].
pub async fn import<S, R>(store: &S, input: R) -> Result<CarSummary, Error>
where
    S: Blockstore,
    R: AsyncRead + Send + Unpin,
{
    let mut reader = CarReader::new(input).await.map_err(Error::Malformed)?;
    let roots = reader.header().roots().to_vec();
    let header_len = reader.header().encode().map_err(Error::Malformed)?.len() as u64;
    let mut bytes = varint_len(header_len) + header_len;
    let mut blocks = 0u64;
    while let Some((cid, data)) = reader.next_block().await.map_err(Error::Malformed)? {
        crate::block::verify(&cid, &data).map_err(|source| Error::InvalidBlock {
            index: blocks,
            source,
        })?;
        store.put(&cid, &data)?;
        let section = cid.encoded_len() as u64 + data.len() as u64;
        bytes += varint_len(section) + section;
        blocks += 1;
    }
    for root in &roots {
        if let Some(missing) = blockstore::missing_blocks(store, root)?.first() {
            return Err(Error::Incomplete {
                root: Box::new(*root),
                missing: *missing,
            });
        }
    }
    Ok(CarSummary {
        roots,
        blocks,
        bytes,
    })
}

fn varint_len(n: u64) -> u64 {
    u64::from(64 - n.max(1).leading_zeros()).div_ceil(7)
}

#[cfg(test)]
mod tests {
    #[test]
    fn varint_lengths() {
        assert_eq!(super::varint_len(0), 1);
        assert_eq!(super::varint_len(127), 1);
        assert_eq!(super::varint_len(128), 2);
        assert_eq!(super::varint_len(16383), 2);
        assert_eq!(super::varint_len(16384), 3);
    }
}
