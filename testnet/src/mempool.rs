//! Pending validated transactions, in arrival order.

use std::collections::VecDeque;

use crate::ledger::Validated;

/// A validated transaction waiting for a block, with the slot it was validated for.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The validated transaction.
    pub tx: Validated,
    /// The slot its validity interval was checked against.
    pub slot: u64,
    /// `validity_interval_start`, `ttl` (to re-check when forged in a later slot).
    pub interval: (Option<u64>, Option<u64>),
}

/// The mempool: FIFO, bounded by `capacity` transactions.
#[derive(Debug, Clone)]
pub struct Mempool {
    queue: VecDeque<Pending>,
    capacity: usize,
}

impl Mempool {
    /// An empty mempool holding at most `capacity` transactions.
    pub fn new(capacity: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity,
        }
    }

    /// True when no more transactions fit.
    pub fn is_full(&self) -> bool {
        self.queue.len() >= self.capacity
    }

    /// Maximum number of pending transactions.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of pending transactions.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Append a transaction.
    pub fn push(&mut self, p: Pending) {
        self.queue.push_back(p);
    }

    /// Take every pending transaction, oldest first.
    pub fn drain(&mut self) -> Vec<Pending> {
        self.queue.drain(..).collect()
    }

    /// Put transactions back at the front (those that did not fit in a block).
    pub fn requeue_front(&mut self, rest: Vec<Pending>) {
        for p in rest.into_iter().rev() {
            self.queue.push_front(p);
        }
    }

    /// Drop everything.
    pub fn clear(&mut self) {
        self.queue.clear();
    }
}
