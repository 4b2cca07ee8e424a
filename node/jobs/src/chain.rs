//! The engine's hands on the chain: UTxOs and submission over N2C (the wallet's
//! [`ChainClient`]), the slot clock, and transactions balanced and signed by the node's payment
//! key with the contracts crate.
//!
//! One connection per operation (as the wallet does). Inputs of transactions this node
//! submitted are held back from coin selection until they are spent on chain or
//! [`IN_FLIGHT_MS`] passed, so two transactions built back to back never spend the same UTxO.

use std::collections::HashMap;
use std::sync::Mutex;

use ed25519_dalek::SigningKey;
use ganglion_contracts::blueprint::{key_address, key_hash};
use ganglion_contracts::env::Env;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::tx::{Draft, TxoRef, Utxo, Wallet, balance, sign};
use ganglion_contracts::v2::build::Deployment;

use ganglion_wallet::N2cEndpoint;
use ganglion_wallet::chain::{self, ChainClient};

/// How long the inputs of a submitted transaction stay out of coin selection, ms.
pub const IN_FLIGHT_MS: u64 = 120_000;

/// Chain-side failures of the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// Connection, query or submission (with the ledger's reason).
    #[error(transparent)]
    Client(#[from] chain::Error),
    /// The transaction could not be built, balanced or signed.
    #[error("building the transaction: {0}")]
    Build(#[from] ganglion_contracts::Error),
    /// A UTxO the action needs is not in the ledger (spent, or not yet confirmed).
    #[error("UTxO {0} is not on chain")]
    Missing(String),
}

/// A signed transaction ready to submit.
#[derive(Debug, Clone)]
pub struct SignedTx {
    /// Its id.
    pub hash: [u8; 32],
    /// Conway CBOR.
    pub bytes: Vec<u8>,
    /// Inputs it spends (wallet and script).
    pub spends: Vec<TxoRef>,
}

/// N2C endpoint, build environment, deployment and the payment key.
pub struct ChainAccess {
    endpoint: N2cEndpoint,
    magic: u64,
    env: Env,
    deployment: Deployment,
    payment: SigningKey,
    in_flight: Mutex<HashMap<TxoRef, u64>>,
}

impl std::fmt::Debug for ChainAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainAccess")
            .field("endpoint", &self.endpoint)
            .field("magic", &self.magic)
            .finish_non_exhaustive()
    }
}

impl ChainAccess {
    /// Access over `endpoint` (handshake `magic`) building with `env` against `deployment`,
    /// paying and signing with `payment`.
    pub fn new(
        endpoint: N2cEndpoint,
        magic: u64,
        env: Env,
        deployment: Deployment,
        payment: SigningKey,
    ) -> Self {
        Self {
            endpoint,
            magic,
            env,
            deployment,
            payment,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The network magic.
    pub fn magic(&self) -> u64 {
        self.magic
    }

    /// The build environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The deployment.
    pub fn deployment(&self) -> &Deployment {
        &self.deployment
    }

    /// The payment key hash (orchestrator / provider identity on chain).
    pub fn key_hash(&self) -> KeyHash {
        key_hash(&self.payment.verifying_key().to_bytes())
    }

    /// The payment address bytes.
    pub fn address(&self) -> Vec<u8> {
        key_address(self.env.network, &self.key_hash())
    }

    /// The slot that contains POSIX ms `now_ms` (`zero_slot` for a time before the clock).
    pub fn slot_at(&self, now_ms: u64) -> u64 {
        self.env.slot_config.slot_at_saturating(now_ms)
    }

    /// The POSIX ms at which `slot` starts (`zero_time` for a slot before the clock).
    pub fn slot_start_ms(&self, slot: u64) -> u64 {
        self.env.slot_config.slot_start_saturating(slot)
    }

    async fn connect(&self) -> Result<ChainClient, ChainError> {
        Ok(ChainClient::connect(&self.endpoint, self.magic).await?)
    }

    /// UTxOs at `address` (raw bytes) now.
    ///
    /// # Errors
    /// [`ChainError::Client`].
    pub async fn utxos_at(&self, address: &[u8]) -> Result<Vec<Utxo>, ChainError> {
        let mut c = self.connect().await?;
        let r = c.utxos_at(address).await;
        c.close().await;
        Ok(r?)
    }

    /// The script UTxOs with these references, in the order asked.
    ///
    /// # Errors
    /// [`ChainError::Missing`] for one not on chain, [`ChainError::Client`].
    pub async fn script_utxos(&self, refs: &[TxoRef]) -> Result<Vec<Utxo>, ChainError> {
        let all = self.utxos_at(&self.deployment.address(&self.env)).await?;
        refs.iter()
            .map(|r| {
                all.iter()
                    .find(|u| u.reference == *r)
                    .cloned()
                    .ok_or_else(|| ChainError::Missing(r.to_string()))
            })
            .collect()
    }

    /// The wallet's spendable UTxOs: on chain and not spent by a transaction in flight.
    ///
    /// # Errors
    /// [`ChainError::Client`].
    pub async fn wallet_utxos(&self, now_ms: u64) -> Result<Vec<Utxo>, ChainError> {
        let utxos = self.utxos_at(&self.address()).await?;
        let mut held = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|r, at| {
            now_ms.saturating_sub(*at) < IN_FLIGHT_MS && utxos.iter().any(|u| u.reference == *r)
        });
        Ok(utxos
            .into_iter()
            .filter(|u| !held.contains_key(&u.reference))
            .collect())
    }

    /// Balances `draft` from the wallet (change back to it), signs with the payment key.
    ///
    /// # Errors
    /// [`ChainError::Build`] (funds, evaluation), [`ChainError::Client`].
    pub async fn build(&self, draft: Draft, now_ms: u64) -> Result<SignedTx, ChainError> {
        let utxos = self.wallet_utxos(now_ms).await?;
        let wallet = Wallet {
            utxos: &utxos,
            key_hash: self.key_hash(),
            change_address: self.address(),
        };
        let b = balance(draft, &wallet, &self.env)?;
        let bytes = sign(&b, &[&self.payment])?;
        Ok(SignedTx {
            hash: b.hash,
            spends: b.spent().iter().map(|u| u.reference).collect(),
            bytes,
        })
    }

    /// Submits signed bytes; the wallet inputs they spend are held back from coin selection
    /// — released again when the ledger rejects the transaction (its inputs stay unspent;
    /// after a transport failure it may still land, so they stay held).
    ///
    /// # Errors
    /// [`ChainError::Client`] with the ledger's reason.
    pub async fn submit(&self, tx: &SignedTx, now_ms: u64) -> Result<(), ChainError> {
        {
            let mut held = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            for r in &tx.spends {
                held.insert(*r, now_ms);
            }
        }
        let mut c = self.connect().await?;
        let r = c.submit(&tx.bytes).await;
        c.close().await;
        if let Err(chain::Error::Submit(ganglion_wallet::rejection::SubmitFailure::Rejected(_))) =
            &r
        {
            let mut held = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            for s in &tx.spends {
                held.remove(s);
            }
        }
        Ok(r?)
    }

    /// Re-submits bytes from the intent log (after a restart or a lost submission). The
    /// ledger's refusal (already on chain, inputs spent) is returned, not hidden.
    ///
    /// # Errors
    /// [`ChainError::Client`].
    pub async fn resubmit(&self, bytes: &[u8]) -> Result<(), ChainError> {
        let mut c = self.connect().await?;
        let r = c.submit(bytes).await;
        c.close().await;
        Ok(r?)
    }
}
