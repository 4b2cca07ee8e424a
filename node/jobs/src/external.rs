//! Locks paid by a wallet outside the node (CIP-30): [`WalletLocks`].
//!
//! 1. [`WalletLocks::build_lock`] pins the spec and builds the lock **funded by the wallet**
//!    (its UTxOs pay the budget and the fee, its change address gets the change) but naming
//!    **this node's payment key as the orchestrator** in the escrow datum. The wallet signs the
//!    returned body (CIP-30 `signTx`).
//! 2. [`WalletLocks::submit_signed`] joins the witness set ([`super::witness::assemble`]) and,
//!    when the transaction is a lock naming this node with a spec pinned here, *adopts* the job:
//!    the orchestrator record and the lock intent are written first, as for
//!    [`super::Engine::submit`], then the bytes go to the ledger and the engine drives the job
//!    (match, assign, receipts, cancel, expire) with its own key.
//!
//! Why the node's key: the escrow validator makes the orchestrator sign assign and cancel
//! (DESIGN §3), which a node cannot ask of a browser wallet at every step. The consequence is
//! that refunds (cancel, the unspent rest at the last claim or the expire) go to the node's
//! wallet, not to the paying one. Any other signed transaction is submitted as it is and
//! reported, not adopted (its job, if any, is visible through the indexer).

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::tx::{Output, TxoRef, Utxo, Wallet, balance};
use ganglion_contracts::v2::build::{self, LockRequest};
use ganglion_contracts::v2::datum::{EscrowDatum, GanglionDatum, JobId, JobState};
use ganglion_indexer::store::Kv;
use pallas_addresses::{Address, ShelleyPaymentPart};
use pallas_codec::minicbor::Decoder;
use pallas_traverse::{Era, MultiEraOutput, MultiEraTx};

use super::chain::{ChainError, SignedTx};
use super::control::EngineHandle;
use super::engine::{Ctx, EngineError, OrchestratorRole};
use super::orchestrator::{self, OrchestratorDetail};
use super::state::{OrchestratorEvent, OrchestratorState};
use super::store::{JobRecord, TxKind};
use super::witness::{self, WitnessError};
use ganglion_dispatch::executor::Executor;
use ganglion_market::spec::Ensemble;

/// Why a wallet-paid lock could not be built or a signed transaction not submitted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExternalError {
    /// The change address is not a Shelley key address on the node's network.
    #[error("address {address:?}: {reason}")]
    Address {
        /// As given.
        address: String,
        /// Why it is refused.
        reason: String,
    },
    /// A given UTxO (CIP-30 `TransactionUnspentOutput` CBOR) is malformed or not the wallet's.
    #[error("UTxO {index}: {reason}")]
    Utxo {
        /// Position in the list.
        index: usize,
        /// Why it is refused.
        reason: String,
    },
    /// The transaction or the witness set.
    #[error(transparent)]
    Witness(#[from] WitnessError),
    /// The engine (spec, chain, store).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<ChainError> for ExternalError {
    fn from(e: ChainError) -> Self {
        Self::Engine(e.into())
    }
}

impl From<super::store::StoreError> for ExternalError {
    fn from(e: super::store::StoreError) -> Self {
        Self::Engine(e.into())
    }
}

/// An unsigned lock for a wallet to sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedLock {
    /// The job id (thread token name).
    pub job: JobId,
    /// The transaction id (blake2b-256 of the body): what the wallet's key signs.
    pub tx_id: [u8; 32],
    /// The unsigned transaction CBOR (Conway; no vkey witnesses).
    pub unsigned: Vec<u8>,
    /// Fee, lovelace (computed for the wallet's one vkey witness).
    pub fee: u64,
    /// First slot at which the lock is no longer valid: sign and submit before it.
    pub valid_until_slot: u64,
    /// The orchestrator named in the escrow datum: this node's payment key hash.
    pub orchestrator: KeyHash,
}

/// What [`WalletLocks::submit_signed`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmittedTx {
    /// The transaction id.
    pub tx_id: [u8; 32],
    /// The job the transaction locks, if it is a lock.
    pub job: Option<JobId>,
    /// Whether this node now orchestrates the job (see the module docs).
    pub adopted: bool,
}

/// Locks built for, and signed by, a wallet outside the node. Implemented by the engine's
/// handle ([`EngineHandle`]).
#[async_trait::async_trait]
pub trait WalletLocks: Send + Sync {
    /// Pins `spec` and builds its lock funded by the wallet at `change_address` (bech32 or
    /// hex; a Shelley key address on the node's network), spending `utxos` (CIP-30
    /// `getUtxos()` items: hex CBOR `[input, output]`) or, when `None`, the UTxOs at
    /// `change_address` on chain.
    ///
    /// # Errors
    /// [`ExternalError::Address`], [`ExternalError::Utxo`], [`ExternalError::Engine`] (spec,
    /// funds, chain).
    async fn build_lock(
        &self,
        spec: &Ensemble,
        change_address: &str,
        utxos: Option<&[String]>,
    ) -> Result<UnsignedLock, ExternalError>;

    /// Joins `witness_set` (CIP-30 `signTx`'s answer) to `tx` and submits it, adopting the
    /// job when the transaction is a lock built by [`WalletLocks::build_lock`] on this node.
    ///
    /// # Errors
    /// [`ExternalError::Witness`] (malformed CBOR, a signature that does not verify),
    /// [`ExternalError::Engine`] with the ledger's reason.
    async fn submit_signed(
        &self,
        tx: &[u8],
        witness_set: &[u8],
    ) -> Result<SubmittedTx, ExternalError>;
}

/// The address bytes and payment key hash of a Shelley key address on `network`.
fn key_address(
    s: &str,
    network: pallas_addresses::Network,
) -> Result<(Vec<u8>, KeyHash), ExternalError> {
    let bad = |reason: String| ExternalError::Address {
        address: s.to_string(),
        reason,
    };
    let a = Address::from_bech32(s)
        .or_else(|_| Address::from_hex(s))
        .map_err(|e| bad(e.to_string()))?;
    let Address::Shelley(sh) = &a else {
        return Err(bad("only Shelley addresses are supported".into()));
    };
    if sh.network() != network {
        return Err(bad(format!(
            "address is for {:?}, the node is on {network:?}",
            sh.network()
        )));
    }
    match sh.payment() {
        ShelleyPaymentPart::Key(h) => Ok((a.to_vec(), **h)),
        ShelleyPaymentPart::Script(_) => Err(bad("a script address cannot sign".into())),
    }
}

/// The payment key hash of a Shelley address's bytes, if it has one.
fn payment_key_of(address: &[u8]) -> Option<KeyHash> {
    match Address::from_bytes(address).ok()? {
        Address::Shelley(s) => match s.payment() {
            ShelleyPaymentPart::Key(h) => Some(**h),
            ShelleyPaymentPart::Script(_) => None,
        },
        _ => None,
    }
}

/// Decodes one CIP-30 `TransactionUnspentOutput` (hex CBOR `[input, output]`).
fn decode_utxo(index: usize, hex_cbor: &str) -> Result<Utxo, ExternalError> {
    let bad = |reason: String| ExternalError::Utxo { index, reason };
    let bytes = hex::decode(hex_cbor.trim()).map_err(|e| bad(format!("not hex: {e}")))?;
    let mut d = Decoder::new(&bytes);
    let pair = d.array().map_err(|e| bad(format!("CBOR: {e}")))?;
    if pair != Some(2) {
        return Err(bad("expected [input, output]".into()));
    }
    if d.array().map_err(|e| bad(format!("input: {e}")))? != Some(2) {
        return Err(bad("input is not [tx_id, index]".into()));
    }
    let tx_hash: [u8; 32] = d
        .bytes()
        .map_err(|e| bad(format!("input tx id: {e}")))?
        .try_into()
        .map_err(|_| bad("input tx id is not 32 bytes".into()))?;
    let idx = d.u64().map_err(|e| bad(format!("input index: {e}")))?;
    let start = d.position();
    d.skip().map_err(|e| bad(format!("output: {e}")))?;
    let out = MultiEraOutput::decode(Era::Conway, &bytes[start..d.position()])
        .map_err(|e| bad(format!("output: {e}")))?;
    Ok(Utxo {
        reference: TxoRef {
            tx_hash,
            index: idx,
        },
        output: Output::from_chain(&out),
    })
}

async fn build_lock<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    spec: &Ensemble,
    change_address: &str,
    utxos: Option<&[String]>,
) -> Result<UnsignedLock, ExternalError> {
    let env = ctx.chain.env();
    let (address, payer) = key_address(change_address, env.network)?;
    let utxos = match utxos {
        Some(list) => {
            let mut v = Vec::with_capacity(list.len());
            for (i, h) in list.iter().enumerate() {
                let u = decode_utxo(i, h)?;
                if payment_key_of(&u.output.address) != Some(payer) {
                    return Err(ExternalError::Utxo {
                        index: i,
                        reason: "not locked by the change address's payment key".into(),
                    });
                }
                v.push(u);
            }
            v
        }
        None => ctx.chain.utxos_at(&address).await?,
    };
    let now = ctx.now();
    let spec_cid = orchestrator::pin_spec(ctx, spec, now)?;
    let terms = spec.escrow_terms();
    orchestrator::check_balance(&utxos, &ctx.chain.deployment().params.ntx, terms.budget)?;
    let seed = orchestrator::seed_of(&utxos, |id| {
        matches!(ctx.store.get::<OrchestratorRole>(id), Ok(Some(_)))
    })?;
    let until = ctx.chain.slot_at(now) + ctx.config.validity_slots;
    let orchestrator = ctx.chain.key_hash();
    let (draft, job) = build::lock(
        ctx.chain.deployment(),
        env,
        &LockRequest {
            orchestrator,
            receipt_key: ctx.receipt_key.verifying_key().to_bytes(),
            spec: spec_cid,
            gpus: terms.gpus,
            max_rate: terms.max_rate,
            budget: terms.budget,
            deadline_ms: terms.deadline_ms,
            receipt_interval_ms: ctx.config.receipt_interval_ms,
            seed,
            valid_until_slot: until,
        },
    )
    .map_err(ChainError::from)?;
    let b = balance(
        draft,
        &Wallet {
            utxos: &utxos,
            key_hash: payer,
            change_address: address,
        },
        env,
    )
    .map_err(ChainError::from)?;
    Ok(UnsignedLock {
        job,
        tx_id: b.hash,
        unsigned: b.unsigned,
        fee: b.fee,
        valid_until_slot: until,
        orchestrator,
    })
}

/// The escrow a transaction creates, if any.
fn escrow_created<S: Kv, E: Executor>(ctx: &Ctx<S, E>, tx: &MultiEraTx<'_>) -> Option<EscrowDatum> {
    let at = ctx.chain.deployment().address(ctx.chain.env());
    tx.outputs().iter().find_map(|o| {
        let o = Output::from_chain(o);
        if o.address != at {
            return None;
        }
        match GanglionDatum::from_plutus_data(o.datum.as_ref()?).ok()? {
            GanglionDatum::Escrow(e) => Some(e),
            GanglionDatum::Bond(_) | GanglionDatum::Burnt(_) => None,
        }
    })
}

/// The spec pinned here under `cid`, if any.
fn pinned_spec<S: Kv, E: Executor>(ctx: &Ctx<S, E>, cid: &[u8]) -> Option<Ensemble> {
    let cid = cid::Cid::try_from(cid).ok()?;
    let mut json = Vec::new();
    ganglion_storage::unixfs::cat(&ctx.blockstore, &cid, &mut json).ok()?;
    Ensemble::from_json_str(std::str::from_utf8(&json).ok()?).ok()
}

async fn submit_signed<S: Kv, E: Executor>(
    ctx: &Ctx<S, E>,
    tx: &[u8],
    witness_set: &[u8],
) -> Result<SubmittedTx, ExternalError> {
    let signed = witness::assemble(tx, witness_set)?;
    let decoded = MultiEraTx::decode_for_era(Era::Conway, &signed.bytes)
        .map_err(|e| WitnessError::Transaction(e.to_string()))?;
    let escrow = escrow_created(ctx, &decoded);
    let job = escrow.as_ref().map(|e| e.job_id);
    let spends = decoded
        .inputs()
        .iter()
        .map(|i| TxoRef {
            tx_hash: **i.hash(),
            index: i.index(),
        })
        .collect();
    let valid_until = decoded.ttl();
    drop(decoded);
    let adopt = escrow.and_then(|e| {
        let spec = pinned_spec(ctx, &e.spec)?;
        let t = spec.escrow_terms();
        // Exactly the lock `build_lock` built: this node's keys, the spec's terms, open.
        let ours = e.orchestrator == ctx.chain.key_hash()
            && e.receipt_key == ctx.receipt_key.verifying_key().to_bytes()
            && (e.gpus, e.max_rate, e.budget, e.deadline_ms)
                == (t.gpus, t.max_rate, t.budget, t.deadline_ms)
            && e.receipt_interval_ms > 0
            && e.state == JobState::Open;
        ours.then_some((e, spec))
    });
    let signed_tx = SignedTx {
        hash: signed.tx_id,
        bytes: signed.bytes,
        spends,
    };
    let Some((e, spec)) = adopt else {
        ctx.chain.resubmit(&signed_tx.bytes).await?;
        tracing::info!(tx = %hex::encode(signed.tx_id), job = ?job.map(|j| j.to_string()), "submitted a wallet-signed transaction (not adopted)");
        return Ok(SubmittedTx {
            tx_id: signed.tx_id,
            job,
            adopted: false,
        });
    };
    let now = ctx.now();
    if let Some(r) = ctx.store.get::<OrchestratorRole>(&e.job_id)? {
        // The same lock again (a retry): send the bytes once more; the ledger decides.
        return match r.intent(TxKind::Lock) {
            Some(i) if i.tx_hash == signed.tx_id => {
                if let Err(err) = ctx.chain.resubmit(&signed_tx.bytes).await {
                    tracing::debug!(error = %err, "re-submission of an adopted lock refused");
                }
                Ok(SubmittedTx {
                    tx_id: signed.tx_id,
                    job,
                    adopted: true,
                })
            }
            _ => Err(EngineError::State {
                job: e.job_id,
                reason: "this node already tracks the job with another lock".into(),
            }
            .into()),
        };
    }
    ctx.store.create::<OrchestratorRole>(&JobRecord::new(
        e.job_id,
        OrchestratorState::Locked,
        OrchestratorDetail {
            spec,
            spec_cid: e.spec.clone(),
            excluded: Vec::new(),
            chosen: Vec::new(),
            last_error: None,
            stopped_at_ms: None,
            links: None,
            unformed: Vec::new(),
            rematch_tried: false,
            successor: None,
            predecessor: None,
            scaling: Default::default(),
        },
        now,
    ))?;
    if let Err(err) = super::submit::intent_first::<OrchestratorRole, S, E>(
        ctx,
        &e.job_id,
        TxKind::Lock,
        signed_tx,
        valid_until,
    )
    .await
    {
        // Refused by the ledger as signed: these bytes will not land; end the record.
        if matches!(
            &err,
            EngineError::Chain(ChainError::Client(ganglion_wallet::chain::Error::Submit(_)))
        ) {
            let detail = ctx.store.get::<OrchestratorRole>(&e.job_id)?.map(|mut r| {
                r.detail.last_error = Some(err.to_string());
                r.detail
            });
            ctx.store.apply_with::<OrchestratorRole>(
                &e.job_id,
                OrchestratorEvent::LockLapsed,
                detail,
                ctx.now(),
                None,
            )?;
        }
        return Err(err.into());
    }
    Ok(SubmittedTx {
        tx_id: signed.tx_id,
        job,
        adopted: true,
    })
}

#[async_trait::async_trait]
impl<S: Kv + 'static, E: Executor + 'static> WalletLocks for EngineHandle<S, E> {
    async fn build_lock(
        &self,
        spec: &Ensemble,
        change_address: &str,
        utxos: Option<&[String]>,
    ) -> Result<UnsignedLock, ExternalError> {
        build_lock(&self.ctx, spec, change_address, utxos).await
    }

    async fn submit_signed(
        &self,
        tx: &[u8],
        witness_set: &[u8],
    ) -> Result<SubmittedTx, ExternalError> {
        let _guard = self.ctx.actions.lock().await;
        submit_signed(&self.ctx, tx, witness_set).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_addresses_must_be_key_addresses_on_the_network() {
        let key = ganglion_wallet::PaymentKey::devnet(1);
        let testnet = key.address(pallas_addresses::Network::Testnet);
        let (bytes, hash) = key_address(
            &testnet.to_bech32().expect("bech32"),
            pallas_addresses::Network::Testnet,
        )
        .expect("key address");
        assert_eq!(hash, key.key_hash());
        assert_eq!(payment_key_of(&bytes), Some(hash));
        let (by_hex, _) = key_address(&hex::encode(&bytes), pallas_addresses::Network::Testnet)
            .expect("hex form");
        assert_eq!(by_hex, bytes);
        let mainnet = key.address(pallas_addresses::Network::Mainnet);
        let e = key_address(
            &mainnet.to_bech32().expect("bech32"),
            pallas_addresses::Network::Testnet,
        )
        .expect_err("wrong network");
        assert!(e.to_string().contains("Mainnet"), "{e}");
        assert!(matches!(
            key_address("addr_test1xyz", pallas_addresses::Network::Testnet),
            Err(ExternalError::Address { .. })
        ));
    }

    #[test]
    fn cip30_utxos_decode_and_bad_ones_are_refused_with_their_index() {
        use pallas_codec::minicbor::Encoder;
        let key = ganglion_wallet::PaymentKey::devnet(1);
        let addr = key.address(pallas_addresses::Network::Testnet).to_vec();
        let mut e = Encoder::new(Vec::new());
        e.array(2).unwrap();
        e.array(2).unwrap().bytes(&[5; 32]).unwrap().u64(3).unwrap();
        // Post-Alonzo output map {0: address, 1: lovelace}.
        e.map(2).unwrap();
        e.u64(0).unwrap().bytes(&addr).unwrap();
        e.u64(1).unwrap().u64(2_000_000).unwrap();
        let u = decode_utxo(0, &hex::encode(e.into_writer())).expect("decodes");
        assert_eq!(u.reference.tx_hash, [5; 32]);
        assert_eq!(u.reference.index, 3);
        assert_eq!(u.output.value.lovelace, 2_000_000);
        assert_eq!(payment_key_of(&u.output.address), Some(key.key_hash()));
        for bad in ["zz", "80", "8201"] {
            let err = decode_utxo(4, bad).expect_err(bad);
            assert!(
                matches!(err, ExternalError::Utxo { index: 4, .. }),
                "{bad}: {err}"
            );
        }
    }
}
