//! `storage_*`: the node's blockstore through its one pinner (the executor's: an import in
//! flight holds the pinner's lock, so a GC never sweeps it), each method one
//! `ganglion_storage::cli` command. Paths are on the node's host and must be absolute.

use std::path::PathBuf;

use ganglion_rpc::api::StorageApiServer;
use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::core::{RpcResult, async_trait};
use ganglion_rpc::storage::{AddOptions, Added, Collected, Piece, Wrote};
use ganglion_storage::cli::{Command, Outcome, execute};
use ganglion_storage::unixfs::{CidVersion, ImportOptions};

use super::{Api, codes};

/// The options of `storage_add` (and `ganglion storage add`) as an import: Kubo's `add` defaults for the CID version given
/// (CIDv1 when none), `--chunker`, `--hidden`.
///
/// # Errors
/// [`error::INVALID_PARAMS`] naming the option.
pub fn import_options(o: &AddOptions) -> RpcResult<ImportOptions> {
    let invalid = |m: String| error(error::INVALID_PARAMS, m);
    let version = match o.cid_version.unwrap_or(1) {
        0 => CidVersion::V0,
        1 => CidVersion::V1,
        v => return Err(invalid(format!("cid_version {v}: must be 0 or 1"))),
    };
    let chunker = match &o.chunker {
        Some(c) => c.parse().map_err(|e| invalid(format!("chunker: {e}")))?,
        None => Default::default(),
    };
    let mut options = ImportOptions::from_flags(version, o.raw_leaves, chunker);
    options.hidden = o.hidden.unwrap_or(false);
    Ok(options)
}

fn absolute(field: &str, path: String) -> RpcResult<PathBuf> {
    let p = PathBuf::from(&path);
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(error(
            error::INVALID_PARAMS,
            format!("{field} {path:?} is not an absolute path on the node's host"),
        ))
    }
}

/// `cid` as given, once it parses as a CID (an `/ipfs/` prefix allowed).
fn cid_param(cid: String) -> RpcResult<String> {
    ganglion_storage::block::parse_cid(&cid)
        .map_err(|e| error(error::INVALID_PARAMS, format!("cid: {e}")))?;
    Ok(cid)
}

impl Api {
    async fn storage_run(&self, command: Command) -> RpcResult<Outcome> {
        let pinner = self.storage.as_ref().ok_or_else(|| {
            error(
                error::CHAIN_UNAVAILABLE,
                "this server holds no blockstore: storage methods need a running node \
                 (`ganglion node run`)",
            )
        })?;
        execute(pinner, command)
            .await
            .map_err(|e| codes::storage(&e))
    }
}

fn unexpected(o: &Outcome) -> ganglion_rpc::jsonrpsee::types::ErrorObjectOwned {
    error(error::INTERNAL, format!("unexpected storage outcome {o:?}"))
}

fn wrote(o: Outcome) -> RpcResult<Wrote> {
    match o {
        Outcome::Wrote { bytes } => Ok(Wrote { bytes }),
        o => Err(unexpected(&o)),
    }
}

#[async_trait]
impl StorageApiServer for Api {
    async fn add(&self, path: String, options: Option<AddOptions>) -> RpcResult<Added> {
        let options = import_options(&options.unwrap_or_default())?;
        let path = absolute("path", path)?;
        match self.storage_run(Command::Add { path, options }).await? {
            Outcome::Added {
                cid,
                content_bytes,
                cumulative_size,
            } => Ok(Added {
                cid,
                content_bytes,
                cumulative_size,
            }),
            o => Err(unexpected(&o)),
        }
    }

    async fn cat(&self, cid: String, out: String) -> RpcResult<Wrote> {
        let out = absolute("out", out)?;
        let cid = cid_param(cid)?;
        wrote(self.storage_run(Command::Cat { cid, out }).await?)
    }

    async fn export_car(&self, cid: String, out: String) -> RpcResult<Wrote> {
        let out = absolute("out", out)?;
        let cid = cid_param(cid)?;
        wrote(self.storage_run(Command::ExportCar { cid, out }).await?)
    }

    async fn piece_cid(&self, cid: String, car_out: String) -> RpcResult<Piece> {
        let car_out = absolute("car_out", car_out)?;
        let cid = cid_param(cid)?;
        match self
            .storage_run(Command::PieceCidOfDag { cid, car_out })
            .await?
        {
            Outcome::Piece {
                piece_cid,
                padded_piece_bytes,
                payload_bytes,
                payload_cid: Some(payload_cid),
            } => Ok(Piece {
                piece_cid,
                padded_piece_bytes,
                payload_bytes,
                payload_cid,
            }),
            o => Err(unexpected(&o)),
        }
    }

    async fn pin(&self, cid: String) -> RpcResult<()> {
        let cid = cid_param(cid)?;
        self.storage_run(Command::Pin { cid }).await.map(drop)
    }

    async fn unpin(&self, cid: String) -> RpcResult<()> {
        let cid = cid_param(cid)?;
        self.storage_run(Command::Unpin { cid }).await.map(drop)
    }

    async fn pins(&self) -> RpcResult<Vec<String>> {
        match self.storage_run(Command::Pins).await? {
            Outcome::Pins { cids } => Ok(cids),
            o => Err(unexpected(&o)),
        }
    }

    async fn gc(&self) -> RpcResult<Collected> {
        match self.storage_run(Command::Gc).await? {
            Outcome::Collected {
                removed_blocks,
                freed_bytes,
            } => Ok(Collected {
                removed_blocks,
                freed_bytes,
            }),
            o => Err(unexpected(&o)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_options_follow_kubo_defaults_and_name_the_bad_one() {
        let o = import_options(&AddOptions::default()).expect("defaults");
        assert_eq!(o, ImportOptions::cid_v1());
        let v0 = import_options(&AddOptions {
            cid_version: Some(0),
            ..Default::default()
        })
        .expect("v0");
        assert_eq!(v0, ImportOptions::kubo_default());
        let e = import_options(&AddOptions {
            cid_version: Some(2),
            ..Default::default()
        })
        .expect_err("refused");
        assert!(e.message().contains("cid_version 2"), "{}", e.message());
        let e = import_options(&AddOptions {
            chunker: Some("rabin".into()),
            ..Default::default()
        })
        .expect_err("refused");
        assert!(e.message().starts_with("chunker:"), "{}", e.message());
        assert!(absolute("out", "rel/x".into()).is_err());
    }
}
