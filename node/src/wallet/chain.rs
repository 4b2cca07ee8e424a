//! An N2C connection to a node (cardano-node or the devnet): the wallet's UTxOs through the
//! local-state queries `GetUTxOByAddress` and `GetCurrentPParams`, the system start, the tip, and transaction
//! submission with readable rejections (the testnet crate's client facade, DESIGN §4).

use ganglion_contracts::protocol::{ExUnits, ProtocolParams, Ratio};
use ganglion_contracts::tx::{Output, TxoRef, Utxo};
use ganglion_testnet::client::{ClientError, N2cClient};
use pallas_codec::minicbor::{self, Decoder};
use pallas_codec::utils::AnyCbor;
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::localstate::queries_v16::{
    self as q16, BlockQuery, LedgerQuery, Request, SystemStart,
};
use pallas_traverse::{Era, MultiEraOutput};

use crate::settings::N2cEndpoint;
use crate::wallet::rejection::{self, SubmitFailure};

/// Era index of Conway in local-state block queries.
const CONWAY_QUERY_ERA: u16 = 6;

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
            CONWAY_QUERY_ERA,
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
            CONWAY_QUERY_ERA,
            BlockQuery::GetCurrentPParams,
        ));
        let raw = self.query("GetCurrentPParams", q).await?;
        let err = |reason: String| Error::Query {
            query: "GetCurrentPParams",
            reason,
        };
        let (p,): (q16::ProtocolParam,) = minicbor::decode(&raw).map_err(|e| err(e.to_string()))?;
        protocol_params_of(&p).map_err(err)
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
        system_start_to_ms(&s).ok_or_else(|| Error::Query {
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
/// The builder's parameters from a `ConwayPParams` answer; names the first missing field.
fn protocol_params_of(p: &q16::ProtocolParam) -> Result<ProtocolParams, String> {
    fn need<T: Clone>(v: &Option<T>, name: &str) -> Result<T, String> {
        v.clone().ok_or_else(|| format!("{name} missing"))
    }
    let ratio = |r: &q16::RationalNumber, name: &str| {
        if r.denominator == 0 {
            return Err(format!("{name} has a zero denominator"));
        }
        Ok(Ratio {
            num: r.numerator,
            den: r.denominator,
        })
    };
    let prices = need(&p.execution_costs, "executionUnitPrices")?;
    let max_ex = need(&p.max_tx_ex_units, "maxTxExecutionUnits")?;
    let coins = need(&p.ada_per_utxo_byte, "coinsPerUTxOByte")?;
    let cost_models = need(&p.cost_models_for_script_languages, "costModels")?;
    let ref_cost = need(
        &p.minfee_refscript_cost_per_byte,
        "minFeeRefScriptCostPerByte",
    )?;
    if ref_cost.denominator == 0 {
        return Err("minFeeRefScriptCostPerByte has a zero denominator".into());
    }
    let (major, _minor) = need(&p.protocol_version, "protocolVersion")?;
    Ok(ProtocolParams {
        min_fee_a: need(&p.minfee_a, "minFeeA")?,
        min_fee_b: need(&p.minfee_b, "minFeeB")?,
        max_tx_size: need(&p.max_transaction_size, "maxTxSize")?,
        price_mem: ratio(&prices.mem_price, "priceMemory")?,
        price_steps: ratio(&prices.step_price, "priceSteps")?,
        max_tx_ex_units: ExUnits {
            mem: max_ex.mem,
            steps: max_ex.steps,
        },
        coins_per_utxo_byte: u64::from(coins),
        collateral_percentage: need(&p.collateral_percentage, "collateralPercentage")?,
        max_collateral_inputs: need(&p.max_collateral_inputs, "maxCollateralInputs")?,
        // Lovelace per byte of reference script, rounded up so a fee is never short.
        min_fee_ref_script_cost_per_byte: ref_cost.numerator.div_ceil(ref_cost.denominator),
        cost_model_v3: cost_models
            .plutus_v3
            .ok_or("the PlutusV3 cost model is missing")?,
        protocol_major: u16::try_from(major).map_err(|_| "protocol version out of range")?,
    })
}

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

/// Haskell `UTCTime` as (year, day of year from 1, picoseconds of day) → POSIX ms.
fn system_start_to_ms(s: &SystemStart) -> Option<u64> {
    let year = bigint_u64(&s.year)?;
    let picos = bigint_u64(&s.picoseconds_of_day)?;
    let year = i64::try_from(year).ok()?;
    // Days from 1970-01-01 to January 1st of `year` (proleptic Gregorian).
    let y = year - 1;
    let days_to_year =
        365 * (year - 1970) + (y / 4 - y / 100 + y / 400) - (1969 / 4 - 1969 / 100 + 1969 / 400);
    let days = days_to_year + s.day_of_year - 1;
    let ms = u64::try_from(days).ok()?.checked_mul(86_400_000)?;
    ms.checked_add(picos / 1_000_000_000)
}

fn bigint_u64(b: &pallas_network::miniprotocols::localstate::queries_v16::BigInt) -> Option<u64> {
    use pallas_network::miniprotocols::localstate::queries_v16::BigInt;
    match b {
        BigInt::Int(i) => u64::try_from(i128::from(*i)).ok(),
        BigInt::BigUInt(bytes) => bytes.iter().try_fold(0u64, |acc, b| {
            acc.checked_mul(256)?.checked_add(u64::from(*b))
        }),
        BigInt::BigNInt(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_start_round_trips_the_devnet_encoding() {
        for ms in [
            0,
            1_506_203_091_000,
            1_735_603_200_000 + 1234,
            1_767_225_600_000,
        ] {
            let (y, d, ps) = ganglion_testnet::serve::localstate::ordinal_date(ms);
            let mut buf = Vec::new();
            let mut e = minicbor::Encoder::new(&mut buf);
            e.array(3)
                .expect("cbor")
                .i64(y)
                .expect("cbor")
                .i64(d)
                .expect("cbor");
            e.u64(u64::try_from(ps).expect("fits")).expect("cbor");
            let s: SystemStart = minicbor::decode(&buf).expect("decodes");
            assert_eq!(system_start_to_ms(&s), Some(ms), "{ms}");
        }
    }

    #[test]
    fn garbage_utxo_answers_are_errors_not_panics() {
        assert!(decode_utxos(&[]).is_err());
        assert!(decode_utxos(&[0x81, 0xa1, 0x82, 0x41, 0x00, 0x00, 0x00]).is_err());
    }
}
