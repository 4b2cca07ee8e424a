//! Streaming import of one file.

use std::io::{ErrorKind, Read};

use cid::Cid;
use rust_unixfs::file::adder::{BalancedCollector, Chunker as UnixfsChunker, FileAdder};

use super::{BlockSink, CidVersion, Error, ImportOptions, Imported};
use crate::block::DAG_PB;
use crate::dagpb;

/// Imports the bytes of `reader` as a UnixFS file, handing each block to `sink`.
///
/// Memory is bounded: one chunk buffer plus the tree's pending links, for any input size.
///
/// # Errors
/// [`Error::Read`] when the reader fails, [`Error::Store`] when the sink refuses a block (the
/// blocks already handed over stay there, unpinned, for GC), [`Error::InvalidOptions`] for a
/// node width below 2.
pub fn import_file(
    mut reader: impl Read,
    options: &ImportOptions,
    mut sink: impl BlockSink,
) -> Result<Imported, Error> {
    let mut adder = adder(options)?;
    let chunk = options.chunker.size_bytes();
    let mut buf = vec![0u8; chunk];
    let mut content_bytes = 0u64;
    let mut blocks = 0u64;
    let mut last: Option<(Cid, Vec<u8>)> = None;
    let mut emit = |cid: Cid, data: Vec<u8>, sink: &mut dyn BlockSink| -> Result<(), Error> {
        sink.put_block(&cid, &data)?;
        blocks += 1;
        last = Some((cid, data));
        Ok(())
    };
    loop {
        // Fill a whole chunk before pushing so the adder hashes in place (no internal copy);
        // short reads from pipes and sockets are normal.
        let mut filled = 0;
        while filled < chunk {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Read(e)),
            }
        }
        content_bytes += filled as u64;
        let mut pushed = 0;
        while pushed < filled {
            let (out, consumed) = adder.push(&buf[pushed..filled]);
            for (cid, data) in out {
                emit(cid, data, &mut sink)?;
            }
            pushed += consumed;
        }
        if filled < chunk {
            break;
        }
    }
    for (cid, data) in adder.finish() {
        emit(cid, data, &mut sink)?;
    }
    // `finish` always yields the root last (an empty file still has one node).
    let (root, root_block) = last.ok_or(Error::InvalidOptions("importer produced no root"))?;
    Ok(Imported {
        root,
        content_bytes,
        cumulative_size: cumulative_size(&root, &root_block)?,
        blocks,
    })
}

/// [`import_file`] over a byte slice.
///
/// # Errors
/// As [`import_file`].
pub fn import_bytes(
    data: &[u8],
    options: &ImportOptions,
    sink: impl BlockSink,
) -> Result<Imported, Error> {
    import_file(data, options, sink)
}

fn adder(options: &ImportOptions) -> Result<FileAdder, Error> {
    if options.max_links < 2 {
        return Err(Error::InvalidOptions("max_links must be at least 2"));
    }
    let version = match options.cid_version {
        CidVersion::V0 => cid::Version::V0,
        CidVersion::V1 => cid::Version::V1,
    };
    Ok(FileAdder::builder()
        .with_chunker(UnixfsChunker::Size(options.chunker.size_bytes()))
        .with_collector(BalancedCollector::with_branching_factor(options.max_links))
        .with_cid_version(version)
        .with_raw_leaves(options.raw_leaves)
        .build())
}

/// The dag-pb `Tsize` of a block: its own length plus its links' `Tsize` (raw: its length).
pub(crate) fn cumulative_size(cid: &Cid, data: &[u8]) -> Result<u64, Error> {
    if cid.codec() != DAG_PB {
        return Ok(data.len() as u64);
    }
    let node = dagpb::decode(data)
        .map_err(|source| crate::blockstore::Error::CorruptNode { cid: *cid, source })?;
    Ok(data.len() as u64 + node.links.iter().map(|l| l.tsize).sum::<u64>())
}
