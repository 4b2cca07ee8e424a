//! A job's attested artifacts (`job_logs`, `job_outputs`): the result and log CIDs its
//! providers signed, as the chain records them (each provider's claim), read back as UnixFS from
//! the node's blockstore after [`super::evidence::gather`] fetched what was missing over
//! bitswap. Logs are files, outputs directories (DESIGN §7; the executor pins them,
//! `executor::artifacts`).

use std::path::Path;
use std::sync::Arc;

use cid::Cid;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::event::Event;
use ganglion_indexer::store::Kv;
use ganglion_indexer::{Indexer, JobView};
use ganglion_rpc::audit::{JobLog, JobOutput, OutputFile};
use ganglion_storage::block::DAG_PB;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::dagpb::{self, UnixFsType};

use super::error::AuditError;
use super::evidence::{self, Evidence};

/// Why artifacts could not be listed at all (a provider's missing DAG is not an error: it is
/// that entry's `error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactsError {
    /// Gathering the job's record and blocks.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The job is on chain but not settled or expired: no attestation is recorded yet.
    #[error(
        "job {job} has no attestation on chain yet (status {status}): each provider attests its \
         log and outputs in its claim, when its share ends (`ganglion job status` shows each node)"
    )]
    NotAttested {
        /// The job.
        job: JobId,
        /// Its chain status (snake_case).
        status: String,
    },
    /// Writing the outputs under the given directory.
    #[error("writing {path}: {detail}")]
    Write {
        /// The directory written.
        path: String,
        /// The cause.
        detail: String,
    },
}

/// What one provider attested: its assignment index and the CIDs of its outputs and logs.
#[derive(Debug, Clone)]
struct Attestation {
    provider_index: u64,
    result: Vec<u8>,
    logs: Vec<u8>,
}

/// The attestations of the job, one per provider's claim, with each provider's key hash
/// (hex).
fn attested(view: &JobView) -> Result<Vec<(String, Attestation)>, ArtifactsError> {
    let mut list: Vec<Attestation> = view
        .history
        .iter()
        .filter_map(|r| match &r.event {
            Event::JobClaimed {
                index, attestation, ..
            } => Some(Attestation {
                provider_index: *index,
                result: attestation.result.clone(),
                logs: attestation.logs.clone(),
            }),
            _ => None,
        })
        .collect();
    if list.is_empty() {
        return Err(ArtifactsError::NotAttested {
            job: view.job_id,
            status: format!("{:?}", view.status).to_lowercase(),
        });
    }
    list.sort_by_key(|a| a.provider_index);
    Ok(list
        .into_iter()
        .map(|a| {
            let provider = usize::try_from(a.provider_index)
                .ok()
                .and_then(|i| view.assignments.get(i))
                .map(|x| hex::encode(x.provider))
                .unwrap_or_default();
            (provider, a)
        })
        .collect())
}

async fn gathered<S: Kv>(
    indexer: &Indexer<S>,
    blocks: &Arc<dyn Blockstore>,
    p2p: Option<&ganglion_p2p::Client>,
    job: &JobId,
) -> Result<(Evidence, Vec<(String, Attestation)>), ArtifactsError> {
    let view = indexer
        .job(job, 0)
        .map_err(AuditError::from)?
        .ok_or(AuditError::UnknownJob(*job))?
        .value;
    // Fail before fetching anything when there is nothing attested.
    attested(&view)?;
    let e = evidence::gather(indexer, blocks.as_ref(), p2p, job).await?;
    let list = attested(&e.job)?;
    Ok((e, list))
}

/// `None` for an empty CID (the provider attested none), else the CID or why it is not one.
fn root(bytes: &[u8]) -> Option<Result<Cid, String>> {
    (!bytes.is_empty())
        .then(|| Cid::try_from(bytes).map_err(|e| format!("attested CID does not parse: {e}")))
}

/// Each attested provider's log, read from `blocks` (fetched over `p2p` from the job's
/// providers when missing).
///
/// # Errors
/// [`ArtifactsError::Audit`] (unknown job, indexer, blockstore),
/// [`ArtifactsError::NotAttested`].
pub async fn logs<S: Kv>(
    indexer: &Indexer<S>,
    blocks: &Arc<dyn Blockstore>,
    p2p: Option<&ganglion_p2p::Client>,
    job: &JobId,
) -> Result<Vec<JobLog>, ArtifactsError> {
    let (_, list) = gathered(indexer, blocks, p2p, job).await?;
    Ok(list
        .into_iter()
        .map(|(provider, a)| {
            let mut log = JobLog {
                index: a.provider_index,
                provider,
                cid: String::new(),
                bytes: 0,
                text: String::new(),
                error: None,
            };
            match root(&a.logs) {
                None => {}
                Some(Err(e)) => log.error = Some(e),
                Some(Ok(cid)) => {
                    log.cid = cid.to_string();
                    let mut content = Vec::new();
                    match ganglion_storage::unixfs::cat(blocks, &cid, &mut content) {
                        Ok(n) => {
                            log.bytes = n;
                            log.text = String::from_utf8_lossy(&content).into_owned();
                        }
                        Err(e) => log.error = Some(e.to_string()),
                    }
                }
            }
            log
        })
        .collect())
}

/// Every regular file under the UnixFS directory (or file) `cid`, with paths under `prefix`.
///
/// # Errors
/// A readable reason: a missing or undecodable block, a HAMT shard or symlink.
pub fn list(
    store: &impl Blockstore,
    cid: &Cid,
    prefix: &str,
    out: &mut Vec<OutputFile>,
) -> Result<(), String> {
    if cid.codec() == DAG_PB {
        let block = store
            .get(cid)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("block {cid} is missing"))?;
        let node = dagpb::decode(&block).map_err(|e| format!("block {cid}: {e}"))?;
        match node.unixfs_type {
            Some(UnixFsType::Directory) => {
                for l in &node.links {
                    let path = if prefix.is_empty() {
                        l.name.clone()
                    } else {
                        format!("{prefix}/{}", l.name)
                    };
                    list(store, &l.cid, &path, out)?;
                }
                return Ok(());
            }
            Some(UnixFsType::File | UnixFsType::Raw) | None => {}
            Some(other) => return Err(format!("{cid}: unsupported UnixFS node {other:?}")),
        }
    }
    let bytes = ganglion_storage::unixfs::cat(store, cid, std::io::sink())
        .map_err(|e| format!("{cid}: {e}"))?;
    out.push(OutputFile {
        path: prefix.to_string(),
        cid: cid.to_string(),
        bytes,
    });
    Ok(())
}

/// Each attested provider's outputs, listed; with `dir`, also unpacked to
/// `<dir>/rank-<index>` (through `executor::artifacts::materialize`).
///
/// # Errors
/// As [`logs`], and [`ArtifactsError::Write`] when a directory cannot be written.
pub async fn outputs<S: Kv>(
    indexer: &Indexer<S>,
    blocks: &Arc<dyn Blockstore>,
    p2p: Option<&ganglion_p2p::Client>,
    job: &JobId,
    dir: Option<&Path>,
) -> Result<Vec<JobOutput>, ArtifactsError> {
    let (_, list_) = gathered(indexer, blocks, p2p, job).await?;
    let mut out = Vec::new();
    for (provider, a) in list_ {
        let mut o = JobOutput {
            index: a.provider_index,
            provider,
            cid: String::new(),
            files: Vec::new(),
            written_to: None,
            error: None,
        };
        match root(&a.result) {
            None => {}
            Some(Err(e)) => o.error = Some(e),
            Some(Ok(cid)) => {
                o.cid = cid.to_string();
                let mut files = Vec::new();
                match list(blocks, &cid, "", &mut files) {
                    Err(e) => o.error = Some(e),
                    Ok(()) => {
                        files.sort_by(|x, y| x.path.cmp(&y.path));
                        o.files = files;
                        if let Some(dir) = dir {
                            let target = dir.join(format!("rank-{}", a.provider_index));
                            let store = Arc::clone(blocks);
                            let t = target.clone();
                            tokio::task::spawn_blocking(move || {
                                ganglion_dispatch::executor::artifacts::materialize(
                                    &store, &cid, &t,
                                )
                                .map_err(|e| e.to_string())
                            })
                            .await
                            .map_err(|e| e.to_string())
                            .and_then(|r| r)
                            .map_err(|detail| {
                                ArtifactsError::Write {
                                    path: target.display().to_string(),
                                    detail,
                                }
                            })?;
                            o.written_to = Some(target.display().to_string());
                        }
                    }
                }
            }
        }
        out.push(o);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_storage::blockstore::MemoryBlockstore;
    use ganglion_storage::unixfs::{self, HashOnly, ImportOptions};

    #[test]
    fn a_directory_lists_every_file_with_its_size_and_a_missing_block_is_named() {
        let src = tempfile::tempdir().expect("tmp");
        let out = src.path().join("outputs");
        std::fs::create_dir_all(out.join("ckpt")).expect("dirs");
        std::fs::write(out.join("result.bin"), vec![7u8; 300_000]).expect("write");
        std::fs::write(out.join("ckpt").join("step-1.pt"), b"weights").expect("write");
        let store = MemoryBlockstore::new();
        let root = unixfs::import_dir(&out, &ImportOptions::cid_v1(), &store)
            .expect("import")
            .root;
        let mut files = Vec::new();
        list(&store, &root, "", &mut files).expect("lists");
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let seen: Vec<(&str, u64)> = files.iter().map(|f| (f.path.as_str(), f.bytes)).collect();
        assert_eq!(seen, [("ckpt/step-1.pt", 7), ("result.bin", 300_000)]);

        // Drop one leaf of the big file: the listing names the missing block.
        let big: Cid = files[1].cid.parse().expect("cid");
        let block = store.get(&big).expect("get").expect("root block");
        let leaf = dagpb::decode(&block).expect("dag-pb").links[0].cid;
        let partial = MemoryBlockstore::new();
        let mut walk = ganglion_storage::dag::Walker::new(root);
        while let Some((c, b)) = walk.next_block(&store).expect("walk") {
            if c != leaf {
                partial.put(&c, &b).expect("put");
            }
        }
        let e = list(&partial, &root, "", &mut Vec::new()).expect_err("incomplete");
        assert!(e.contains(&leaf.to_string()), "{e}");
    }

    #[test]
    fn an_empty_attested_cid_means_none_and_garbage_is_an_error() {
        assert!(root(&[]).is_none());
        assert!(matches!(root(&[1, 2, 3]), Some(Err(_))));
        let c = unixfs::import_bytes(b"log", &ImportOptions::cid_v1(), HashOnly::default())
            .expect("hash")
            .root;
        assert_eq!(root(&c.to_bytes()), Some(Ok(c)));
    }
}
