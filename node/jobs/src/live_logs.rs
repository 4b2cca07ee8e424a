//! Live logs: a running job's container logs at its orchestrator, before any provider attests
//! (`job_liveLogs`, `ganglion job logs --follow`).
//!
//! - **Provider** ([`tail`]): with each heartbeat ([`super::heartbeat::beat`]) it takes the last
//!   [`MAX_LOG_TAIL_BYTES`] of its container's log from the executor
//!   ([`Executor::log_tail`]), imports them into its blockstore as a UnixFS file (CIDv1, raw
//!   leaves, 256 KiB chunks: one raw block; not pinned, so `storage gc` may drop it) and names
//!   its CID, where it starts and the log's length in the heartbeat's `log`
//!   ([`ganglion_p2p::protocols::LiveLog`]).
//! - **Orchestrator** ([`remember`]): once a heartbeat's sender is verified as its assignment's
//!   peer, the latest live log of each (job, assignment index) is kept in memory with when it
//!   came and from whom (a restart forgets them until the next heartbeats). [`of`] reads each
//!   one back: from the blockstore, or fetched over bitswap from the provider's peer (at most
//!   [`FETCH_TIMEOUT`]; the fetched block is not pinned either).
//!
//! The tail is unattested and informational: only the log a provider signs in its claim is the
//! job's record (`job_logs`). A tail must be a single raw block of at most
//! [`MAX_LOG_TAIL_BYTES`] (what [`tail`] makes), so a provider cannot make the orchestrator
//! fetch more than that per query.

use std::time::Duration;

use cid::Cid;
use ganglion_contracts::v2::datum::JobId;
use ganglion_dispatch::executor::{Executor, JobRecord as ExecRecord, MAX_LOG_TAIL_BYTES};
use ganglion_indexer::store::Kv;
use ganglion_p2p::protocols::LiveLog;
use ganglion_rpc::audit::LiveJobLog;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::unixfs::{self, ImportOptions};
use libp2p::PeerId;

use super::engine::{Ctx, EngineError, OrchestratorRole};

/// How long the orchestrator waits for one live log's block over bitswap.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The latest live log a provider named in a heartbeat, as its orchestrator keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The tail's CID (a raw block).
    pub cid: Cid,
    /// Where the tail starts in the provider's log, bytes.
    pub offset: u64,
    /// The log's length when the tail was taken, bytes.
    pub total: u64,
    /// When the heartbeat came, POSIX ms (this node's clock).
    pub at_ms: u64,
    /// The provider's peer (verified as the assignment's), who serves the block.
    pub peer: PeerId,
}

/// Provider side: the live log of this provider's container (assignment `index`) in the run
/// `exec`, imported into this node's blockstore, for the next heartbeat. `None` when the executor keeps no log for it, or
/// it cannot be read or imported (logged; the heartbeat goes without it).
pub(crate) async fn tail<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    executor: &E,
    exec: &ExecRecord,
    index: u64,
) -> Option<LiveLog> {
    let rank = super::provider::exec_rank(&exec.plan, index);
    let tail = match executor
        .log_tail(&exec.plan.job, rank, MAX_LOG_TAIL_BYTES)
        .await
    {
        Ok(t) => t?,
        Err(e) => {
            tracing::debug!(job = %exec.plan.job, error = %e, "live log not read");
            return None;
        }
    };
    match unixfs::import_bytes(&tail.bytes, &ImportOptions::cid_v1(), &ctx.blockstore) {
        Ok(imported) => Some(LiveLog {
            cid: imported.root.to_bytes(),
            offset: tail.offset,
            total: tail.total,
        }),
        Err(e) => {
            tracing::debug!(job = %exec.plan.job, error = %e, "live log not imported");
            None
        }
    }
}

/// Why a heartbeat's live log is not kept: it is not what [`tail`] makes.
fn refused(log: &LiveLog) -> Option<String> {
    let cid = match Cid::try_from(log.cid.as_slice()) {
        Ok(c) => c,
        Err(e) => return Some(format!("the CID does not parse: {e}")),
    };
    if cid.codec() != ganglion_storage::block::RAW {
        return Some(format!("{cid} is not a raw block"));
    }
    match log.total.checked_sub(log.offset) {
        None => Some(format!(
            "it starts at byte {} of a {}-byte log",
            log.offset, log.total
        )),
        Some(n) if n > MAX_LOG_TAIL_BYTES => Some(format!(
            "a {n}-byte tail is over the {MAX_LOG_TAIL_BYTES}-byte cap"
        )),
        Some(_) => None,
    }
}

/// Orchestrator side: keeps `log`, from `peer` (verified as the peer of assignment `index` of
/// `job`), as that assignment's latest live log, received at `now_ms`. One that is not what
/// [`tail`] makes is dropped (logged).
pub(crate) fn remember<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: JobId,
    index: u64,
    peer: PeerId,
    log: &LiveLog,
    now_ms: u64,
) {
    if let Some(why) = refused(log) {
        tracing::debug!(%job, index, %peer, %why, "live log ignored");
        return;
    }
    let Ok(cid) = Cid::try_from(log.cid.as_slice()) else {
        return;
    };
    ctx.live_logs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(
            (job, index),
            Seen {
                cid,
                offset: log.offset,
                total: log.total,
                at_ms: now_ms,
                peer,
            },
        );
}

/// The bytes of a live log from `offset` as text whose byte positions are the log's: the
/// returned offset is where the text starts (past the continuation bytes of a character cut
/// at the start, when the tail is not the whole log); every byte that is not valid UTF-8 is a
/// `?`; a character cut at the end is left out (the next tail brings it).
pub(crate) fn text_of(offset: u64, bytes: &[u8]) -> (u64, String) {
    let skip = if offset > 0 {
        bytes
            .iter()
            .take(3)
            .take_while(|&&b| is_continuation(b))
            .count()
    } else {
        0
    };
    let mut rest = &bytes[skip..];
    // An incomplete character at the end: a lead byte with fewer continuation bytes than it
    // announces.
    let tail_start = rest.len().saturating_sub(3);
    if let Some(lead) = rest[tail_start..]
        .iter()
        .rposition(|b| (0xc2..=0xf4).contains(b))
    {
        let at = tail_start + lead;
        let want = match rest[at] {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        let have = rest.len() - at;
        if have < want && rest[at + 1..].iter().all(|&b| is_continuation(b)) {
            rest = &rest[..at];
        }
    }
    let mut text = String::with_capacity(rest.len());
    for chunk in rest.utf8_chunks() {
        text.push_str(chunk.valid());
        text.extend(std::iter::repeat_n('?', chunk.invalid().len()));
    }
    (offset + skip as u64, text)
}

/// Whether `b` continues a UTF-8 character (`10xxxxxx`).
fn is_continuation(b: u8) -> bool {
    (0x80..0xc0).contains(&b)
}

/// The bytes of `cid`, from `blocks` or fetched from `peer` over `p2p` within
/// [`FETCH_TIMEOUT`].
async fn read(
    blocks: std::sync::Arc<dyn Blockstore>,
    p2p: ganglion_p2p::Client,
    cid: Cid,
    peer: PeerId,
) -> Result<Vec<u8>, String> {
    if !blocks.has(&cid).map_err(|e| e.to_string())? {
        match tokio::time::timeout(FETCH_TIMEOUT, p2p.fetch_dag(cid, peer)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(format!("fetching {cid} from {peer}: {e}")),
            Err(_) => {
                return Err(format!(
                    "{cid} not fetched from {peer} within {} s",
                    FETCH_TIMEOUT.as_secs()
                ));
            }
        }
    }
    let mut bytes = Vec::new();
    unixfs::cat(&blocks, &cid, &mut bytes).map_err(|e| format!("reading {cid}: {e}"))?;
    Ok(bytes)
}

/// Orchestrator side: the latest live log of each node of `job` that sent one, in assignment
/// order, read (fetched concurrently, each within [`FETCH_TIMEOUT`]) as
/// [`LiveJobLog`]s. A log that cannot be read is an entry with its `error`.
///
/// # Errors
/// [`EngineError::State`] for a job this node does not orchestrate; store and indexer errors.
pub(crate) async fn of<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    job: &JobId,
) -> Result<Vec<LiveJobLog>, EngineError> {
    if ctx.store.get::<OrchestratorRole>(job)?.is_none() {
        return Err(EngineError::State {
            job: *job,
            reason: "this node does not orchestrate it: live logs come to a job's orchestrator"
                .into(),
        });
    }
    let providers: Vec<String> = ctx
        .indexer
        .job(job, 0)?
        .map(|v| {
            v.value
                .assignments
                .iter()
                .map(|a| hex::encode(a.provider))
                .collect()
        })
        .unwrap_or_default();
    let mut seen: Vec<(u64, Seen)> = ctx
        .live_logs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|((j, _), _)| j == job)
        .map(|((_, index), s)| (*index, s.clone()))
        .collect();
    seen.sort_by_key(|(index, _)| *index);
    let mut reads = tokio::task::JoinSet::new();
    for (i, (_, s)) in seen.iter().enumerate() {
        if s.total > s.offset {
            let (blocks, p2p) = (ctx.blockstore.clone(), ctx.p2p.clone());
            let (cid, peer) = (s.cid, s.peer);
            reads.spawn(async move { (i, read(blocks, p2p, cid, peer).await) });
        }
    }
    let mut read_back: Vec<Option<Result<Vec<u8>, String>>> = vec![None; seen.len()];
    while let Some(done) = reads.join_next().await {
        match done {
            Ok((i, r)) => read_back[i] = Some(r),
            Err(e) => tracing::warn!(%job, error = %e, "a live log read did not finish"),
        }
    }
    Ok(seen
        .into_iter()
        .zip(read_back)
        .map(|((index, s), bytes)| {
            let mut log = LiveJobLog {
                index,
                provider: usize::try_from(index)
                    .ok()
                    .and_then(|i| providers.get(i))
                    .cloned()
                    .unwrap_or_default(),
                cid: s.cid.to_string(),
                offset: s.offset,
                total: s.total,
                text: String::new(),
                at_ms: s.at_ms,
                error: None,
            };
            let want = s.total - s.offset;
            match bytes {
                // An empty tail: nothing to read.
                None if want == 0 => {}
                None => log.error = Some("the read did not finish".into()),
                Some(Err(e)) => log.error = Some(e),
                Some(Ok(b)) if b.len() as u64 != want => {
                    log.error = Some(format!(
                        "{} holds {} bytes, the heartbeat said {want}",
                        s.cid,
                        b.len()
                    ));
                }
                Some(Ok(b)) => (log.offset, log.text) = text_of(s.offset, &b),
            }
            log
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_storage::blockstore::MemoryBlockstore;

    #[test]
    fn text_keeps_the_logs_byte_positions() {
        // Valid UTF-8 from the log's start: as it is.
        assert_eq!(text_of(0, "héllo\n".as_bytes()), (0, "héllo\n".into()));
        // A tail starting inside `é` (0xc3 0xa9): its continuation byte is skipped.
        let log = "héllo\n".as_bytes();
        assert_eq!(text_of(2, &log[2..]), (3, "llo\n".into()));
        // A tail ending inside `€` (3 bytes): the cut character is left out.
        let euro = "ab€".as_bytes();
        assert_eq!(text_of(0, &euro[..4]), (0, "ab".into()));
        assert_eq!(text_of(0, &euro[..3]), (0, "ab".into()));
        assert_eq!(text_of(0, euro), (0, "ab€".into()));
        // Bytes that are not UTF-8 in the middle: one `?` each, the length kept.
        let (at, text) = text_of(5, b"a\xff\xfeb\n");
        assert_eq!((at, text.as_str()), (5, "a??b\n"));
        assert_eq!(text.len(), 5);
        // At the very start of the log a continuation byte is no cut: it is shown.
        assert_eq!(text_of(0, b"\x80x"), (0, "?x".into()));
        assert_eq!(text_of(0, b""), (0, String::new()));
    }

    #[test]
    fn only_a_tail_as_the_provider_makes_it_is_kept() {
        let store = MemoryBlockstore::new();
        let bytes = vec![b'x'; MAX_LOG_TAIL_BYTES as usize];
        let root = unixfs::import_bytes(&bytes, &ImportOptions::cid_v1(), &store)
            .expect("import")
            .root;
        assert_eq!(
            root.codec(),
            ganglion_storage::block::RAW,
            "a full tail is one raw block"
        );
        let log = |cid: Vec<u8>, offset, total| LiveLog { cid, offset, total };
        assert_eq!(
            refused(&log(root.to_bytes(), 10, 10 + MAX_LOG_TAIL_BYTES)),
            None
        );
        assert!(refused(&log(root.to_bytes(), 0, MAX_LOG_TAIL_BYTES + 1)).is_some());
        assert!(refused(&log(root.to_bytes(), 11, 10)).is_some());
        assert!(refused(&log(vec![1, 2, 3], 0, 1)).is_some());
        let dir = unixfs::import_bytes(
            &bytes,
            &ImportOptions {
                raw_leaves: false,
                ..ImportOptions::cid_v1()
            },
            &store,
        )
        .expect("import")
        .root;
        assert!(
            refused(&log(dir.to_bytes(), 0, 1)).is_some(),
            "a dag-pb root could name a DAG of any size"
        );
    }
}
