//! The protocol-v2 world for tests and benches (DESIGN §3, `notes/v2-spec.md`): the
//! `ganglion_v2` validator deployed as a reference script, an orchestrator with a receipt
//! key, n providers with attest keys and payout addresses (provider 0 is paid at a base
//! address carrying a stake key), a third party with lovelace only, each party's wallet
//! also holding a 5-ADA collateral UTxO and (but the third party's) an ADA-only UTxO as a
//! real wallet does ([`COLLATERAL_UTXO`], [`ADA_UTXO`]), and helpers that build, balance,
//! sign and apply each v2 action through the devnet's real ledger.
//!
//! It reuses [`crate::test_utils::world`] (the ledger) and the shared test constants and
//! helpers ([`env`], [`ntx`], [`cid_bytes`], [`NTX`]).
#![allow(missing_docs, clippy::missing_panics_doc)]

use ed25519_dalek::SigningKey;
use ganglion_testnet::ledger::Validated;

use crate::Result;
use crate::blueprint::key_hash;
use crate::env::Env;
use crate::test_utils::world::{Party, World};
use crate::test_utils::{NTX, cid_bytes, env, ntx};
use crate::tx::{Balanced, Draft, TxoRef, Utxo, Value, balance};
use crate::v2::build::{
    self, AssignRequest, BondRequest, ClaimRequest, Deployment, ExpireOutcome, ExpireRequest,
    LockRequest, RescaleRequest,
};
use crate::v2::datum::{Assignment, EscrowDatum, GanglionDatum, JobId, JobState};
use crate::v2::params::Params;
use crate::v2::payout::{Payout, StakeCredential};
use crate::v2::redeemer::{Attestation, SignedReceipt};
use crate::v2::signed::{Acceptance, AttestationBody, Receipt, sign};

/// Claims are accepted until one hour after the deadline; expiry only after it.
pub const CLAIM_WINDOW_MS: u64 = 3_600_000;
/// The default receipt interval: one minute.
pub const RECEIPT_INTERVAL_MS: u64 = 60_000;
/// A provider's default rate: 2 NTX per GPU-hour.
pub const RATE: u64 = 2 * NTX;
/// The escrows' default maximum rate: 100 NTX per GPU-hour.
pub const MAX_RATE: u64 = 100 * NTX;
/// Slots (= seconds) an acceptance is valid for, counted from the moment it is signed.
pub const ACCEPT_FOR_SLOTS: u64 = 600;
/// The world's first slot.
pub const START_SLOT: u64 = 10_000;
/// Slots a rescale the harness builds is valid for.
pub const RESCALE_SLOTS: u64 = 60;

/// The v2 parameters of the test deployment: the test NTX, 100 NTX per GPU, a 7-day
/// unbonding delay and a one-hour claim window.
pub fn params() -> Params {
    Params {
        ntx: ntx(),
        min_bond_per_gpu: 100 * NTX,
        unbonding_delay_ms: 7 * 86_400_000,
        claim_window_ms: CLAIM_WINDOW_MS,
    }
}

/// A provider: its wallet (enterprise address), attest key, payout address and offer.
#[derive(Debug, Clone)]
pub struct Provider {
    pub party: Party,
    pub attest: SigningKey,
    /// The stake key of the payout address, when it delegates.
    pub stake: Option<SigningKey>,
    pub payout: Payout,
    pub gpus: u64,
    /// NTX base units per GPU-hour the provider accepts.
    pub rate: u64,
    pub bond: Option<Utxo>,
}

impl Provider {
    pub fn attest_key(&self) -> [u8; 32] {
        self.attest.verifying_key().to_bytes()
    }

    /// Where claims pay this provider.
    pub fn payout_address(&self, env: &Env) -> Vec<u8> {
        self.payout.address(env.network)
    }

    /// Every address of the provider: its wallet and, when different, its payout address.
    pub fn addresses(&self, env: &Env) -> Vec<Vec<u8>> {
        let mut a = vec![self.party.address.clone()];
        let payout = self.payout_address(env);
        if payout != self.party.address {
            a.push(payout);
        }
        a
    }
}

/// The pure-ADA UTxO (lovelace) each party keeps aside as collateral: what a CIP-30
/// wallet's `getCollateral` hands out, at most
/// [`MAX_COLLATERAL_WITHOUT_RETURN`](crate::tx::MAX_COLLATERAL_WITHOUT_RETURN), so the
/// balancer puts it up without a collateral return.
pub const COLLATERAL_UTXO: u64 = 5_000_000;
/// A party's ADA-only UTxO (lovelace): fees and min-UTxO lovelace come from it, so a
/// transaction that needs only lovelace from the wallet has an ADA-only change. Less than
/// the mixed UTxOs, so the orchestrator's lock seed (its largest UTxO) still carries NTX.
pub const ADA_UTXO: u64 = 100_000_000;

/// Funds `address` with what a real wallet holds besides its NTX UTxOs: a
/// [`COLLATERAL_UTXO`] set aside for collateral and an [`ADA_UTXO`] of lovelace only.
///
/// Why: with NTX-carrying UTxOs only, every collateral would need a collateral return (and a
/// total collateral), and every change would carry the wallet's NTX, even where the
/// transaction needs only lovelace from the wallet: ≈ 6 000 lovelace more fee a transaction
/// than a user's wallet pays, so the fees the tests and the `fees` bench measure would not
/// be the ones users see. The third party already holds lovelace only; it gets the
/// collateral UTxO.
fn fund_like_a_wallet(world: &mut World, address: &[u8]) {
    world.fund(address, Value::lovelace(COLLATERAL_UTXO));
    world.fund(address, Value::lovelace(ADA_UTXO));
}

/// The v2 world.
#[derive(Debug, Clone)]
pub struct Harness {
    pub world: World,
    pub dep: Deployment,
    pub orch: Party,
    /// The orchestrator's ed25519 receipt key (its public half is in every escrow).
    pub receipt: SigningKey,
    pub providers: Vec<Provider>,
    /// Someone who is neither orchestrator nor provider: lovelace only.
    pub third: Party,
}

/// A locked job as the tests track it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    /// The escrow as it stands now (stale once the last claim or an expire closed it).
    pub escrow: Utxo,
    pub spec: Vec<u8>,
    pub deadline_ms: u64,
    pub deadline_slot: u64,
    pub budget: u64,
    pub receipt_interval_ms: u64,
    /// The assign's lower bound, once assigned.
    pub started_at_ms: Option<u64>,
}

impl Job {
    /// The first slot at which a claim is no longer possible and expiry is: the slot
    /// starting exactly at the deadline plus the claim window (expiry needs a lower bound
    /// strictly after it, so the slot after this one).
    pub fn claim_end_slot(&self) -> u64 {
        self.deadline_slot + CLAIM_WINDOW_MS / 1000
    }
}

impl Harness {
    /// A world with `ganglion_v2` deployed, a funded orchestrator, `n` funded providers with
    /// 2 GPUs each at [`RATE`], and a funded third party.
    pub fn new(n: usize) -> Self {
        Self::with_gpus(&vec![2; n])
    }

    /// As [`Harness::new`] with one provider per entry of `gpus`.
    pub fn with_gpus(gpus: &[u64]) -> Self {
        let env = env();
        let mut world = World::new(env.clone(), START_SLOT);
        let script = crate::v2::blueprint()
            .and_then(|b| b.apply_data(params().to_plutus_data()))
            .expect("the v2 blueprint applies");
        let deployer = Party::from_seed(&env, [1; 32]);
        world.fund(&deployer.address, Value::lovelace(200_000_000));
        let draft = build::deploy(&env, &script).expect("deploy draft");
        let utxos = world.at(&deployer.address);
        let b = balance(draft, &world.wallet(&deployer, &utxos), &env).expect("deploy balances");
        world
            .sign_and_submit(&b, &[&deployer.key])
            .expect("deploy applies");
        let reference = world
            .get(&TxoRef {
                tx_hash: b.hash,
                index: 0,
            })
            .expect("reference script output");
        let dep = Deployment {
            params: params(),
            script,
            reference,
        };
        let orch = Party::from_seed(&env, [2; 32]);
        for _ in 0..3 {
            world.fund(
                &orch.address,
                Value::lovelace(1_000_000_000).with_class(&ntx(), 100_000 * NTX),
            );
        }
        fund_like_a_wallet(&mut world, &orch.address);
        let third = Party::from_seed(&env, [3; 32]);
        for _ in 0..2 {
            world.fund(&third.address, Value::lovelace(500_000_000));
        }
        world.fund(&third.address, Value::lovelace(COLLATERAL_UTXO));
        let providers = gpus
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let seed = u8::try_from(i).expect("at most 100 providers");
                let party = Party::from_seed(&env, [10 + seed; 32]);
                for _ in 0..2 {
                    world.fund(
                        &party.address,
                        Value::lovelace(500_000_000).with_class(&ntx(), 10_000 * NTX),
                    );
                }
                fund_like_a_wallet(&mut world, &party.address);
                // Provider 0 is paid at a base address: its payment key and a stake key.
                let stake = (i == 0).then(|| SigningKey::from_bytes(&[200; 32]));
                let payout = Payout {
                    key: party.hash,
                    stake: stake
                        .as_ref()
                        .map(|k| StakeCredential::Key(key_hash(&k.verifying_key().to_bytes()))),
                };
                Provider {
                    party,
                    attest: SigningKey::from_bytes(&[110 + seed; 32]),
                    stake,
                    payout,
                    gpus: *g,
                    rate: RATE,
                    bond: None,
                }
            })
            .collect();
        Self {
            world,
            dep,
            orch,
            receipt: SigningKey::from_bytes(&[4; 32]),
            providers,
            third,
        }
    }

    pub fn env(&self) -> &Env {
        &self.world.env
    }

    /// Balances `draft` from `payer`'s wallet (running every script in uplc).
    pub fn balance(&self, draft: Draft, payer: &Party) -> Result<Balanced> {
        let utxos = self.world.at(&payer.address);
        balance(draft, &self.world.wallet(payer, &utxos), self.env())
    }

    /// Balances, signs with `keys` (the payer's key always) and applies `draft`.
    pub fn run(&mut self, draft: Draft, payer: &Party, keys: &[&SigningKey]) -> Result<Balanced> {
        let b = self.balance(draft, payer)?;
        let mut all: Vec<&SigningKey> = vec![&payer.key];
        all.extend(keys.iter().copied());
        self.world.sign_and_submit(&b, &all)?;
        Ok(b)
    }

    /// Balances `draft` from `payer`'s wallet, signs it with `keys` (and the payer's key)
    /// and has the devnet ledger judge it at the current slot without applying it.
    pub fn judge(&self, draft: Draft, payer: &Party, keys: &[&SigningKey]) -> Result<Validated> {
        let b = self.balance(draft, payer)?;
        let mut all: Vec<&SigningKey> = vec![&payer.key];
        all.extend(keys.iter().copied());
        self.world.judge(&crate::tx::sign(&b, &all)?)
    }

    pub fn output(&self, b: &Balanced, index: u64) -> Utxo {
        self.world
            .get(&TxoRef {
                tx_hash: b.hash,
                index,
            })
            .expect("output exists")
    }

    /// POSIX ms at the start of `slot`.
    pub fn ms(&self, slot: u64) -> u64 {
        self.env().slot_config.slot_start_saturating(slot)
    }

    // ---- holdings ----------------------------------------------------------------------

    /// Lovelace at `addresses`.
    pub fn lovelace_at(&self, addresses: &[Vec<u8>]) -> u64 {
        addresses
            .iter()
            .flat_map(|a| self.world.at(a))
            .map(|u| u.output.value.lovelace)
            .sum()
    }

    /// NTX base units at `addresses`.
    pub fn ntx_at(&self, addresses: &[Vec<u8>]) -> u64 {
        addresses
            .iter()
            .flat_map(|a| self.world.at(a))
            .map(|u| u.output.value.quantity_of(&ntx()))
            .sum()
    }

    /// `(lovelace, NTX)` of the orchestrator's wallet.
    pub fn orch_holdings(&self) -> (u64, u64) {
        let a = [self.orch.address.clone()];
        (self.lovelace_at(&a), self.ntx_at(&a))
    }

    /// `(lovelace, NTX)` of provider `i`'s wallet and payout address together.
    pub fn provider_holdings(&self, i: usize) -> (u64, u64) {
        let a = self.providers[i].addresses(self.env());
        (self.lovelace_at(&a), self.ntx_at(&a))
    }

    /// `(lovelace, NTX)` of the third party.
    pub fn third_holdings(&self) -> (u64, u64) {
        let a = [self.third.address.clone()];
        (self.lovelace_at(&a), self.ntx_at(&a))
    }

    /// NTX at provider `i`'s payout address only.
    pub fn ntx_paid_to(&self, i: usize) -> u64 {
        self.ntx_at(&[self.providers[i].payout_address(self.env())])
    }

    /// Every UTxO anywhere holding the job's thread token.
    pub fn token_holders(&self, job: &Job) -> usize {
        self.world
            .utxos
            .values()
            .filter(|o| o.value.quantity(&self.dep.script.hash, &job.id.0) > 0)
            .count()
    }

    /// The datum of `job`'s escrow as tracked.
    pub fn escrow_datum(&self, job: &Job) -> EscrowDatum {
        escrow_of(&job.escrow)
    }

    // ---- bonds -------------------------------------------------------------------------

    /// The bond request of provider `i`: exactly the minimum stake.
    pub fn bond_request(&self, i: usize) -> BondRequest {
        let p = &self.providers[i];
        BondRequest {
            provider: p.party.hash,
            attest_key: p.attest_key(),
            peer_id: vec![0x00, 0x24, u8::try_from(i).expect("few providers")],
            payout: p.payout,
            gpus: p.gpus,
            stake: self.dep.params.min_bond_per_gpu * p.gpus,
        }
    }

    /// Posts provider `i`'s bond (from its wallet) with `req`.
    pub fn post_bond_with(&mut self, i: usize, req: &BondRequest) -> Result<Balanced> {
        let draft = build::post_bond(&self.dep, self.env(), req)?;
        let party = self.providers[i].party.clone();
        let b = self.run(draft, &party, &[])?;
        self.providers[i].bond = Some(self.output(&b, 0));
        Ok(b)
    }

    /// Posts a bond of exactly the minimum stake for each provider.
    pub fn post_bonds(&mut self) -> Vec<Balanced> {
        self.post_bonds_for(1)
    }

    /// Posts, for each provider, a bond of the minimum stake for `jobs` times its GPUs: it
    /// backs that many of its assignments at once (G5).
    pub fn post_bonds_for(&mut self, jobs: u64) -> Vec<Balanced> {
        (0..self.providers.len())
            .map(|i| {
                let mut req = self.bond_request(i);
                req.gpus *= jobs;
                req.stake *= jobs;
                self.post_bond_with(i, &req).expect("bond posts")
            })
            .collect()
    }

    // ---- lock, assign, cancel ----------------------------------------------------------

    /// Locks a job for all providers' GPUs with a deadline `deadline_in` slots from now and
    /// the default receipt interval.
    pub fn lock(&mut self, budget: u64, deadline_in: u64) -> (Job, Balanced) {
        let gpus = self.providers.iter().map(|p| p.gpus).sum();
        self.lock_with(gpus, budget, deadline_in, RECEIPT_INTERVAL_MS)
            .expect("lock applies")
    }

    /// Locks a job of `gpus` GPUs, `budget` NTX, a deadline `deadline_in` slots from now and
    /// a receipt interval of `receipt_interval_ms`.
    pub fn lock_with(
        &mut self,
        gpus: u64,
        budget: u64,
        deadline_in: u64,
        receipt_interval_ms: u64,
    ) -> Result<(Job, Balanced)> {
        let req = self.lock_request(gpus, budget, deadline_in, receipt_interval_ms);
        let (draft, id) = build::lock(&self.dep, self.env(), &req)?;
        let orch = self.orch.clone();
        let b = self.run(draft, &orch, &[])?;
        let escrow = self.output(&b, 0);
        Ok((
            Job {
                id,
                escrow,
                spec: req.spec,
                deadline_ms: req.deadline_ms,
                deadline_slot: self.world.slot + deadline_in,
                budget,
                receipt_interval_ms,
                started_at_ms: None,
            },
            b,
        ))
    }

    /// The lock request [`Harness::lock_with`] submits.
    pub fn lock_request(
        &self,
        gpus: u64,
        budget: u64,
        deadline_in: u64,
        receipt_interval_ms: u64,
    ) -> LockRequest {
        let seed = self
            .world
            .at(&self.orch.address)
            .into_iter()
            .max_by_key(|u| u.output.value.lovelace)
            .expect("orchestrator funds");
        LockRequest {
            orchestrator: self.orch.hash,
            receipt_key: self.receipt.verifying_key().to_bytes(),
            spec: cid_bytes(b"ensemble spec v2"),
            gpus,
            max_rate: MAX_RATE,
            budget,
            deadline_ms: self.ms(self.world.slot + deadline_in),
            receipt_interval_ms,
            seed,
            valid_until_slot: self.world.slot + 300,
        }
    }

    /// The acceptance message provider `i` signs for `job` with accept-by `accept_by_ms`.
    pub fn acceptance_message(&self, job: &Job, i: usize, accept_by_ms: u64) -> Acceptance {
        let p = &self.providers[i];
        Acceptance {
            job_id: job.id,
            spec: job.spec.clone(),
            gpus: p.gpus,
            rate: p.rate,
            deadline_ms: job.deadline_ms,
            accept_by_ms,
            receipt_interval_ms: job.receipt_interval_ms,
        }
    }

    /// Provider `i`'s assignment on `job` and its signed acceptance; its window from now (an
    /// assign or rescale valid from now) to the deadline.
    pub fn acceptance(&self, job: &Job, i: usize, accept_by_ms: u64) -> (Assignment, Vec<u8>) {
        let p = &self.providers[i];
        let a = Assignment {
            provider: p.party.hash,
            attest_key: p.attest_key(),
            payout: p.payout,
            gpus: p.gpus,
            rate: p.rate,
            accept_by_ms,
            started_at_ms: self.ms(self.world.slot),
            until_ms: job.deadline_ms,
        };
        let msg = self.acceptance_message(job, i, accept_by_ms).signed_bytes();
        (a, sign(&p.attest, &msg))
    }

    /// The assign request of `job` to `providers` (indices, in this order), acceptances
    /// valid for [`ACCEPT_FOR_SLOTS`] from now, assign valid from now for 120 slots.
    pub fn assign_request_for(&self, job: &Job, providers: &[usize]) -> AssignRequest {
        let accept_by = self.ms(self.world.slot + ACCEPT_FOR_SLOTS);
        let (assignments, acceptances) = providers
            .iter()
            .map(|i| self.acceptance(job, *i, accept_by))
            .unzip();
        AssignRequest {
            escrow: job.escrow.clone(),
            assignments,
            acceptances,
            bonds: providers
                .iter()
                .filter_map(|i| self.providers[*i].bond.clone())
                .collect(),
            valid_from_slot: self.world.slot,
            valid_until_slot: self.world.slot + 120,
        }
    }

    /// The assign request of `job` to every provider.
    pub fn assign_request(&self, job: &Job) -> AssignRequest {
        let all: Vec<usize> = (0..self.providers.len()).collect();
        self.assign_request_for(job, &all)
    }

    /// Submits `req` (by the orchestrator); updates `job` and each assigned provider's bond
    /// to its continuation (outputs 1.., in assignment order).
    pub fn assign_with(&mut self, job: &mut Job, req: &AssignRequest) -> Result<Balanced> {
        let draft = build::assign(&self.dep, self.env(), req)?;
        let orch = self.orch.clone();
        let b = self.run(draft, &orch, &[])?;
        job.escrow = self.output(&b, 0);
        job.started_at_ms = Some(self.ms(req.valid_from_slot));
        for (k, a) in req.assignments.iter().enumerate() {
            let continued = self.output(&b, 1 + k as u64);
            if let Some(p) = self
                .providers
                .iter_mut()
                .find(|p| p.party.hash == a.provider)
            {
                p.bond = Some(continued);
            }
        }
        Ok(b)
    }

    /// The rescale of `job` adding `providers` (indices, in this order; acceptances valid for
    /// [`ACCEPT_FOR_SLOTS`] from now) and releasing `releases` (`(assignment index,
    /// until_ms)`); valid from now for [`RESCALE_SLOTS`] slots.
    pub fn rescale_request(
        &self,
        job: &Job,
        providers: &[usize],
        releases: &[(u64, u64)],
    ) -> RescaleRequest {
        let accept_by = self.ms(self.world.slot + ACCEPT_FOR_SLOTS);
        let (added, acceptances) = providers
            .iter()
            .map(|i| self.acceptance(job, *i, accept_by))
            .unzip();
        RescaleRequest {
            escrow: job.escrow.clone(),
            added,
            acceptances,
            bonds: providers
                .iter()
                .filter_map(|i| self.providers[*i].bond.clone())
                .collect(),
            releases: releases.to_vec(),
            valid_from_slot: self.world.slot,
            valid_until_slot: self.world.slot + RESCALE_SLOTS,
        }
    }

    /// The earliest end a release may give an assignment of `job` in a rescale valid until
    /// `valid_until_slot`: its start plus one receipt interval.
    pub fn release_notice_ms(&self, job: &Job, valid_until_slot: u64) -> u64 {
        self.ms(valid_until_slot) + job.receipt_interval_ms
    }

    /// Submits `req` (by the orchestrator); updates `job` and each added provider's bond to
    /// its continuation (outputs 1.., in the order added).
    pub fn rescale_with(&mut self, job: &mut Job, req: &RescaleRequest) -> Result<Balanced> {
        let draft = build::rescale(&self.dep, self.env(), req)?;
        let orch = self.orch.clone();
        let b = self.run(draft, &orch, &[])?;
        job.escrow = self.output(&b, 0);
        for (k, a) in req.added.iter().enumerate() {
            let continued = self.output(&b, 1 + k as u64);
            if let Some(p) = self
                .providers
                .iter_mut()
                .find(|p| p.party.hash == a.provider)
            {
                p.bond = Some(continued);
            }
        }
        Ok(b)
    }

    /// Starts unbonding provider `i`'s bond now (valid for 60 slots); updates its bond.
    pub fn unbond(&mut self, i: usize) -> Result<Balanced> {
        let bond = self.providers[i].bond.clone().expect("bonded");
        let p = self.providers[i].party.clone();
        let slot = self.world.slot;
        let draft = build::unbond(&self.dep, self.env(), &bond, slot, slot + 60)?;
        let b = self.run(draft, &p, &[])?;
        self.providers[i].bond = Some(self.output(&b, 0));
        Ok(b)
    }

    /// Assigns `job` to every provider; updates `job`.
    pub fn assign(&mut self, job: &mut Job) -> Balanced {
        let req = self.assign_request(job);
        self.assign_with(job, &req).expect("assign applies")
    }

    /// Cancels an open `job` (the orchestrator signs and pays).
    pub fn cancel(&mut self, job: &Job) -> Result<Balanced> {
        let draft = build::cancel(&self.dep, self.env(), &job.escrow)?;
        let orch = self.orch.clone();
        self.run(draft, &orch, &[])
    }

    // ---- signed messages ---------------------------------------------------------------

    /// The orchestrator's receipt: provider `index` of `job` alive until `until_ms`.
    pub fn receipt(&self, job: &Job, index: u64, until_ms: u64) -> SignedReceipt {
        SignedReceipt {
            acknowledged_until_ms: until_ms,
            signature: sign(&self.receipt, &receipt_message(job.id, index, until_ms)),
        }
    }

    /// The attestation body provider `i` signs for `job`.
    pub fn attestation_body(&self, job_id: JobId, i: usize, gpu_ms: u64) -> AttestationBody {
        let p = &self.providers[i];
        AttestationBody {
            job_id,
            provider: p.party.hash,
            result: cid_bytes(format!("result {i}").as_bytes()),
            logs: cid_bytes(format!("logs {i}").as_bytes()),
            gpu_ms,
            exit_code: 0,
        }
    }

    /// Provider `i`'s attestation of `gpu_ms` GPU-milliseconds on `job`.
    pub fn attest(&self, job: &Job, i: usize, gpu_ms: u64) -> Attestation {
        let body = self.attestation_body(job.id, i, gpu_ms);
        Attestation {
            result: body.result.clone(),
            logs: body.logs.clone(),
            gpu_ms,
            exit_code: body.exit_code,
            signature: sign(&self.providers[i].attest, &body.signed_bytes()),
        }
    }

    // ---- claims ------------------------------------------------------------------------

    /// The claim of assignment `index` (provider `index` when all were assigned in order)
    /// of `gpu_ms`, with a receipt until `receipt_until_ms` when given; valid from now until
    /// 60 slots later or the end of the claim window, whichever is first.
    pub fn claim_request(
        &self,
        job: &Job,
        index: u64,
        provider: usize,
        gpu_ms: u64,
        receipt_until_ms: Option<u64>,
    ) -> ClaimRequest {
        ClaimRequest {
            escrow: job.escrow.clone(),
            index,
            attestation: self.attest(job, provider, gpu_ms),
            receipt: receipt_until_ms.map(|t| self.receipt(job, index, t)),
            valid_from_slot: self.world.slot,
            valid_until_slot: (self.world.slot + 60).min(job.claim_end_slot()),
            release: None,
        }
    }

    /// Submits `req` with `payer` paying the fee; updates `job.escrow` when the escrow
    /// continues.
    pub fn claim_with(
        &mut self,
        job: &mut Job,
        req: &ClaimRequest,
        payer: &Party,
    ) -> Result<Balanced> {
        let draft = build::claim(&self.dep, self.env(), req)?;
        let last = {
            let e = escrow_of(&req.escrow);
            match e.state {
                JobState::Assigned {
                    assignments,
                    claimed,
                    ..
                } => claimed.len() + 1 == assignments.len(),
                JobState::Open => false,
            }
        };
        let b = self.run(draft, payer, &[])?;
        if !last {
            job.escrow = self.output(&b, 1);
        }
        if let Some(bond) = &req.release {
            let continued = self.output(&b, 2);
            if let Some(p) = self
                .providers
                .iter_mut()
                .find(|p| p.bond.as_ref() == Some(bond))
            {
                p.bond = Some(continued);
            }
        }
        Ok(b)
    }

    /// Provider `i` (assignment `i`) claims `gpu_ms` with a receipt until
    /// `receipt_until_ms`, paying its own fee and releasing its bond's commitment to the job
    /// (as the node does); its bond is updated.
    pub fn claim(
        &mut self,
        job: &mut Job,
        i: usize,
        gpu_ms: u64,
        receipt_until_ms: Option<u64>,
    ) -> Result<Balanced> {
        self.claim_as(job, i as u64, i, gpu_ms, receipt_until_ms)
    }

    /// As [`Harness::claim`], for provider `provider` holding assignment `index` (the two
    /// differ once a rescale added providers in another order).
    pub fn claim_as(
        &mut self,
        job: &mut Job,
        index: u64,
        provider: usize,
        gpu_ms: u64,
        receipt_until_ms: Option<u64>,
    ) -> Result<Balanced> {
        let mut req = self.claim_request(job, index, provider, gpu_ms, receipt_until_ms);
        req.release = self.providers[provider].bond.clone();
        let payer = self.providers[provider].party.clone();
        self.claim_with(job, &req, &payer)
    }

    // ---- expire ------------------------------------------------------------------------

    /// The expire of `job` slashing the bonds of `slash` (provider indices), valid from
    /// now.
    pub fn expire_request(&self, job: &Job, slash: &[usize]) -> ExpireRequest {
        ExpireRequest {
            escrow: job.escrow.clone(),
            slash: slash
                .iter()
                .map(|i| self.providers[*i].bond.clone().expect("bonded"))
                .collect(),
            valid_from_slot: self.world.slot,
        }
    }

    /// Expires `job` (the third party submits and pays), slashing the bonds of `slash`;
    /// each slashed provider's bond is updated to its continuation.
    pub fn expire(&mut self, job: &Job, slash: &[usize]) -> Result<(Balanced, ExpireOutcome)> {
        let req = self.expire_request(job, slash);
        let (draft, outcome) = build::expire(&self.dep, self.env(), &req)?;
        let third = self.third.clone();
        let b = self.run(draft, &third, &[])?;
        let first_bond = if outcome.burnt > 0 { 2 } else { 1 };
        for (k, i) in slash.iter().enumerate() {
            self.providers[*i].bond = Some(self.output(&b, first_bond + k as u64));
        }
        Ok((b, outcome))
    }
}

/// The bytes the orchestrator signs for a receipt.
pub fn receipt_message(job_id: JobId, index: u64, until_ms: u64) -> Vec<u8> {
    Receipt {
        job_id,
        provider_index: index,
        acknowledged_until_ms: until_ms,
    }
    .signed_bytes()
}

/// The escrow datum of `utxo`.
pub fn escrow_of(utxo: &Utxo) -> EscrowDatum {
    match GanglionDatum::from_plutus_data(utxo.output.datum.as_ref().expect("inline datum"))
        .expect("datum decodes")
    {
        GanglionDatum::Escrow(e) => e,
        other => panic!("not an escrow: {other:?}"),
    }
}
