//! A minimal local-state-query server: acquire (tip or a point on chain), and the queries
//! `GetSystemStart`, `GetChainPoint`, `GetChainBlockNo`, `GetCurrentEra`, and the Conway
//! block queries `GetCurrentPParams` and `GetUTxOByAddress`, in the encodings pallas'
//! `queries_v16` helpers decode. Queries always answer from the current tip (the devnet
//! keeps no historical ledger states). Any other query closes the connection. The answers'
//! encodings are `ganglion_cardano::localstate`'s, which the node's wallet decodes.

use std::sync::Arc;

use ganglion_cardano::localstate::{CONWAY_ERA_INDEX, current_pparams_cbor, system_start_cbor};
use pallas_codec::minicbor::{self, Encoder};
use pallas_codec::utils::AnyCbor;
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::localstate::queries_v16::{
    BlockQuery, HardForkQuery, LedgerQuery, Request,
};
use pallas_network::miniprotocols::localstate::{
    AcquireFailure, ClientAcquireRequest, ClientQueryRequest, Server,
};
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;
use crate::serve::ServeError;
use crate::serve::chainsync::{point_of, resolve_point};

fn answer(chain: &Chain, system_start_ms: u64, q: &Request) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    let ok = match q {
        Request::GetChainPoint => {
            let p = chain.tip().as_ref().map_or(Point::Origin, point_of);
            e.encode(p).is_ok()
        }
        Request::GetChainBlockNo => {
            let n = chain.tip().map_or(0, |t| t.number);
            (|| e.array(2)?.u8(1)?.u64(n).map(|_| ()))().is_ok()
        }
        Request::GetSystemStart => {
            e.writer_mut()
                .extend_from_slice(&system_start_cbor(system_start_ms));
            true
        }
        Request::LedgerQuery(LedgerQuery::HardForkQuery(HardForkQuery::GetCurrentEra)) => {
            e.u16(CONWAY_ERA_INDEX).is_ok()
        }
        Request::LedgerQuery(LedgerQuery::BlockQuery(_, BlockQuery::GetCurrentPParams)) => {
            e.writer_mut()
                .extend_from_slice(&current_pparams_cbor(&chain.rules().params));
            true
        }
        Request::LedgerQuery(LedgerQuery::BlockQuery(_, BlockQuery::GetUTxOByAddress(addrs))) => {
            let mut found = Vec::new();
            for a in addrs {
                match chain.utxos_at(a) {
                    Ok(u) => found.extend(u),
                    Err(_) => return None,
                }
            }
            let r = (|| {
                e.array(1)?.map(found.len() as u64)?;
                for (r, raw) in &found {
                    e.array(2)?.bytes(&r.tx_hash)?.u64(r.index)?;
                    e.writer_mut().extend_from_slice(raw);
                }
                Ok::<_, minicbor::encode::Error<std::convert::Infallible>>(())
            })();
            r.is_ok()
        }
        _ => false,
    };
    ok.then_some(buf)
}

/// Serve one local-state-query client.
///
/// # Errors
/// [`ServeError`]; an unsupported query ends the connection with
/// [`ServeError::LocalState`] (`InvalidInbound`).
pub async fn serve(
    server: &mut Server,
    chain: Arc<Chain>,
    system_start_ms: u64,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    loop {
        let req = tokio::select! {
            r = server.recv_while_idle() => r?,
            _ = cancel.cancelled() => return Ok(()),
        };
        let Some(ClientAcquireRequest(point)) = req else {
            return Ok(());
        };
        let mut point = point;
        'acquired: loop {
            if let Some(p) = &point
                && resolve_point(&chain, p)?.is_none()
            {
                server.send_failure(AcquireFailure::PointNotOnChain).await?;
                break 'acquired;
            }
            server.send_acquired().await?;
            loop {
                let q = tokio::select! {
                    r = server.recv_while_acquired() => r?,
                    _ = cancel.cancelled() => return Ok(()),
                };
                match q {
                    ClientQueryRequest::Release => break 'acquired,
                    ClientQueryRequest::ReAcquire(p) => {
                        point = p;
                        continue 'acquired;
                    }
                    ClientQueryRequest::Query(raw) => {
                        let parsed: Option<Request> = minicbor::decode(raw.raw_bytes()).ok();
                        match parsed.and_then(|q| answer(&chain, system_start_ms, &q)) {
                            Some(bytes) => {
                                server.send_result(AnyCbor::from_raw_bytes(bytes)).await?
                            }
                            None => {
                                return Err(ServeError::LocalState(
                                    pallas_network::miniprotocols::localstate::Error::InvalidInbound,
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
}
