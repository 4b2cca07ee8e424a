//! The node's wallet: one ed25519 payment key in the data dir, its enterprise address on the
//! configured network, its UTxOs and balance from the chain (N2C local-state query), and
//! payments balanced and signed by the contracts crate's transaction builder.
//!
//! The parts are crate `ganglion-wallet` (re-exported here: [`key`], [`chain`], [`payment`],
//! [`rejection`]); this module adds [`service`]: [`Wallet`], the key in the node's data dir on
//! the configured network preset, what the CLI and the RPC call.

pub mod service;

pub use ganglion_wallet::{
    Balance, ChainClient, Payment, PaymentKey, chain, key, payment, rejection,
};
pub use service::{Error, Wallet};
