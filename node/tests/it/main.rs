//! Integration tests of `ganglion-node`, one binary (STYLE §3).

mod ensembles;
mod gpu_bench;
mod gpus_cli;
mod import_sdl_cli;
mod matching_props;
mod matching_rules;
mod mig;
mod nofit_limits;
mod vram_classes;
