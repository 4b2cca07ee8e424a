//! # ganglion-contracts
//!
//! The on-chain half of Ganglion: one Plutus V3 validator (`contracts/aiken/`, Aiken, no
//! stdlib) that holds job escrows and provider bonds, and everything off-chain code needs to
//! use it exactly — the blueprint with parameters applied, datums and redeemers with exact
//! PlutusData codecs, the messages providers sign, fees and min-UTxO, phase-2 evaluation
//! through uplc, and a transaction builder per action.
//!
//! ```text
//! lock ──► escrow {Open} ──assign──► escrow {Assigned} ──settle──► providers paid, rest refunded
//!                 └─cancel──► refunded               └─expire──► attested paid, defaulters slashed
//! post_bond ──► bond ──unbond──► bond {unbonding} ──withdraw──► stake returned
//! ```
//!
//! Typical use: [`blueprint::Blueprint::committed`] → [`blueprint::Blueprint::apply`] with
//! [`params::Params`] → a [`build::Deployment`]; then a builder (e.g. [`build::lock`])
//! gives a [`tx::Draft`], [`tx::balance`] funds, evaluates and prices it, and [`tx::sign`]
//! signs it.
//!
//! Modules:
//! - [`blueprint`]: the committed `plutus.json`, parameter application, script hash, addresses.
//! - [`params`]: validator parameters, and how the escrow↔bond hash cycle is broken.
//! - [`datum`]: `EscrowDatum`, `BondDatum` and their PlutusData codecs.
//! - [`redeemer`]: spend and mint redeemers, attestations.
//! - [`signed`]: `Acceptance` and `AttestationBody`, the exact bytes signed with ed25519.
//! - [`data`]: PlutusData helpers in the `serialiseData` encoding.
//! - [`protocol`]: protocol parameters (re-exported from `ganglion_cardano`: [`env::Env`]
//!   holds them).
//! - [`fees`]: min fee (size, ExUnits, reference-script tiers), min-UTxO, collateral.
//! - [`time`]: the slot clock, slot ↔ POSIX ms (re-exported from `ganglion_cardano`, the
//!   clock [`env::Env`] holds and uplc is given).
//! - [`eval`]: phase-2 evaluation with uplc over CBOR bytes.
//! - [`env`](mod@env): the chain a transaction targets (parameters, slot config, network).
//! - [`tx`]: UTxO types, drafts, Conway encoding, balancing to a fixed point, signing.
//! - [`build`]: one builder per action.
//! - [`v2`]: escrow protocol v2 (DESIGN §3 trust model): receipts, per-provider claims,
//!   proportional slashes — the next protocol, which the node moves to next.
//! - `test_utils` (feature `test-utils`): a UTxO set and slot that apply every transaction
//!   through the devnet's real ledger (`ganglion_testnet::ledger::validate`, phases 1 and 2)
//!   and a ready world of parties.

pub mod blueprint;
pub mod build;
pub mod data;
pub mod datum;
pub mod env;
pub mod error;
pub mod eval;
pub mod fees;
pub mod params;
pub mod redeemer;
pub mod signed;
pub mod signing;
#[cfg(feature = "test-utils")]
pub mod test_utils;
pub mod tx;
pub mod v2;

pub use error::{Error, Result};
pub use ganglion_cardano::{protocol, time};
