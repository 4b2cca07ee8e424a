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
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io(parent, e))?;
        }
        let file = tokio::fs::File::create(&path)
            .await
            .map_err(|e| io(&path, e))?;
        pinner
            .cat(&input.cid, file)
            .await
            .map_err(|e| storage(format!("input {}: {e}", input.cid)))?;
    }
    if let RunAs::User(user) = run_as {
        if let Some((uid, gid)) = numeric_user(user) {
            std::os::unix::fs::chown(&output_dir, Some(uid), Some(gid))
                .map_err(|e| io(&output_dir, e))?;
        } else {
            // A named user: its uid is only known inside the image; let anyone write.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&output_dir, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| io(&output_dir, e))?;
        }
    }
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
