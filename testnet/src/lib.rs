//! `ganglion-testnet`: an embedded Cardano devnet that speaks the real Ouroboros
//! mini-protocols, validates transactions with the Conway rules and runs Plutus with `uplc`.
//!
//! Nodes and the indexer follow it exactly as they would follow a cardano-node: N2N
//! (chainsync headers + blockfetch + keepalive) over TCP, N2C (chainsync blocks,
//! local-tx-submission, a minimal local-state-query) over a Unix socket or TCP.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ganglion_testnet::{devnet, genesis::Genesis};
//! let handle = devnet::start(devnet::DevnetConfig::new(Genesis::devnet()?, "/tmp/devnet")).await?;
//! println!("follow me at {} (magic {})", handle.n2n_addr(), handle.magic());
//! handle.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The Cardano primitives it shares with Ganglion's other crates — protocol parameters,
//! `TxoRef`, the slot clock, the N2C wire shapes and the N2C client facade its tests connect
//! with — are `ganglion_cardano`'s, a leaf crate: the devnet depends on no Ganglion-protocol
//! crate.
//!
//! Modules, in data-flow order:
//! - [`genesis`]: genesis JSON → magic, system start, funded UTxOs, test NTX, protocol
//!   parameters (default: mainnet's, `ganglion_cardano::protocol`).
//! - [`keys`]: deterministic devnet ed25519 keys (genesis funding, tests, demos).
//! - [`ledger`]: UTxO set, phase-1 rules, phase-2 (uplc), [`ledger::Rejection`].
//! - [`mempool`]: pending validated transactions in arrival order.
//! - [`producer`]: Conway block assembly from raw transaction bytes.
//! - [`store`]: sled persistence (blocks, UTxO set, undo records, tip).
//! - [`chain`]: store + ledger + mempool; forge, rollback, tip and events.
//! - [`serve`]: N2N and N2C servers.
//! - [`control`]: operator control socket (`rollback <n>`, `tip`).
//! - [`devnet`]: `start(config)` → [`devnet::DevnetHandle`].
//! - [`txbuild`]: a minimal transaction builder (tests, CLI, bench).
//! - [`postgres`]: a throwaway PostgreSQL server (the indexer's PostgreSQL store in tests,
//!   benchmarks and demos).

pub mod chain;
pub mod control;
pub mod devnet;
pub mod genesis;
pub mod keys;
pub mod ledger;
pub mod mempool;
pub mod postgres;
pub mod producer;
pub mod serve;
pub mod store;
pub mod txbuild;
