//! The node's wallet: one ed25519 payment key in the data dir, its enterprise address on the
//! configured network, its UTxOs and balance from the chain (N2C local-state query), and
//! payments balanced and signed by the contracts crate's transaction builder.
//!
//! - [`key`]: the payment key (cardano-cli text envelope, 0600) and its address.
//! - [`chain`]: an N2C connection: UTxOs at an address, system start, submission.
//! - [`payment`]: balances of a UTxO set; a payment drafted, balanced and signed.
//! - [`service`]: [`Wallet`], what the CLI and the RPC call.

pub mod chain;
pub mod key;
pub mod payment;
pub mod rejection;
pub mod service;

pub use chain::ChainClient;
pub use key::PaymentKey;
pub use payment::{Balance, Payment};
pub use service::{Error, Wallet};
