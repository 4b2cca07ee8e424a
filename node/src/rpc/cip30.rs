//! `job_buildLock` and `tx_submit`: the CIP-30 flow over [`crate::job::WalletLocks`].

use std::sync::Arc;

use ganglion_rpc::api::TxApiServer;
use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::core::{RpcResult, async_trait};
use ganglion_rpc::types::{TxSubmitted, UnsignedLock};

use super::{Api, codes, spec_param};
use crate::job::WalletLocks;

fn locks_of(api: &Api) -> RpcResult<&Arc<dyn WalletLocks>> {
    api.locks
        .as_ref()
        .ok_or_else(|| error(error::JOB, "no job engine runs on this node"))
}

fn unhex(what: &str, s: &str) -> RpcResult<Vec<u8>> {
    hex::decode(s.trim())
        .map_err(|e| error(error::INVALID_PARAMS, format!("{what} is not hex: {e}")))
}

/// `job_buildLock` (`ganglion_rpc::api::JobApi`).
pub(super) async fn build_lock(
    api: &Api,
    spec: serde_json::Value,
    change_address: String,
    utxos: Option<Vec<String>>,
) -> RpcResult<UnsignedLock> {
    {
        let spec = spec_param(&spec)?;
        let locks = locks_of(api)?;
        let l = locks
            .build_lock(&spec, &change_address, utxos.as_deref())
            .await
            .map_err(|e| codes::external(&e))?;
        Ok(UnsignedLock {
            job_id: hex::encode(l.job.0),
            tx_cbor_hex: hex::encode(&l.unsigned),
            tx_id: hex::encode(l.tx_id),
            fee: l.fee.into(),
            valid_until_slot: l.valid_until_slot,
            orchestrator: hex::encode(l.orchestrator),
        })
    }
}

#[async_trait]
impl TxApiServer for Api {
    async fn submit(
        &self,
        tx_cbor_hex: String,
        witness_set_cbor_hex: String,
    ) -> RpcResult<TxSubmitted> {
        let tx = unhex("tx_cbor_hex", &tx_cbor_hex)?;
        let ws = unhex("witness_set_cbor_hex", &witness_set_cbor_hex)?;
        let locks = locks_of(self)?;
        let s = locks
            .submit_signed(&tx, &ws)
            .await
            .map_err(|e| codes::external(&e))?;
        Ok(TxSubmitted {
            tx_id: hex::encode(s.tx_id),
            job_id: s.job.map(|j| hex::encode(j.0)),
            adopted: s.adopted,
        })
    }
}
