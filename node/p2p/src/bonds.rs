//! The indexer's view of live bonds as the p2p layer checks them: [`ActiveBond`] (chain state)
//! → [`LiveBond`] / [`BondSnapshot`] (what [`super::offers::verify_offer`] and attestation checks
//! read).
//!
//! The rule (DESIGN §5): only providers with a live bond count. "Live" is the indexer's
//! [`Indexer::active_bonds`]: not unbonding and holding the minimum stake for its GPUs; tentative
//! (shallow) blocks count, as offers are advisory and the escrow validator re-checks bonds at
//! assignment. Refresh the snapshot ([`refresh`]) whenever the indexer applies or rolls back a
//! block.

use ganglion_indexer::Indexer;
use ganglion_indexer::query::ActiveBond;
use ganglion_indexer::store::Kv;

use super::offers::{BondSnapshot, LiveBond};

/// One active bond as the p2p layer needs it.
pub fn live_bond(active: &ActiveBond) -> LiveBond {
    LiveBond {
        bond: active.bond,
        provider: active.datum.provider,
        attest_key: active.datum.attest_key,
        peer_id: active.datum.peer_id.clone(),
        free_gpus: active.free_gpus,
    }
}

/// The indexer's active bonds now, as a snapshot.
///
/// # Errors
/// The indexer's store errors ([`ganglion_indexer::Error`]).
pub fn snapshot<S: Kv>(indexer: &Indexer<S>) -> ganglion_indexer::Result<BondSnapshot> {
    Ok(BondSnapshot::new(
        indexer.active_bonds()?.iter().map(live_bond),
    ))
}

/// Takes a fresh snapshot from `indexer` and hands it to the running p2p layer, which drops
/// the offers of bonds that are gone. Returns the number of live bonds.
///
/// # Errors
/// [`super::Error::Stopped`]; an indexer store error is reported as
/// [`super::Error::Bonds`].
pub async fn refresh<S: Kv>(
    indexer: &Indexer<S>,
    client: &super::Client,
) -> Result<usize, super::Error> {
    let bonds = snapshot(indexer).map_err(|e| super::Error::Bonds(Box::new(e)))?;
    let n = bonds.len();
    client.set_bonds(bonds).await?;
    Ok(n)
}
