//! The escrow protocol, version 2 (DESIGN §3, the trust model): the `ganglion_v2` validator
//! (`contracts/aiken/validators/ganglion_v2.ak`, rules in `lib/ganglion/v2/`) and everything
//! off-chain code needs to use it.
//!
//! Pay follows the orchestrator's signed receipts and the time provably elapsed (the
//! claim's validity *lower* bound), in GPU-milliseconds; every provider claims its own pay
//! (`Claim`, any time up to the deadline plus the claim window); the acceptance binds the
//! spec CID, accept-by and receipt interval; an assign must leave the budget able to pay
//! every assignment for its whole window and commits each provider's bond; expiry slashes
//! only assigned providers that never claimed, proportionally to their assignment, the
//! orchestrator recovering at most what it paid and the rest burnt; payouts go to the bond's
//! full address.
//!
//! ```text
//! lock ──► escrow {Open} ──assign──► {Assigned, claimed: []} ──claim i──► provider i paid,
//!   └─cancel──► refunded                 │  ▲                             escrow continues;
//!                                        │  └─rescale: release some,      the last claim
//!                                        │    add others (a service)      refunds the rest
//!                                        └─expire (after deadline + claim window)──► rest
//!                                           refunded, defaulters slashed proportionally
//! ```
//!
//! Each assignment has its own paid window (`started_at`..`until`): from the assign or
//! rescale that added it to the deadline, or to its release by a rescale.
//!
//! It is the only protocol: the node (`ganglion-jobs`) and the indexer speak it.
//!
//! Modules: [`params`], [`payout`], [`datum`], [`redeemer`], [`signed`], [`rules`] (the
//! validator's arithmetic off-chain), [`build`] (one builder per action).

pub mod build;
pub mod datum;
pub mod params;
pub mod payout;
pub mod redeemer;
pub mod rules;
pub mod signed;

use crate::blueprint::{Blueprint, PLUTUS_JSON};
use crate::error::Result;

/// Title of the v2 validator in the blueprint (module `ganglion_v2`, validator `ganglion_v2`).
pub const VALIDATOR: &str = "ganglion_v2.ganglion_v2";

/// The committed blueprint's `ganglion_v2` validator.
///
/// # Errors
/// [`crate::Error::Blueprint`] if the committed file lacks it or is broken.
pub fn blueprint() -> Result<Blueprint> {
    Blueprint::parse_validator(PLUTUS_JSON, VALIDATOR)
}
