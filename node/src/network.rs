//! Network presets: what the node must know about each chain before it connects — the
//! handshake magic, the address network, the slot clock, the rollback depth and the Ganglion
//! deployment parameters (escrow and bond validator parameters, `DESIGN.md` §3).
//!
//! Sources: magics and Shelley slot clocks are the public values of the Cardano networks
//! (`cardano-node` configuration, the same triples uplc's `SlotConfig` uses); the devnet's come
//! from [`ganglion_cardano::devnet`], which the devnet's genesis is built from. Ganglion is
//! **not deployed** on any public network: preview, preprod and mainnet carry no deployment
//! parameters, so the config file must supply `[deployment]`, and
//! [`NetworkPreset::require_deployment`] refuses to go on without it.

use ganglion_cardano::devnet;
use ganglion_contracts::params::AssetClass;
use ganglion_contracts::time::SlotConfig;
use ganglion_contracts::v2::params::Params;

use crate::config::Network;

/// What the node knows about a chain before connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPreset {
    /// Which chain.
    pub network: Network,
    /// Ouroboros handshake magic (N2N and N2C).
    pub magic: u64,
    /// Network of the addresses (testnet for all but mainnet).
    pub address_network: pallas_addresses::Network,
    /// The slot clock from the Shelley era on. `None` for the devnet, whose system start is
    /// the moment it was created: ask the chain (`GetSystemStart`) or its genesis file.
    pub slot_config: Option<SlotConfig>,
    /// Security parameter k, blocks: the deepest rollback to expect.
    pub security_param: u64,
    /// Confirmations before the node acts on chain state (`DESIGN.md` §4; devnet 1).
    pub confirmation_depth: u64,
    /// Ganglion's validator parameters, when a deployment is known for this network.
    pub deployment: Option<Params>,
}

/// The preset refuses to run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// No deployment parameters are known for a public network and the config sets none.
    #[error(
        "no Ganglion deployment is known on {network}: set [deployment] (ntx, min_bond_per_gpu, \
         unbonding_delay_ms, claim_window_ms) in the config file"
    )]
    UnsetDeployment {
        /// The network.
        network: Network,
    },
}

/// Devnet validator parameters besides the NTX asset: 100 NTX bond per GPU (NTX has 6
/// decimals), a 7-day unbonding delay, a 2-minute claim window after each job's deadline.
const DEVNET_MIN_BOND_PER_GPU: u64 = 100_000_000;
const DEVNET_UNBONDING_DELAY_MS: u64 = 7 * 86_400_000;
const DEVNET_CLAIM_WINDOW_MS: u64 = 120_000;

impl NetworkPreset {
    /// The preset of `network`.
    pub fn of(network: Network) -> Self {
        match network {
            Network::Devnet => Self {
                network,
                magic: devnet::NETWORK_MAGIC,
                address_network: pallas_addresses::Network::Testnet,
                slot_config: None,
                security_param: devnet::SECURITY_PARAM,
                confirmation_depth: 1,
                deployment: Some(Params {
                    ntx: AssetClass {
                        policy: devnet::ntx_policy_id(),
                        name: devnet::NTX_ASSET_NAME.to_vec(),
                    },
                    min_bond_per_gpu: DEVNET_MIN_BOND_PER_GPU,
                    unbonding_delay_ms: DEVNET_UNBONDING_DELAY_MS,
                    claim_window_ms: DEVNET_CLAIM_WINDOW_MS,
                }),
            },
            Network::Preview => Self::public(network, 2, 1_666_656_000_000, 0, 432),
            Network::Preprod => Self::public(network, 1, 1_655_769_600_000, 86_400, 2160),
            Network::Mainnet => {
                Self::public(network, 764_824_073, 1_596_059_091_000, 4_492_800, 2160)
            }
        }
    }

    fn public(network: Network, magic: u64, zero_time: u64, zero_slot: u64, k: u64) -> Self {
        Self {
            network,
            magic,
            address_network: if network == Network::Mainnet {
                pallas_addresses::Network::Mainnet
            } else {
                pallas_addresses::Network::Testnet
            },
            slot_config: Some(SlotConfig {
                zero_time,
                zero_slot,
                slot_length: 1000,
            }),
            security_param: k,
            // Placeholder until a deployment exists: wait out the security parameter.
            confirmation_depth: k,
            deployment: None,
        }
    }

    /// The deployment parameters: the config's `[deployment]` when set, else the preset's.
    ///
    /// # Errors
    /// [`Error::UnsetDeployment`] when neither exists (every public network without
    /// `[deployment]`: no public preset carries one).
    pub fn require_deployment(&self, configured: Option<&Params>) -> Result<Params, Error> {
        configured
            .or(self.deployment.as_ref())
            .cloned()
            .ok_or(Error::UnsetDeployment {
                network: self.network,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devnet_preset_follows_the_testnet_genesis() {
        // The preset reads `ganglion_cardano::devnet`; the devnet's genesis must agree.
        let p = NetworkPreset::of(Network::Devnet);
        let g = ganglion_testnet::genesis::Genesis::devnet().expect("genesis");
        assert_eq!(p.magic, g.network_magic);
        assert_eq!(p.security_param, g.security_param);
        let d = p.require_deployment(None).expect("devnet is deployed");
        assert_eq!(d.ntx.policy, *g.ntx_policy_id().expect("policy"));
        assert_eq!(d.ntx.name, b"NTX".to_vec());
    }

    #[test]
    fn public_networks_have_their_magic_and_refuse_without_deployment() {
        for (n, magic) in [
            (Network::Preview, 2),
            (Network::Preprod, 1),
            (Network::Mainnet, 764_824_073),
        ] {
            let p = NetworkPreset::of(n);
            assert_eq!(p.magic, magic);
            assert_eq!(
                p.require_deployment(None),
                Err(Error::UnsetDeployment { network: n })
            );
            let configured = NetworkPreset::of(Network::Devnet)
                .deployment
                .expect("params");
            assert_eq!(
                p.require_deployment(Some(&configured)),
                Ok(configured.clone())
            );
        }
        let m = NetworkPreset::of(Network::Mainnet);
        assert_eq!(m.address_network, pallas_addresses::Network::Mainnet);
        // Mainnet slot 4 492 800 (first Shelley slot) began 2020-07-29T21:44:51Z.
        assert_eq!(
            m.slot_config.map(|c| (c.zero_time, c.zero_slot)),
            Some((1_596_059_091_000, 4_492_800))
        );
    }
}
