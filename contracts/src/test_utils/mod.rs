//! Test helpers (feature `test-utils`), shared by this crate's tests and its bench.
//!
//! - [`world`]: a UTxO set and a slot that apply every transaction through the devnet's
//!   real ledger (`ganglion_testnet::ledger::validate`: fees, balance, min-UTxO, validity,
//!   witnesses, collateral, and phase 2 through uplc).
//! - [`harness`]: the validator deployed in such a world, with an orchestrator and providers.
//! - [`harness_v2`]: the same for protocol v2 (`ganglion_v2`): receipt key, payout
//!   addresses, claims, proportional slashes.

pub mod harness;
pub mod harness_v2;
pub mod world;
