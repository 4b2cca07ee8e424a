//! Local-tx-submission with readable rejections.
//!
//! pallas' Cardano instantiation (`TxValidationError`) models the Haskell node's rejection
//! tree and does not round-trip, so the devnet uses the generic pallas state machine with
//! its own rejection payload, [`WireRejection`] = CBOR `[rule: text, message: text]`.
//! Use [`crate::client::N2cClient`] to submit and read rejections.

use std::sync::Arc;

use pallas_codec::minicbor::{self, Decode, Decoder, Encode, Encoder, decode, encode};
use pallas_network::miniprotocols::localtxsubmission::{
    EraTx, GenericClient, GenericServer, Request, Response,
};
use tokio_util::sync::CancellationToken;

use crate::chain::{Chain, SubmitError};
use crate::serve::ServeError;

/// N2C era index of Conway transactions in `EraTx`.
pub const CONWAY_TX_ERA: u16 = 6;

/// A rejection as sent to the submitter: the rule name and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {message}")]
pub struct WireRejection {
    /// Stable rule name, e.g. `FeeTooSmallUTxO` (see [`crate::ledger::Rejection::rule`]),
    /// `MempoolFull`, `WrongEra` or `Internal`.
    pub rule: String,
    /// Human-readable reason.
    pub message: String,
}

impl From<String> for WireRejection {
    fn from(message: String) -> Self {
        Self {
            rule: "Unknown".into(),
            message,
        }
    }
}

impl From<&SubmitError> for WireRejection {
    fn from(e: &SubmitError) -> Self {
        match e {
            SubmitError::Rejected(r) => Self {
                rule: r.rule().into(),
                message: r.to_string(),
            },
            SubmitError::MempoolFull { .. } => Self {
                rule: "MempoolFull".into(),
                message: e.to_string(),
            },
            SubmitError::Internal(_) => Self {
                rule: "Internal".into(),
                message: e.to_string(),
            },
        }
    }
}

impl<C> Encode<C> for WireRejection {
    fn encode<W: encode::Write>(
        &self,
        e: &mut Encoder<W>,
        _ctx: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        e.array(2)?.str(&self.rule)?.str(&self.message)?;
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for WireRejection {
    fn decode(d: &mut Decoder<'b>, _ctx: &mut C) -> Result<Self, decode::Error> {
        if d.array()? != Some(2) {
            return Err(decode::Error::message("rejection must be [rule, message]"));
        }
        Ok(Self {
            rule: d.str()?.to_string(),
            message: d.str()?.to_string(),
        })
    }
}

/// A rejection reason as it came over the wire: one whole CBOR item, undecoded. A client
/// receives either the devnet's [`WireRejection`] or a real cardano-node's Conway
/// `HardForkApplyTxErr`; [`RawRejection::devnet`] reads the first, anything else is left to
/// a decoder of the node's encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRejection(pub Vec<u8>);

impl RawRejection {
    /// The devnet's `[rule, message]`, if that is what this is.
    pub fn devnet(&self) -> Option<WireRejection> {
        let mut d = Decoder::new(&self.0);
        let r: WireRejection = d.decode().ok()?;
        (d.position() == self.0.len()).then_some(r)
    }
}

impl From<String> for RawRejection {
    /// pallas' state machine turns its own errors into a reason: kept as a CBOR text item.
    fn from(message: String) -> Self {
        Self(minicbor::to_vec(&message).unwrap_or_default())
    }
}

impl<C> Encode<C> for RawRejection {
    fn encode<W: encode::Write>(
        &self,
        e: &mut Encoder<W>,
        _ctx: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        e.writer_mut()
            .write_all(&self.0)
            .map_err(encode::Error::write)?;
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for RawRejection {
    fn decode(d: &mut Decoder<'b>, _ctx: &mut C) -> Result<Self, decode::Error> {
        let start = d.position();
        d.skip()?;
        Ok(Self(d.input()[start..d.position()].to_vec()))
    }
}

/// Server side of the devnet's local-tx-submission.
pub type Server = GenericServer<EraTx, WireRejection>;

/// Client side of local-tx-submission, to the devnet or a real cardano-node: the
/// rejection reason is kept raw ([`RawRejection`]).
pub type Client = GenericClient<EraTx, RawRejection>;

/// Serve one local-tx-submission client until `Done`, a broken connection or `cancel`.
///
/// # Errors
/// [`ServeError`].
pub async fn serve(
    server: &mut Server,
    chain: Arc<Chain>,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    loop {
        let req = tokio::select! {
            r = server.recv_next_request() => r?,
            _ = cancel.cancelled() => return Ok(()),
        };
        let EraTx(era, bytes) = match req {
            Request::Submit(tx) => tx,
            Request::Done => return Ok(()),
        };
        let result = if era != CONWAY_TX_ERA {
            Err(WireRejection {
                rule: "WrongEra".into(),
                message: format!("era {era} is not accepted; submit Conway transactions (era 6)"),
            })
        } else {
            let chain = chain.clone();
            match tokio::task::spawn_blocking(move || chain.submit(&bytes)).await {
                Ok(Ok(id)) => {
                    tracing::debug!(tx = %id, "accepted");
                    Ok(())
                }
                Ok(Err(e)) => Err(WireRejection::from(&e)),
                Err(_) => Err(WireRejection {
                    rule: "Internal".into(),
                    message: "validation task failed".into(),
                }),
            }
        };
        let response = match result {
            Ok(()) => Response::Accepted,
            Err(r) => Response::Rejected(r),
        };
        server.send_submit_tx_response(response).await?;
    }
}

/// Encode a rejection (exposed for tests of the wire format).
pub fn encode_rejection(r: &WireRejection) -> Vec<u8> {
    minicbor::to_vec(r).unwrap_or_default()
}
