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
use super::plan::{InputFile, JobId, RunAs};
use super::report::{Artifact, CarArtifact};

/// Paths of one job on this node.
#[derive(Debug, Clone)]
pub struct JobDirs {
    root: PathBuf,
}

impl JobDirs {
    /// The dirs of `job` under `work_dir`.
    pub fn new(work_dir: &Path, job: &JobId) -> Self {
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

/// Options for every artifact import: CIDv1 with raw leaves, 256 KiB chunks (DESIGN §7).
pub fn import_options() -> ImportOptions {
    ImportOptions::cid_v1()
}

/// Creates `rank`'s dirs: inputs filled from the blockstore, an empty outputs dir owned by the
/// container user.
///
/// # Errors
/// [`FailureReason::Storage`] when an input is missing or a file cannot be written.
pub async fn prepare_rank<S: Blockstore + 'static>(
    dirs: &JobDirs,
    rank: u32,
    inputs: &[InputFile],
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
        let store = std::sync::Arc::clone(pinner.store());
        let cid = input.cid;
        tokio::task::spawn_blocking(move || materialize(&*store, &cid, &path))
            .await
            .map_err(|e| storage(format!("input {}: {e}", input.cid)))?
            .map_err(|e| storage(format!("input {}: {e}", input.cid)))?;
    }
    if let RunAs::User(user) = run_as {
        let owned = numeric_user(user).is_some_and(|(uid, gid)| {
            std::os::unix::fs::chown(&output_dir, Some(uid), Some(gid)).is_ok()
        });
        if !owned {
            // A named user (its uid is only known inside the image), or a node not running as
            // root (cannot chown): let anyone write. The dir is only mounted into this rank.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&output_dir, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| io(&output_dir, e))?;
        }
    }
    Ok(())
}

/// Writes the UnixFS file or directory `cid` from `store` at `path` (directories recursively;
/// HAMT-sharded directories and symlinks are refused).
///
/// # Errors
/// Missing blocks, unsupported node types, I/O.
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
                for link in node.links {
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
    })
}

/// Pins the outputs dir and writes its CAR with the piece CID.
///
/// # Errors
/// [`FailureReason::Storage`] (symlinks or special files in outputs, store full…).
pub async fn pin_outputs<S: Blockstore + 'static>(
    pinner: &Embedded<S>,
    dir: &Path,
    car_path: &Path,
) -> Result<Artifact, FailureReason> {
    let storage = |detail: String| FailureReason::Storage { detail };
    let added = pinner
        .add_dir(dir, &import_options())
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
