//! Integration tests of the daemon pieces (settings, wallet, CLI), against a
//! real devnet started by each test.

mod deploy_cli;
mod doctor_cli;
mod gpu_check;
mod node_info_cli;
mod rpc;
mod rpc_params;
mod support;
mod wallet;
mod wallet_cli;
