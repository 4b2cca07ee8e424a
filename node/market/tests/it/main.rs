//! Integration tests of `ganglion-market`, one binary (STYLE §3): spec parsing on the example
//! ensembles, matcher rules and properties, network-aware placement (measured compute, pair
//! throughputs, latency groups), no-fit reports and the VRAM class rule.

mod ensembles;
mod matching_props;
mod matching_rules;
mod network_placement;
mod nofit_limits;
mod vram_classes;
