//! The job's files on this node: `/inputs` filled from CIDs, an empty `/outputs` owned by the
//! container user, and after the run: logs and outputs pinned (UnixFS, CIDv1 raw leaves),
//! outputs exported as CAR v1 with their Filecoin piece CID (storage crate).
//!
//! Layout under the executor's work dir: `jobs/<job>/rank-<n>/{inputs,outputs}` (removed at
//! cleanup) and `jobs/<job>/artifacts/rank-<n>.{log,car}` (kept).

use std::path::{Path, PathBuf};

use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::pin::{Embedded, Pinner};
use ganglion_storage::unixfs::ImportOptions;

use super::error::FailureReason;
use super::plan::{InputFile, RunAs, RunId};
use super::report::{Artifact, CarArtifact};

/// Paths of one job on this node.
#[derive(Debug, Clone)]
pub struct JobDirs {
    root: PathBuf,
}

impl JobDirs {
    /// The dirs of `job` under `work_dir`.
    pub fn new(work_dir: &Path, job: &RunId) -> Self {
        Self {
            root: work_dir.join("jobs").join(job.as_str()),
        }
    }

    /// `jobs/<job>`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Host dir mounted at `/inputs` for `rank`.
    pub fn inputs(&self, rank: u32) -> PathBuf {
        self.root.join(format!("rank-{rank}")).join("inputs")
    }

    /// Host dir mounted at `/outputs` for `rank`.
    pub fn outputs(&self, rank: u32) -> PathBuf {
        self.root.join(format!("rank-{rank}")).join("outputs")
    }

    /// Kept artifacts (logs, CARs).
    pub fn artifacts(&self) -> PathBuf {
        self.root.join("artifacts")
    }

    /// The log file of `rank`.
    pub fn log(&self, rank: u32) -> PathBuf {
        self.artifacts().join(format!("rank-{rank}.log"))
    }

    /// The job's report as JSON (`artifacts/report.json`), written when the job ends.
    pub fn report(&self) -> PathBuf {
        self.artifacts().join("report.json")
    }

    /// The outputs CAR of `rank`.
    pub fn car(&self, rank: u32) -> PathBuf {
        self.artifacts().join(format!("rank-{rank}.car"))
    }

    /// Removes the per-rank dirs (inputs, outputs); artifacts stay.
    ///
    /// # Errors
    /// I/O errors other than "not found".
    pub async fn remove_rank_dirs(&self, ranks: &[u32]) -> std::io::Result<()> {
        for rank in ranks {
            match tokio::fs::remove_dir_all(self.root.join(format!("rank-{rank}"))).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Options for every artifact import: CIDv1 with raw leaves, 256 KiB chunks, 174 links
/// (DESIGN §7), and — for the outputs directory — dot entries **taken** (`hidden: true`, Kubo's
/// `ipfs add -r --hidden`) and symlinks stored as UnixFS `Symlink` nodes (never followed).
///
/// The dot-file rule differs from Kubo's `ipfs add -r` default (which leaves them out) on
/// purpose: the outputs are what the job wrote and what the orchestrator pays for, so none of
/// it is dropped silently (a `.hydra/` config or a `.done` marker is output too). The options
/// are recorded with the outputs ([`Artifact::import`]) and documented in `docs/dispatch.md`.
pub fn import_options() -> ImportOptions {
    ImportOptions {
        hidden: true,
        ..ImportOptions::cid_v1()
    }
}

/// Creates `rank`'s dirs: inputs filled from the blockstore, an empty outputs dir owned by the
/// container user, with the spec's declared output directories (`outputs`, relative to
/// `/outputs`) in it, as writable.
///
/// # Errors
/// [`FailureReason::Storage`] when an input is missing or a file cannot be written.
pub async fn prepare_rank<S: Blockstore + 'static>(
    dirs: &JobDirs,
    rank: u32,
    inputs: &[InputFile],
    outputs: &[PathBuf],
    pinner: &Embedded<S>,
    run_as: &RunAs,
) -> Result<(), FailureReason> {
    let storage = |detail: String| FailureReason::Storage { detail };
    let io = |p: &Path, e: std::io::Error| storage(format!("{}: {e}", p.display()));
    let input_dir = dirs.inputs(rank);
    let output_dir = dirs.outputs(rank);
    for dir in [&input_dir, &output_dir, &dirs.artifacts()] {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| io(dir, e))?;
    }
    for input in inputs {
        let path = input_dir.join(&input.path);
        // An earlier input may have been a symlink (inputs can be a previous job's outputs):
        // never write through one.
        if let Some(link) = symlink_on_the_way(&input_dir, &path) {
            return Err(storage(format!(
                "input {} at {}: {} is a symlink (an earlier input); refusing to write through it",
                input.cid,
                input.path.display(),
                link.display()
            )));
        }
        let store = std::sync::Arc::clone(pinner.store());
        let cid = input.cid;
        tokio::task::spawn_blocking(move || materialize(&*store, &cid, &path))
            .await
            .map_err(|e| storage(format!("input {}: {e}", input.cid)))?
            .map_err(|e| storage(format!("input {}: {e}", input.cid)))?;
    }
    // The declared output dirs, then the dirs on the way to them: each owned by (or open to)
    // the workload's user like `/outputs` itself.
    let mut writable = vec![output_dir.clone()];
    for rel in outputs {
        let dir = output_dir.join(rel);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| io(&dir, e))?;
        writable.extend(
            rel.ancestors()
                .filter(|a| !a.as_os_str().is_empty())
                .map(|a| output_dir.join(a)),
        );
    }
    if let RunAs::User(user) = run_as {
        for dir in &writable {
            let owned = numeric_user(user).is_some_and(|(uid, gid)| {
                std::os::unix::fs::chown(dir, Some(uid), Some(gid)).is_ok()
            });
            if !owned {
                // A named user (its uid is only known inside the image), or a node not running
                // as root (cannot chown): let anyone write. The dir is only mounted into this
                // rank.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
                    .map_err(|e| io(dir, e))?;
            }
        }
    }
    Ok(())
}

/// The first path from `base` (exclusive) down to `path` (inclusive) that exists as a
/// symlink, if any.
fn symlink_on_the_way(base: &Path, path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(base).ok()?;
    let mut at = base.to_path_buf();
    for part in rest.components() {
        at.push(part);
        if at.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
            return Some(at);
        }
    }
    None
}

/// Writes the UnixFS file, directory or symlink `cid` from `store` at `path` (directories
/// recursively; HAMT-sharded directories are refused). A `Symlink` node becomes a symlink
/// with the node's target text, never followed or checked (as `ipfs get` writes it); a
/// directory naming an entry twice is refused, so nothing is ever written through a link.
///
/// # Errors
/// Missing blocks, unsupported node types, duplicate or non-plain entry names, I/O.
pub fn materialize(
    store: &impl Blockstore,
    cid: &cid::Cid,
    path: &Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use ganglion_storage::block::DAG_PB;
    use ganglion_storage::dagpb::{self, UnixFsType};
    if cid.codec() == DAG_PB {
        let block = store
            .get(cid)?
            .ok_or_else(|| format!("block {cid} is not in the blockstore"))?;
        let node = dagpb::decode(&block)?;
        match node.unixfs_type {
            Some(UnixFsType::Directory) => {
                std::fs::create_dir_all(path)?;
                let mut names = std::collections::HashSet::new();
                for link in node.links {
                    if !names.insert(link.name.clone()) {
                        return Err(format!("directory entry {:?} appears twice", link.name).into());
                    }
                    let name = Path::new(&link.name);
                    let plain = matches!(
                        name.components().collect::<Vec<_>>()[..],
                        [std::path::Component::Normal(_)]
                    );
                    if !plain {
                        return Err(
                            format!("directory entry {:?} is not a plain name", link.name).into(),
                        );
                    }
                    materialize(store, &link.cid, &path.join(name))?;
                }
                return Ok(());
            }
            Some(UnixFsType::Symlink) => {
                let target = String::from_utf8(node.data)
                    .map_err(|_| format!("{cid}: symlink target is not UTF-8"))?;
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::os::unix::fs::symlink(target, path)?;
                return Ok(());
            }
            Some(UnixFsType::File) | Some(UnixFsType::Raw) | None => {}
            Some(other) => return Err(format!("{cid}: unsupported UnixFS node {other:?}").into()),
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    ganglion_storage::unixfs::cat(store, cid, file)?;
    Ok(())
}

fn numeric_user(user: &str) -> Option<(u32, u32)> {
    let (uid, gid) = user.split_once(':').unwrap_or((user, user));
    Some((uid.parse().ok()?, gid.parse().ok()?))
}

/// Total bytes of regular files under `dir` (symlinks not followed).
///
/// # Errors
/// I/O errors.
pub fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.path().symlink_metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// The last `max_bytes` of the log file at `path` and where they start in it
/// ([`super::Executor::log_tail`]); `None` when there is no such file. The file may grow
/// while it is read: the tail is what was there at the length first seen.
///
/// # Errors
/// I/O errors other than "not found".
pub fn read_tail(path: &Path, max_bytes: u64) -> std::io::Result<Option<super::LogTail>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let offset = len.saturating_sub(max_bytes);
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(len - offset).read_to_end(&mut bytes)?;
    Ok(Some(super::LogTail {
        offset,
        total: offset + bytes.len() as u64,
        bytes,
    }))
}

/// Pins the log file.
///
/// # Errors
/// [`FailureReason::Storage`].
pub async fn pin_log<S: Blockstore + 'static>(
    pinner: &Embedded<S>,
    path: &Path,
) -> Result<Artifact, FailureReason> {
    let added = pinner
        .add_file(path, &import_options())
        .await
        .map_err(|e| FailureReason::Storage {
            detail: format!("pin log {}: {e}", path.display()),
        })?;
    Ok(Artifact {
        cid: added.root.to_string(),
        bytes: added.content_bytes,
        car: None,
        import: None,
    })
}

/// Pins the outputs dir and writes its CAR with the piece CID.
///
/// Symlinks in the outputs are stored as UnixFS `Symlink` nodes and dot-files are taken
/// ([`import_options`]); the options are recorded in [`Artifact::import`].
///
/// # Errors
/// [`FailureReason::Storage`] (devices, FIFOs or sockets in outputs, store full…).
pub async fn pin_outputs<S: Blockstore + 'static>(
    pinner: &Embedded<S>,
    dir: &Path,
    car_path: &Path,
) -> Result<Artifact, FailureReason> {
    let storage = |detail: String| FailureReason::Storage { detail };
    let options = import_options();
    let added = pinner
        .add_dir(dir, &options)
        .await
        .map_err(|e| storage(format!("pin outputs: {e}")))?;
    let car = tokio::fs::File::create(car_path)
        .await
        .map_err(|e| storage(format!("{}: {e}", car_path.display())))?;
    let mut car = tokio::io::BufWriter::new(car);
    let deal = ganglion_storage::deal::prepare(&**pinner.store(), &added.root, &mut car)
        .await
        .map_err(|e| storage(format!("CAR/piece CID: {e}")))?;
    tokio::io::AsyncWriteExt::flush(&mut car)
        .await
        .map_err(|e| storage(format!("{}: {e}", car_path.display())))?;
    Ok(Artifact {
        cid: added.root.to_string(),
        bytes: added.content_bytes,
        car: Some(CarArtifact {
            path: car_path.to_path_buf(),
            deal,
        }),
        import: Some(options),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_storage::blockstore::MemoryBlockstore;
    use ganglion_storage::unixfs;

    #[test]
    fn directory_and_file_cids_materialize_as_imported() {
        let src = tempfile::tempdir().expect("tmp");
        let root = src.path().join("data");
        std::fs::create_dir_all(root.join("nested")).expect("mkdir");
        let big: Vec<u8> = (0..700_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(root.join("nested/big.bin"), &big).expect("write");
        std::fs::write(root.join("small.txt"), b"hello").expect("write");
        std::fs::write(root.join("empty"), b"").expect("write");
        let store = MemoryBlockstore::new();
        let dir = unixfs::import_dir(&root, &import_options(), &store).expect("import");

        let out = tempfile::tempdir().expect("tmp");
        materialize(&store, &dir.root, &out.path().join("in")).expect("materialize");
        assert_eq!(
            std::fs::read(out.path().join("in/nested/big.bin")).expect("read"),
            big
        );
        assert_eq!(
            std::fs::read(out.path().join("in/small.txt")).expect("read"),
            b"hello"
        );
        assert_eq!(
            std::fs::read(out.path().join("in/empty")).expect("read"),
            b""
        );
        // Re-importing the materialized tree gives the same CID.
        let again = unixfs::import_dir(
            &out.path().join("in"),
            &import_options(),
            &MemoryBlockstore::new(),
        )
        .expect("import again");
        assert_eq!(again.root, dir.root);

        let unknown =
            cid::Cid::try_from("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy")
                .expect("cid");
        assert!(materialize(&store, &unknown, &out.path().join("missing")).is_err());
    }

    /// Outputs with a symlink (one dangling) and dot entries: the job does not fail, the CID is
    /// the one `ipfs add -r --hidden --cid-version=1` gives for the tree, the options are
    /// recorded, and the tree materializes back with its links as links.
    #[tokio::test]
    async fn outputs_with_symlinks_and_dot_files_pin_and_record_their_options() {
        let work = tempfile::tempdir().expect("tmp");
        let out = work.path().join("outputs");
        std::fs::create_dir_all(out.join("ckpt")).expect("mkdir");
        std::fs::write(out.join("ckpt/step-2.pt"), b"weights").expect("write");
        std::fs::write(out.join(".done"), b"").expect("write");
        std::os::unix::fs::symlink("ckpt/step-2.pt", out.join("latest.pt")).expect("symlink");
        std::os::unix::fs::symlink("/nonexistent/x", out.join("dangling")).expect("symlink");
        let pinner = Embedded::new(std::sync::Arc::new(MemoryBlockstore::new()));

        let car = work.path().join("rank-0.car");
        let a = pin_outputs(&pinner, &out, &car).await.expect("pinned");
        let want = unixfs::import_dir(
            &out,
            &ImportOptions {
                hidden: true,
                ..ImportOptions::cid_v1()
            },
            unixfs::HashOnly::default(),
        )
        .expect("import");
        assert_eq!(a.cid, want.root.to_string());
        let recorded = a.import.as_ref().expect("options recorded");
        assert!(recorded.hidden);
        assert_eq!(recorded, &import_options());
        // The record survives report.json.
        let back: Artifact =
            serde_json::from_str(&serde_json::to_string(&a).expect("json")).expect("parse");
        assert_eq!(back, a);
        // Without dot entries the tree has another CID: the rule matters and is the recorded one.
        let without =
            unixfs::import_dir(&out, &ImportOptions::cid_v1(), unixfs::HashOnly::default())
                .expect("import");
        assert_ne!(without.root, want.root);

        let back_dir = work.path().join("again");
        materialize(&**pinner.store(), &want.root, &back_dir).expect("materialize");
        assert_eq!(
            std::fs::read_link(back_dir.join("latest.pt")).expect("link"),
            Path::new("ckpt/step-2.pt")
        );
        assert_eq!(
            std::fs::read_link(back_dir.join("dangling")).expect("link"),
            Path::new("/nonexistent/x")
        );
        assert!(back_dir.join(".done").is_file());
        let again = unixfs::import_dir(&back_dir, &import_options(), unixfs::HashOnly::default())
            .expect("import");
        assert_eq!(again.root, want.root);
    }

    /// The spec's declared output dirs exist, open to a named (non-numeric) user, before the
    /// workload starts: a workload writing `/outputs/result/summary.json` needs no `mkdir`.
    #[tokio::test]
    async fn declared_output_dirs_exist_and_are_writable_before_the_start() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tmp");
        let pinner = Embedded::new(std::sync::Arc::new(MemoryBlockstore::new()));
        let dirs = JobDirs::new(&tmp.path().join("work"), &RunId::new("job-1").expect("id"));
        let outputs = [PathBuf::from("result"), PathBuf::from("ckpt/best")];
        prepare_rank(
            &dirs,
            0,
            &[],
            &outputs,
            &pinner,
            &RunAs::User("trainer".into()),
        )
        .await
        .expect("prepared");
        for rel in ["result", "ckpt", "ckpt/best"] {
            let dir = dirs.outputs(0).join(rel);
            assert!(dir.is_dir(), "{rel} created");
            let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o777, "{rel} writable by the workload");
        }
    }

    /// An input that is a symlink never lets a later input be written through it.
    #[tokio::test]
    async fn a_later_input_is_not_written_through_an_earlier_symlink() {
        let src = tempfile::tempdir().expect("tmp");
        let outside = src.path().join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, src.path().join("link")).expect("symlink");
        let store = std::sync::Arc::new(MemoryBlockstore::new());
        let link = unixfs::import_path(&src.path().join("link"), &import_options(), &*store)
            .expect("import link")
            .root;
        let file = unixfs::import_bytes(b"payload", &import_options(), &*store)
            .expect("import file")
            .root;
        let pinner = Embedded::new(store);
        let dirs = JobDirs::new(&src.path().join("work"), &RunId::new("job-1").expect("id"));
        let inputs = [
            InputFile {
                cid: link,
                path: "data".into(),
            },
            InputFile {
                cid: file,
                path: "data/evil".into(),
            },
        ];
        let e = prepare_rank(&dirs, 0, &inputs, &[], &pinner, &RunAs::ImageDefault)
            .await
            .expect_err("refused");
        assert!(
            matches!(&e, FailureReason::Storage { detail } if detail.contains("is a symlink")),
            "{e:?}"
        );
        assert!(!outside.join("evil").exists(), "nothing written outside");
        assert!(
            std::fs::read_link(dirs.inputs(0).join("data")).is_ok(),
            "the link itself is an input"
        );
    }

    #[test]
    fn a_log_tail_is_the_last_bytes_with_their_offset() {
        let d = tempfile::tempdir().expect("tmp");
        let log = d.path().join("rank-0.log");
        assert_eq!(read_tail(&log, 10).expect("read"), None, "no log yet");
        std::fs::write(&log, b"").expect("write");
        let empty = read_tail(&log, 10).expect("read").expect("a log");
        assert_eq!((empty.offset, empty.total, empty.bytes.len()), (0, 0, 0));
        std::fs::write(&log, b"0123456789abcdef").expect("write");
        let tail = read_tail(&log, 6).expect("read").expect("a log");
        assert_eq!(
            (tail.offset, tail.total, tail.bytes.as_slice()),
            (10, 16, b"abcdef".as_slice())
        );
        let whole = read_tail(&log, 64).expect("read").expect("a log");
        assert_eq!(
            (whole.offset, whole.total, whole.bytes.as_slice()),
            (0, 16, b"0123456789abcdef".as_slice())
        );
    }

    #[test]
    fn dir_bytes_counts_regular_files_recursively() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(d.path().join("a/b")).expect("mkdir");
        std::fs::write(d.path().join("a/b/x"), vec![0u8; 1000]).expect("write");
        std::fs::write(d.path().join("y"), vec![0u8; 24]).expect("write");
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).expect("symlink");
        assert_eq!(dir_bytes(d.path()).expect("size"), 1024);
    }
}
