//! A ready world for tests and benches: the validator deployed as a reference script, a
//! funded orchestrator and n funded providers, and helpers that build, balance, sign and
//! apply each action.
#![allow(missing_docs, clippy::missing_panics_doc)]

use crate::Result;
use crate::blueprint::Blueprint;
use crate::build::{self, AssignRequest, BondRequest, Deployment, LockRequest, SettleRequest};
use crate::datum::{Assignment, JobId};
use crate::env::Env;
use crate::params::Params;
use crate::redeemer::Attestation;
use crate::signed::{Acceptance, AttestationBody, sign};
use crate::test_utils::world::{Party, World};
pub use crate::test_utils::{NTX, ZERO_TIME, assert_script_fails, cid_bytes, env, ntx};
use crate::tx::{Balanced, Draft, TxoRef, Utxo, Value, balance};
use ed25519_dalek::SigningKey;
use ganglion_testnet::ledger::Validated;

pub fn params() -> Params {
    Params {
        ntx: ntx(),
        min_bond_per_gpu: 100 * NTX,
        unbonding_delay_ms: 7 * 86_400_000,
        slash_bps: 2_000,
    }
}

pub struct Provider {
    pub party: Party,
    pub attest: SigningKey,
    pub gpus: u64,
    pub rate: u64,
    pub bond: Option<Utxo>,
}

impl Provider {
    pub fn attest_key(&self) -> [u8; 32] {
        self.attest.verifying_key().to_bytes()
    }
}

pub struct Harness {
    pub world: World,
    pub dep: Deployment,
    pub orch: Party,
    pub providers: Vec<Provider>,
}

/// Locked job as the tests track it.
#[derive(Clone)]
pub struct Job {
    pub id: JobId,
    pub escrow: Utxo,
    pub deadline_ms: u64,
    pub deadline_slot: u64,
    pub budget: u64,
}

impl Harness {
    /// A world with the validator deployed, a funded orchestrator and `n` funded providers
    /// with 2 GPUs each (rate 2 NTX per GPU-hour).
    pub fn new(n: usize) -> Self {
        Self::with_gpus(&vec![2; n])
    }

    pub fn with_gpus(gpus: &[u64]) -> Self {
        let env = env();
        let mut world = World::new(env.clone(), 10_000);
        let script = Blueprint::committed()
            .and_then(|b| b.apply(&params()))
            .expect("blueprint applies");
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
        let providers = gpus
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let party = Party::from_seed(&env, [10 + i as u8; 32]);
                for _ in 0..2 {
                    world.fund(
                        &party.address,
                        Value::lovelace(500_000_000).with_class(&ntx(), 10_000 * NTX),
                    );
                }
                Provider {
                    party,
                    attest: SigningKey::from_bytes(&[100 + i as u8; 32]),
                    gpus: *g,
                    rate: 2 * NTX,
                    bond: None,
                }
            })
            .collect();
        Self {
            world,
            dep,
            orch,
            providers,
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

    /// Posts a bond of exactly the minimum stake for each provider.
    pub fn post_bonds(&mut self) -> Vec<Balanced> {
        let mut out = Vec::new();
        for i in 0..self.providers.len() {
            let p = &self.providers[i];
            let req = BondRequest {
                provider: p.party.hash,
                attest_key: p.attest_key(),
                peer_id: vec![0x00, 0x24, i as u8],
                gpus: p.gpus,
                stake: self.dep.params.min_bond_per_gpu * p.gpus,
            };
            let draft = build::post_bond(&self.dep, self.env(), &req).expect("bond draft");
            let party = p.party.clone();
            let b = self.run(draft, &party, &[]).expect("bond posts");
            self.providers[i].bond = Some(self.output(&b, 0));
            out.push(b);
        }
        out
    }

    /// Locks a job for all providers' GPUs with a deadline `deadline_in` slots from now.
    pub fn lock(&mut self, budget: u64, deadline_in: u64) -> (Job, Balanced) {
        let gpus = self.providers.iter().map(|p| p.gpus).sum();
        self.lock_gpus(gpus, budget, deadline_in)
    }

    pub fn lock_gpus(&mut self, gpus: u64, budget: u64, deadline_in: u64) -> (Job, Balanced) {
        let deadline_slot = self.world.slot + deadline_in;
        let deadline_ms = self.env().slot_config.slot_start_saturating(deadline_slot);
        let seed = self
            .world
            .at(&self.orch.address)
            .into_iter()
            .max_by_key(|u| u.output.value.lovelace)
            .expect("orchestrator funds");
        let req = LockRequest {
            orchestrator: self.orch.hash,
            spec: cid_bytes(b"ensemble spec"),
            gpus,
            max_rate: 3 * NTX,
            budget,
            deadline_ms,
            seed,
            valid_until_slot: self.world.slot + 300,
        };
        let (draft, id) = build::lock(&self.dep, self.env(), &req).expect("lock draft");
        let orch = self.orch.clone();
        let b = self.run(draft, &orch, &[]).expect("lock applies");
        let escrow = self.output(&b, 0);
        (
            Job {
                id,
                escrow,
                deadline_ms,
                deadline_slot,
                budget,
            },
            b,
        )
    }

    /// Assignments and acceptances for `providers` (indices) on `job`.
    pub fn acceptances(&self, job: &Job, providers: &[usize]) -> (Vec<Assignment>, Vec<Vec<u8>>) {
        providers
            .iter()
            .map(|i| {
                let p = &self.providers[*i];
                let a = Assignment {
                    provider: p.party.hash,
                    attest_key: p.attest_key(),
                    gpus: p.gpus,
                    rate: p.rate,
                };
                let msg = Acceptance {
                    job_id: job.id,
                    gpus: a.gpus,
                    rate: a.rate,
                    deadline_ms: job.deadline_ms,
                }
                .signed_bytes();
                (a, sign(&p.attest, &msg))
            })
            .unzip()
    }

    pub fn assign_request(&self, job: &Job) -> AssignRequest {
        let all: Vec<usize> = (0..self.providers.len()).collect();
        let (assignments, acceptances) = self.acceptances(job, &all);
        AssignRequest {
            escrow: job.escrow.clone(),
            assignments,
            acceptances,
            bonds: self
                .providers
                .iter()
                .filter_map(|p| p.bond.clone())
                .collect(),
            valid_from_slot: self.world.slot,
            valid_until_slot: self.world.slot + 120,
        }
    }

    /// Assigns `job` to every provider; updates `job.escrow`.
    pub fn assign(&mut self, job: &mut Job) -> Balanced {
        let req = self.assign_request(job);
        let draft = build::assign(&self.dep, self.env(), &req).expect("assign draft");
        let orch = self.orch.clone();
        let b = self.run(draft, &orch, &[]).expect("assign applies");
        job.escrow = self.output(&b, 0);
        b
    }

    /// Provider `i`'s attestation of `gpu_seconds` on `job`.
    pub fn attest(&self, job: &Job, i: usize, gpu_seconds: u64) -> Attestation {
        self.attest_as(job.id, i, i as u64, gpu_seconds)
    }

    pub fn attest_as(
        &self,
        job_id: JobId,
        provider: usize,
        provider_index: u64,
        gpu_seconds: u64,
    ) -> Attestation {
        let p = &self.providers[provider];
        let body = AttestationBody {
            job_id,
            provider: p.party.hash,
            result: cid_bytes(format!("result {provider}").as_bytes()),
            logs: cid_bytes(format!("logs {provider}").as_bytes()),
            gpu_seconds,
            exit_code: 0,
        };
        Attestation {
            provider_index,
            result: body.result.clone(),
            logs: body.logs.clone(),
            gpu_seconds,
            exit_code: 0,
            signature: sign(&p.attest, &body.signed_bytes()),
        }
    }

    /// A settle request in which every provider attests `seconds` of wall time.
    pub fn settle_request(&self, job: &Job, seconds: u64) -> SettleRequest {
        SettleRequest {
            escrow: job.escrow.clone(),
            attestations: (0..self.providers.len())
                .map(|i| self.attest(job, i, self.providers[i].gpus * seconds))
                .collect(),
            valid_from_slot: None,
            valid_until_slot: self.world.slot + 60,
        }
    }

    /// NTX base units at `party`'s address, and NTX at outputs tagged with `job`.
    pub fn ntx_at(&self, party: &Party) -> u64 {
        self.world
            .at(&party.address)
            .iter()
            .map(|u| u.output.value.quantity_of(&ntx()))
            .sum()
    }

    /// Every UTxO anywhere holding the job's thread token.
    pub fn token_holders(&self, job: &Job) -> usize {
        self.world
            .utxos
            .values()
            .filter(|o| o.value.quantity(&self.dep.script.hash, &job.id.0) > 0)
            .count()
    }
}
