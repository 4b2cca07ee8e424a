//! The only writer: applies blocks and undoes them, one atomic batch per block, keeping
//! undo records for the last k blocks and a durable cursor.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use ganglion_cardano::txo::TxoRef;
use pallas_traverse::MultiEraBlock;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::event::{Event, Meta, Record};
use crate::extract::{CreatedAt, Tracked, extract_tx, into_txs};
use crate::keys;
use crate::store::{Kv, Write};
use crate::view::JobView;
use crate::watch::Watch;

/// A block the indexer applied: slot, header hash, height.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Point {
    /// Slot.
    pub slot: u64,
    /// Header hash.
    #[serde(with = "hex::serde")]
    pub hash: [u8; 32],
    /// Block height (block number).
    pub height: u64,
}

/// What applying one block did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The block.
    pub point: Point,
    /// Transactions scanned.
    pub tx_count: usize,
    /// Events extracted.
    pub records: Vec<Record>,
    /// False when the block was the tip already (a re-delivery) and nothing changed.
    pub fresh: bool,
}

/// What subscribers hear, in chain order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// A block was applied with these events (possibly none).
    Applied {
        /// The block.
        point: Point,
        /// Its events.
        records: Vec<Record>,
    },
    /// Blocks after `to` were undone (`None` = back to the start).
    RolledBack {
        /// The new tip.
        to: Option<Point>,
    },
    /// A follower connected and found where to continue: slot and hash (`None` = origin).
    Intersected {
        /// The intersection point.
        at: Option<(u64, [u8; 32])>,
    },
}

#[derive(Serialize, Deserialize)]
struct UndoRecord {
    point: Point,
    prev: Option<Point>,
    /// Keys written by the block and their previous values (UTF-8: all keys and values are).
    restore: Vec<(String, Option<String>)>,
}

/// Capacity of each subscriber's queue; a subscriber that falls this far behind is dropped
/// (it can re-read events by slot range).
pub const SUBSCRIBER_QUEUE: usize = 1024;

/// The indexer over a [`Kv`] store.
pub struct Indexer<S: Kv> {
    store: S,
    watch: Watch,
    k: u64,
    subscribers: Mutex<Vec<SyncSender<Notification>>>,
    /// Cache of the live script UTxO references (the `u/` keys), so that the common case —
    /// an input that is not ours — costs one hash lookup. Rebuilt from the store when empty.
    live: Mutex<Option<HashSet<TxoRef>>>,
    /// Cache of the cursor (`None` = not loaded yet).
    tip: Mutex<Option<Option<Point>>>,
    /// False for a reader beside a follower in another process ([`Self::reader`]): the
    /// cursor moves under it, so it is read from the store each time.
    writer: bool,
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    // Serialising our own plain data types cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

pub(crate) fn parse<T: for<'de> Deserialize<'de>>(what: &'static str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|source| Error::Corrupt { what, source })
}

fn utf8(what: &'static str, b: Vec<u8>) -> Result<String> {
    String::from_utf8(b).map_err(|e| Error::Corrupt {
        what,
        source: serde::de::Error::custom(e.to_string()),
    })
}

/// Pending writes of one block, over the writes of the earlier blocks of its batch, over the
/// store: reads see the newest first.
struct Pending<'a, S: Kv> {
    store: &'a S,
    batch: &'a BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Store values read ahead ([`Self::prefetch`]): what the store held before the run.
    fetched: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<S: Kv> Pending<'_, S> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self
            .writes
            .get(key)
            .or_else(|| self.batch.get(key))
            .or_else(|| self.fetched.get(key))
        {
            Some(v) => Ok(v.clone()),
            None => self.store.get(key),
        }
    }

    /// Reads the stored values of `keys` that neither this block nor its run wrote, in one
    /// [`Kv::get_many`] (one round trip per table on PostgreSQL, not one per key).
    fn prefetch(&mut self, keys: impl IntoIterator<Item = Vec<u8>>) -> Result<()> {
        let mut missing: Vec<Vec<u8>> = keys
            .into_iter()
            .filter(|k| {
                !self.writes.contains_key(k)
                    && !self.batch.contains_key(k)
                    && !self.fetched.contains_key(k)
            })
            .collect();
        missing.sort();
        missing.dedup();
        let values = self.store.get_many(&missing)?;
        self.fetched.extend(missing.into_iter().zip(values));
        Ok(())
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.insert(key, Some(value));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.writes.insert(key, None);
    }

    /// The value each key this block writes had before it (from the run, else the store:
    /// what was read ahead, one [`Kv::get_many`] for the rest), as an undo record's
    /// `restore`.
    fn restore(&self) -> Result<Vec<(String, Option<String>)>> {
        let before = |k: &Vec<u8>| self.batch.get(k).or_else(|| self.fetched.get(k));
        let missing: Vec<Vec<u8>> = self
            .writes
            .keys()
            .filter(|k| before(k).is_none())
            .cloned()
            .collect();
        let mut stored = self.store.get_many(&missing)?.into_iter();
        let mut restore = Vec::with_capacity(self.writes.len());
        for key in self.writes.keys() {
            let old = match before(key) {
                Some(v) => v.clone(),
                None => stored.next().flatten(),
            };
            let old = old.map(|v| utf8("undo value", v)).transpose()?;
            restore.push((utf8("undo key", key.clone())?, old));
        }
        Ok(restore)
    }
}

impl<S: Kv> Indexer<S> {
    /// An indexer for `watch` over `store`, keeping undo records for `k` blocks (mainnet
    /// security parameter: 2160).
    pub fn new(store: S, watch: Watch, k: u64) -> Self {
        Self {
            store,
            watch,
            k: k.max(1),
            subscribers: Mutex::new(Vec::new()),
            live: Mutex::new(None),
            tip: Mutex::new(None),
            writer: true,
        }
    }

    /// A read-only indexer over a store another process writes (a `serve` process beside
    /// the follower, on PostgreSQL): nothing is cached, so every answer is as of the last
    /// block the follower committed. Applying or rolling back fails with the store's
    /// [`Error::ReadOnly`].
    pub fn reader(store: S, watch: Watch, k: u64) -> Self {
        Self {
            writer: false,
            ..Self::new(store, watch, k)
        }
    }

    /// The deployment watched.
    pub fn watch(&self) -> &Watch {
        &self.watch
    }

    /// The underlying store (read it, never write it).
    pub fn kv(&self) -> &S {
        &self.store
    }

    /// The last applied block, if any.
    ///
    /// # Errors
    /// Store errors, [`Error::Corrupt`].
    pub fn tip(&self) -> Result<Option<Point>> {
        let stored = || {
            self.store
                .get(keys::CURSOR)?
                .map(|b| parse("cursor", &b))
                .transpose()
        };
        if !self.writer {
            return stored();
        }
        let mut cache = self.tip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tip) = *cache {
            return Ok(tip);
        }
        let tip = stored()?;
        *cache = Some(tip);
        Ok(tip)
    }

    /// Commits `writes`, which move the cursor to `to`, with the tip cache locked: a reader
    /// on another thread (a query, the RPC) must never load the old cursor from the store
    /// after the cache was cleared but before the commit, and cache it over the new tip. That
    /// race left a stale tip whose undo record was already gone (a rollback then failed as
    /// too deep and the follower stopped).
    fn commit_moving_tip(&self, writes: Vec<Write>, to: Option<Point>) -> Result<()> {
        let mut cache = self.tip.lock().unwrap_or_else(|p| p.into_inner());
        match self.store.commit(writes) {
            Ok(()) => {
                *cache = Some(to);
                Ok(())
            }
            Err(e) => {
                *cache = None;
                Err(e)
            }
        }
    }

    /// The blocks the indexer can still roll back to, newest first: the tip, the blocks whose
    /// undo records are kept, and the block below the oldest of them (the deepest point an
    /// undo reaches, like a node's immutable tip). A follower offers these as intersection
    /// points; leaving out the deepest one would make a fork exactly k blocks deep look like
    /// a chain with no intersection at all.
    ///
    /// # Errors
    /// Store errors, [`Error::Corrupt`].
    pub fn recent_points(&self) -> Result<Vec<Point>> {
        let undo: Vec<UndoRecord> = self
            .store
            .scan_prefix(keys::UNDO.as_bytes())?
            .iter()
            .map(|(_, b)| parse::<UndoRecord>("undo record", b))
            .collect::<Result<_>>()?;
        let deepest = undo.first().and_then(|u| u.prev);
        let mut points: Vec<Point> = self.tip()?.into_iter().collect();
        for p in undo.iter().rev().map(|u| u.point).chain(deepest) {
            if !points.contains(&p) {
                points.push(p);
            }
        }
        Ok(points)
    }

    /// The live script UTxOs, taken out of the cache (read from the store when it is
    /// empty): the caller owns them while it applies a block and puts them back with
    /// [`Self::set_live`] once the block is committed. Taken, not cloned, so a block costs no
    /// copy of a set that grows with every live escrow and bond; a failure in between
    /// leaves the cache empty, to be read again.
    fn take_live(&self) -> Result<HashSet<TxoRef>> {
        let mut cache = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = cache.take() {
            return Ok(set);
        }
        self.store
            .scan_prefix(keys::UTXO.as_bytes())?
            .iter()
            .map(|(_, b)| parse::<Tracked>("utxo", b).map(|t| t.reference))
            .collect()
    }

    fn set_live(&self, set: Option<HashSet<TxoRef>>) {
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = set;
    }

    /// A queue of notifications from now on (bounded by [`SUBSCRIBER_QUEUE`]).
    pub fn subscribe(&self) -> Receiver<Notification> {
        let (tx, rx) = sync_channel(SUBSCRIBER_QUEUE);
        self.subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tx);
        rx
    }

    pub(crate) fn notify(&self, n: Notification) {
        let mut subs = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|s| match s.try_send(n.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                tracing::warn!("dropping an indexer subscriber that fell {SUBSCRIBER_QUEUE} notifications behind");
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }

    /// Applies one block (HFC-wrapped CBOR `[era, block]`, as blockfetch and N2C chainsync
    /// deliver it). A block equal to the tip is ignored (re-delivery after a restart).
    ///
    /// # Errors
    /// [`Error::BlockDecode`], [`Error::NotNext`] when the block does not extend the tip,
    /// store errors.
    pub fn apply_block(&self, cbor: &[u8]) -> Result<Applied> {
        let mut applied = self.apply_blocks(&[cbor])?;
        applied.pop().ok_or(Error::BlockDecode {
            slot: None,
            reason: "no block".to_string(),
        })
    }

    /// Applies a run of consecutive blocks (each as for [`Self::apply_block`]) in one commit
    /// of the store: a follower catching up writes once per run, not once per block. Each
    /// block still gets its own undo record, so a later rollback can stop inside the run; the
    /// cursor moves in the same commit, so after a crash the store holds the whole run or
    /// none of it. Subscribers hear each block, in order, after the commit. A block equal to
    /// the tip is skipped (`fresh: false`).
    ///
    /// # Errors
    /// As [`Self::apply_block`], for the first block that fails; nothing of the run is
    /// committed then.
    pub fn apply_blocks<B: AsRef<[u8]>>(&self, blocks: &[B]) -> Result<Vec<Applied>> {
        let mut tip = self.tip()?;
        let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut applied = Vec::with_capacity(blocks.len());
        let mut live = self.take_live()?;
        for cbor in blocks {
            let result = self.apply_one(cbor.as_ref(), tip, &mut batch, &mut live);
            let a = match result {
                Ok(a) => a,
                Err(e) => {
                    self.set_live(None);
                    return Err(e);
                }
            };
            tip = Some(a.point);
            applied.push(a);
        }
        if batch.is_empty() {
            // Only re-deliveries: nothing to write.
            self.set_live(Some(live));
            return Ok(applied);
        }
        if let Err(e) = self.commit_moving_tip(batch.into_iter().collect(), tip) {
            self.set_live(None);
            return Err(e);
        }
        self.set_live(Some(live));
        for a in applied.iter().filter(|a| a.fresh) {
            self.notify(Notification::Applied {
                point: a.point,
                records: a.records.clone(),
            });
        }
        Ok(applied)
    }

    /// Applies `cbor` on top of `tip` into `batch` (the writes of the run so far), updating
    /// `live`.
    fn apply_one(
        &self,
        cbor: &[u8],
        tip: Option<Point>,
        batch: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>,
        live: &mut HashSet<TxoRef>,
    ) -> Result<Applied> {
        let block = MultiEraBlock::decode(cbor).map_err(|e| Error::BlockDecode {
            slot: None,
            reason: e.to_string(),
        })?;
        let point = Point {
            slot: block.slot(),
            hash: *block.hash(),
            height: block.number(),
        };
        if let Some(tip) = tip {
            if tip.hash == point.hash {
                return Ok(Applied {
                    point,
                    tx_count: block.tx_count(),
                    records: Vec::new(),
                    fresh: false,
                });
            }
            let parent = block.header().previous_hash().map(|h| *h);
            if point.height != tip.height + 1 || parent != Some(tip.hash) {
                return Err(Error::NotNext {
                    hash: hex::encode(point.hash),
                    height: point.height,
                    tip: tip.height,
                });
            }
        }
        let mut p = Pending {
            store: &self.store,
            batch: &*batch,
            writes: BTreeMap::new(),
            fetched: HashMap::new(),
        };
        let mut records = Vec::new();
        let tx_count = block.tx_count();
        let unknown;
        let txs = match into_txs(block) {
            Ok(txs) => txs,
            Err(block) => {
                unknown = block;
                unknown.txs()
            }
        };
        for (i, tx) in txs.iter().enumerate() {
            let meta = Meta {
                slot: point.slot,
                height: point.height,
                block_hash: point.hash,
                tx_hash: *tx.hash(),
                tx_index: i as u32,
                fee: tx.fee().unwrap_or(0),
            };
            let lookup = |r: &TxoRef| -> Option<Tracked> {
                if !live.contains(r) {
                    return None;
                }
                p.get(&keys::utxo(r))
                    .ok()
                    .flatten()
                    .and_then(|b| parse("utxo", &b).ok())
            };
            let fx = extract_tx(&self.watch, tx, &lookup);
            for r in &fx.spent {
                p.delete(keys::utxo(r));
                live.remove(r);
            }
            for t in &fx.created {
                let mut t = t.clone();
                if let Some(seen) = &mut t.output {
                    seen.created = Some(CreatedAt {
                        slot: meta.slot,
                        block_hash: meta.block_hash,
                        tx_index: meta.tx_index,
                    });
                }
                p.put(keys::utxo(&t.reference), json(&t));
                live.insert(t.reference);
            }
            records.extend(
                fx.events
                    .into_iter()
                    .enumerate()
                    .map(|(seq, event)| Record {
                        meta,
                        seq: seq as u32,
                        event,
                    }),
            );
        }
        // Events touch only event and job keys, never the UTxO keys extraction reads: the
        // jobs they name are read in one go, then the events indexed in chain order.
        p.prefetch(
            records
                .iter()
                .filter_map(|r| r.event.job_id())
                .map(|id| keys::job(&id)),
        )?;
        for record in &records {
            self.index_record(&mut p, record)?;
        }
        // Undo record: the previous value of every key this block writes.
        let undo = UndoRecord {
            point,
            prev: tip,
            restore: p.restore()?,
        };
        let writes = p.writes;
        batch.extend(writes);
        batch.insert(keys::undo(point.height), Some(json(&undo)));
        if point.height >= self.k {
            batch.insert(keys::undo(point.height - self.k), None);
        }
        batch.insert(keys::CURSOR.to_vec(), Some(json(&point)));
        Ok(Applied {
            point,
            tx_count,
            records,
            fresh: true,
        })
    }

    fn index_record(&self, p: &mut Pending<'_, S>, record: &Record) -> Result<()> {
        p.put(keys::event(&record.meta, record.seq), json(record));
        let Some(job_id) = record.event.job_id() else {
            return Ok(());
        };
        let key = keys::job(&job_id);
        let mut view = match p.get(&key)? {
            Some(b) => parse::<JobView>("job", &b)?,
            None => match JobView::locked(record) {
                Some(v) => {
                    p.put(keys::by_orchestrator(&v.orchestrator, &job_id), Vec::new());
                    p.put(key, json(&v));
                    return Ok(());
                }
                // An event of a job locked before the indexer's start point.
                None => return Ok(()),
            },
        };
        view.apply(record);
        if let Event::JobAssigned {
            assignments: new, ..
        }
        | Event::JobRescaled { added: new, .. } = &record.event
        {
            for a in new {
                p.put(keys::by_provider(&a.provider, &job_id), Vec::new());
            }
        }
        p.put(key, json(&view));
        Ok(())
    }

    /// Undoes every block after `target` (`None`: after the start). A no-op when `target`
    /// is the tip. Nothing changes when the target cannot be reached.
    ///
    /// # Errors
    /// [`Error::RollbackTooDeep`] when the target is older than the undo window. The
    /// window is the last `k` blocks below the highest block ever applied, not below the
    /// current tip: like a node's immutable tip it never moves back, so a rollback
    /// followed by another cannot reach further than `k` blocks from the longest chain
    /// seen (Ouroboros common prefix).
    /// [`Error::UnknownPoint`] when no applied block matches it, store errors.
    pub fn roll_back_to(&self, target: Option<(u64, [u8; 32])>) -> Result<Option<Point>> {
        let unknown = |(slot, hash): (u64, [u8; 32])| Error::UnknownPoint {
            slot,
            hash: hex::encode(hash),
        };
        // Find the undo records leading to the target before touching anything.
        let mut path: Vec<UndoRecord> = Vec::new();
        let mut cursor = self.tip()?;
        loop {
            match (cursor, target) {
                (None, None) => break,
                (None, Some(t)) => return Err(unknown(t)),
                (Some(c), Some((slot, hash))) if c.hash == hash || c.slot < slot => {
                    if c.hash != hash {
                        return Err(unknown((slot, hash)));
                    }
                    break;
                }
                (Some(c), _) => {
                    let Some(undo) = self.store.get(&keys::undo(c.height))? else {
                        return Err(Error::RollbackTooDeep {
                            slot: target.map(|t| t.0).unwrap_or(0),
                            k: self.k,
                        });
                    };
                    let undo: UndoRecord = parse("undo record", &undo)?;
                    cursor = undo.prev;
                    path.push(undo);
                }
            }
        }
        for undo in path {
            let mut writes: Vec<Write> = undo
                .restore
                .into_iter()
                .map(|(k, v)| (k.into_bytes(), v.map(String::into_bytes)))
                .collect();
            writes.push((keys::undo(undo.point.height), None));
            writes.push((keys::CURSOR.to_vec(), undo.prev.map(|p| json(&p))));
            self.set_live(None);
            self.commit_moving_tip(writes, undo.prev)?;
            self.notify(Notification::RolledBack { to: undo.prev });
        }
        Ok(cursor)
    }

    /// Flushes the store to disk.
    ///
    /// # Errors
    /// Store errors.
    pub fn flush(&self) -> Result<()> {
        self.store.flush()
    }
}
