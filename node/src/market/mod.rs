//! The market: ensemble specs, market snapshots and the gang matcher.

mod glob;
pub mod matching;
pub mod snapshot;
pub mod spec;
#[cfg(feature = "test-utils")]
pub mod synthetic;

pub use matching::{Constraint, NoFit, Plan, Requirements, match_gang};
pub use snapshot::{GpuModel, MarketSnapshot, Offer, OfferedGpus, RttSample, SnapshotOptions};
pub use spec::{Ensemble, SpecError};
