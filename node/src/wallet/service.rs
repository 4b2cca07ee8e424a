//! The wallet as the CLI and the RPC use it: settings → data dir, preset, key; each
//! operation opens one N2C connection, does its work and closes it.

use ganglion_contracts::env::Env;
use ganglion_contracts::time::SlotConfig;
use ganglion_contracts::tx::Value;
use pallas_addresses::Address;

use crate::datadir::{self, DataDir};
use crate::network::{self, NetworkPreset};
use crate::settings::{self, Settings};
use crate::wallet::chain::{self, ChainClient};
use crate::wallet::key::{self, PaymentKey};
use crate::wallet::payment::{self, Balance, Payment};

/// Wallet failures, each with its cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Settings (no data dir, no chain connection configured).
    #[error(transparent)]
    Settings(#[from] settings::Error),
    /// The data dir.
    #[error(transparent)]
    DataDir(#[from] datadir::Error),
    /// The network preset.
    #[error(transparent)]
    Network(#[from] network::Error),
    /// The key file.
    #[error(transparent)]
    Key(#[from] key::Error),
    /// No key yet.
    #[error("no wallet key at {0}: run `ganglion wallet new`")]
    NoKey(std::path::PathBuf),
    /// The chain connection or a query.
    #[error(transparent)]
    Chain(#[from] chain::Error),
    /// The payment could not be built (funds, min-UTxO, ...).
    #[error("cannot build the payment: {0}")]
    Build(#[from] ganglion_contracts::Error),
    /// A destination address that does not parse or is for another network.
    #[error("bad destination address {address:?}: {reason}")]
    Address {
        /// As given.
        address: String,
        /// Why.
        reason: String,
    },
    /// A devnet key (public seed) was asked for on another network.
    #[error("devnet keys are public; refused on {0}")]
    DevnetOnly(crate::config::Network),
    /// NTX requested on a network without a known deployment.
    #[error("NTX is unknown here: {0}")]
    NoNtx(#[source] network::Error),
}

/// The node's wallet.
#[derive(Debug, Clone)]
pub struct Wallet {
    settings: Settings,
    preset: NetworkPreset,
    key: PaymentKey,
}

impl Wallet {
    /// Creates the key in the data dir (or imports a devnet key with `devnet_seed`, devnet
    /// only) and returns the wallet.
    ///
    /// # Errors
    /// [`Error::Key`] (`Exists` when a key is already there), [`Error::DataDir`],
    /// [`Error::Settings`], [`Error::Network`], [`Error::DevnetOnly`].
    pub fn create(settings: Settings, devnet_seed: Option<u32>) -> Result<Self, Error> {
        let preset = NetworkPreset::of(settings.network());
        let dir = DataDir::open(settings.data_dir()?)?;
        let key = match devnet_seed {
            Some(s) if preset.network == crate::config::Network::Devnet => PaymentKey::devnet(s),
            Some(_) => return Err(Error::DevnetOnly(preset.network)),
            None => PaymentKey::generate(),
        };
        key.create(&dir.payment_key())?;
        Ok(Self {
            settings,
            preset,
            key,
        })
    }

    /// Opens the wallet whose key is in the data dir.
    ///
    /// # Errors
    /// [`Error::NoKey`], [`Error::Key`], [`Error::DataDir`], [`Error::Settings`],
    /// [`Error::Network`].
    pub fn open(settings: Settings) -> Result<Self, Error> {
        let preset = NetworkPreset::of(settings.network());
        let dir = DataDir::open(settings.data_dir()?)?;
        let path = dir.payment_key();
        if !path.exists() {
            return Err(Error::NoKey(path));
        }
        let key = PaymentKey::load(&path)?;
        Ok(Self {
            settings,
            preset,
            key,
        })
    }

    /// The network preset.
    pub fn preset(&self) -> &NetworkPreset {
        &self.preset
    }

    /// The payment key.
    pub fn key(&self) -> &PaymentKey {
        &self.key
    }

    /// The wallet's address, bech32 (`addr_test1…` / `addr1…`).
    pub fn address(&self) -> String {
        let a = self.key.address(self.preset.address_network);
        a.to_bech32().unwrap_or_else(|_| a.to_hex())
    }

    async fn connect(&self) -> Result<ChainClient, Error> {
        Ok(ChainClient::connect(&self.settings.n2c()?, self.preset.magic).await?)
    }

    /// The wallet's balance from the node's UTxO set.
    ///
    /// # Errors
    /// [`Error::Settings`] (no N2C endpoint), [`Error::Chain`].
    pub async fn balance(&self) -> Result<Balance, Error> {
        let mut c = self.connect().await?;
        let r = c
            .utxos_at(&self.key.address(self.preset.address_network).to_vec())
            .await;
        c.close().await;
        Ok(Balance::of(&r?))
    }

    /// Pays `lovelace` and `ntx` (NTX base units, 0 for none) to `to` (bech32 or hex) and
    /// submits; returns the transaction id and fee.
    ///
    /// # Errors
    /// [`Error::Address`], [`Error::NoNtx`], [`Error::Build`], [`Error::Chain`] (including
    /// the node's rejection), [`Error::Settings`].
    pub async fn send(&self, to: &str, lovelace: u64, ntx: u64) -> Result<Payment, Error> {
        let to_bytes = self.parse_address(to)?;
        let mut value = Value::lovelace(lovelace);
        if ntx > 0 {
            let d = self
                .preset
                .require_deployment(self.settings.deployment.as_ref())
                .map_err(Error::NoNtx)?;
            value = value.with_class(&d.ntx, ntx);
        }
        let mut c = self.connect().await?;
        let r = self.send_on(&mut c, to_bytes, value).await;
        c.close().await;
        r
    }

    async fn send_on(
        &self,
        c: &mut ChainClient,
        to: Vec<u8>,
        value: Value,
    ) -> Result<Payment, Error> {
        let env = self.env(c).await?;
        let utxos = c.utxos_at(&self.key.address(env.network).to_vec()).await?;
        let p = payment::pay(&self.key, &utxos, to, value, &env)?;
        c.submit(&p.signed).await?;
        Ok(p)
    }

    /// The build environment: the ledger's current protocol parameters (`GetCurrentPParams`)
    /// and the preset's slot clock (the chain's system start where the preset has none).
    async fn env(&self, c: &mut ChainClient) -> Result<Env, Error> {
        let slot_config = match self.preset.slot_config {
            Some(s) => s,
            None => SlotConfig {
                zero_time: c.system_start_ms().await?,
                zero_slot: 0,
                slot_length: 1000,
            },
        };
        Ok(Env {
            params: c.protocol_params().await?,
            slot_config,
            network: self.preset.address_network,
        })
    }

    fn parse_address(&self, to: &str) -> Result<Vec<u8>, Error> {
        let bad = |reason: String| Error::Address {
            address: to.to_string(),
            reason,
        };
        let a = Address::from_bech32(to)
            .or_else(|_| Address::from_hex(to))
            .map_err(|e| bad(e.to_string()))?;
        match &a {
            Address::Shelley(s) if s.network() == self.preset.address_network => Ok(a.to_vec()),
            Address::Shelley(s) => Err(bad(format!(
                "address is for {:?}, the wallet is on {}",
                s.network(),
                self.preset.network
            ))),
            _ => Err(bad("only Shelley addresses are supported".into())),
        }
    }
}
