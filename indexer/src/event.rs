//! Marketplace events extracted from the chain, each with where it happened.

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::datum::{Assignment, JobId};
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::redeemer::Attestation;
use serde::{Deserialize, Serialize};

/// Where an event happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Meta {
    /// Slot of the block.
    pub slot: u64,
    /// Block height.
    pub height: u64,
    /// Block header hash.
    #[serde(with = "hex::serde")]
    pub block_hash: [u8; 32],
    /// Transaction id.
    #[serde(with = "hex::serde")]
    pub tx_hash: [u8; 32],
    /// Position of the transaction in the block.
    pub tx_index: u32,
}

/// NTX paid to a key by a settle or an expire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// Payment key hash of the payee.
    #[serde(with = "hex::serde")]
    pub to: KeyHash,
    /// NTX base units.
    pub ntx: u64,
}

/// One marketplace event. Amounts are NTX base units; times POSIX ms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A provider bonded `stake` NTX for `gpus` GPUs.
    BondPosted {
        /// Provider key hash.
        #[serde(with = "hex::serde")]
        provider: KeyHash,
        /// ed25519 attest key.
        #[serde(with = "hex::serde")]
        attest_key: [u8; 32],
        /// libp2p peer id bytes.
        #[serde(with = "hex::serde")]
        peer_id: Vec<u8>,
        /// GPUs backed.
        gpus: u64,
        /// NTX staked.
        stake: u64,
        /// The bond UTxO.
        bond: TxoRef,
    },
    /// A bond started unbonding.
    BondUnbonding {
        /// Provider key hash.
        #[serde(with = "hex::serde")]
        provider: KeyHash,
        /// POSIX ms the clock started.
        since_ms: u64,
        /// The continuing bond UTxO.
        bond: TxoRef,
    },
    /// A bond was withdrawn.
    BondWithdrawn {
        /// Provider key hash.
        #[serde(with = "hex::serde")]
        provider: KeyHash,
        /// NTX returned.
        stake: u64,
    },
    /// A bond lost `amount` NTX to the orchestrator of an expired job.
    BondSlashed {
        /// Provider key hash.
        #[serde(with = "hex::serde")]
        provider: KeyHash,
        /// The expired job.
        job_id: JobId,
        /// NTX taken.
        amount: u64,
    },
    /// An orchestrator locked a job.
    JobLocked {
        /// Job id.
        job_id: JobId,
        /// Orchestrator key hash.
        #[serde(with = "hex::serde")]
        orchestrator: KeyHash,
        /// Spec CID bytes.
        #[serde(with = "hex::serde")]
        spec: Vec<u8>,
        /// GPUs needed.
        gpus: u64,
        /// Highest rate, NTX per GPU-hour.
        max_rate: u64,
        /// NTX locked.
        budget: u64,
        /// Deadline, POSIX ms.
        deadline_ms: u64,
        /// The escrow UTxO.
        escrow: TxoRef,
    },
    /// The job was assigned to providers.
    JobAssigned {
        /// Job id.
        job_id: JobId,
        /// Providers, GPUs, rates.
        assignments: Vec<Assignment>,
        /// POSIX ms.
        started_at_ms: u64,
        /// The continuing escrow UTxO.
        escrow: TxoRef,
        /// The providers' acceptance signatures from the `Assign` redeemer (64 bytes each,
        /// hex), in assignment order; empty in records indexed before they were kept.
        #[serde(default, with = "hex_bytes_list")]
        acceptances: Vec<Vec<u8>>,
    },
    /// The job settled: every attestation and every payment.
    JobSettled {
        /// Job id.
        job_id: JobId,
        /// One per assignment.
        attestations: Vec<Attestation>,
        /// Payments to providers.
        payments: Vec<Payment>,
        /// NTX refunded to the orchestrator.
        refund: u64,
    },
    /// An open job was cancelled.
    JobCancelled {
        /// Job id.
        job_id: JobId,
        /// NTX refunded.
        refund: u64,
    },
    /// The job expired: attested providers paid, the rest refunded, defaulters slashed.
    JobExpired {
        /// Job id.
        job_id: JobId,
        /// Attestations of the providers that finished.
        attestations: Vec<Attestation>,
        /// Payments to them.
        payments: Vec<Payment>,
        /// Assigned providers that never attested.
        #[serde(with = "hex_list")]
        defaulters: Vec<KeyHash>,
        /// NTX refunded to the orchestrator (slashes included).
        refund: u64,
    },
    /// An output at the script address that is not an authentic escrow or bond.
    Ignored {
        /// The output.
        utxo: TxoRef,
        /// Why it does not count.
        reason: String,
    },
}

impl Event {
    /// The job the event belongs to, if any.
    pub fn job_id(&self) -> Option<JobId> {
        match self {
            Self::JobLocked { job_id, .. }
            | Self::JobAssigned { job_id, .. }
            | Self::JobSettled { job_id, .. }
            | Self::JobCancelled { job_id, .. }
            | Self::JobExpired { job_id, .. }
            | Self::BondSlashed { job_id, .. } => Some(*job_id),
            _ => None,
        }
    }
}

/// An event and where it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Where.
    pub meta: Meta,
    /// Position among the transaction's events.
    pub seq: u32,
    /// What.
    pub event: Event,
}

mod hex_bytes_list {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(hex::encode))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        Vec::<String>::deserialize(d)?
            .into_iter()
            .map(|h| hex::decode(&h).map_err(serde::de::Error::custom))
            .collect()
    }
}

mod hex_list {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[[u8; 28]], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(hex::encode))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<[u8; 28]>, D::Error> {
        Vec::<String>::deserialize(d)?
            .into_iter()
            .map(|h| {
                hex::decode(&h)
                    .ok()
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| serde::de::Error::custom("expected 28 hex bytes"))
            })
            .collect()
    }
}
