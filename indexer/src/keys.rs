//! The layout of the key space (text keys; numbers zero-padded so byte order = numeric order).
//!
//! | prefix | value |
//! |---|---|
//! | `c` | cursor: the last applied [`crate::Point`] |
//! | `x/{height}` | undo record of the block at that height (last k blocks) |
//! | `u/{tx hash}#{index}` | a live authentic script UTxO ([`crate::extract::Tracked`]) |
//! | `e/{slot}/{tx index}/{seq}` | an event [`crate::Record`] |
//! | `j/{job id}` | a job's view ([`crate::JobView`]) |
//! | `o/{orchestrator}/{job id}` | index: jobs by orchestrator |
//! | `p/{provider}/{job id}` | index: jobs by provider |

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;

use crate::event::Meta;

pub(crate) const CURSOR: &[u8] = b"c";
pub(crate) const UNDO: &str = "x/";
pub(crate) const UTXO: &str = "u/";
pub(crate) const EVENT: &str = "e/";
pub(crate) const JOB: &str = "j/";
pub(crate) const BY_ORCHESTRATOR: &str = "o/";
pub(crate) const BY_PROVIDER: &str = "p/";

pub(crate) fn undo(height: u64) -> Vec<u8> {
    format!("{UNDO}{height:020}").into_bytes()
}

pub(crate) fn utxo(r: &TxoRef) -> Vec<u8> {
    format!("{UTXO}{}#{:010}", hex::encode(r.tx_hash), r.index).into_bytes()
}

pub(crate) fn event(meta: &Meta, seq: u32) -> Vec<u8> {
    format!("{EVENT}{:020}/{:010}/{seq:05}", meta.slot, meta.tx_index).into_bytes()
}

/// First event key at or after `slot`.
pub(crate) fn event_slot(slot: u64) -> Vec<u8> {
    format!("{EVENT}{slot:020}/").into_bytes()
}

pub(crate) fn job(id: &JobId) -> Vec<u8> {
    format!("{JOB}{id}").into_bytes()
}

pub(crate) fn by_orchestrator(o: &KeyHash, id: &JobId) -> Vec<u8> {
    format!("{BY_ORCHESTRATOR}{}/{id}", hex::encode(o)).into_bytes()
}

pub(crate) fn by_provider(p: &KeyHash, id: &JobId) -> Vec<u8> {
    format!("{BY_PROVIDER}{}/{id}", hex::encode(p)).into_bytes()
}

/// The job id at the end of an index key.
pub(crate) fn job_of_index(key: &[u8]) -> Option<JobId> {
    let s = std::str::from_utf8(key).ok()?;
    let hex_id = s.rsplit('/').next()?;
    Some(JobId(hex::decode(hex_id).ok()?.try_into().ok()?))
}
