//! `audit verify`: a job re-derived from the chain (the indexer) and IPFS (the node's
//! blockstore, missing blocks fetched over bitswap from the job's providers) only — nothing
//! the job engine remembers is trusted (DESIGN §3 and §7).
//!
//! Two steps, so that each check can also be run on modified inputs:
//! 1. [`evidence::gather`]: the job's chain record, the attest keys its providers bonded, and
//!    every block of the spec, result and log DAGs that can be found.
//! 2. [`checks::check`]: pure; one named [`Report`] entry per item (spec CID re-hashed, the
//!    assignment, each acceptance and attestation signature, each result and log DAG, each
//!    payment against the escrow rule, the refund). The report passes only if all do.
//!
//! [`verify`] does both. The node serves it as JSON-RPC `audit_verify` ([`service::AuditService`],
//! which also answers `audit_job`, `audit_provider`, `market_offers`, `provider_bond`,
//! `provider_offers`, `job_logs` and `job_outputs`); `ganglion audit verify <job>` calls that.
//!
//! Modules:
//! - [`artifacts`]: the attested logs and outputs of a job (`job_logs`, `job_outputs`).
//! - [`error`]: why an audit could not be made ([`AuditError`]).
//! - [`evidence`]: what the checks look at, and how it is gathered.
//! - [`checks`]: the checks every job gets, and [`checks::check`], which hands the job to
//!   `claims`: its claims and slashes re-derived rule by rule (G1, G3, G4, G6).
//! - `usage`: a service's claim — the usage its provider attested in its log is the
//!   orchestrator's, signed for this assignment, up to the receipt it was paid on.
//! - [`dag`]: walking and re-hashing a DAG held in memory.
//! - [`record`]: the indexer's job and provider records in their JSON-RPC shapes.
//! - [`service`]: the read-only queries the node's `audit_*`, `market_*`, `provider_bond` /
//!   `provider_offers` and `job_logs` / `job_outputs` methods answer ([`service::Audit`]).

pub mod artifacts;
pub mod checks;
mod claims;
pub mod dag;
pub mod error;
pub mod evidence;
pub mod record;
pub mod service;
mod usage;

use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_storage::blockstore::Blockstore;

pub use error::AuditError;
pub use evidence::Evidence;
pub use ganglion_rpc::audit::{AuditCheck as Check, AuditReport as Report};

/// Gathers the evidence of `job` and checks it: see the module docs. `p2p`, when given,
/// fetches blocks missing from `blocks` from the job's providers (their bonds' peer ids).
///
/// # Errors
/// [`AuditError::UnknownJob`] when the indexer has no such job; [`AuditError::Indexer`],
/// [`AuditError::Blockstore`]. A check that fails is not an error: it is in the report.
pub async fn verify<S: Kv>(
    indexer: &Indexer<S>,
    blocks: &dyn Blockstore,
    p2p: Option<&ganglion_p2p::Client>,
    job: &JobId,
) -> Result<Report, AuditError> {
    let evidence = evidence::gather(indexer, blocks, p2p, job).await?;
    Ok(checks::check(&evidence))
}
