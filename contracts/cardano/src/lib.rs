//! # ganglion-cardano
//!
//! The Cardano primitives both sides of Ganglion use — the contracts' transaction builders,
//! the embedded devnet (`ganglion-testnet`), the indexer and the node's wallet — defined once,
//! so that what a builder pays, what the devnet's ledger enforces and what a wallet reads
//! from a cardano-node are the same numbers in the same shapes. This crate depends on no
//! other Ganglion crate (DESIGN §2): the devnet may use it and stay free of the
//! Ganglion protocol.
//!
//! ```no_run
//! # async fn demo(socket: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
//! use ganglion_cardano::{client::N2cClient, protocol::ProtocolParams, time};
//! let params = ProtocolParams::mainnet()?; // lovelace, bytes, ExUnits
//! let clock = time::SlotConfig { zero_time: 1_666_656_000_000, zero_slot: 0, slot_length: 1000 };
//! let slot = time::posix_ms_to_slot(&clock, time::now_posix_ms())?;
//! let mut node = N2cClient::connect_unix(socket, 2).await?; // preview magic
//! node.submit(&[/* a signed Conway transaction */]).await?;
//! # let _ = (params, slot); Ok(()) }
//! ```
//!
//! Modules:
//! - [`blockfrost`]: Blockfrost's API conventions (error object, paging) for the HTTP APIs.
//! - [`kupo`]: Kupo's `/matches` patterns and match objects.
//! - [`protocol`]: protocol parameters (fees, limits, prices, cost models) and mainnet's values.
//! - [`fees`]: min fee (size, ExUnits, reference-script tiers), min-UTxO, collateral, lovelace.
//! - [`txo`]: [`txo::TxoRef`], an output reference, with its CBOR, PlutusData and key shapes.
//! - [`time`]: the slot clock, slot ↔ POSIX ms, with typed errors.
//! - [`localstate`]: local-state-query answers (system start, Conway pparams) both ways.
//! - [`localtx`]: local-tx-submission rejections on the wire (`[rule, message]` or raw).
//! - [`client`]: the N2C and N2N client facades (chainsync, blockfetch, state query,
//!   submission).
//! - [`devkey`]: the devnet's deterministic key derivation.
//! - [`devnet`]: the devnet's well-known values (magic, k, NTX policy) a node joins it with.

pub mod blockfrost;
pub mod client;
pub mod devkey;
pub mod devnet;
pub mod fees;
pub mod kupo;
pub mod localstate;
pub mod localtx;
pub mod protocol;
pub mod time;
pub mod txo;
