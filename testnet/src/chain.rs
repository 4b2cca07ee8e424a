//! The chain: store + ledger state + mempool under one lock; forges blocks, rolls back,
//! and publishes tip changes (for followers) and [`ChainEvent`]s (for callers and tests).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use pallas_crypto::hash::{Hash, Hasher};
use tokio::sync::{broadcast, watch};

use crate::genesis::{Genesis, GenesisError};
use ganglion_cardano::time::{now_posix_ms, posix_ms_to_slot};
use ganglion_cardano::txo::TxoRef;

use crate::ledger::utxo::{UtxoDelta, UtxoSet};
use crate::ledger::{self, Rejection, Rules, phase1};
use crate::mempool::{Mempool, Pending};
use crate::producer::{self, ProduceError};
use crate::store::{BlockRef, Store, StoreError};

/// The tip as followers see it; `version` increases on every change (forge or rollback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TipInfo {
    /// The tip block, `None` at origin.
    pub tip: Option<BlockRef>,
    /// Change counter.
    pub version: u64,
}

/// Something that happened to the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainEvent {
    /// A block was forged and stored.
    BlockForged {
        /// The block.
        block: BlockRef,
        /// Ids of the transactions it contains.
        txs: Vec<Hash<32>>,
    },
    /// Blocks were rolled back (injected).
    RolledBack {
        /// The new tip.
        tip: Option<BlockRef>,
        /// How many blocks were removed.
        blocks: u64,
    },
    /// A pending transaction was dropped from the mempool: after a rollback or when its
    /// validity interval passed, it no longer validated.
    TxDropped {
        /// Transaction id.
        tx: Hash<32>,
        /// Why it no longer validates.
        rejection: Rejection,
    },
}

/// Chain errors (not rejections: those are per transaction).
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The genesis is invalid.
    #[error(transparent)]
    Genesis(#[from] GenesisError),
    /// Block assembly failed.
    #[error(transparent)]
    Produce(#[from] ProduceError),
    /// A blocking task running chain work panicked or was cancelled.
    #[error("chain task {0}")]
    Task(&'static str),
}

/// Why a submission was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The ledger rejected the transaction.
    #[error("rejected ({rule}): {0}", rule = .0.rule())]
    Rejected(#[from] Rejection),
    /// The mempool is full; retry after the next block.
    #[error("mempool full ({capacity} transactions)")]
    MempoolFull {
        /// Mempool capacity.
        capacity: usize,
    },
    /// The devnet's submission task failed (a panic in validation or the store); the devnet
    /// needs attention. Text, not the `JoinError`: this enum is cloned and compared (the
    /// `Eq` of a submission's outcome), which a `JoinError` is not.
    #[error("devnet store failure: {0}")]
    Internal(String),
}

struct Inner {
    speculative: UtxoSet,
    mempool: Mempool,
    version: u64,
}

/// The devnet chain. Shared as `Arc<Chain>`; all methods take `&self`.
pub struct Chain {
    store: Store,
    rules: Rules,
    k: u64,
    inner: Mutex<Inner>,
    tip_tx: watch::Sender<TipInfo>,
    events: broadcast::Sender<ChainEvent>,
}

/// Capacity of the event channel; a slower subscriber misses events (it gets `Lagged`).
pub const EVENT_CHANNEL_CAPACITY: usize = 1024;

impl Chain {
    /// Open the chain in `dir`, initialising it from `genesis` on first use. A restarted
    /// devnet continues its stored chain and UTxO set.
    ///
    /// # Errors
    /// [`ChainError`] (invalid genesis, store failure, another genesis in `dir`).
    pub fn open(
        genesis: &Genesis,
        dir: &Path,
        mempool_capacity: usize,
    ) -> Result<Self, ChainError> {
        let store = Store::open(dir)?;
        let utxos = genesis.initial_utxos()?;
        let fingerprint = genesis_fingerprint(genesis)?;
        store.init(fingerprint.as_ref(), &utxos)?;
        let speculative = UtxoSet::from_entries(store.utxos()?);
        let tip = store.tip()?;
        let (tip_tx, _) = watch::channel(TipInfo { tip, version: 0 });
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        Ok(Self {
            rules: Rules::new(
                genesis.protocol_params.clone(),
                genesis.slot_config(),
                genesis.network_id,
            ),
            k: genesis.security_param,
            store,
            inner: Mutex::new(Inner {
                speculative,
                mempool: Mempool::new(mempool_capacity),
                version: 0,
            }),
            tip_tx,
            events,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated in a way that
        // matters more than losing the process; recover the guard.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The validation rules (parameters, slot config, network id).
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The store (read access for servers).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The security parameter k (blocks).
    pub fn k(&self) -> u64 {
        self.k
    }

    /// The current tip.
    pub fn tip(&self) -> Option<BlockRef> {
        self.tip_tx.borrow().tip
    }

    /// Watch tip changes.
    pub fn subscribe_tip(&self) -> watch::Receiver<TipInfo> {
        self.tip_tx.subscribe()
    }

    /// Subscribe to chain events.
    pub fn subscribe_events(&self) -> broadcast::Receiver<ChainEvent> {
        self.events.subscribe()
    }

    /// The wall-clock slot now.
    pub fn wall_slot(&self) -> u64 {
        posix_ms_to_slot(&self.rules.slot_config, now_posix_ms()).unwrap_or(0)
    }

    /// Number of pending transactions.
    pub fn mempool_len(&self) -> usize {
        self.lock().mempool.len()
    }

    /// Validate `bytes` for the next block (slot = wall slot + 1) against the confirmed UTxO
    /// set plus pending transactions, and queue it. Returns the transaction id.
    /// CPU-bound (runs Plutus): call from `spawn_blocking` in async code.
    ///
    /// # Errors
    /// [`SubmitError`].
    pub fn submit(&self, bytes: &[u8]) -> Result<Hash<32>, SubmitError> {
        let mut inner = self.lock();
        if inner.mempool.is_full() {
            return Err(SubmitError::MempoolFull {
                capacity: inner.mempool.capacity(),
            });
        }
        let slot = self.next_block_slot();
        let v = ledger::validate(&self.rules, &inner.speculative, bytes, slot)?;
        let interval = interval_of(bytes);
        inner.speculative.apply(&v.delta);
        let id = v.tx_hash;
        inner.mempool.push(Pending {
            tx: v,
            slot,
            interval,
        });
        Ok(id)
    }

    /// Validate `bytes` exactly as [`Chain::submit`] would (against the confirmed UTxO set
    /// plus pending transactions, for the next block's slot) without queuing it: a dry run
    /// that returns the measured ExUnits and the UTxO delta.
    ///
    /// # Errors
    /// [`Rejection`] of the first broken rule.
    pub fn dry_run(&self, bytes: &[u8]) -> Result<ledger::Validated, Rejection> {
        let inner = self.lock();
        ledger::validate(
            &self.rules,
            &inner.speculative,
            bytes,
            self.next_block_slot(),
        )
    }

    /// The ExUnits each redeemer of `bytes` needs ([`ledger::evaluate`]), its inputs resolved
    /// from the confirmed UTxO set plus pending transactions, then from `additional`
    /// (outputs not on the chain yet, as Ogmios' `additionalUtxoSet`; never overriding one
    /// that is). The outputs it names are copied under the chain's lock and the scripts run
    /// without it, so an evaluation never holds up submission or forging. CPU-bound: call
    /// from `spawn_blocking` in async code.
    ///
    /// # Errors
    /// The [`Rejection`] that stops the evaluation.
    pub fn evaluate(
        &self,
        bytes: &[u8],
        additional: &[(TxoRef, Vec<u8>)],
    ) -> Result<Vec<crate::ledger::phase2::ScriptRun>, Rejection> {
        let tx = ledger::decode_tx(bytes)?;
        let named = ledger::named_outputs(&tx.transaction_body);
        let on_chain: BTreeMap<TxoRef, Vec<u8>> = {
            let inner = self.lock();
            named
                .filter_map(|r| inner.speculative.get(&r).map(|o| (r, o.to_vec())))
                .collect()
        };
        let view = WithAdditional {
            on_chain,
            additional,
        };
        ledger::evaluate(&self.rules, &view, bytes)
    }

    /// The slot the next block will have: wall slot + 1, and after the tip.
    pub fn next_block_slot(&self) -> u64 {
        let after_tip = self.tip().map_or(0, |t| t.slot + 1);
        (self.wall_slot() + 1).max(after_tip)
    }

    /// Forge a block at `slot` from pending transactions (up to the block size and ExUnits
    /// limits; the rest wait). Returns `None` when nothing is pending or `slot` is not after
    /// the tip.
    ///
    /// # Errors
    /// [`ChainError`]; on a store failure the mempool is dropped and the ledger state is
    /// reloaded from the store, so memory never runs ahead of disk.
    pub fn forge(&self, slot: u64) -> Result<Option<BlockRef>, ChainError> {
        self.forge_at(slot, None)
    }

    /// [`Chain::forge`], and when nothing is pending, an empty block at `slot` if the tip is
    /// at least `idle_slots` slots older than it (or there is no block yet): a devnet that
    /// keeps forging while idle lets a node's confirmation depth be reached without other
    /// traffic (`ganglion-devnet up --idle-block-s`).
    ///
    /// # Errors
    /// As [`Chain::forge`].
    pub fn forge_or_idle(
        &self,
        slot: u64,
        idle_slots: u64,
    ) -> Result<Option<BlockRef>, ChainError> {
        self.forge_at(slot, Some(idle_slots))
    }

    fn forge_at(&self, slot: u64, idle_slots: Option<u64>) -> Result<Option<BlockRef>, ChainError> {
        let mut inner = self.lock();
        if inner.mempool.is_empty() {
            let tip = self.store.tip()?;
            // An empty chain has been idle since genesis (slot 0), not forever: a devnet
            // rolled back to genesis waits its idle slots like any other.
            let since = tip.map_or(0, |t| t.slot);
            let idle = idle_slots.is_some_and(|n| slot > since && slot - since >= n.max(1));
            if !idle {
                return Ok(None);
            }
            return self.append(inner, tip, slot, Vec::new()).map(Some);
        }
        let tip = self.store.tip()?;
        if tip.is_some_and(|t| t.slot >= slot) {
            return Ok(None);
        }
        let mut pending = inner.mempool.drain();
        let expired = pending
            .iter()
            .any(|p| p.interval.1.is_some_and(|ttl| slot >= ttl));
        if expired {
            // Rare: a transaction validated for an earlier slot expired. Revalidate the
            // whole queue in order against the confirmed state, each at the slot it can
            // land in at the earliest, and drop what no longer holds.
            let (state, kept) = self.revalidate(pending, slot)?;
            inner.speculative = state;
            pending = kept;
        }
        // Transactions not yet valid at this slot (validated for a later one, submitted
        // while this slot began) wait, and so does everything queued after them.
        let cut = pending
            .iter()
            .position(|p| p.interval.0.is_some_and(|start| slot < start))
            .unwrap_or(pending.len());
        let later = pending.split_off(cut);
        let params = &self.rules.params;
        let mut size = 64u64;
        let (mut mem, mut steps) = (0u64, 0u64);
        let mut take = 0;
        for p in &pending {
            let s = p.tx.bytes.len() as u64;
            let (m, st) = (p.tx.ex_units.mem, p.tx.ex_units.steps);
            if take > 0
                && (size + s > params.max_block_body_size
                    || mem + m > params.max_block_ex_units.mem
                    || steps + st > params.max_block_ex_units.steps)
            {
                break;
            }
            size += s;
            mem += m;
            steps += st;
            take += 1;
        }
        let mut rest = pending.split_off(take);
        rest.extend(later);
        inner.mempool.requeue_front(rest);
        if pending.is_empty() {
            return Ok(None);
        }
        self.append(inner, tip, slot, pending).map(Some)
    }

    /// Assembles a block of `pending` (possibly none) at `slot` on `tip`, stores it and
    /// publishes it.
    fn append(
        &self,
        mut inner: MutexGuard<'_, Inner>,
        tip: Option<BlockRef>,
        slot: u64,
        pending: Vec<Pending>,
    ) -> Result<BlockRef, ChainError> {
        let params = &self.rules.params;
        let number = tip.map_or(1, |t| t.number + 1);
        let txs: Vec<&[u8]> = pending.iter().map(|p| p.tx.bytes.as_slice()).collect();
        let block = producer::assemble(
            number,
            slot,
            tip.map(|t| t.hash),
            params.protocol_version,
            &txs,
        )?;
        let mut delta = UtxoDelta::default();
        for p in &pending {
            delta.extend(&p.tx.delta);
        }
        if let Err(e) = self.store.append(&block, &delta, self.k) {
            inner.mempool.clear();
            inner.speculative = UtxoSet::from_entries(self.store.utxos().unwrap_or_default());
            return Err(e.into());
        }
        let at = BlockRef {
            number,
            slot,
            hash: block.hash,
        };
        inner.version += 1;
        let version = inner.version;
        drop(inner);
        self.tip_tx.send_replace(TipInfo {
            tip: Some(at),
            version,
        });
        let _ = self.events.send(ChainEvent::BlockForged {
            block: at,
            txs: pending.iter().map(|p| p.tx.tx_hash).collect(),
        });
        tracing::info!(number, slot, hash = %block.hash, txs = pending.len(), "block forged");
        Ok(at)
    }

    /// Revalidate `pending` in order against the confirmed UTxO set, each at the earliest
    /// slot it can land in (≥ `slot`); returns the resulting speculative state and the
    /// survivors, and publishes [`ChainEvent::TxDropped`] for the others.
    fn revalidate(
        &self,
        pending: Vec<Pending>,
        slot: u64,
    ) -> Result<(UtxoSet, Vec<Pending>), ChainError> {
        let mut state = UtxoSet::from_entries(self.store.utxos()?);
        let mut kept = Vec::new();
        for p in pending {
            let at = p.slot.max(slot);
            match ledger::validate(&self.rules, &state, &p.tx.bytes, at) {
                Ok(v) => {
                    state.apply(&v.delta);
                    kept.push(Pending {
                        tx: v,
                        slot: at,
                        ..p
                    });
                }
                Err(rejection) => {
                    tracing::info!(tx = %p.tx.tx_hash, slot = at, rule = rejection.rule(), "dropped from mempool");
                    let _ = self.events.send(ChainEvent::TxDropped {
                        tx: p.tx.tx_hash,
                        rejection,
                    });
                }
            }
        }
        Ok((state, kept))
    }

    /// Roll back the last `n` blocks (n ≤ k). Pending transactions are revalidated against
    /// the restored state, as a node's mempool is after a chain switch: those that still
    /// validate stay (the transactions of the removed blocks are *not* re-added), the others
    /// are dropped with [`ChainEvent::TxDropped`]. Followers see `RollBackward`.
    ///
    /// # Errors
    /// [`StoreError::RollbackTooDeep`] and other store failures.
    pub fn rollback(&self, n: u64) -> Result<Option<BlockRef>, ChainError> {
        let mut inner = self.lock();
        let result = self.store.rollback(n, self.k);
        let pending = inner.mempool.drain();
        let (state, kept) = match self.revalidate(pending, self.wall_slot() + 1) {
            Ok(x) => x,
            Err(e) => {
                inner.speculative = UtxoSet::from_entries(self.store.utxos().unwrap_or_default());
                return Err(e);
            }
        };
        inner.speculative = state;
        inner.mempool.requeue_front(kept);
        let tip = result?;
        inner.version += 1;
        let version = inner.version;
        drop(inner);
        self.tip_tx.send_replace(TipInfo { tip, version });
        let _ = self.events.send(ChainEvent::RolledBack { tip, blocks: n });
        tracing::info!(blocks = n, tip = ?tip.map(|t| t.number), "rollback injected");
        Ok(tip)
    }

    /// Confirmed unspent outputs paying to `address` (raw address bytes).
    ///
    /// # Errors
    /// [`ChainError::Store`].
    pub fn utxos_at(&self, address: &[u8]) -> Result<Vec<(TxoRef, Vec<u8>)>, ChainError> {
        Ok(self
            .store
            .utxos()?
            .into_iter()
            .filter(|(_, o)| phase1::output_facts(o).is_ok_and(|f| f.address == address))
            .collect())
    }
}

/// The genesis fingerprint recorded in a store: blake2b-256 of the genesis JSON.
///
/// # Errors
/// [`GenesisError::Json`].
pub fn genesis_fingerprint(genesis: &Genesis) -> Result<Hash<32>, GenesisError> {
    Ok(Hasher::<256>::hash(genesis.to_json()?.as_bytes()))
}

fn interval_of(bytes: &[u8]) -> (Option<u64>, Option<u64>) {
    ledger::decode_tx(bytes)
        .map(|t| {
            (
                t.transaction_body.validity_interval_start,
                t.transaction_body.ttl,
            )
        })
        .unwrap_or((None, None))
}

/// Outputs copied from the UTxO set, with extra outputs beside them (those on the chain win).
struct WithAdditional<'a> {
    on_chain: BTreeMap<TxoRef, Vec<u8>>,
    additional: &'a [(TxoRef, Vec<u8>)],
}

impl ledger::UtxoView for WithAdditional<'_> {
    fn lookup(&self, r: &TxoRef) -> Option<&[u8]> {
        self.on_chain.get(r).map(Vec::as_slice).or_else(|| {
            self.additional
                .iter()
                .find(|(x, _)| x == r)
                .map(|(_, o)| o.as_slice())
        })
    }
}
