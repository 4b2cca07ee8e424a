//! Ganglion's wallet (DESIGN §2, §4): what a node needs to pay and be paid on Cardano.
//!
//! - [`key`]: the payment signing key (cardano-cli text envelope) and its addresses;
//! - [`chain`]: an N2C connection (cardano-node or the devnet) for the wallet's UTxOs, the
//!   protocol parameters, the tip and transaction submission;
//! - [`rejection`]: the ledger's submit rejections decoded into readable reasons;
//! - [`payment`]: simple payments (ADA and NTX) built, balanced and signed;
//! - [`secret`]: secret files written atomically with mode 0600.
//!
//! The node's wallet service (keys in its data dir, the network preset) composes these in
//! `ganglion-node`.

pub mod chain;
pub mod key;
pub mod payment;
pub mod rejection;
pub mod secret;

pub use chain::{ChainClient, N2cEndpoint};
pub use key::PaymentKey;
pub use payment::{Balance, Payment};
