//! What the node, the RPC and auditors ask. Every answer says whether it is confirmed:
//! state from blocks fewer than `depth` blocks deep is tentative (it may still roll back).

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::{BondDatum, JobId};
use serde::{Deserialize, Serialize};

use crate::apply::{Indexer, parse};
use crate::error::Result;
use crate::event::{Event, Record};
use crate::extract::Tracked;
use crate::keys;
use crate::store::Kv;
use crate::view::{JobStatus, JobView};

/// An answer and whether it is final enough to act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmed<T> {
    /// The answer.
    pub value: T,
    /// Blocks on top of the newest block the answer depends on (0 = in the tip).
    pub confirmations: u64,
    /// True when `confirmations` is below the requested depth.
    pub tentative: bool,
}

/// A live bond and how many of its GPUs are not in assigned jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveBond {
    /// The bond UTxO.
    pub bond: TxoRef,
    /// Its datum.
    pub datum: BondDatum,
    /// NTX staked.
    pub stake: u64,
    /// GPUs backed minus GPUs held by the bond's live on-chain commitments (DESIGN §3.1 G5),
    /// which hold an assignment's GPUs until the provider's claim releases them, at the latest
    /// until its deadline + claim window, exactly as an assign judges them.
    pub free_gpus: u64,
}

/// A provider as the chain sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderSummary {
    /// Its live bonds.
    pub bonds: Vec<ActiveBond>,
    /// Jobs it was assigned.
    pub jobs: Vec<JobId>,
    /// NTX earned from its claims.
    pub earnings: u64,
    /// Jobs it was assigned and never claimed before they expired.
    pub defaults: Vec<JobId>,
    /// NTX slashed from its bonds.
    pub slashed: u64,
}

/// One payment to a provider from its claim: where it happened and for which job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentRecord {
    /// Slot of the claim's block.
    pub slot: u64,
    /// The claim transaction.
    #[serde(with = "hex::serde")]
    pub tx_hash: [u8; 32],
    /// Its position in the block.
    pub tx_index: u32,
    /// The job.
    pub job_id: JobId,
    /// NTX base units paid.
    pub ntx: u64,
}

impl<S: Kv> Indexer<S> {
    fn confirm<T>(&self, value: T, height: u64, depth: u64) -> Result<Confirmed<T>> {
        let tip = self.tip()?.map(|t| t.height).unwrap_or(0);
        let confirmations = tip.saturating_sub(height);
        Ok(Confirmed {
            value,
            confirmations,
            tentative: confirmations < depth,
        })
    }

    /// A job with its full history.
    ///
    /// # Errors
    /// Store errors, [`crate::Error::Corrupt`].
    pub fn job(&self, id: &JobId, depth: u64) -> Result<Option<Confirmed<JobView>>> {
        match self.kv().get(&keys::job(id))? {
            Some(b) => {
                let v: JobView = parse("job", &b)?;
                let h = v.last_height();
                Ok(Some(self.confirm(v, h, depth)?))
            }
            None => Ok(None),
        }
    }

    fn jobs_in_index(&self, prefix: String) -> Result<Vec<JobView>> {
        let mut out = Vec::new();
        for (k, _) in self.kv().scan_prefix(prefix.as_bytes())? {
            if let Some(id) = keys::job_of_index(&k)
                && let Some(b) = self.kv().get(&keys::job(&id))?
            {
                out.push(parse("job", &b)?);
            }
        }
        Ok(out)
    }

    /// Jobs locked by an orchestrator.
    ///
    /// # Errors
    /// Store errors.
    pub fn jobs_by_orchestrator(&self, orchestrator: &KeyHash) -> Result<Vec<JobView>> {
        self.jobs_in_index(format!(
            "{}{}/",
            keys::BY_ORCHESTRATOR,
            hex::encode(orchestrator)
        ))
    }

    /// Jobs a provider was assigned.
    ///
    /// # Errors
    /// Store errors.
    pub fn jobs_by_provider(&self, provider: &KeyHash) -> Result<Vec<JobView>> {
        self.jobs_in_index(format!("{}{}/", keys::BY_PROVIDER, hex::encode(provider)))
    }

    /// Every job the indexer has seen, in job-id order (a scan of every job view: for
    /// the node's own lookups, e.g. which jobs name a CID; an indexed query belongs in a
    /// store with secondary indexes).
    ///
    /// # Errors
    /// Store errors.
    pub fn jobs(&self) -> Result<Vec<JobView>> {
        self.kv()
            .scan_prefix(keys::JOB.as_bytes())?
            .iter()
            .map(|(_, b)| parse("job", b))
            .collect()
    }

    /// A page of jobs in job-id order (descending when `desc`), only those in `status` when
    /// given: `take` after skipping `skip`. A store that pages by an index answers directly
    /// (PostgreSQL, [`Kv::jobs_page`]); otherwise every job view is read.
    ///
    /// # Errors
    /// Store errors.
    pub fn jobs_page(
        &self,
        status: Option<JobStatus>,
        skip: usize,
        take: usize,
        desc: bool,
    ) -> Result<Vec<JobView>> {
        if let Some(page) = self.kv().jobs_page(status, skip, take, desc)? {
            return Ok(page);
        }
        let mut all = match status {
            Some(s) => self.jobs_by_status(s)?,
            None => self.jobs()?,
        };
        if desc {
            all.reverse();
        }
        Ok(all.into_iter().skip(skip).take(take).collect())
    }

    /// Jobs in a status.
    ///
    /// # Errors
    /// Store errors.
    pub fn jobs_by_status(&self, status: JobStatus) -> Result<Vec<JobView>> {
        Ok(self
            .jobs()?
            .into_iter()
            .filter(|v| v.status == status)
            .collect())
    }

    /// Live authentic script UTxOs (escrows and bonds).
    ///
    /// # Errors
    /// Store errors.
    pub fn live_utxos(&self) -> Result<Vec<Tracked>> {
        self.kv()
            .scan_prefix(keys::UTXO.as_bytes())?
            .iter()
            .map(|(_, b)| parse("utxo", b))
            .collect()
    }

    /// Bonds that are not unbonding and hold their minimum stake, with their free capacity
    /// now (the wall clock: the devnet's and Cardano's slot clocks are POSIX time).
    ///
    /// # Errors
    /// Store errors.
    pub fn active_bonds(&self) -> Result<Vec<ActiveBond>> {
        self.active_bonds_at(ganglion_cardano::time::now_posix_ms())
    }

    /// [`Self::active_bonds`] with the capacity as of `now_ms` (POSIX ms): a bond's live
    /// commitments (DESIGN §3.1 G5) hold GPUs until the provider's claim releases them, at the
    /// latest their job's deadline + claim window, exactly as an assign judges them.
    ///
    /// # Errors
    /// Store errors.
    pub fn active_bonds_at(&self, now_ms: u64) -> Result<Vec<ActiveBond>> {
        let mut out = Vec::new();
        for t in self.live_utxos()? {
            if let Some(b) = t.bond() {
                if b.unbonding_since_ms.is_some() || t.ntx < self.watch().min_stake(b.gpus) {
                    continue;
                }
                // The bond's own commitments are what an assign judges.
                let busy = b.committed_gpus(now_ms);
                let b = b.clone();
                out.push(ActiveBond {
                    bond: t.reference,
                    stake: t.ntx,
                    free_gpus: b.gpus.saturating_sub(busy),
                    datum: b,
                });
            }
        }
        Ok(out)
    }

    /// A provider's bonds, jobs, earnings, defaults and slashes.
    ///
    /// # Errors
    /// Store errors.
    pub fn provider(&self, provider: &KeyHash) -> Result<ProviderSummary> {
        let bonds = self
            .active_bonds()?
            .into_iter()
            .filter(|b| b.datum.provider == *provider)
            .collect();
        let jobs = self.jobs_by_provider(provider)?;
        let earnings = jobs
            .iter()
            .flat_map(|j| j.payments.iter())
            .filter(|p| p.to == *provider)
            .map(|p| p.ntx)
            .sum();
        let defaults = jobs
            .iter()
            .filter(|j| j.defaulters().contains(provider))
            .map(|j| j.job_id)
            .collect();
        let slashed = jobs
            .iter()
            .flat_map(|j| j.history.iter())
            .filter_map(|r| match &r.event {
                Event::BondSlashed {
                    provider: p,
                    amount,
                    ..
                } if p == provider => Some(*amount),
                _ => None,
            })
            .sum();
        Ok(ProviderSummary {
            bonds,
            jobs: jobs.iter().map(|j| j.job_id).collect(),
            earnings,
            defaults,
            slashed,
        })
    }

    /// Pay to `provider` from its claims, newest first (slot, then position in the block),
    /// `take` of them after skipping `skip`. A store with an index of payments answers
    /// directly (PostgreSQL's `payments` table, [`Kv::payments_to`]); otherwise the
    /// provider's jobs are read.
    ///
    /// # Errors
    /// Store errors.
    pub fn payments_to(
        &self,
        provider: &KeyHash,
        skip: usize,
        take: usize,
    ) -> Result<Vec<PaymentRecord>> {
        if let Some(page) = self.kv().payments_to(provider, skip, take)? {
            return Ok(page);
        }
        let mut all: Vec<(u32, PaymentRecord)> = Vec::new();
        for job in self.jobs_by_provider(provider)? {
            for r in &job.history {
                if let Event::JobClaimed {
                    provider: p,
                    paid,
                    job_id,
                    ..
                } = &r.event
                    && p == provider
                {
                    let record = PaymentRecord {
                        slot: r.meta.slot,
                        tx_hash: r.meta.tx_hash,
                        tx_index: r.meta.tx_index,
                        job_id: *job_id,
                        ntx: *paid,
                    };
                    all.push((r.seq, record));
                }
            }
        }
        all.sort_by(|(sa, a), (sb, b)| (b.slot, b.tx_index, sb).cmp(&(a.slot, a.tx_index, sa)));
        Ok(all
            .into_iter()
            .skip(skip)
            .take(take)
            .map(|(_, r)| r)
            .collect())
    }

    /// Events with `from <= slot <= to`, in chain order.
    ///
    /// # Errors
    /// Store errors.
    pub fn events(&self, from: u64, to: u64) -> Result<Vec<Record>> {
        let end = keys::event_slot(to.saturating_add(1));
        self.kv()
            .range(&keys::event_slot(from), &end)?
            .iter()
            .map(|(_, b)| parse("event", b))
            .collect()
    }
}
