//! # ganglion-contracts
//!
//! The on-chain half of Ganglion: one Plutus V3 validator (`ganglion_v2`,
//! `contracts/aiken/`, Aiken, no stdlib) that holds job escrows and provider bonds, and
//! everything off-chain code needs to use it exactly — the blueprint with parameters applied,
//! datums and redeemers with exact PlutusData codecs, the messages parties sign, fees and
//! min-UTxO, phase-2 evaluation through uplc, and a transaction builder per action.
//!
//! ```text
//! lock ──► escrow {Open} ──assign──► {Assigned} ──claim i──► provider i paid; the last
//!   └─cancel──► refunded          │                          claim refunds the rest
//!                                 └─expire (after deadline + claim window)──► rest
//!                                    refunded, defaulters slashed proportionally
//! post_bond ──► bond ──unbond──► bond {unbonding} ──withdraw──► stake returned
//! ```
//!
//! Typical use: [`v2::blueprint`] → [`blueprint::Blueprint::apply`] with
//! [`v2::params::Params`] → a [`v2::build::Deployment`]; then a builder (e.g.
//! [`v2::build::lock`]) gives a [`tx::Draft`], [`tx::balance`] funds, evaluates and prices
//! it, and [`tx::sign`] signs it.
//!
//! Modules:
//! - [`blueprint`]: the committed `plutus.json`, parameter application, script hash, addresses.
//! - [`params`]: the key, policy and asset types the parameters and datums use, and how the
//!   escrow↔bond hash cycle is broken.
//! - [`v2`]: the escrow protocol (DESIGN §3 trust model): parameters, datums, redeemers,
//!   the signed messages (acceptances, receipts, attestations), the validator's arithmetic
//!   ([`v2::rules`]) and one builder per action ([`v2::build`]).
//! - [`signing`]: ed25519 signing and verification of those messages.
//! - [`data`]: PlutusData helpers in the `serialiseData` encoding.
//! - [`protocol`]: protocol parameters (re-exported from `ganglion_cardano`: [`env::Env`]
//!   holds them).
//! - [`fees`]: min fee (size, ExUnits, reference-script tiers), min-UTxO, collateral.
//! - [`time`]: the slot clock, slot ↔ POSIX ms (re-exported from `ganglion_cardano`, the
//!   clock [`env::Env`] holds and uplc is given).
//! - [`eval`]: phase-2 evaluation with uplc over CBOR bytes.
//! - [`env`](mod@env): the chain a transaction targets (parameters, slot config, network).
//! - [`tx`]: UTxO types, drafts, Conway encoding, balancing to a fixed point, signing.
//! - `test_utils` (feature `test-utils`): a UTxO set and slot that apply every transaction
//!   through the devnet's real ledger (`ganglion_testnet::ledger::validate`, phases 1 and 2)
//!   and a ready world of parties.

pub mod blueprint;
pub mod data;
pub mod env;
pub mod error;
pub mod eval;
pub mod fees;
pub mod params;
pub mod signing;
#[cfg(feature = "test-utils")]
pub mod test_utils;
pub mod tx;
pub mod v2;

pub use error::{Error, Result};
pub use ganglion_cardano::{protocol, time};
