//! Integration tests: real pallas clients against a devnet on ephemeral ports.

mod blockfrost;
mod cli;
mod common;
mod differential;
mod fee_size;
mod fixtures;
mod follow;
mod idle;
mod ledger_rules;
mod plutus;
mod robustness;
mod rollback;
mod sets;
mod submit;
