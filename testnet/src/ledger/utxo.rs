//! The UTxO set: output references ([`TxoRef`]) → raw output CBOR, and per-transaction deltas that can
//! be applied and undone (rollback as data).

use std::collections::HashMap;

use ganglion_cardano::txo::TxoRef;

/// The effect of one transaction (or block) on the UTxO set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UtxoDelta {
    /// Spent outputs, with their raw CBOR (kept so the delta can be undone).
    pub consumed: Vec<(TxoRef, Vec<u8>)>,
    /// Created outputs (raw CBOR exactly as in the transaction).
    pub produced: Vec<(TxoRef, Vec<u8>)>,
}

impl UtxoDelta {
    /// Compose with the delta of a later transaction (a block's delta is the composition
    /// of its transactions'): an output produced earlier and consumed by `other` cancels
    /// out, so the result is the net effect and stays correct to apply and to undo.
    pub fn extend(&mut self, other: &UtxoDelta) {
        for (r, o) in &other.consumed {
            match self.produced.iter().position(|(x, _)| x == r) {
                Some(pos) => {
                    self.produced.remove(pos);
                }
                None => self.consumed.push((*r, o.clone())),
            }
        }
        self.produced.extend(other.produced.iter().cloned());
    }
}

/// An in-memory UTxO set.
#[derive(Debug, Clone, Default)]
pub struct UtxoSet {
    map: HashMap<TxoRef, Vec<u8>>,
}

impl UtxoSet {
    /// Build from (reference, raw output) pairs.
    pub fn from_entries(entries: impl IntoIterator<Item = (TxoRef, Vec<u8>)>) -> Self {
        Self {
            map: entries.into_iter().collect(),
        }
    }

    /// The raw output at `r`, if unspent.
    pub fn get(&self, r: &TxoRef) -> Option<&[u8]> {
        self.map.get(r).map(Vec::as_slice)
    }

    /// Number of unspent outputs.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Iterate over all unspent outputs (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (&TxoRef, &Vec<u8>)> {
        self.map.iter()
    }

    /// Apply a delta: remove consumed, insert produced.
    pub fn apply(&mut self, delta: &UtxoDelta) {
        for (r, _) in &delta.consumed {
            self.map.remove(r);
        }
        for (r, o) in &delta.produced {
            self.map.insert(*r, o.clone());
        }
    }

    /// Undo a delta applied with [`UtxoSet::apply`].
    pub fn undo(&mut self, delta: &UtxoDelta) {
        for (r, _) in &delta.produced {
            self.map.remove(r);
        }
        for (r, o) in &delta.consumed {
            self.map.insert(*r, o.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(b: u8, i: u64) -> TxoRef {
        TxoRef {
            tx_hash: [b; 32],
            index: i,
        }
    }

    #[test]
    fn apply_then_undo_restores_the_set() {
        let mut set = UtxoSet::from_entries([(r(1, 0), vec![1]), (r(1, 1), vec![2])]);
        let before: Vec<_> = {
            let mut v: Vec<_> = set.iter().map(|(k, v)| (*k, v.clone())).collect();
            v.sort();
            v
        };
        let delta = UtxoDelta {
            consumed: vec![(r(1, 0), vec![1])],
            produced: vec![(r(2, 0), vec![3]), (r(2, 1), vec![4])],
        };
        set.apply(&delta);
        assert!(set.get(&r(1, 0)).is_none());
        assert_eq!(set.get(&r(2, 1)), Some(&[4u8][..]));
        set.undo(&delta);
        let mut after: Vec<_> = set.iter().map(|(k, v)| (*k, v.clone())).collect();
        after.sort();
        assert_eq!(before, after);
    }

    #[test]
    fn composing_chained_deltas_nets_out_intermediate_outputs() {
        let first = UtxoDelta {
            consumed: vec![(r(1, 0), vec![1])],
            produced: vec![(r(2, 0), vec![2]), (r(2, 1), vec![3])],
        };
        let second = UtxoDelta {
            consumed: vec![(r(2, 1), vec![3])],
            produced: vec![(r(3, 0), vec![4])],
        };
        let mut block = first.clone();
        block.extend(&second);
        let mut one_by_one = UtxoSet::from_entries([(r(1, 0), vec![1])]);
        one_by_one.apply(&first);
        one_by_one.apply(&second);
        let mut at_once = UtxoSet::from_entries([(r(1, 0), vec![1])]);
        at_once.apply(&block);
        let sorted = |s: &UtxoSet| {
            let mut v: Vec<_> = s.iter().map(|(k, v)| (*k, v.clone())).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&one_by_one), sorted(&at_once));
        at_once.undo(&block);
        assert_eq!(sorted(&at_once), vec![(r(1, 0), vec![1])]);
    }

    proptest::proptest! {
        /// Apply-then-undo of a block delta composed from chained transactions restores
        /// the set, and composing equals applying one transaction at a time.
        #[test]
        fn composed_block_deltas_apply_and_undo_like_their_transactions(
            steps in proptest::collection::vec((0usize..8, 1usize..4), 1..12)
        ) {
            let mut set = UtxoSet::from_entries((0..4u64).map(|i| (r(0, i), vec![i as u8])));
            let initial = sorted(&set);
            let mut one_by_one = set.clone();
            let mut block = UtxoDelta::default();
            for (n, (pick, outs)) in steps.into_iter().enumerate() {
                let live: Vec<_> = one_by_one.iter().map(|(k, v)| (*k, v.clone())).collect();
                if live.is_empty() {
                    break;
                }
                let mut live = live;
                live.sort();
                let spent = live[pick % live.len()].clone();
                let tx = UtxoDelta {
                    consumed: vec![spent],
                    produced: (0..outs as u64)
                        .map(|i| (r(n as u8 + 1, i), vec![n as u8, i as u8]))
                        .collect(),
                };
                one_by_one.apply(&tx);
                block.extend(&tx);
            }
            set.apply(&block);
            proptest::prop_assert_eq!(sorted(&set), sorted(&one_by_one));
            set.undo(&block);
            proptest::prop_assert_eq!(sorted(&set), initial);
        }
    }

    fn sorted(s: &UtxoSet) -> Vec<(TxoRef, Vec<u8>)> {
        let mut v: Vec<_> = s.iter().map(|(k, v)| (*k, v.clone())).collect();
        v.sort();
        v
    }
}
