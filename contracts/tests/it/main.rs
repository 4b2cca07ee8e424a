//! `ganglion-contracts` integration tests: every transaction is built, balanced, signed and
//! applied through the devnet's ledger (`ganglion_testnet::ledger::validate`: fees, value,
//! min-UTxO, validity, witnesses, phase 2); no validator function is ever called with a
//! hand-made context. Reject tests show the unbroken transaction passing that ledger first.

mod balance;
mod blueprint;
mod differential;
mod fees;
mod sets;
mod v2;
