//! Integration tests of `ganglion-node`, one binary (STYLE §3).

mod crate_graph;
mod gpu_bench;
mod gpus_cli;
mod import_sdl_cli;
mod mig;
