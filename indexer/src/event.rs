//! Marketplace events extracted from the chain, each with where it happened.

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::{Assignment, JobId};
use ganglion_contracts::v2::payout::Payout;
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
    /// The transaction's fee, lovelace (0 in records written before it was kept).
    #[serde(default)]
    pub fee: u64,
}

/// NTX paid to a provider's key by a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// Payment key hash of the payee.
    #[serde(with = "hex::serde")]
    pub to: KeyHash,
    /// NTX base units.
    pub ntx: u64,
}

/// The receipt terms of an escrow (`docs/escrow-v2.md`): who signs receipts and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptTerms {
    /// The orchestrator's ed25519 receipt key (32 bytes): signs `Receipt{job_id,
    /// provider_index, acknowledged_until}`.
    #[serde(with = "hex::serde")]
    pub key: [u8; 32],
    /// Milliseconds between two receipts: a claim counts at most one interval past its
    /// receipt (DESIGN §3.1 G1).
    pub interval_ms: u64,
}

/// What a claim left of the escrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum ClaimOutcome {
    /// Other assignments are still unclaimed: the escrow continues here, less the pay.
    Continues {
        /// The continuing escrow UTxO.
        escrow: TxoRef,
    },
    /// The last claim: the thread token is burnt and the rest refunded to the orchestrator.
    Closed {
        /// NTX base units refunded to the orchestrator (`outputs[1]`).
        refund: u64,
    },
}

/// One defaulter's bond slashed by an expire (DESIGN §3.1 G4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slash {
    /// The defaulting provider's key hash.
    #[serde(with = "hex::serde")]
    pub provider: KeyHash,
    /// Its index in the escrow's assignments.
    pub index: u64,
    /// NTX base units taken from its bond: `min(stake, gpus × rate × window / 3 600 000)`.
    pub amount: u64,
}

/// An assignment a Rescale released: it is paid no further than `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// Its index in the escrow's assignments.
    pub index: u64,
    /// The provider's key hash.
    #[serde(with = "hex::serde")]
    pub provider: KeyHash,
    /// The new end of its paid window, POSIX ms (before: the deadline or an earlier release).
    pub until_ms: u64,
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
        /// Where the provider's claims pay: its full payout address, payment key and stake
        /// credential.
        payout: Payout,
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
        /// Receipt key and interval.
        receipts: ReceiptTerms,
        /// Milliseconds after the deadline during which claims stay possible, from the
        /// deployment's parameters.
        claim_window_ms: u64,
    },
    /// The job was assigned to providers.
    JobAssigned {
        /// Job id.
        job_id: JobId,
        /// Providers, GPUs, rates, payout addresses and accept-by times.
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
    /// The orchestrator of a running job rescaled it (`Rescale`): assignments released and
    /// providers added after the existing ones.
    JobRescaled {
        /// Job id.
        job_id: JobId,
        /// The assignments added, in order; their indices follow the existing ones
        /// (`first_added`, `first_added + 1`, …). Each runs from the rescale's lower bound
        /// (`started_at_ms`) to the deadline.
        added: Vec<Assignment>,
        /// Index of the first added assignment: the number of assignments before.
        first_added: u64,
        /// The assignments released.
        released: Vec<Released>,
        /// The continuing escrow UTxO.
        escrow: TxoRef,
        /// The added providers' acceptance signatures from the `Rescale` redeemer, in the
        /// order added.
        #[serde(default, with = "hex_bytes_list")]
        acceptances: Vec<Vec<u8>>,
    },
    /// A claim paid assignment `index` for its attested GPU time.
    JobClaimed {
        /// Job id.
        job_id: JobId,
        /// Index of the assignment paid.
        index: u64,
        /// The provider's key hash.
        #[serde(with = "hex::serde")]
        provider: KeyHash,
        /// Where the pay went (the assignment's payout address).
        payout: Payout,
        /// GPU-milliseconds attested.
        gpu_ms: u64,
        /// NTX base units paid (`outputs[0]`): `⌊gpu_ms × rate / 3 600 000⌋`.
        paid: u64,
        /// The orchestrator's receipt the claim carried, if any: the POSIX ms acknowledged
        /// and the receipt key's signature.
        receipt: Option<ganglion_contracts::v2::redeemer::SignedReceipt>,
        /// The claim transaction's validity lower bound, POSIX ms (the "time provably
        /// elapsed" of DESIGN §3.1 G1), when the watch knows the slot clock.
        lower_bound_ms: Option<u64>,
        /// The provider's signed attestation (result and log CIDs, exit code).
        attestation: ganglion_contracts::v2::redeemer::Attestation,
        /// Whether the escrow continues or closed (with the refund).
        outcome: ClaimOutcome,
    },
    /// An open job was cancelled.
    JobCancelled {
        /// Job id.
        job_id: JobId,
        /// NTX refunded.
        refund: u64,
    },
    /// The job expired after its deadline and claim window: the rest refunded, defaulters
    /// slashed.
    JobExpired {
        /// Job id.
        job_id: JobId,
        /// Assigned providers that never claimed, whether or not their bond was slashed.
        #[serde(with = "hex_list")]
        defaulters: Vec<KeyHash>,
        /// NTX refunded to the orchestrator (`outputs[0]`), slashes recovered included.
        refund: u64,
        /// The bonds slashed, per defaulter.
        slashes: Vec<Slash>,
        /// NTX base units of the slashes the orchestrator recovered: `min(Σ slashes, paid)`.
        recovered: u64,
        /// NTX base units of the slashes locked for good in a `Burnt{job_id}` output.
        burnt: u64,
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
            | Self::JobRescaled { job_id, .. }
            | Self::JobClaimed { job_id, .. }
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
