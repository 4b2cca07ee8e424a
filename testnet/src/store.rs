//! Durable chain state in sled: blocks by number, block numbers by hash, the confirmed UTxO
//! set, an undo record per block (last k blocks), the tip, and two indexes for the read API
//! ([`crate::serve::blockfrost`]): each transaction's place (block number, position) and the
//! transaction that spent each output.
//!
//! Every block append and every single-block rollback is one multi-tree sled transaction,
//! followed by a flush, so a `kill -9` at any point leaves either the old or the new state,
//! never a mix.

use std::path::Path;

use pallas_crypto::hash::Hash;
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

use ganglion_cardano::txo::TxoRef;

use crate::ledger::utxo::UtxoDelta;
use crate::producer::ForgedBlock;

/// A block's identity on the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef {
    /// Block number (height, first block = 1).
    pub number: u64,
    /// Slot.
    pub slot: u64,
    /// Header hash.
    pub hash: Hash<32>,
}

/// A stored block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlock {
    /// Its identity.
    pub at: BlockRef,
    /// Header CBOR (N2N chainsync).
    pub header: Vec<u8>,
    /// HFC-wrapped block CBOR (blockfetch, N2C chainsync).
    pub wrapped: Vec<u8>,
}

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sled failed (I/O or corruption).
    #[error("sled error")]
    Sled(#[from] sled::Error),
    /// A record does not have the expected layout.
    #[error("corrupt {what} record")]
    Corrupt {
        /// Which record.
        what: &'static str,
    },
    /// The store was created from another genesis.
    #[error("the data directory belongs to another genesis")]
    GenesisMismatch,
    /// Rollback deeper than the chain or than k.
    #[error("cannot roll back {requested} blocks (chain height {height}, k = {k})")]
    RollbackTooDeep {
        /// Blocks asked for.
        requested: u64,
        /// Current height.
        height: u64,
        /// Security parameter.
        k: u64,
    },
}

impl From<TransactionError<StoreError>> for StoreError {
    fn from(e: TransactionError<StoreError>) -> Self {
        match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => StoreError::Sled(e),
        }
    }
}

const TIP: &[u8] = b"tip";
const GENESIS: &[u8] = b"genesis";
/// Set once the transaction indexes cover every stored block (stores written before they
/// existed are indexed when opened).
const TX_INDEX: &[u8] = b"tx-index-v1";

/// Where a transaction is on the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxPlace {
    /// Block number (height).
    pub block: u64,
    /// Position in the block's transactions (0-based).
    pub index: u32,
}

/// A block's transactions as the indexes see them: each one's id, and the outputs it
/// consumes (inputs, or collateral when phase-2 invalid).
type BlockTxs = Vec<(Hash<32>, Vec<TxoRef>)>;

fn block_txs(wrapped: &[u8]) -> Option<BlockTxs> {
    let block = pallas_traverse::MultiEraBlock::decode(wrapped).ok()?;
    Some(
        block
            .txs()
            .iter()
            .map(|tx| {
                let consumed = tx
                    .consumes()
                    .iter()
                    .map(|i| TxoRef {
                        tx_hash: **i.hash(),
                        index: i.index(),
                    })
                    .collect();
                (tx.hash(), consumed)
            })
            .collect(),
    )
}

fn encode_place(number: u64, index: usize) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..8].copy_from_slice(&number.to_be_bytes());
    v[8..].copy_from_slice(&(index as u32).to_be_bytes());
    v
}

/// The sled-backed chain store.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    blocks: sled::Tree,
    hashes: sled::Tree,
    utxo: sled::Tree,
    undo: sled::Tree,
    meta: sled::Tree,
    /// tx id → [`TxPlace`] (12 bytes).
    txs: sled::Tree,
    /// output reference key → id of the transaction that consumed it.
    spent: sled::Tree,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

fn get_bytes<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    if buf.len() < 4 {
        return None;
    }
    let n = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let rest = &buf[4..];
    if rest.len() < n {
        return None;
    }
    let (a, b) = rest.split_at(n);
    *buf = b;
    Some(a)
}

fn encode_ref(r: &BlockRef) -> Vec<u8> {
    let mut v = Vec::with_capacity(48);
    v.extend_from_slice(&r.number.to_be_bytes());
    v.extend_from_slice(&r.slot.to_be_bytes());
    v.extend_from_slice(r.hash.as_ref());
    v
}

fn decode_ref(v: &[u8]) -> Option<BlockRef> {
    if v.len() != 48 {
        return None;
    }
    let number = u64::from_be_bytes(v[0..8].try_into().ok()?);
    let slot = u64::from_be_bytes(v[8..16].try_into().ok()?);
    let hash: [u8; 32] = v[16..48].try_into().ok()?;
    Some(BlockRef {
        number,
        slot,
        hash: Hash::new(hash),
    })
}

fn encode_block(b: &ForgedBlock) -> Vec<u8> {
    let mut v = encode_ref(&BlockRef {
        number: b.number,
        slot: b.slot,
        hash: b.hash,
    });
    put_bytes(&mut v, &b.header);
    put_bytes(&mut v, &b.wrapped);
    v
}

fn decode_block(v: &[u8]) -> Option<StoredBlock> {
    let at = decode_ref(v.get(..48)?)?;
    let mut rest = &v[48..];
    let header = get_bytes(&mut rest)?.to_vec();
    let wrapped = get_bytes(&mut rest)?.to_vec();
    Some(StoredBlock {
        at,
        header,
        wrapped,
    })
}

fn encode_undo(prev_tip: Option<&BlockRef>, d: &UtxoDelta) -> Vec<u8> {
    let mut v = Vec::new();
    put_bytes(&mut v, &prev_tip.map(encode_ref).unwrap_or_default());
    v.extend_from_slice(&(d.consumed.len() as u32).to_be_bytes());
    for (r, o) in &d.consumed {
        put_bytes(&mut v, &r.to_key());
        put_bytes(&mut v, o);
    }
    v.extend_from_slice(&(d.produced.len() as u32).to_be_bytes());
    for (r, _) in &d.produced {
        put_bytes(&mut v, &r.to_key());
    }
    v
}

type Undo = (Option<BlockRef>, Vec<(TxoRef, Vec<u8>)>, Vec<TxoRef>);

fn decode_undo(v: &[u8]) -> Option<Undo> {
    let mut rest = v;
    let prev = get_bytes(&mut rest)?;
    let prev = if prev.is_empty() {
        None
    } else {
        Some(decode_ref(prev)?)
    };
    let count = |rest: &mut &[u8]| -> Option<usize> {
        let n = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        *rest = &rest[4..];
        Some(n)
    };
    let n = count(&mut rest)?;
    let mut consumed = Vec::with_capacity(n);
    for _ in 0..n {
        let r = TxoRef::from_key(get_bytes(&mut rest)?)?;
        consumed.push((r, get_bytes(&mut rest)?.to_vec()));
    }
    let n = count(&mut rest)?;
    let mut produced = Vec::with_capacity(n);
    for _ in 0..n {
        produced.push(TxoRef::from_key(get_bytes(&mut rest)?)?);
    }
    Some((prev, consumed, produced))
}

fn abort(what: &'static str) -> ConflictableTransactionError<StoreError> {
    ConflictableTransactionError::Abort(StoreError::Corrupt { what })
}

impl Store {
    /// Open (or create) the store in directory `path`.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = ganglion_sled::open(path)?;
        let store = Self {
            blocks: db.open_tree("blocks")?,
            hashes: db.open_tree("hashes")?,
            utxo: db.open_tree("utxo")?,
            undo: db.open_tree("undo")?,
            meta: db.open_tree("meta")?,
            txs: db.open_tree("txs")?,
            spent: db.open_tree("spent")?,
            db,
        };
        store.index_older_blocks()?;
        Ok(store)
    }

    /// Index the transactions of a store written before the indexes existed (once).
    fn index_older_blocks(&self) -> Result<(), StoreError> {
        if self.meta.get(TX_INDEX)?.is_some() {
            return Ok(());
        }
        for kv in self.blocks.iter() {
            let (_, v) = kv?;
            let block = decode_block(&v).ok_or(StoreError::Corrupt { what: "block" })?;
            let txs = block_txs(&block.wrapped).ok_or(StoreError::Corrupt { what: "block" })?;
            for (i, (id, consumed)) in txs.iter().enumerate() {
                self.txs
                    .insert(id.as_ref(), &encode_place(block.at.number, i)[..])?;
                for r in consumed {
                    self.spent.insert(&r.to_key()[..], id.as_ref())?;
                }
            }
        }
        self.meta.insert(TX_INDEX, b"1".as_slice())?;
        self.db.flush()?;
        Ok(())
    }

    /// Where transaction `id` is on the chain, if it is.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn tx_place(&self, id: &[u8]) -> Result<Option<TxPlace>, StoreError> {
        let Some(v) = self.txs.get(id)? else {
            return Ok(None);
        };
        let corrupt = || StoreError::Corrupt { what: "tx index" };
        let v: [u8; 12] = v.as_ref().try_into().map_err(|_| corrupt())?;
        Ok(Some(TxPlace {
            block: u64::from_be_bytes(v[..8].try_into().map_err(|_| corrupt())?),
            index: u32::from_be_bytes(v[8..].try_into().map_err(|_| corrupt())?),
        }))
    }

    /// The transaction on the chain that consumed output `r`, if one did.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn spent_by(&self, r: &TxoRef) -> Result<Option<Hash<32>>, StoreError> {
        match self.spent.get(r.to_key())? {
            None => Ok(None),
            Some(v) => {
                let h: [u8; 32] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
                    what: "spent index",
                })?;
                Ok(Some(Hash::new(h)))
            }
        }
    }

    /// Initialise a fresh store with the genesis UTxOs, or check that an existing one was
    /// created from the same genesis (`fingerprint` = hash of the genesis JSON).
    ///
    /// # Errors
    /// [`StoreError::GenesisMismatch`], [`StoreError::Sled`].
    pub fn init(&self, fingerprint: &[u8], utxos: &[(TxoRef, Vec<u8>)]) -> Result<(), StoreError> {
        if let Some(existing) = self.meta.get(GENESIS)? {
            if existing.as_ref() != fingerprint {
                return Err(StoreError::GenesisMismatch);
            }
            return Ok(());
        }
        (&self.utxo, &self.meta).transaction(|(u, m)| {
            for (r, o) in utxos {
                u.insert(&r.to_key()[..], o.as_slice())?;
            }
            m.insert(GENESIS, fingerprint)?;
            Ok(())
        })?;
        self.db.flush()?;
        Ok(())
    }

    /// The tip, `None` at origin.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn tip(&self) -> Result<Option<BlockRef>, StoreError> {
        match self.meta.get(TIP)? {
            None => Ok(None),
            Some(v) if v.is_empty() => Ok(None),
            Some(v) => decode_ref(&v)
                .map(Some)
                .ok_or(StoreError::Corrupt { what: "tip" }),
        }
    }

    /// The block at height `number`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn block(&self, number: u64) -> Result<Option<StoredBlock>, StoreError> {
        match self.blocks.get(number.to_be_bytes())? {
            None => Ok(None),
            Some(v) => decode_block(&v)
                .map(Some)
                .ok_or(StoreError::Corrupt { what: "block" }),
        }
    }

    /// The block number of header hash `hash`, if on the chain.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn number_of(&self, hash: &[u8]) -> Result<Option<u64>, StoreError> {
        match self.hashes.get(hash)? {
            None => Ok(None),
            Some(v) => {
                Ok(Some(u64::from_be_bytes(v.as_ref().try_into().map_err(
                    |_| StoreError::Corrupt { what: "hash index" },
                )?)))
            }
        }
    }

    /// The confirmed UTxO set.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn utxos(&self) -> Result<Vec<(TxoRef, Vec<u8>)>, StoreError> {
        self.utxo
            .iter()
            .map(|kv| {
                let (k, v) = kv?;
                let r = TxoRef::from_key(&k).ok_or(StoreError::Corrupt { what: "utxo key" })?;
                Ok((r, v.to_vec()))
            })
            .collect()
    }

    /// Append `block` with its UTxO `delta` atomically, drop undo records older than `k`
    /// blocks, and flush.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn append(&self, block: &ForgedBlock, delta: &UtxoDelta, k: u64) -> Result<(), StoreError> {
        let prev = self.tip()?;
        let at = BlockRef {
            number: block.number,
            slot: block.slot,
            hash: block.hash,
        };
        let value = encode_block(block);
        let undo = encode_undo(prev.as_ref(), delta);
        let txs = block_txs(&block.wrapped).ok_or(StoreError::Corrupt { what: "block" })?;
        (
            &self.blocks,
            &self.hashes,
            &self.utxo,
            &self.undo,
            &self.meta,
            &self.txs,
            &self.spent,
        )
            .transaction(|(b, h, u, un, m, ti, sp)| {
                b.insert(&block.number.to_be_bytes()[..], value.as_slice())?;
                for (i, (id, consumed)) in txs.iter().enumerate() {
                    ti.insert(id.as_ref(), &encode_place(block.number, i)[..])?;
                    for r in consumed {
                        sp.insert(&r.to_key()[..], id.as_ref())?;
                    }
                }
                h.insert(block.hash.as_ref(), &block.number.to_be_bytes()[..])?;
                for (r, _) in &delta.consumed {
                    u.remove(&r.to_key()[..])?;
                }
                for (r, o) in &delta.produced {
                    u.insert(&r.to_key()[..], o.as_slice())?;
                }
                un.insert(&block.number.to_be_bytes()[..], undo.as_slice())?;
                if block.number > k {
                    un.remove(&(block.number - k).to_be_bytes()[..])?;
                }
                m.insert(TIP, encode_ref(&at))?;
                Ok(())
            })?;
        self.db.flush()?;
        Ok(())
    }

    /// Roll back the last `n` blocks (each step atomic), then flush. Returns the new tip.
    ///
    /// # Errors
    /// [`StoreError::RollbackTooDeep`] if `n` exceeds the height or `k`; [`StoreError`].
    pub fn rollback(&self, n: u64, k: u64) -> Result<Option<BlockRef>, StoreError> {
        let height = self.tip()?.map_or(0, |t| t.number);
        if n > height || n > k {
            return Err(StoreError::RollbackTooDeep {
                requested: n,
                height,
                k,
            });
        }
        for _ in 0..n {
            (
                &self.blocks,
                &self.hashes,
                &self.utxo,
                &self.undo,
                &self.meta,
                &self.txs,
                &self.spent,
            )
                .transaction(|(b, h, u, un, m, ti, sp)| {
                    let tip = m
                        .get(TIP)?
                        .and_then(|v| decode_ref(&v))
                        .ok_or_else(|| abort("tip"))?;
                    let key = tip.number.to_be_bytes();
                    let record = un.get(&key[..])?.ok_or_else(|| abort("undo"))?;
                    let (prev, consumed, produced) =
                        decode_undo(&record).ok_or_else(|| abort("undo"))?;
                    for r in &produced {
                        u.remove(&r.to_key()[..])?;
                    }
                    for (r, o) in &consumed {
                        u.insert(&r.to_key()[..], o.as_slice())?;
                    }
                    let block = b
                        .get(&key[..])?
                        .and_then(|v| decode_block(&v))
                        .ok_or_else(|| abort("block"))?;
                    for (id, consumed) in block_txs(&block.wrapped).ok_or_else(|| abort("block"))? {
                        ti.remove(id.as_ref())?;
                        for r in consumed {
                            sp.remove(&r.to_key()[..])?;
                        }
                    }
                    b.remove(&key[..])?;
                    h.remove(tip.hash.as_ref())?;
                    un.remove(&key[..])?;
                    m.insert(TIP, prev.as_ref().map(encode_ref).unwrap_or_default())?;
                    Ok(())
                })?;
        }
        self.db.flush()?;
        self.tip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::assemble;

    fn r(b: u8, i: u64) -> TxoRef {
        TxoRef {
            tx_hash: [b; 32],
            index: i,
        }
    }

    #[test]
    fn transactions_are_indexed_with_their_block_unindexed_on_rollback_and_indexed_in_older_stores()
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(dir.path()).expect("open");
        s.init(b"g1", &[]).expect("init");
        let spec = crate::txbuild::TxSpec {
            inputs: vec![r(1, 0), r(1, 3)],
            fee: 200_000,
            ..Default::default()
        };
        let tx = crate::txbuild::build(&spec, &[&crate::keys::DevKey::from_seed(1)]);
        let id = crate::ledger::tx_hash(&crate::ledger::decode_tx(&tx).expect("tx"));
        let b1 = assemble(1, 3, None, (10, 0), &[]).expect("b1");
        s.append(&b1, &UtxoDelta::default(), 10).expect("append");
        let b2 = assemble(2, 4, Some(b1.hash), (10, 0), &[&tx]).expect("b2");
        s.append(&b2, &UtxoDelta::default(), 10).expect("append");
        let placed = Some(TxPlace { block: 2, index: 0 });
        assert_eq!(s.tx_place(id.as_ref()).expect("read"), placed);
        for input in &spec.inputs {
            assert_eq!(s.spent_by(input).expect("read"), Some(id));
        }
        assert_eq!(s.spent_by(&r(1, 1)).expect("read"), None);
        s.rollback(1, 10).expect("rollback");
        assert_eq!(s.tx_place(id.as_ref()).expect("read"), None);
        assert_eq!(s.spent_by(&r(1, 0)).expect("read"), None);
        // A store written before the indexes existed: they are built when it is opened.
        s.append(&b2, &UtxoDelta::default(), 10)
            .expect("append again");
        s.txs.clear().expect("clear");
        s.spent.clear().expect("clear");
        s.meta.remove(TX_INDEX).expect("remove");
        drop(s);
        let s = Store::open(dir.path()).expect("reopen");
        assert_eq!(s.tx_place(id.as_ref()).expect("read"), placed);
        assert_eq!(s.spent_by(&r(1, 3)).expect("read"), Some(id));
    }

    #[test]
    fn append_rollback_and_reopen_keep_a_consistent_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(dir.path()).expect("open");
        s.init(b"g1", &[(r(1, 0), vec![0xa0])]).expect("init");
        let b1 = assemble(1, 3, None, (10, 0), &[]).expect("b1");
        let d1 = UtxoDelta {
            consumed: vec![(r(1, 0), vec![0xa0])],
            produced: vec![(r(2, 0), vec![0xa1])],
        };
        s.append(&b1, &d1, 10).expect("append");
        let b2 = assemble(2, 4, Some(b1.hash), (10, 0), &[]).expect("b2");
        s.append(&b2, &UtxoDelta::default(), 10).expect("append");
        assert_eq!(s.tip().expect("tip").map(|t| t.number), Some(2));
        assert_eq!(s.number_of(b2.hash.as_ref()).expect("idx"), Some(2));
        let tip = s.rollback(2, 10).expect("rollback");
        assert_eq!(tip, None);
        assert_eq!(s.utxos().expect("utxos"), vec![(r(1, 0), vec![0xa0])]);
        assert!(s.block(1).expect("read").is_none());
        assert!(matches!(
            s.rollback(1, 10),
            Err(StoreError::RollbackTooDeep { .. })
        ));
        s.append(&b1, &d1, 10).expect("append again");
        drop(s);
        let s = Store::open(dir.path()).expect("reopen");
        assert!(matches!(
            s.init(b"other", &[]),
            Err(StoreError::GenesisMismatch)
        ));
        s.init(b"g1", &[]).expect("same genesis");
        assert_eq!(s.tip().expect("tip").map(|t| t.hash), Some(b1.hash));
        assert_eq!(s.utxos().expect("utxos"), vec![(r(2, 0), vec![0xa1])]);
    }
}
