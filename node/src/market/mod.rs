//! The market: ensemble specs, market snapshots and the gang matcher.

mod glob;
pub mod limits;
pub mod matching;
mod nofit;
pub mod snapshot;
pub mod spec;
pub mod vram;
#[cfg(feature = "test-utils")]
pub mod synthetic;

pub use limits::{ProviderLimits, Refusal};
pub use matching::{Binding, Constraint, NoFit, Plan, Requirements, match_gang};
pub use snapshot::{
    GpuModel, MarketSnapshot, Offer, OfferedGpus, ProviderLoad, RttSample, SnapshotOptions,
};
pub use spec::{Ensemble, SpecError};
