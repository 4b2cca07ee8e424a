//! The chain a transaction is built for: protocol parameters, slot config and network.

use crate::protocol::ProtocolParams;
use crate::time::SlotConfig;

/// Where transactions go: fees and limits, the slot ↔ time mapping scripts see, and the
/// address network.
#[derive(Debug, Clone)]
pub struct Env {
    /// Protocol parameters (fees, limits, cost model).
    pub params: ProtocolParams,
    /// Slot ↔ POSIX time.
    pub slot_config: SlotConfig,
    /// Network of the addresses built (`Testnet` for the devnet, preview and preprod).
    pub network: pallas_addresses::Network,
}
