//! A minimal local-state-query server: acquire (tip or a point on chain), and the queries
//! `GetSystemStart`, `GetChainPoint`, `GetChainBlockNo`, `GetCurrentEra`, and the Conway
//! block queries `GetCurrentPParams` and `GetUTxOByAddress`, in the encodings pallas'
//! `queries_v16` helpers decode. Queries always answer from the current tip (the devnet
//! keeps no historical ledger states). Any other query closes the connection.

use std::sync::Arc;

use pallas_codec::minicbor::{self, Encoder};
use pallas_codec::utils::AnyCbor;
use pallas_network::miniprotocols::Point;
use pallas_network::miniprotocols::localstate::queries_v16::{
    self as q16, BlockQuery, HardForkQuery, LedgerQuery, Request,
};
use pallas_network::miniprotocols::localstate::{
    AcquireFailure, ClientAcquireRequest, ClientQueryRequest, Server,
};
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;
use crate::serve::ServeError;
use crate::serve::chainsync::{point_of, resolve_point};

/// Hard-fork-combinator era index of Conway (answer to `GetCurrentEra`).
pub const CONWAY_ERA_INDEX: u16 = 6;

/// (year, day of year starting at 1, picoseconds of day) of a POSIX time in ms — the
/// shape of the node's `SystemStart` (Haskell `UTCTime` as ordinal date).
pub fn ordinal_date(posix_ms: u64) -> (i64, i64, u128) {
    let days = (posix_ms / 86_400_000) as i64;
    let ms_of_day = posix_ms % 86_400_000;
    // Civil-from-days (H. Hinnant), then day of year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy_mar = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy_mar + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let day_of_year = if month <= 2 {
        doy_mar - 305
    } else {
        doy_mar + 60 + i64::from(leap)
    };
    (year, day_of_year, u128::from(ms_of_day) * 1_000_000_000)
}

/// The devnet's parameters in the node's `ConwayPParams` shape (fields the devnet does not
/// use — deposits, pools, governance — are left empty).
pub fn pparams(p: &crate::params::ProtocolParams) -> q16::ProtocolParam {
    let ratio = |r: crate::params::Ratio| q16::RationalNumber {
        numerator: r.numerator,
        denominator: r.denominator,
    };
    q16::ProtocolParam {
        minfee_a: Some(p.min_fee_a),
        minfee_b: Some(p.min_fee_b),
        max_block_body_size: Some(p.max_block_body_size),
        max_transaction_size: Some(p.max_tx_size),
        max_block_header_size: None,
        key_deposit: None,
        pool_deposit: None,
        maximum_epoch: None,
        desired_number_of_stake_pools: None,
        pool_pledge_influence: None,
        expansion_rate: None,
        treasury_growth_rate: None,
        protocol_version: Some(p.protocol_version),
        min_pool_cost: None,
        ada_per_utxo_byte: Some(pallas_codec::utils::AnyUInt::U64(p.coins_per_utxo_byte)),
        cost_models_for_script_languages: Some(q16::CostModels {
            plutus_v1: Some(p.cost_model_v1.clone()),
            plutus_v2: Some(p.cost_model_v2.clone()),
            plutus_v3: Some(p.cost_model_v3.clone()),
            unknown: pallas_codec::utils::KeyValuePairs::Def(vec![]),
        }),
        execution_costs: Some(q16::ExUnitPrices {
            mem_price: ratio(p.price_mem),
            step_price: ratio(p.price_steps),
        }),
        max_tx_ex_units: Some(q16::ExUnits {
            mem: p.max_tx_ex_units.mem,
            steps: p.max_tx_ex_units.steps,
        }),
        max_block_ex_units: Some(q16::ExUnits {
            mem: p.max_block_ex_units.mem,
            steps: p.max_block_ex_units.steps,
        }),
        max_value_size: Some(p.max_value_size),
        collateral_percentage: Some(p.collateral_percentage),
        max_collateral_inputs: Some(p.max_collateral_inputs),
        pool_voting_thresholds: None,
        drep_voting_thresholds: None,
        min_committee_size: None,
        committee_term_limit: None,
        governance_action_validity_period: None,
        governance_action_deposit: None,
        drep_deposit: None,
        drep_inactivity_period: None,
        minfee_refscript_cost_per_byte: Some(q16::RationalNumber {
            numerator: p.min_fee_ref_script_cost_per_byte,
            denominator: 1,
        }),
    }
}

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
            let (y, d, ps) = ordinal_date(system_start_ms);
            (|| {
                e.array(3)?.i64(y)?.i64(d)?;
                match u64::try_from(ps) {
                    Ok(p) => e.u64(p)?,
                    Err(_) => e.u64(u64::MAX)?,
                };
                Ok::<_, minicbor::encode::Error<std::convert::Infallible>>(())
            })()
            .is_ok()
        }
        Request::LedgerQuery(LedgerQuery::HardForkQuery(HardForkQuery::GetCurrentEra)) => {
            e.u16(CONWAY_ERA_INDEX).is_ok()
        }
        Request::LedgerQuery(LedgerQuery::BlockQuery(_, BlockQuery::GetCurrentPParams)) => (|| {
            e.array(1)?
                .encode(pparams(&chain.rules().params))
                .map(|_| ())
        })(
        )
        .is_ok(),
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
                    e.array(2)?.bytes(r.tx_id.as_ref())?.u64(r.index)?;
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

#[cfg(test)]
mod tests {
    use super::ordinal_date;

    #[test]
    fn ordinal_dates_match_the_calendar() {
        assert_eq!(ordinal_date(0), (1970, 1, 0));
        // 2017-09-23T21:44:51Z (mainnet system start) is day 266 of 2017.
        assert_eq!(ordinal_date(1_506_203_091_000).0, 2017);
        assert_eq!(ordinal_date(1_506_203_091_000).1, 266);
        // 2024-12-31 is day 366 of a leap year.
        assert_eq!(ordinal_date(1_735_603_200_000).1, 366);
        assert_eq!(ordinal_date(1_735_603_200_000 + 1000).2, 1_000_000_000_000);
    }
}
