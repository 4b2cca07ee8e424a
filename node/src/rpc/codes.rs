//! The one map from the node's domain errors to JSON-RPC error codes
//! (`ganglion_rpc::error`): every RPC method turns a failure into an error object here, so the
//! same failure has the same code whichever method met it. The message is the error with its
//! whole `source()` chain (the ledger's reason for a refused transaction included).

use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::types::ErrorObjectOwned;

use crate::audit::AuditError;
use crate::audit::artifacts::ArtifactsError;
use crate::job::EngineError;
use crate::job::chain::ChainError;
use crate::job::external::ExternalError;
use crate::wallet;

/// `e` and every error below it, joined with `": "`.
pub(crate) fn message(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        // An error whose message already carries its source's (`"…: {0}"`) is not repeated.
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

/// The N2C client: a refused submission is [`error::TX_REJECTED`], anything else (no
/// connection, a failed query) [`error::CHAIN_UNAVAILABLE`].
fn client_code(e: &wallet::chain::Error) -> i32 {
    match e {
        wallet::chain::Error::Submit(_) => error::TX_REJECTED,
        _ => error::CHAIN_UNAVAILABLE,
    }
}

fn chain_code(e: &ChainError) -> i32 {
    match e {
        ChainError::Client(c) => client_code(c),
        ChainError::Build(_) => error::WALLET,
        ChainError::Missing(_) => error::JOB,
        _ => error::INTERNAL,
    }
}

fn wallet_code(e: &wallet::Error) -> i32 {
    use ganglion_contracts::Error as C;
    match e {
        wallet::Error::Address { .. } | wallet::Error::NoNtx(_) => error::INVALID_PARAMS,
        wallet::Error::Build(C::OutputBelowMinUtxo { .. }) => error::INVALID_PARAMS,
        wallet::Error::Build(_) | wallet::Error::NoKey(_) => error::WALLET,
        wallet::Error::Chain(c) => client_code(c),
        wallet::Error::Settings(_) => error::CHAIN_UNAVAILABLE,
        _ => error::INTERNAL,
    }
}

fn engine_code(e: &EngineError) -> i32 {
    match e {
        EngineError::Spec(_) | EngineError::Terms(_) => error::INVALID_PARAMS,
        EngineError::State { .. } => error::JOB,
        EngineError::Chain(c) => chain_code(c),
        _ => error::INTERNAL,
    }
}

fn external_code(e: &ExternalError) -> i32 {
    match e {
        ExternalError::Engine(e) => engine_code(e),
        _ => error::INVALID_PARAMS,
    }
}

fn audit_code(e: &AuditError) -> i32 {
    match e {
        AuditError::UnknownJob(_) => error::JOB,
        AuditError::UnknownProvider(_) => error::INVALID_PARAMS,
        AuditError::NoPaymentKey => error::WALLET,
        _ => error::INTERNAL,
    }
}

fn artifacts_code(e: &ArtifactsError) -> i32 {
    match e {
        ArtifactsError::Audit(a) => audit_code(a),
        ArtifactsError::NotAttested { .. } => error::JOB,
        _ => error::INTERNAL,
    }
}

/// An audit, market or provider query that failed.
pub(crate) fn audit(e: &AuditError) -> ErrorObjectOwned {
    error(audit_code(e), message(e))
}

/// A job's artifacts that could not be read or written.
pub(crate) fn artifacts(e: &ArtifactsError) -> ErrorObjectOwned {
    error(artifacts_code(e), message(e))
}

/// A chain action (build, balance, sign, submit) that failed.
pub(crate) fn chain(e: &ChainError) -> ErrorObjectOwned {
    error(chain_code(e), message(e))
}

/// A wallet call that failed.
pub(crate) fn wallet(e: &wallet::Error) -> ErrorObjectOwned {
    error(wallet_code(e), message(e))
}

/// A job engine call that failed.
pub(crate) fn engine(e: &EngineError) -> ErrorObjectOwned {
    error(engine_code(e), message(e))
}

/// A CIP-30 wallet lock that could not be built or adopted.
pub(crate) fn external(e: &ExternalError) -> ErrorObjectOwned {
    error(external_code(e), message(e))
}

/// A `storage_*` command: a CID or option that is not one is [`error::INVALID_PARAMS`]; a
/// missing block, an unreadable or unwritable path, a store failure [`error::STORAGE`].
pub(crate) fn storage(e: &ganglion_storage::cli::Error) -> ErrorObjectOwned {
    use ganglion_storage::cli::Error as S;
    let code = match e {
        S::InvalidCid(_) | S::TooSmall(_) => error::INVALID_PARAMS,
        S::Import(ganglion_storage::unixfs::Error::InvalidChunker { .. }) => error::INVALID_PARAMS,
        _ => error::STORAGE,
    };
    error(code, message(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submit_refused() -> wallet::chain::Error {
        wallet::chain::Error::Submit(wallet::rejection::SubmitFailure::Undecodable {
            reason: "a test's".into(),
            cbor_hex: "80".into(),
        })
    }

    #[test]
    fn one_failure_has_one_code_whichever_layer_carries_it() {
        let through_chain = chain_code(&ChainError::Client(submit_refused()));
        let through_engine = engine_code(&EngineError::Chain(ChainError::Client(submit_refused())));
        let through_wallet = wallet_code(&wallet::Error::Chain(submit_refused()));
        assert_eq!(through_chain, error::TX_REJECTED);
        assert_eq!(through_engine, error::TX_REJECTED);
        assert_eq!(through_wallet, error::TX_REJECTED);
        let missing = ChainError::Missing("ab#0".into());
        assert_eq!(chain_code(&missing), error::JOB);
        assert_eq!(engine_code(&EngineError::Chain(missing)), error::JOB);
    }

    #[test]
    fn audit_failures_have_the_codes_of_their_kind() {
        let job = ganglion_contracts::v2::datum::JobId([7; 32]);
        assert_eq!(audit_code(&AuditError::UnknownJob(job)), error::JOB);
        assert_eq!(
            audit_code(&AuditError::UnknownProvider("zz".into())),
            error::INVALID_PARAMS
        );
        assert_eq!(audit_code(&AuditError::NoPaymentKey), error::WALLET);
        assert_eq!(audit_code(&AuditError::NoSwarm), error::INTERNAL);
        // The same unknown job, met while reading artifacts, keeps its code.
        assert_eq!(
            artifacts_code(&ArtifactsError::Audit(AuditError::UnknownJob(job))),
            error::JOB
        );
        let not_yet = ArtifactsError::NotAttested {
            job,
            status: "assigned".into(),
        };
        assert_eq!(artifacts_code(&not_yet), error::JOB);
    }
}
