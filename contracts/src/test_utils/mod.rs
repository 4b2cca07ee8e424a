//! Test helpers (feature `test-utils`), shared by this crate's tests and its bench.
//!
//! - [`world`]: a UTxO set and a slot that apply every transaction through the devnet's
//!   real ledger (`ganglion_testnet::ledger::validate`: fees, balance, min-UTxO, validity,
//!   witnesses, collateral, and phase 2 through uplc).
//! - [`harness_v2`]: the `ganglion_v2` validator deployed in such a world, with an
//!   orchestrator (and its receipt key), providers with payout addresses, and a helper per
//!   action: bonds, locks, assigns, claims, expiries with proportional slashes.
//! - Here: the test chain's parameters ([`env`]), the test NTX ([`ntx`], [`NTX`]), CID-shaped
//!   bytes ([`cid_bytes`]) and [`assert_script_fails`].
#![allow(clippy::missing_panics_doc)]

pub mod harness_v2;
pub mod world;

use crate::env::Env;
use crate::params::AssetClass;
use crate::protocol::ProtocolParams;
use crate::time::SlotConfig;
use crate::{Error, Result};

/// 2026-01-01T00:00:00Z, POSIX ms.
pub const ZERO_TIME: u64 = 1_767_225_600_000;
/// 1 NTX = 10^6 base units.
pub const NTX: u64 = 1_000_000;

/// The test chain: mainnet protocol parameters, one-second slots from [`ZERO_TIME`], testnet
/// addresses.
pub fn env() -> Env {
    Env {
        params: ProtocolParams::mainnet().expect("mainnet parameters"),
        slot_config: SlotConfig {
            zero_time: ZERO_TIME,
            zero_slot: 0,
            slot_length: 1000,
        },
        network: pallas_addresses::Network::Testnet,
    }
}

/// The test NTX: policy `4e…4e`, asset name `NTX`.
pub fn ntx() -> AssetClass {
    AssetClass {
        policy: [0x4e; 28],
        name: b"NTX".to_vec(),
    }
}

/// A CIDv1 raw-leaves-shaped byte string (0x01 0x55 0x12 0x20 ‖ sha-256-sized digest).
pub fn cid_bytes(seed: &[u8]) -> Vec<u8> {
    let mut v = vec![0x01, 0x55, 0x12, 0x20];
    v.extend(pallas_crypto::hash::Hasher::<256>::hash(seed).as_ref());
    v
}

/// Asserts that a result is a phase-2 script failure.
#[track_caller]
pub fn assert_script_fails<T: std::fmt::Debug>(r: Result<T>) {
    match r {
        Err(Error::ScriptFailed { .. }) => {}
        Err(other) => panic!("expected the validator to reject, got another error: {other}"),
        Ok(_) => {
            panic!("expected the validator to reject, but the transaction balanced and passed")
        }
    }
}
