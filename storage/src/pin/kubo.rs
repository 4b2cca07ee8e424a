//! A pinner that drives a Kubo daemon over its HTTP RPC (`/api/v0`, Kubo's `docs/http-rpc`)
//! through `ipfs-api-backend-hyper` 0.6.
//!
//! `add` and `dag/export` are custom requests: the crate's `AddResponse` wants `Size` as a string
//! (Kubo) where js-ipfs sends a number, and it has no `dag/export`. Before uploading, the CID is
//! computed locally with the same options; a daemon that returns another CID is an error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cid::Cid;
use futures::{StreamExt, TryStreamExt};
use ipfs_api_backend_hyper::{IpfsApi, IpfsClient, TryFromUri};
use ipfs_api_prelude::{ApiRequest, Backend};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::{Added, Error, Pinner};
use crate::block::parse_cid;
use crate::unixfs::{self, CidVersion, HashOnly, ImportOptions};

/// A [`Pinner`] backed by a Kubo (or Kubo-compatible, e.g. js-ipfs) daemon.
#[derive(Clone)]
pub struct Kubo {
    client: IpfsClient,
    endpoint: String,
    pin_timeout: Duration,
}

impl std::fmt::Debug for Kubo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubo")
            .field("endpoint", &self.endpoint)
            .field("pin_timeout", &self.pin_timeout)
            .finish()
    }
}

/// `/api/v0/add` with the flags this crate sets.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct AddRequest {
    cid_version: u32,
    raw_leaves: bool,
    chunker: String,
    pin: bool,
    progress: bool,
}

impl ApiRequest for AddRequest {
    const PATH: &'static str = "/add";
}

/// One NDJSON line of `add`. `Size` is a string in Kubo and a number in js-ipfs.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AddLine {
    hash: String,
    #[serde(default)]
    size: Option<serde_json::Value>,
}

/// `/api/v0/dag/export?arg=<cid>`, with Kubo's global `timeout` when bounded.
#[derive(Serialize)]
struct DagExport {
    arg: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
}

impl ApiRequest for DagExport {
    const PATH: &'static str = "/dag/export";
}

/// `/api/v0/pin/add` with a server-side `timeout` (a Kubo global option) so that pinning a CID
/// nobody has fails instead of searching forever.
#[derive(Serialize)]
struct PinAdd {
    arg: String,
    recursive: bool,
    timeout: String,
}

impl ApiRequest for PinAdd {
    const PATH: &'static str = "/pin/add";
}

impl Kubo {
    /// Default limit on `pin add` (ms): long enough for a local DAG, short for a missing one.
    pub const DEFAULT_PIN_TIMEOUT: Duration = Duration::from_secs(10);

    /// A client for the RPC at `endpoint`, e.g. `http://127.0.0.1:5001` (no `/api/v0`). Nothing
    /// is contacted yet.
    ///
    /// # Errors
    /// [`Error::InvalidEndpoint`] when `endpoint` is not a URL.
    pub fn new(endpoint: &str) -> Result<Self, Error> {
        let client = IpfsClient::from_str(endpoint).map_err(|source| Error::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            source: Box::new(source),
        })?;
        Ok(Self {
            client,
            endpoint: endpoint.to_owned(),
            pin_timeout: Self::DEFAULT_PIN_TIMEOUT,
        })
    }

    /// Sets the limit on `pin add` (server side, and client side plus 2 s).
    pub fn with_pin_timeout(mut self, limit: Duration) -> Self {
        self.pin_timeout = limit;
        self
    }

    /// The daemon's version string (`/api/v0/version`): a liveness probe.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when it is down.
    pub async fn version(&self) -> Result<String, Error> {
        let v = self
            .client
            .version()
            .await
            .map_err(|e| self.classify("/version", e))?;
        Ok(v.version)
    }

    fn classify(&self, operation: &'static str, source: ipfs_api_backend_hyper::Error) -> Error {
        match &source {
            ipfs_api_backend_hyper::Error::Client(e) if e.is_connect() => Error::Unavailable {
                endpoint: self.endpoint.clone(),
                source,
            },
            _ => Error::Rpc { operation, source },
        }
    }

    async fn raw_add(&self, path: PathBuf, options: &ImportOptions) -> Result<AddLine, Error> {
        let file = std::fs::File::open(&path)?;
        let mut form = ipfs_api_backend_hyper::Form::default();
        form.add_reader("path", file);
        let request = AddRequest {
            cid_version: match options.cid_version {
                CidVersion::V0 => 0,
                CidVersion::V1 => 1,
            },
            raw_leaves: options.raw_leaves,
            chunker: options.chunker.to_string(),
            pin: true,
            progress: false,
        };
        let (status, body) = self
            .client
            .request_raw(request, Some(form))
            .await
            .map_err(|e| self.classify("/add", e))?;
        if !status.is_success() {
            return Err(Error::Rpc {
                operation: "/add",
                source: <IpfsClient as Backend>::process_error_from_body(body),
            });
        }
        // One JSON object per line; the root is the last.
        let text = String::from_utf8_lossy(&body);
        let last = text
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .ok_or_else(|| Error::BadResponse {
                operation: "/add",
                detail: "empty body".into(),
            })?;
        serde_json::from_str(last).map_err(|e| Error::BadResponse {
            operation: "/add",
            detail: format!("{e}: {last}"),
        })
    }
}

impl Pinner for Kubo {
    async fn add_file(&self, path: &Path, options: &ImportOptions) -> Result<Added, Error> {
        if options.max_links != 174 {
            return Err(Error::Import(unixfs::Error::InvalidOptions(
                "Kubo's add has no max-links flag: only 174 links per node",
            )));
        }
        let path = path.to_owned();
        let local = {
            let (path, options) = (path.clone(), options.clone());
            tokio::task::spawn_blocking(move || {
                let file = std::fs::File::open(&path)?;
                Ok::<_, Error>(unixfs::import_file(file, &options, HashOnly::default())?)
            })
            .await??
        };
        let line = self.raw_add(path, options).await?;
        let matches = parse_cid(&line.hash).is_ok_and(|c| c == local.root);
        if !matches {
            // Leave the daemon as it was: drop the pin on the CID we did not ask for.
            if let Err(e) = self.client.pin_rm(&line.hash, true).await {
                tracing::warn!(returned = %line.hash, error = %e, "could not unpin mismatched CID");
            }
            return Err(Error::CidMismatch {
                expected: local.root,
                returned: line.hash,
            });
        }
        if let Some(size) = &line.size {
            let reported = match size {
                serde_json::Value::String(s) => s.parse::<u64>().ok(),
                serde_json::Value::Number(n) => n.as_u64(),
                _ => None,
            };
            if reported.is_some_and(|r| r != local.cumulative_size) {
                tracing::warn!(
                    ?reported,
                    ours = local.cumulative_size,
                    "daemon reports another Size"
                );
            }
        }
        Ok(Added {
            root: local.root,
            content_bytes: local.content_bytes,
            cumulative_size: local.cumulative_size,
        })
    }

    async fn pin(&self, cid: &Cid) -> Result<(), Error> {
        let limit = self.pin_timeout;
        let request = PinAdd {
            arg: cid.to_string(),
            recursive: true,
            timeout: format!("{}ms", limit.as_millis()),
        };
        let call = self.client.request_raw(request, None);
        let timeout_error = Error::Timeout {
            operation: "/pin/add",
            limit_ms: limit.as_millis() as u64,
        };
        let (status, body) = tokio::time::timeout(limit + Duration::from_secs(2), call)
            .await
            .map_err(|_| timeout_error)?
            .map_err(|e| self.classify("/pin/add", e))?;
        if status.is_success() {
            Ok(())
        } else {
            Err(Error::Rpc {
                operation: "/pin/add",
                source: <IpfsClient as Backend>::process_error_from_body(body),
            })
        }
    }

    async fn unpin(&self, cid: &Cid) -> Result<(), Error> {
        match self.client.pin_rm(&cid.to_string(), true).await {
            Ok(_) => Ok(()),
            Err(ipfs_api_backend_hyper::Error::Api(api)) if api.message.contains("not pinned") => {
                Err(Error::NotPinned(*cid))
            }
            Err(e) => Err(self.classify("/pin/rm", e)),
        }
    }

    async fn pins(&self) -> Result<Vec<Cid>, Error> {
        let listed = self
            .client
            .pin_ls(None, Some("recursive"))
            .await
            .map_err(|e| self.classify("/pin/ls", e))?;
        let mut cids = listed
            .keys
            .keys()
            .map(|k| {
                parse_cid(k).map_err(|e| Error::BadResponse {
                    operation: "/pin/ls",
                    detail: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        cids.sort_by_key(|c| c.to_bytes());
        Ok(cids)
    }

    async fn cat<W: AsyncWrite + Send + Unpin>(&self, cid: &Cid, mut out: W) -> Result<u64, Error> {
        let mut stream = self.client.cat(&cid.to_string());
        let mut written = 0u64;
        while let Some(bytes) = stream.next().await {
            let bytes = bytes.map_err(|e| self.classify("/cat", e))?;
            out.write_all(&bytes).await?;
            written += bytes.len() as u64;
        }
        out.flush().await?;
        Ok(written)
    }

    async fn export_car<W: AsyncWrite + Send + Unpin>(
        &self,
        cid: &Cid,
        out: W,
    ) -> Result<u64, Error> {
        self.export(cid, out, None).await
    }
}

impl Kubo {
    /// Fetches the DAG under `root` from the daemon into `store`: `dag/export` streamed into
    /// [`crate::car::import`], so every block is checked against its CID and the DAG is
    /// checked complete before this returns. Bounded by `limit` (Kubo's `timeout` on the
    /// server, and here). Pins nothing: pin `root` in `store` to keep it through GC.
    ///
    /// # Errors
    /// [`Error::Timeout`], [`Error::Unavailable`], [`Error::Rpc`], [`Error::Car`] (a block that
    /// does not match its CID, an incomplete DAG, a malformed CAR), [`Error::BadResponse`]
    /// when the CAR's roots do not name `root`.
    pub async fn fetch_into<S: crate::blockstore::Blockstore>(
        &self,
        root: &Cid,
        store: &S,
        limit: Duration,
    ) -> Result<crate::car::CarSummary, Error> {
        let (writer, reader) = tokio::io::duplex(256 * 1024);
        // The writer moves into the export and is dropped when it ends: the import's EOF.
        let export = self.export(root, writer, Some(limit));
        let import = async { crate::car::import(store, reader).await.map_err(Error::from) };
        let (_, summary) = tokio::time::timeout(limit + Duration::from_secs(2), async {
            tokio::try_join!(export, import)
        })
        .await
        .map_err(|_| Error::Timeout {
            operation: "/dag/export",
            limit_ms: limit.as_millis() as u64,
        })??;
        if !summary.roots.contains(root) {
            return Err(Error::BadResponse {
                operation: "/dag/export",
                detail: format!("the CAR's roots {:?} do not name {root}", summary.roots),
            });
        }
        Ok(summary)
    }

    async fn export<W: AsyncWrite + Send + Unpin>(
        &self,
        cid: &Cid,
        mut out: W,
        limit: Option<Duration>,
    ) -> Result<u64, Error> {
        let request = self
            .client
            .build_base_request(
                DagExport {
                    arg: cid.to_string(),
                    timeout: limit.map(|l| format!("{}ms", l.as_millis())),
                },
                None,
            )
            .map_err(|e| self.classify("/dag/export", e))?;
        let mut stream = self
            .client
            .request_stream_bytes(request)
            .map_err(|e| self.classify("/dag/export", e));
        let mut written = 0u64;
        while let Some(bytes) = stream.try_next().await? {
            out.write_all(&bytes).await?;
            written += bytes.len() as u64;
        }
        out.flush().await?;
        Ok(written)
    }
}
