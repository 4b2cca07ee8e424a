//! What an audit looks at, read from the chain (the indexer) and IPFS (the blockstore, with
//! bitswap for what is missing) — never from the job engine's own records.

use std::collections::{BTreeMap, BTreeSet};

use cid::Cid;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;
use ganglion_indexer::event::Event;
use ganglion_indexer::store::Kv;
use ganglion_indexer::{Indexer, JobView};
use ganglion_storage::blockstore::Blockstore;
use libp2p::PeerId;

use super::dag::Blocks;
use super::error::AuditError;

/// Everything [`super::checks::check`] reads. Public fields: a test (or a sceptic) can change
/// any of them and see which check notices.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The indexer's record of the job, with every event (lock, assign, claims, expire…).
    pub job: JobView,
    /// For each assigned provider, every attest key a bond of its ever carried on chain
    /// (`BondPosted` events and live bond datums).
    pub bonded_keys: BTreeMap<KeyHash, BTreeSet<[u8; 32]>>,
    /// Every block found of the spec, result and log DAGs, by CID, as stored (not yet
    /// checked).
    pub blocks: Blocks,
    /// Why a DAG could not be fetched, by root CID (text), when a fetch was tried and failed.
    pub fetch_errors: BTreeMap<String, String>,
}

/// The CID roots the job's chain record names: the spec, then each attestation's result and
/// logs (empty CIDs are skipped; unparsable ones are left to the checks).
pub fn roots(job: &JobView) -> Vec<Cid> {
    let mut out: Vec<Cid> = Cid::try_from(job.spec.as_slice()).into_iter().collect();
    for r in &job.history {
        let cids: Vec<&Vec<u8>> = match &r.event {
            Event::JobClaimed { attestation, .. } => vec![&attestation.result, &attestation.logs],
            _ => Vec::new(),
        };
        out.extend(
            cids.into_iter()
                .filter_map(|c| Cid::try_from(c.as_slice()).ok()),
        );
    }
    out
}

/// Bonded attest keys of `providers`, from bond events and live bond UTxOs.
fn bonded_keys<S: Kv>(
    indexer: &Indexer<S>,
    providers: &BTreeSet<KeyHash>,
) -> Result<BTreeMap<KeyHash, BTreeSet<[u8; 32]>>, AuditError> {
    let mut keys: BTreeMap<KeyHash, BTreeSet<[u8; 32]>> = BTreeMap::new();
    for r in indexer.events(0, u64::MAX)? {
        if let Event::BondPosted {
            provider,
            attest_key,
            ..
        } = r.event
            && providers.contains(&provider)
        {
            keys.entry(provider).or_default().insert(attest_key);
        }
    }
    for t in indexer.live_utxos()? {
        if let Some(b) = t.bond()
            && providers.contains(&b.provider)
        {
            keys.entry(b.provider).or_default().insert(b.attest_key);
        }
    }
    Ok(keys)
}

/// libp2p peer ids of the bonds of `providers` (live bonds and bond events).
fn peers_of<S: Kv>(
    indexer: &Indexer<S>,
    providers: &BTreeSet<KeyHash>,
) -> Result<Vec<PeerId>, AuditError> {
    let mut peers = BTreeSet::new();
    for r in indexer.events(0, u64::MAX)? {
        if let Event::BondPosted {
            provider, peer_id, ..
        } = &r.event
            && providers.contains(provider)
        {
            peers.insert(peer_id.clone());
        }
    }
    Ok(peers
        .into_iter()
        .filter_map(|b| PeerId::from_bytes(&b).ok())
        .collect())
}

/// Copies the DAG under `root` from `store` into `out`, as far as it is present.
fn collect(store: &dyn Blockstore, root: &Cid, out: &mut Blocks) -> Result<bool, AuditError> {
    let mut stack = vec![*root];
    let mut seen = BTreeSet::new();
    let mut complete = true;
    while let Some(cid) = stack.pop() {
        if !seen.insert(cid) || cid.hash().code() == ganglion_storage::block::IDENTITY {
            continue;
        }
        let Some(data) = store.get(&cid)? else {
            complete = false;
            continue;
        };
        // A block that does not decode has no links to follow; the checks say why.
        let links = ganglion_storage::dag::links(&cid, &data).unwrap_or_default();
        stack.extend(links);
        out.insert(cid, data);
    }
    Ok(complete)
}

/// Reads the job from `indexer`, the bonded keys of its providers, and the blocks of its DAGs
/// from `blocks`; a DAG not complete there is fetched over bitswap from the providers' peers
/// (when `p2p` is given) into `blocks` first.
///
/// # Errors
/// [`AuditError::UnknownJob`], [`AuditError::Indexer`], [`AuditError::Blockstore`].
pub async fn gather<S: Kv>(
    indexer: &Indexer<S>,
    blocks: &dyn Blockstore,
    p2p: Option<&ganglion_p2p::Client>,
    job: &JobId,
) -> Result<Evidence, AuditError> {
    let view = indexer
        .job(job, 0)?
        .ok_or(AuditError::UnknownJob(*job))?
        .value;
    let providers: BTreeSet<KeyHash> = view.assignments.iter().map(|a| a.provider).collect();
    let bonded_keys = bonded_keys(indexer, &providers)?;
    let peers = match p2p {
        Some(_) => peers_of(indexer, &providers)?,
        None => Vec::new(),
    };
    let mut found = Blocks::new();
    let mut fetch_errors = BTreeMap::new();
    for root in roots(&view) {
        let mut scratch = Blocks::new();
        if collect(blocks, &root, &mut scratch)? {
            found.extend(scratch);
            continue;
        }
        if let Some(client) = p2p {
            let mut last = String::from("no provider peer known");
            for peer in &peers {
                match client.fetch_dag(root, *peer).await {
                    Ok(_) => {
                        last.clear();
                        break;
                    }
                    Err(e) => last = format!("from {peer}: {e}"),
                }
            }
            if !last.is_empty() {
                fetch_errors.insert(root.to_string(), last);
            }
        }
        collect(blocks, &root, &mut found)?;
    }
    Ok(Evidence {
        job: view,
        bonded_keys,
        blocks: found,
        fetch_errors,
    })
}
