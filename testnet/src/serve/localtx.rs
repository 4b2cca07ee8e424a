//! The devnet's local-tx-submission server, with readable rejections.
//!
//! The wire shapes are shared with every client in `ganglion_cardano::localtx`: the devnet
//! answers a rejection as [`WireRejection`] = CBOR `[rule: text, message: text]` over the
//! generic pallas state machine. Use `ganglion_cardano::client::N2cClient` to submit and read
//! rejections.

use std::sync::Arc;

use ganglion_cardano::localtx::{CONWAY_TX_ERA, WireRejection};
use pallas_network::miniprotocols::localtxsubmission::{EraTx, GenericServer, Request, Response};
use tokio_util::sync::CancellationToken;

use crate::chain::{Chain, SubmitError};
use crate::serve::ServeError;

/// The devnet's rule name for each way a submission fails.
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

/// Server side of the devnet's local-tx-submission.
pub type Server = GenericServer<EraTx, WireRejection>;

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
