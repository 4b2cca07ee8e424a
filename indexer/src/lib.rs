//! # ganglion-indexer
//!
//! Learns Ganglion's on-chain state from blocks (the `ganglion_v2` escrow protocol): provider
//! bonds, job escrows, assignments, claims, slashes, cancellations and expiries, each event with
//! its slot, block and transaction; survives rollbacks (undo records for the last k blocks)
//! and crashes (one atomic batch per block, a durable cursor); answers the node, the RPC and
//! auditors.
//!
//! [`sync::run`] follows a node or relay ([`follow::Source`]: N2N, N2C socket, N2C TCP) into
//! an [`Indexer`], which can also be fed directly with [`Indexer::apply_block`] and
//! [`Indexer::roll_back_to`]; then query it. The `ganglion-indexer` binary does the former
//! into a sled or PostgreSQL store (`follow`) and serves the latter over HTTP (`serve`).
//!
//! Modules:
//! - [`event`]: the events and where they happened.
//! - [`watch`]: which deployment (script hash and parameters) to look for.
//! - [`extract`]: transaction → effects and events, pure; authentic UTxOs only.
//! - [`follow`]: chainsync (+ blockfetch) clients as a stream of roll-forward/backward.
//! - [`sync`]: the follow loop: intersect, apply, reconnect with backoff.
//! - [`store`]: the ordered key space ([`store::MemoryKv`] spec, [`store::SledKv`] on disk,
//!   [`store::PgKv`] in PostgreSQL; [`store::Store`] picks one from a configuration).
//! - [`apply`]: the only writer: apply a block, undo to a point, notify subscribers.
//! - [`view`]: a job's read model with its history.
//! - [`query`]: jobs, providers, active bonds, events by slot; confirmed vs tentative.
//! - [`http`]: the read API over HTTP in Blockfrost's conventions (`ganglion-indexer serve`).
//! - `keys`: the key layout.

pub mod apply;
pub mod error;
pub mod event;
pub mod extract;
pub mod follow;
pub mod http;
mod keys;
pub mod query;
pub mod store;
pub mod sync;
pub mod view;
pub mod watch;

pub use apply::{Applied, Indexer, Notification, Point};
pub use error::{Error, Result};
pub use event::{ClaimOutcome, Event, Meta, Payment, ReceiptTerms, Record, Released, Slash};
pub use view::{ClaimView, JobStatus, JobView};
pub use watch::Watch;
