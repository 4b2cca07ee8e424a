//! Integration tests of `ganglion-node`, one binary (STYLE §3). The root-only suites that
//! change the host's network (`overlay`, `p2p_nat`, `demo_natnet`, `placement`) have binaries
//! of their own; each says why at its top.

mod crate_graph;
mod daemon;
mod daemon_run;
mod demo;
mod fake_nvml;
mod gateway_cli;
mod gpu_bench;
mod gpus_cli;
mod import_sdl_cli;
mod job_validate_cli;
mod lifecycle;
mod mig;
mod rpc_client;
