//! The Ganglion market: what a job asks for, what providers offer, and who gets the job.
//!
//! Pure and deterministic: no I/O, no clock, no network. The node's p2p layer fills a
//! [`MarketSnapshot`] from signed offers; the job engine parses an [`Ensemble`] spec, turns it
//! into [`Requirements`] and asks [`match_gang`] for a [`Plan`] (DESIGN §5: the placement
//! rules); a provider applies its own [`ProviderLimits`] to
//! the GPUs its inventory lists ([`gpu::Gpu`]) to build its offer and to admit a job.
//!
//! - [`spec`]: the ensemble spec (strict YAML/JSON, `docs/ensemble-spec.md`) and its payment
//!   terms as they go into the escrow datum.
//! - [`service`]: what only a `kind: service` spec has: `serve`, `replicas`, `scale`.
//! - [`sdl`]: import of Akash SDL documents and GPU blocks into a spec.
//! - [`vram`]: the marketed VRAM class rule (a card of class N GiB reports ≥ N × 10⁹ bytes).
//! - [`gpu`], [`declared`]: a GPU as the market sees it, and GPUs declared in the config.
//! - [`snapshot`]: the market snapshot: offers grouped by model (measured or declared
//!   compute), RTT and throughput samples, provider load.
//! - [`matching`]: the gang matcher (flat gangs and latency groups) and its no-fit report,
//!   naming the binding limit and, for a pairwise limit, the closest failing pair.
//! - [`limits`]: a provider's own rules: pooled GPUs, price, concurrent jobs, admission.
//! - `synthetic`, `test_utils` (feature `test-utils`): seeded synthetic markets and hand-built
//!   ones for tests, examples and benches.

pub mod declared;
mod glob;
pub mod gpu;
mod groups;
pub mod limits;
pub mod matching;
mod nofit;
pub mod sdl;
mod sdl_full;
pub mod service;
pub mod snapshot;
pub mod spec;
#[cfg(feature = "test-utils")]
pub mod synthetic;
#[cfg(feature = "test-utils")]
pub mod test_utils;
pub mod vram;

pub use limits::{PoolModel, ProviderLimits, Refusal};
pub use matching::{
    Binding, Constraint, GroupRequirements, NoFit, PairBound, PairFailure, Plan, Requirements,
    match_gang,
};
pub use service::{JobKind, Replicas, Scale, ScaleTarget, Serve};
pub use snapshot::{
    Compute, GpuModel, MarketSnapshot, Offer, OfferedGpus, ProviderLoad, RttSample, SnapshotOptions,
};
pub use spec::{Ensemble, SpecError};
