//! [`BondRpc`]: `provider_post`, `provider_topUp`, `provider_unbond` and
//! `provider_withdraw` — this node's bond (found in the indexer's live script UTxOs), posted or
//! spent through the contracts builders (`build::post_bond`, `build::top_up`,
//! `build::unbond`, `build::withdraw`), balanced and signed by the node's wallet
//! ([`ChainAccess`]) and submitted. The unbonding rule (DESIGN §3, validator `bond` spend): withdraw only from
//! `unbonding_since_ms + unbonding_delay_ms`, where unbonding starts at the unbond
//! transaction's upper validity bound.

use std::sync::Arc;

use ganglion_contracts::tx::TxoRef;
use ganglion_contracts::v2::build;
use ganglion_contracts::v2::datum::{BondDatum, GanglionDatum};
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::core::{RpcResult, async_trait};
use ganglion_rpc::types::BondTx;

use crate::audit::record::txo_text;
use crate::job::chain::ChainAccess;

/// What the bond methods answer from. Cheap to clone.
pub struct BondRpc<S: Kv> {
    indexer: Arc<Indexer<S>>,
    chain: Arc<ChainAccess>,
    validity_slots: u64,
    owner: Option<Arc<Owner>>,
}

/// What a provider node's new bond names besides its payment key.
#[derive(Debug, Clone)]
pub struct Owner {
    /// The attest key (ed25519 public key).
    pub attest_key: [u8; 32],
    /// The libp2p peer id bytes.
    pub peer_id: Vec<u8>,
    /// GPUs a bond backs when `provider_post` names none: those the node offers.
    pub gpus: u64,
}

impl<S: Kv> Clone for BondRpc<S> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            chain: self.chain.clone(),
            validity_slots: self.validity_slots,
            owner: self.owner.clone(),
        }
    }
}

/// The first slot from which a bond unbonding since `since_ms` can be withdrawn:
/// the first slot starting at or after `since_ms + delay_ms`.
pub fn withdrawable_from(chain: &ChainAccess, since_ms: u64, delay_ms: u64) -> (u64, u64) {
    let ready_ms = since_ms.saturating_add(delay_ms);
    let mut slot = chain.slot_at(ready_ms);
    if chain.slot_start_ms(slot) < ready_ms {
        slot += 1;
    }
    (slot, ready_ms)
}

/// A bond action the contracts builder refused: a request it names as impossible (a stake
/// below the minimum, an unbonding bond) is [`error::JOB`] with its reason; anything else as
/// any chain action fails.
fn refused(e: ganglion_contracts::Error) -> ganglion_rpc::jsonrpsee::types::ErrorObjectOwned {
    match e {
        ganglion_contracts::Error::InvalidRequest(why) => error(error::JOB, why),
        other => super::codes::chain(&other.into()),
    }
}

fn parse_ref(s: &str) -> RpcResult<TxoRef> {
    let bad = || {
        error(
            error::INVALID_PARAMS,
            format!("bond {s:?} is not `<64 hex digits>#<index>`"),
        )
    };
    let (hash, index) = s.split_once('#').ok_or_else(bad)?;
    let tx_hash: [u8; 32] = hex::decode(hash)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad)?;
    let index = index.parse().map_err(|_| bad())?;
    Ok(TxoRef { tx_hash, index })
}

impl<S: Kv + Send + Sync + 'static> BondRpc<S> {
    /// Over a following `indexer`, spending with `chain` (the node's payment key). An unbond
    /// stays valid for `validity_slots` (the engine's setting): unbonding counts from its last
    /// slot, so a short window makes the stake withdrawable sooner.
    pub fn new(indexer: Arc<Indexer<S>>, chain: ChainAccess, validity_slots: u64) -> Self {
        Self {
            indexer,
            chain: Arc::new(chain),
            validity_slots,
            owner: None,
        }
    }

    /// The same methods for a provider node: `provider_post` names `owner`'s keys.
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(Arc::new(owner));
        self
    }

    /// This node's live bonds (active or unbonding) on chain.
    fn own(&self) -> RpcResult<Vec<(TxoRef, BondDatum)>> {
        let me = self.chain.key_hash();
        let live = self
            .indexer
            .live_utxos()
            .map_err(|e| error(error::INTERNAL, format!("indexer: {e}")))?;
        Ok(live
            .into_iter()
            .filter_map(|t| match t.datum {
                GanglionDatum::Bond(b) if b.provider == me => Some((t.reference, b)),
                _ => None,
            })
            .collect())
    }

    /// This node's bonds that are not unbonding (whatever their stake).
    fn active(&self) -> RpcResult<Vec<TxoRef>> {
        Ok(self
            .own()?
            .into_iter()
            .filter(|(_, b)| b.unbonding_since_ms.is_none())
            .map(|(r, _)| r)
            .collect())
    }

    /// This node's live bonds in `unbonding` state (or not), optionally the one named.
    fn mine(&self, named: Option<&str>, unbonding: bool) -> RpcResult<(TxoRef, BondDatum)> {
        let named = named.map(parse_ref).transpose()?;
        let mut found: Vec<(TxoRef, BondDatum)> = self
            .own()?
            .into_iter()
            .filter(|(r, _)| named.is_none_or(|n| n == *r))
            .collect();
        let state = if unbonding { "unbonding" } else { "active" };
        if let (Some(n), Some((_, b))) = (named, found.first())
            && b.unbonding_since_ms.is_some() != unbonding
        {
            return Err(error(
                error::JOB,
                format!("bond {} of this node is not {state}", txo_text(&n)),
            ));
        }
        found.retain(|(_, b)| b.unbonding_since_ms.is_some() == unbonding);
        match (found.len(), named) {
            (1, _) => Ok(found.remove(0)),
            (0, Some(n)) => Err(error(
                error::JOB,
                format!("no live bond {} of this node on chain", txo_text(&n)),
            )),
            (0, None) => Err(error(
                error::JOB,
                format!("this node has no {state} bond on chain"),
            )),
            (n, _) => Err(error(
                error::JOB,
                format!(
                    "this node has {n} {state} bonds ({}): name one",
                    found
                        .iter()
                        .map(|(r, _)| txo_text(r))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    async fn spend(&self, draft: ganglion_contracts::tx::Draft) -> RpcResult<String> {
        let now = ganglion_p2p::now_ms();
        let tx = self
            .chain
            .build(draft, now)
            .await
            .map_err(|e| super::codes::chain(&e))?;
        self.chain
            .submit(&tx, now)
            .await
            .map_err(|e| super::codes::chain(&e))?;
        Ok(hex::encode(tx.hash))
    }

    async fn utxo(&self, r: TxoRef) -> RpcResult<ganglion_contracts::tx::Utxo> {
        self.chain
            .script_utxos(&[r])
            .await
            .map_err(|e| super::codes::chain(&e))?
            .pop()
            .ok_or_else(|| error(error::JOB, format!("bond {} is not on chain", txo_text(&r))))
    }
}

/// `provider_unbond` and `provider_withdraw` (`ganglion_rpc::api::ProviderApi`): this node's
/// bond spent through its wallet. Object-safe, so that the RPC server holds one whatever the
/// indexer's store.
#[async_trait]
pub trait Bonds: Send + Sync {
    /// Starts unbonding `bond` (`<tx hash hex>#<index>`), or this node's only active bond.
    ///
    /// # Errors
    /// As `provider_unbond`.
    async fn unbond(&self, bond: Option<String>) -> RpcResult<BondTx>;

    /// Withdraws the stake of unbonding `bond`, or of this node's only unbonding bond.
    ///
    /// # Errors
    /// As `provider_withdraw`.
    async fn withdraw(&self, bond: Option<String>) -> RpcResult<BondTx>;

    /// Posts a bond of `stake_ntx` NTX base units for `gpus` GPUs (default: the node's).
    ///
    /// # Errors
    /// As `provider_post`.
    async fn post(&self, stake_ntx: u64, gpus: Option<u64>) -> RpcResult<BondTx>;

    /// Adds `add_ntx` NTX base units to `bond`, or to this node's only active bond.
    ///
    /// # Errors
    /// As `provider_topUp`.
    async fn top_up(&self, add_ntx: u64, bond: Option<String>) -> RpcResult<BondTx>;
}

#[async_trait]
impl<S: Kv + Send + Sync + 'static> Bonds for BondRpc<S> {
    async fn unbond(&self, bond: Option<String>) -> RpcResult<BondTx> {
        let (r, _) = self.mine(bond.as_deref(), false)?;
        let utxo = self.utxo(r).await?;
        let from = self.chain.slot_at(ganglion_p2p::now_ms());
        let until = from + self.validity_slots;
        let draft = build::unbond(
            self.chain.deployment(),
            self.chain.env(),
            &utxo,
            from,
            until,
        )
        .map_err(|e| super::codes::chain(&e.into()))?;
        let tx_id = self.spend(draft).await?;
        let delay = self.chain.deployment().params.unbonding_delay_ms;
        let (slot, ms) = withdrawable_from(&self.chain, self.chain.slot_start_ms(until), delay);
        Ok(BondTx {
            tx_id,
            bond: txo_text(&r),
            withdrawable_from_slot: Some(slot),
            withdrawable_from_ms: Some(ms),
        })
    }

    async fn post(&self, stake_ntx: u64, gpus: Option<u64>) -> RpcResult<BondTx> {
        let owner = self.owner.as_ref().ok_or_else(|| {
            error(
                error::JOB,
                "this node is no provider (no [provider] in its config): it posts no bond",
            )
        })?;
        if let Some(live) = self.active()?.first() {
            return Err(error(
                error::JOB,
                format!(
                    "this node has an active bond {}: top it up (`ganglion provider bond \
                     top-up`) rather than post another",
                    txo_text(live)
                ),
            ));
        }
        let me = self.chain.key_hash();
        let draft = build::post_bond(
            self.chain.deployment(),
            self.chain.env(),
            &build::BondRequest {
                provider: me,
                attest_key: owner.attest_key,
                peer_id: owner.peer_id.clone(),
                // Claims pay the provider's own key (an enterprise address), as at start.
                payout: ganglion_contracts::v2::payout::Payout::enterprise(me),
                gpus: gpus.unwrap_or(owner.gpus),
                stake: stake_ntx,
            },
        )
        .map_err(refused)?;
        let tx_id = self.spend(draft).await?;
        Ok(BondTx {
            // `post_bond` pays the bond first.
            bond: format!("{tx_id}#0"),
            tx_id,
            withdrawable_from_slot: None,
            withdrawable_from_ms: None,
        })
    }

    async fn top_up(&self, add_ntx: u64, bond: Option<String>) -> RpcResult<BondTx> {
        let (r, _) = self.mine(bond.as_deref(), false)?;
        let utxo = self.utxo(r).await?;
        let draft = build::top_up(self.chain.deployment(), self.chain.env(), &utxo, add_ntx)
            .map_err(refused)?;
        let tx_id = self.spend(draft).await?;
        Ok(BondTx {
            tx_id,
            bond: txo_text(&r),
            withdrawable_from_slot: None,
            withdrawable_from_ms: None,
        })
    }

    async fn withdraw(&self, bond: Option<String>) -> RpcResult<BondTx> {
        let (r, datum) = self.mine(bond.as_deref(), true)?;
        let since = datum.unbonding_since_ms.unwrap_or_default();
        let delay = self.chain.deployment().params.unbonding_delay_ms;
        let (from_slot, from_ms) = withdrawable_from(&self.chain, since, delay);
        let now = ganglion_p2p::now_ms();
        let now_slot = self.chain.slot_at(now);
        if now_slot < from_slot {
            return Err(error(
                error::JOB,
                format!(
                    "bond {} is unbonding since {since} ms; its stake can be withdrawn from \
                     slot {from_slot} ({from_ms} POSIX ms, in {} s; now slot {now_slot}): the \
                     unbonding delay is {delay} ms",
                    txo_text(&r),
                    from_ms.saturating_sub(now).div_ceil(1000)
                ),
            ));
        }
        let utxo = self.utxo(r).await?;
        // The earliest valid lower bound: the validator compares it with the unbonding end.
        let draft = build::withdraw(self.chain.deployment(), self.chain.env(), &utxo, from_slot)
            .map_err(|e| super::codes::chain(&e.into()))?;
        let tx_id = self.spend(draft).await?;
        Ok(BondTx {
            tx_id,
            bond: txo_text(&r),
            withdrawable_from_slot: None,
            withdrawable_from_ms: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bond_references_parse_only_as_hash_hash_index() {
        let h = "ab".repeat(32);
        assert_eq!(
            parse_ref(&format!("{h}#3")).expect("parses"),
            TxoRef {
                tx_hash: [0xab; 32],
                index: 3
            }
        );
        for bad in [
            h.clone(),
            format!("{h}#"),
            format!("{h}#-1"),
            format!("{}#0", "ab".repeat(31)),
            format!("zz{}#0", "ab".repeat(31)),
        ] {
            let e = parse_ref(&bad).expect_err(&bad);
            assert_eq!(e.code(), error::INVALID_PARAMS, "{bad}");
        }
    }
}
