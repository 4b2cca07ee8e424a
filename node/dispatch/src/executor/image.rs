//! The job's image: a local name (never pulled: there may be no registry), a rootfs archive by
//! CID (`docker import`: `create_image` with `fromSrc=-`) or a `docker save` archive by CID
//! (`docker load`: `import_image`). Archives are read from the node's blockstore. The resolved
//! image id (`sha256:…`, the digest of its config) and the archive CID are recorded.

use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::{CreateImageOptionsBuilder, ImportImageOptionsBuilder};
use futures::StreamExt;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::pin::{Embedded, Pinner};
use serde::{Deserialize, Serialize};
use tokio_util::io::ReaderStream;

use super::error::FailureReason;
use super::plan::ImageSource;

/// The image a job ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// Where it came from (local name or archive CID).
    pub source: ImageSource,
    /// The engine's image id, `sha256:…`.
    pub id: String,
    /// The name it carries here (archives: `ganglion/archive:<cid>`).
    pub name: String,
}

/// The local name an archive is imported under (cached by CID).
pub fn archive_name(cid: &cid::Cid) -> String {
    // Docker tags are at most 128 characters of [A-Za-z0-9_.-]; a CIDv1 base32 string fits.
    let cid = cid.to_string();
    let tag: String = cid.chars().take(128).collect();
    format!("ganglion/archive:{tag}")
}

/// Resolves `source` to an image id, importing archives from `pinner` through `scratch`
/// (a directory for the archive's temporary copy).
///
/// # Errors
/// [`FailureReason::ImageUnavailable`] (unknown name, archive not in the blockstore, engine
/// refused the archive) or [`FailureReason::EngineUnavailable`].
pub async fn ensure<S: Blockstore + 'static>(
    docker: &Docker,
    pinner: &Embedded<S>,
    source: &ImageSource,
    scratch: &Path,
) -> Result<ImageRecord, FailureReason> {
    let record = |name: String, id: String| ImageRecord {
        source: source.clone(),
        id,
        name,
    };
    match source {
        ImageSource::Local { name } => {
            let id = inspect_id(docker, name).await?;
            Ok(record(name.clone(), id))
        }
        ImageSource::Rootfs { cid } | ImageSource::DockerSave { cid } => {
            let name = archive_name(cid);
            if let Ok(id) = inspect_id(docker, &name).await {
                return Ok(record(name, id));
            }
            let unavailable = |detail: String| FailureReason::ImageUnavailable { detail };
            tokio::fs::create_dir_all(scratch)
                .await
                .map_err(|e| unavailable(format!("scratch dir: {e}")))?;
            let path = scratch.join(format!("image-{cid}.tar"));
            let file = tokio::fs::File::create(&path)
                .await
                .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
            pinner
                .cat(cid, file)
                .await
                .map_err(|e| unavailable(format!("archive {cid}: {e}")))?;
            let result = load(docker, source, &path, &name).await;
            let _ = tokio::fs::remove_file(&path).await;
            result?;
            let id = inspect_id(docker, &name).await?;
            Ok(record(name, id))
        }
    }
}

async fn load(
    docker: &Docker,
    source: &ImageSource,
    path: &Path,
    name: &str,
) -> Result<(), FailureReason> {
    let unavailable = |detail: String| FailureReason::ImageUnavailable { detail };
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
    let body = bollard::body_try_stream(ReaderStream::new(file));
    let (repo, tag) = name.split_once(':').unwrap_or((name, "latest"));
    match source {
        ImageSource::Rootfs { .. } => {
            let options = CreateImageOptionsBuilder::default()
                .from_src("-")
                .repo(repo)
                .tag(tag)
                .build();
            let mut progress = docker.create_image(Some(options), Some(body), None);
            while let Some(item) = progress.next().await {
                let info = item.map_err(|e| unavailable(format!("docker import: {e}")))?;
                if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                    return Err(unavailable(format!("docker import: {detail}")));
                }
            }
            Ok(())
        }
        ImageSource::DockerSave { .. } => {
            let options = ImportImageOptionsBuilder::default().quiet(true).build();
            let mut progress = docker.import_image(options, body, None);
            let mut loaded: Option<String> = None;
            while let Some(item) = progress.next().await {
                let info = item.map_err(|e| unavailable(format!("docker load: {e}")))?;
                if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                    return Err(unavailable(format!("docker load: {detail}")));
                }
                if let Some(stream) = info.stream {
                    // "Loaded image: repo:tag" or "Loaded image ID: sha256:…"
                    if let Some(rest) = stream.trim().strip_prefix("Loaded image ID: ") {
                        loaded = Some(rest.to_string());
                    } else if let Some(rest) = stream.trim().strip_prefix("Loaded image: ") {
                        loaded = Some(rest.to_string());
                    }
                }
            }
            let loaded =
                loaded.ok_or_else(|| unavailable("docker load reported no image".to_string()))?;
            // Name it by CID so the next job finds it without loading again.
            let options = bollard::query_parameters::TagImageOptionsBuilder::default()
                .repo(repo)
                .tag(tag)
                .build();
            docker
                .tag_image(&loaded, Some(options))
                .await
                .map_err(|e| unavailable(format!("tag {loaded}: {e}")))
        }
        ImageSource::Local { .. } => Ok(()),
    }
}

async fn inspect_id(docker: &Docker, name: &str) -> Result<String, FailureReason> {
    match docker.inspect_image(name).await {
        Ok(image) => image.id.ok_or_else(|| FailureReason::ImageUnavailable {
            detail: format!("{name}: the engine reports no id"),
        }),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            message,
        }) => Err(FailureReason::ImageUnavailable {
            detail: format!(
                "{name}: {message} (images are never pulled; load it or give an archive CID)"
            ),
        }),
        Err(e) => Err(FailureReason::EngineUnavailable {
            detail: format!("inspect image {name}: {e}"),
        }),
    }
}
