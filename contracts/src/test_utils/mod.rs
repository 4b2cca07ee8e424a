//! Test helpers (feature `test-utils`), shared by this crate's tests and its bench.
//!
//! - [`world`]: a test double of the ledger: a UTxO set that applies transactions after
//!   running their scripts through uplc and checking witnesses and validity.
//! - [`harness`]: the validator deployed in such a world, with an orchestrator and providers.

pub mod harness;
pub mod world;
