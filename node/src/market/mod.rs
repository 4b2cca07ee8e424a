//! The market: ensemble specs, market snapshots and the gang matcher.

mod glob;
pub mod limits;
pub mod matching;
mod nofit;
pub mod sdl;
mod sdl_full;
pub mod snapshot;
pub mod spec;
#[cfg(feature = "test-utils")]
pub mod synthetic;
pub mod vram;

pub use limits::{ProviderLimits, Refusal};
pub use matching::{Binding, Constraint, NoFit, Plan, Requirements, match_gang};
pub use snapshot::{
    GpuModel, MarketSnapshot, Offer, OfferedGpus, ProviderLoad, RttSample, SnapshotOptions,
};
pub use spec::{Ensemble, SpecError};
