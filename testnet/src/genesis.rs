//! Devnet genesis (JSON): network magic, system start, slot length, security parameter k,
//! protocol parameters, and funded addresses holding ADA and a test NTX minted under a
//! native-script policy.
//!
//! Genesis outputs are Babbage-style (map) outputs; output `i` of fund `i` has the
//! pseudo transaction id blake2b-256("ganglion-genesis" ‖ address bytes) and index 0,
//! like Shelley's genesis UTxOs (which hash the address).

use std::collections::HashSet;
use std::path::Path;

use pallas_addresses::{Address, Network};
use pallas_codec::minicbor;
use pallas_crypto::hash::{Hash, Hasher};
use pallas_primitives::conway::NativeScript;
use serde::{Deserialize, Serialize};

use crate::keys::DevKey;
use ganglion_cardano::devnet;
use ganglion_cardano::protocol::{ParamsError, ProtocolParams};
use ganglion_cardano::time::{SlotConfig, now_posix_ms};
use ganglion_cardano::txo::TxoRef;

/// A funded genesis address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fund {
    /// Address, bech32 (`addr_test1…`) or hex of the raw bytes.
    pub address: String,
    /// Lovelace.
    pub lovelace: u64,
    /// Test NTX (base units); 0 for none.
    #[serde(default)]
    pub ntx: u64,
}

/// The test NTX asset: minted at genesis under `ScriptPubkey(minter_key_hash)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtxConfig {
    /// Key hash (hex, 28 B) allowed to mint more NTX with the policy script.
    pub minter_key_hash: String,
    /// Asset name (hex).
    pub asset_name: String,
}

/// The devnet genesis document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Genesis {
    /// Network magic used in N2N/N2C handshakes.
    pub network_magic: u64,
    /// Network id of addresses (0 = testnet).
    pub network_id: u8,
    /// POSIX ms of slot 0.
    pub system_start_ms: u64,
    /// Slot length (ms); default 1000.
    pub slot_length_ms: u32,
    /// Security parameter k (blocks): the deepest rollback allowed, undo records kept.
    pub security_param: u64,
    /// Protocol parameters (default: real mainnet values).
    pub protocol_params: ProtocolParams,
    /// The test NTX asset.
    pub ntx: NtxConfig,
    /// Funded addresses.
    pub funds: Vec<Fund>,
}

/// Errors building or reading a genesis.
#[derive(Debug, thiserror::Error)]
pub enum GenesisError {
    /// Reading the genesis file failed.
    #[error("cannot read genesis {path}")]
    Io {
        /// The file.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The JSON does not match the genesis schema.
    #[error("invalid genesis JSON")]
    Json(#[from] serde_json::Error),
    /// The embedded protocol parameters could not be read.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// A fund's address does not parse.
    #[error("fund {index}: invalid address {address}")]
    Address {
        /// Index in `funds`.
        index: usize,
        /// The text given.
        address: String,
    },
    /// A fund's address is for another network.
    #[error("fund {index}: address is not on network id {expected}")]
    WrongNetwork {
        /// Index in `funds`.
        index: usize,
        /// The genesis network id.
        expected: u8,
    },
    /// Two funds use the same address (their genesis UTxO ids would collide).
    #[error("fund {index}: duplicate address")]
    DuplicateAddress {
        /// Index in `funds`.
        index: usize,
    },
    /// The NTX minter key hash or asset name is not valid hex of the right size.
    #[error("invalid NTX config: {field}")]
    Ntx {
        /// The field.
        field: &'static str,
    },
    /// A slot length of zero.
    #[error("slot_length_ms must be positive")]
    ZeroSlotLength,
    /// The NTX a fund would mint at genesis is above the largest mint, 2^63 − 1: a mint
    /// quantity is a signed 64-bit integer (`mint = multiasset<nonZeroInt64>` in the Conway
    /// CDDL), so no transaction could mint (or burn) it.
    #[error(
        "fund {index}: genesis NTX {ntx} is above the largest mint 9223372036854775807 \
         (2^63 - 1; a mint is a signed 64-bit quantity)"
    )]
    FundNtxAboveMintLimit {
        /// Index in `funds`.
        index: usize,
        /// The NTX base units asked for.
        ntx: u64,
    },
    /// The NTX of all funds together is above the largest mint, 2^63 − 1 (the genesis mints
    /// the whole supply under one policy).
    #[error(
        "genesis NTX of all funds, {total}, is above the largest mint 9223372036854775807 \
         (2^63 - 1; a mint is a signed 64-bit quantity)"
    )]
    TotalNtxAboveMintLimit {
        /// The sum of the funds' NTX base units.
        total: u128,
    },
}

/// The largest NTX quantity one mint may carry: `i64::MAX` (Conway CDDL `nonZeroInt64`).
pub const MAX_MINT_NTX: u64 = i64::MAX as u64;

/// Number of deterministic devnet keys funded by [`Genesis::devnet`] (seeds 0..N).
pub const DEVNET_FUNDED_KEYS: u32 = ganglion_cardano::devnet::FUNDED_KEYS;

impl Genesis {
    /// A ready devnet: magic 42, testnet addresses, system start = now, 1 s slots, k = 10,
    /// mainnet parameters; [`DevKey`] seeds `0..DEVNET_FUNDED_KEYS` each funded with
    /// 1 000 000 ADA and 1 000 000 000 NTX; key seed 0 is the NTX minter.
    ///
    /// # Errors
    /// [`GenesisError::Params`] (only for a broken checkout).
    pub fn devnet() -> Result<Self, GenesisError> {
        let funds = (0..DEVNET_FUNDED_KEYS)
            .map(|s| {
                let a = DevKey::from_seed(s).address(Network::Testnet);
                Fund {
                    address: a.to_bech32().unwrap_or_else(|_| a.to_hex()),
                    lovelace: 1_000_000_000_000,
                    ntx: 1_000_000_000,
                }
            })
            .collect();
        Ok(Self {
            network_magic: devnet::NETWORK_MAGIC,
            network_id: 0,
            system_start_ms: now_posix_ms(),
            slot_length_ms: devnet::SLOT_LENGTH_MS,
            security_param: devnet::SECURITY_PARAM,
            protocol_params: ProtocolParams::mainnet()?,
            ntx: NtxConfig {
                minter_key_hash: DevKey::from_seed(devnet::NTX_MINTER_SEED)
                    .key_hash()
                    .to_string(),
                asset_name: hex::encode(devnet::NTX_ASSET_NAME),
            },
            funds,
        })
    }

    /// Parse a genesis JSON document.
    ///
    /// # Errors
    /// [`GenesisError::Json`].
    pub fn from_json(text: &str) -> Result<Self, GenesisError> {
        Ok(serde_json::from_str(text)?)
    }

    /// Read a genesis JSON file.
    ///
    /// # Errors
    /// [`GenesisError::Io`], [`GenesisError::Json`].
    pub fn load(path: &Path) -> Result<Self, GenesisError> {
        let text = std::fs::read_to_string(path).map_err(|source| GenesisError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Pretty JSON of this genesis.
    ///
    /// # Errors
    /// [`GenesisError::Json`] (not expected for a well-formed value).
    pub fn to_json(&self) -> Result<String, GenesisError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// The shared slot config: zero time = system start, zero slot 0.
    pub fn slot_config(&self) -> SlotConfig {
        SlotConfig {
            zero_time: self.system_start_ms,
            zero_slot: 0,
            slot_length: self.slot_length_ms,
        }
    }

    /// Checks that the genesis NTX could be minted: each fund's and the total at most
    /// [`MAX_MINT_NTX`] (a mint is signed 64-bit; outputs hold up to 2^64 − 1, mints do not).
    ///
    /// # Errors
    /// [`GenesisError::FundNtxAboveMintLimit`] naming the fund,
    /// [`GenesisError::TotalNtxAboveMintLimit`] for the sum.
    pub fn check_mint_limit(&self) -> Result<(), GenesisError> {
        let mut total: u128 = 0;
        for (index, f) in self.funds.iter().enumerate() {
            if f.ntx > MAX_MINT_NTX {
                return Err(GenesisError::FundNtxAboveMintLimit { index, ntx: f.ntx });
            }
            total += u128::from(f.ntx);
        }
        if total > u128::from(MAX_MINT_NTX) {
            return Err(GenesisError::TotalNtxAboveMintLimit { total });
        }
        Ok(())
    }

    /// The NTX minting policy: `ScriptPubkey(minter_key_hash)`.
    ///
    /// # Errors
    /// [`GenesisError::Ntx`] for a bad key hash.
    pub fn ntx_policy_script(&self) -> Result<NativeScript, GenesisError> {
        let bytes = hex::decode(&self.ntx.minter_key_hash)
            .ok()
            .filter(|b| b.len() == 28)
            .ok_or(GenesisError::Ntx {
                field: "minter_key_hash",
            })?;
        let mut h = [0u8; 28];
        h.copy_from_slice(&bytes);
        Ok(NativeScript::ScriptPubkey(Hash::new(h)))
    }

    /// The NTX policy id: blake2b-224(0x00 ‖ CBOR of the policy script).
    ///
    /// # Errors
    /// [`GenesisError::Ntx`].
    pub fn ntx_policy_id(&self) -> Result<Hash<28>, GenesisError> {
        let script = self.ntx_policy_script()?;
        let cbor = minicbor::to_vec(&script).map_err(|_| GenesisError::Ntx {
            field: "minter_key_hash",
        })?;
        Ok(Hasher::<224>::hash_tagged(&cbor, 0))
    }

    /// The NTX asset name bytes.
    ///
    /// # Errors
    /// [`GenesisError::Ntx`].
    pub fn ntx_asset_name(&self) -> Result<Vec<u8>, GenesisError> {
        hex::decode(&self.ntx.asset_name)
            .ok()
            .filter(|b| b.len() <= 32)
            .ok_or(GenesisError::Ntx {
                field: "asset_name",
            })
    }

    /// The genesis UTxO set: (reference, raw output CBOR) per fund.
    ///
    /// # Errors
    /// [`GenesisError`] for invalid addresses, networks, duplicates or NTX config, and
    /// [`GenesisError::FundNtxAboveMintLimit`] / [`GenesisError::TotalNtxAboveMintLimit`]
    /// before any output is built.
    pub fn initial_utxos(&self) -> Result<Vec<(TxoRef, Vec<u8>)>, GenesisError> {
        if self.slot_length_ms == 0 {
            return Err(GenesisError::ZeroSlotLength);
        }
        self.check_mint_limit()?;
        let policy = self.ntx_policy_id()?;
        let name = self.ntx_asset_name()?;
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(self.funds.len());
        for (index, f) in self.funds.iter().enumerate() {
            let addr = Address::from_bech32(&f.address)
                .or_else(|_| Address::from_hex(&f.address))
                .map_err(|_| GenesisError::Address {
                    index,
                    address: f.address.clone(),
                })?;
            if addr.network().map(|n| n.value()) != Some(self.network_id) {
                return Err(GenesisError::WrongNetwork {
                    index,
                    expected: self.network_id,
                });
            }
            let bytes = addr.to_vec();
            if !seen.insert(bytes.clone()) {
                return Err(GenesisError::DuplicateAddress { index });
            }
            let mut id_material = b"ganglion-genesis".to_vec();
            id_material.extend_from_slice(&bytes);
            let r = TxoRef {
                tx_hash: *Hasher::<256>::hash(&id_material),
                index: 0,
            };
            out.push((r, encode_output(&bytes, f.lovelace, &policy, &name, f.ntx)));
        }
        Ok(out)
    }
}

/// A Babbage map output `{0: address, 1: value}`; the value is `[coin, {policy: {name: q}}]`
/// when `ntx > 0`, plain coin otherwise.
pub fn encode_output(
    address: &[u8],
    lovelace: u64,
    policy: &Hash<28>,
    name: &[u8],
    ntx: u64,
) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = minicbor::Encoder::new(&mut buf);
    // Writing into a Vec cannot fail.
    let _ = (|| -> Result<(), minicbor::encode::Error<std::convert::Infallible>> {
        e.map(2)?.u8(0)?.bytes(address)?.u8(1)?;
        if ntx > 0 {
            e.array(2)?.u64(lovelace)?;
            e.map(1)?.bytes(policy.as_ref())?;
            e.map(1)?.bytes(name)?.u64(ntx)?;
        } else {
            e.u64(lovelace)?;
        }
        Ok(())
    })();
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::phase1::output_facts;

    #[test]
    fn the_devnet_genesis_has_the_well_known_values_a_node_joins_with() {
        // The node's devnet preset reads `ganglion_cardano::devnet`, not this crate.
        let g = Genesis::devnet().expect("genesis");
        assert_eq!(g.network_magic, devnet::NETWORK_MAGIC);
        assert_eq!(g.security_param, devnet::SECURITY_PARAM);
        assert_eq!(*g.ntx_policy_id().expect("policy"), devnet::ntx_policy_id());
        assert_eq!(g.ntx_asset_name().expect("name"), devnet::NTX_ASSET_NAME);
        let script = minicbor::to_vec(g.ntx_policy_script().expect("script")).expect("cbor");
        assert_eq!(
            script,
            devnet::script_pubkey_cbor(&devnet::key_hash(devnet::NTX_MINTER_SEED))
        );
    }

    #[test]
    fn devnet_genesis_round_trips_through_json_and_funds_keys() {
        let g = Genesis::devnet().expect("genesis");
        let back = Genesis::from_json(&g.to_json().expect("json")).expect("parse");
        assert_eq!(g, back);
        let utxos = g.initial_utxos().expect("utxos");
        assert_eq!(utxos.len(), DEVNET_FUNDED_KEYS as usize);
        let f = output_facts(&utxos[0].1).expect("decodes as a ledger output");
        assert_eq!(f.value.coin, 1_000_000_000_000);
        let policy = g.ntx_policy_id().expect("policy");
        assert_eq!(
            f.value.assets.get(&(policy.to_vec(), b"NTX".to_vec())),
            Some(&1_000_000_000)
        );
        assert_eq!(
            f.address,
            DevKey::from_seed(0).address(Network::Testnet).to_vec()
        );
    }

    #[test]
    fn genesis_ntx_above_the_signed_64_bit_mint_limit_is_refused() {
        // `shared/fixtures/field/README.md`, "Amounts over JSON-RPC": mints are signed 64-bit.
        let mut g = Genesis::devnet().expect("genesis");
        g.funds[1].ntx = 9_223_372_036_854_775_807;
        g.funds[0].ntx = 0;
        g.funds[2].ntx = 0;
        g.funds[3].ntx = 0;
        let utxos = g.initial_utxos().expect("2^63 - 1 is mintable");
        let f = output_facts(&utxos[1].1).expect("output");
        let policy = g.ntx_policy_id().expect("policy");
        assert_eq!(
            f.value.assets.get(&(policy.to_vec(), b"NTX".to_vec())),
            Some(&9_223_372_036_854_775_807)
        );

        g.funds[1].ntx = 9_223_372_036_854_775_808;
        let e = g.initial_utxos().expect_err("2^63 is not mintable");
        assert!(
            matches!(
                e,
                GenesisError::FundNtxAboveMintLimit {
                    index: 1,
                    ntx: 9_223_372_036_854_775_808
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("9223372036854775807"), "{e}");

        // Each fund within the limit, the sum above it.
        g.funds[1].ntx = MAX_MINT_NTX;
        g.funds[2].ntx = 1;
        assert!(matches!(
            g.initial_utxos(),
            Err(GenesisError::TotalNtxAboveMintLimit {
                total: 9_223_372_036_854_775_808
            })
        ));
        // The JSON form is checked by the same rule once its outputs are built.
        let json = g.to_json().expect("json");
        let back = Genesis::from_json(&json).expect("parses");
        assert!(back.initial_utxos().is_err());
    }

    #[test]
    fn bad_funds_are_rejected_with_the_index() {
        let mut g = Genesis::devnet().expect("genesis");
        g.funds[1].address = "nonsense".into();
        assert!(matches!(
            g.initial_utxos(),
            Err(GenesisError::Address { index: 1, .. })
        ));
        let mut g = Genesis::devnet().expect("genesis");
        g.funds[2] = g.funds[0].clone();
        assert!(matches!(
            g.initial_utxos(),
            Err(GenesisError::DuplicateAddress { index: 2 })
        ));
        let mut g = Genesis::devnet().expect("genesis");
        g.network_id = 1;
        assert!(matches!(
            g.initial_utxos(),
            Err(GenesisError::WrongNetwork { index: 0, .. })
        ));
    }
}
