//! An N2C connection to a node (cardano-node or the devnet): the wallet's UTxOs through the
//! local-state queries `GetUTxOByAddress` and `GetCurrentPParams`, the system start, the tip, and transaction
//! submission with readable rejections (`ganglion_cardano`'s client facade, DESIGN §4).

use std::net::SocketAddr;
use std::path::PathBuf;

use ganglion_cardano::client::{ClientError, N2cClient};
use ganglion_cardano::localstate::{
    CONWAY_ERA_INDEX, decode_current_pparams, protocol_params_of, system_start_ms,
};
use ganglion_cardano::protocol::ProtocolParams;
use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::tx::{Output, Utxo};
use pallas_codec::minicbor::{self, Decoder};
use pallas_codec::utils::AnyCbor;
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::localstate::queries_v16::{
    BlockQuery, LedgerQuery, Request, SystemStart,
};
use pallas_traverse::{Era, MultiEraOutput};

use crate::rejection::{self, SubmitFailure};

/// Where the N2C endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum N2cEndpoint {
    /// A Unix socket.
    Unix(PathBuf),
    /// TCP (the devnet's N2C port).
    Tcp(SocketAddr),
}

/// Chain-connection failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Connecting or the handshake failed.
    #[error("cannot reach the node at {endpoint}: {source}")]
    Connect {
        /// Where.
        endpoint: String,
        /// The cause.
        #[source]
        source: ClientError,
    },
    /// A local-state query failed.
    #[error("local-state query {query}: {reason}")]
    Query {
        /// Which query.
        query: &'static str,
        /// Why.
        reason: String,
    },
    /// The node rejected a transaction (decoded: a real cardano-node's Conway ledger
    /// failures or the devnet's rule and message) or the submission failed.
    #[error("transaction rejected: {0}")]
    Submit(#[source] SubmitFailure),
}

/// One N2C connection.
pub struct ChainClient {
    client: N2cClient,
}

impl ChainClient {
    /// Connects and performs the handshake with `magic`.
    ///
    /// # Errors
    /// [`Error::Connect`].
    pub async fn connect(endpoint: &N2cEndpoint, magic: u64) -> Result<Self, Error> {
        let r = match endpoint {
            N2cEndpoint::Unix(p) => N2cClient::connect_unix(p, magic).await,
            N2cEndpoint::Tcp(a) => N2cClient::connect_tcp(*a, magic).await,
        };
        let client = r.map_err(|source| Error::Connect {
            endpoint: match endpoint {
                N2cEndpoint::Unix(p) => p.display().to_string(),
                N2cEndpoint::Tcp(a) => a.to_string(),
            },
            source,
        })?;
        Ok(Self { client })
    }

    async fn query(&mut self, name: &'static str, q: Request) -> Result<Vec<u8>, Error> {
        let err = |reason: String| Error::Query {
            query: name,
            reason,
        };
        let sq = self.client.statequery();
        sq.acquire(None).await.map_err(|e| err(e.to_string()))?;
        let r: Result<AnyCbor, _> = sq.query(q).await;
        let released = sq.send_release().await;
        let raw = r.map_err(|e| err(e.to_string()))?;
        released.map_err(|e| err(e.to_string()))?;
        Ok(raw.raw_bytes().to_vec())
    }

    /// The UTxOs at `address` (raw address bytes), in the ledger's order.
    ///
    /// # Errors
    /// [`Error::Query`] (also for an answer that does not decode).
    pub async fn utxos_at(&mut self, address: &[u8]) -> Result<Vec<Utxo>, Error> {
        let q = Request::LedgerQuery(LedgerQuery::BlockQuery(
            CONWAY_ERA_INDEX,
            BlockQuery::GetUTxOByAddress(vec![address.to_vec().into()]),
        ));
        let raw = self.query("GetUTxOByAddress", q).await?;
        decode_utxos(&raw).map_err(|reason| Error::Query {
            query: "GetUTxOByAddress",
            reason,
        })
    }

    /// The ledger's current protocol parameters (`GetCurrentPParams`, Conway era): what fees,
    /// min-UTxO and script budgets are computed from, so transactions built here pay what the
    /// ledger asks on any network (the devnet answers its genesis values).
    ///
    /// # Errors
    /// [`Error::Query`], also when a field the builder needs is missing or out of range.
    pub async fn protocol_params(&mut self) -> Result<ProtocolParams, Error> {
        let q = Request::LedgerQuery(LedgerQuery::BlockQuery(
            CONWAY_ERA_INDEX,
            BlockQuery::GetCurrentPParams,
        ));
        let raw = self.query("GetCurrentPParams", q).await?;
        let err = |reason: String| Error::Query {
            query: "GetCurrentPParams",
            reason,
        };
        let p = decode_current_pparams(&raw).map_err(|e| err(e.to_string()))?;
        protocol_params_of(&p).map_err(|e| err(e.to_string()))
    }

    /// The chain's system start (POSIX ms) from `GetSystemStart`.
    ///
    /// # Errors
    /// [`Error::Query`].
    pub async fn system_start_ms(&mut self) -> Result<u64, Error> {
        let raw = self
            .query("GetSystemStart", Request::GetSystemStart)
            .await?;
        let s: SystemStart = minicbor::decode(&raw).map_err(|e| Error::Query {
            query: "GetSystemStart",
            reason: e.to_string(),
        })?;
        system_start_ms(&s).ok_or_else(|| Error::Query {
            query: "GetSystemStart",
            reason: format!("out of range: {s:?}"),
        })
    }

    /// The tip: `(slot, block hash)`, `None` at origin.
    ///
    /// # Errors
    /// [`Error::Query`].
    pub async fn tip(&mut self) -> Result<Option<(u64, [u8; 32])>, Error> {
        let raw = self.query("GetChainPoint", Request::GetChainPoint).await?;
        let p: Point = minicbor::decode(&raw).map_err(|e| Error::Query {
            query: "GetChainPoint",
            reason: e.to_string(),
        })?;
        Ok(match p {
            Point::Origin => None,
            Point::Specific(slot, hash) => {
                let h: [u8; 32] = hash.try_into().map_err(|_| Error::Query {
                    query: "GetChainPoint",
                    reason: "block hash is not 32 bytes".into(),
                })?;
                Some((slot, h))
            }
        })
    }

    /// Submits a signed Conway transaction.
    ///
    /// # Errors
    /// [`Error::Submit`] with the node's reason.
    pub async fn submit(&mut self, tx: &[u8]) -> Result<(), Error> {
        self.client
            .submit(tx)
            .await
            .map_err(|e| Error::Submit(rejection::from_client(e)))
    }

    /// Closes the connection.
    pub async fn close(self) {
        self.client.close().await;
    }
}

/// `[{ [tx_id, index] => output }]` → UTxOs (outputs decoded in the Conway era).
fn decode_utxos(raw: &[u8]) -> Result<Vec<Utxo>, String> {
    let mut d = Decoder::new(raw);
    let e = |e: minicbor::decode::Error| e.to_string();
    d.array().map_err(e)?;
    let n = d.map().map_err(e)?.ok_or("indefinite UTxO map")?;
    let mut out = Vec::new();
    for _ in 0..n {
        d.array().map_err(e)?;
        let tx: [u8; 32] = d
            .bytes()
            .map_err(e)?
            .try_into()
            .map_err(|_| "transaction id is not 32 bytes")?;
        let index = d.u64().map_err(e)?;
        let start = d.position();
        d.skip().map_err(e)?;
        let bytes = &raw[start..d.position()];
        let o = MultiEraOutput::decode(Era::Conway, bytes).map_err(e)?;
        out.push(Utxo {
            reference: TxoRef { tx_hash: tx, index },
            output: Output::from_chain(&o),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_utxo_answers_are_errors_not_panics() {
        assert!(decode_utxos(&[]).is_err());
        assert!(decode_utxos(&[0x81, 0xa1, 0x82, 0x41, 0x00, 0x00, 0x00]).is_err());
    }
}
