//! `ganglion-indexer` integration tests. Blocks are real Conway blocks (assembled by the
//! devnet's producer) holding real transactions built by `ganglion-contracts` and accepted by
//! the Plutus evaluator.

mod crash;
mod devnet;
mod fixtures;
mod follow;
mod postgres;
mod rescale;
mod rollback;
mod scenario;
mod serve;
mod store;
mod v2;
