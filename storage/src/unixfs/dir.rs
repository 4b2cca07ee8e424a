//! Directory import (`ipfs add -r`): files are imported one at a time (streaming), then the
//! directory nodes are rendered by `rust-unixfs`' tree builder: entries sorted by name, plain
//! dag-pb directories, HAMT sharding above 256 KiB of entries (Kubo's `HAMTShardingSize`).
//! Symlinks become UnixFS `Symlink` nodes (never followed); dot entries are taken only with
//! [`ImportOptions::hidden`] (Kubo's `--hidden`).

use std::fs;
use std::path::{Path, PathBuf};

use cid::Cid;
use rust_unixfs::dir::builder::{BufferingTreeBuilder, TreeOptions};

use super::symlink::{read_target, symlink_block};
use super::{BlockSink, CidVersion, Error, ImportOptions, Imported, import_file, import_symlink};

/// Imports what is at `path` as `ipfs add [-r] PATH` does without `--dereference-args`: a
/// symlink as its own `Symlink` node, a directory recursively ([`import_dir`]), anything else
/// as a file.
///
/// # Errors
/// [`Error::ReadPath`] when `path` cannot be inspected, and what the chosen import returns.
pub fn import_path(
    path: &Path,
    options: &ImportOptions,
    sink: impl BlockSink,
) -> Result<Imported, Error> {
    let kind = fs::symlink_metadata(path).map_err(|source| Error::ReadPath {
        path: path.to_path_buf(),
        source,
    })?;
    if kind.is_symlink() {
        import_symlink(path, options, sink)
    } else if kind.is_dir() {
        import_dir(path, options, sink)
    } else if kind.is_file() {
        let file = fs::File::open(path).map_err(|source| Error::ReadPath {
            path: path.to_path_buf(),
            source,
        })?;
        import_file(file, options, sink)
    } else {
        Err(Error::UnsupportedFileType(path.to_path_buf()))
    }
}

/// Imports the directory at `path` recursively. The root is the directory itself (as `ipfs add
/// -r path` prints last), named by its last path component.
///
/// Entries are visited in name order. A symlink becomes a UnixFS `Symlink` node holding its
/// target text (never followed; a dangling link is fine), as Kubo stores it. Entries whose name
/// begins with `.` are left out unless [`ImportOptions::hidden`] (Kubo's `--hidden`, default
/// off); the root itself is always taken. Devices, FIFOs and sockets are refused rather than
/// silently skipped.
///
/// # Errors
/// [`Error::ReadPath`] for unreadable entries, [`Error::UnsupportedFileType`],
/// [`Error::NonUtf8Name`], [`Error::NonUtf8SymlinkTarget`], and everything [`import_file`]
/// returns.
pub fn import_dir(
    path: &Path,
    options: &ImportOptions,
    mut sink: impl BlockSink,
) -> Result<Imported, Error> {
    let name = utf8_name(path)?;
    let mut tree_options = TreeOptions::default();
    tree_options.cid_version(match options.cid_version {
        CidVersion::V0 => cid::Version::V0,
        CidVersion::V1 => cid::Version::V1,
    });
    let mut tree = BufferingTreeBuilder::new(tree_options);
    let mut totals = Totals::default();
    add_entries(path, &name, options, &mut sink, &mut tree, &mut totals)?;

    let mut root: Option<(Cid, u64)> = None;
    let mut nodes = tree.build();
    while let Some(node) = nodes.next_borrowed() {
        let node = node?;
        sink.put_block(node.cid, node.block)?;
        totals.blocks += 1;
        root = Some((*node.cid, node.total_size));
    }
    let (root, cumulative_size) =
        root.ok_or(Error::InvalidOptions("directory produced no root node"))?;
    Ok(Imported {
        root,
        content_bytes: totals.content_bytes,
        cumulative_size,
        blocks: totals.blocks,
    })
}

#[derive(Default)]
struct Totals {
    content_bytes: u64,
    blocks: u64,
}

fn add_entries(
    dir: &Path,
    prefix: &str,
    options: &ImportOptions,
    sink: &mut impl BlockSink,
    tree: &mut BufferingTreeBuilder,
    totals: &mut Totals,
) -> Result<(), Error> {
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::ReadPath { path, source }
    };
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(read_err(dir))? {
        let entry = entry.map_err(read_err(dir))?.path();
        let name = utf8_name(&entry)?;
        if options.hidden || !name.starts_with('.') {
            entries.push((name, entry));
        }
    }
    entries.sort();
    if entries.is_empty() {
        // An empty directory (or one of dot entries only, without `hidden`) still gets a node.
        tree.set_metadata(prefix, rust_unixfs::Metadata::default())?;
    }
    for (name, entry) in entries {
        let child = format!("{prefix}/{name}");
        let kind = fs::symlink_metadata(&entry).map_err(read_err(&entry))?;
        if kind.is_symlink() {
            let (cid, block) = symlink_block(&read_target(&entry)?, options.cid_version);
            sink.put_block(&cid, &block)?;
            totals.blocks += 1;
            tree.put_link(&child, cid, block.len() as u64)?;
        } else if kind.is_dir() {
            add_entries(&entry, &child, options, sink, tree, totals)?;
        } else if kind.is_file() {
            let file = fs::File::open(&entry).map_err(read_err(&entry))?;
            let imported = import_file(file, options, &mut *sink)?;
            totals.content_bytes += imported.content_bytes;
            totals.blocks += imported.blocks;
            tree.put_link(&child, imported.root, imported.cumulative_size)?;
        } else {
            return Err(Error::UnsupportedFileType(entry));
        }
    }
    Ok(())
}

fn utf8_name(path: &Path) -> Result<String, Error> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| Error::NonUtf8Name(path.to_path_buf()))
}
