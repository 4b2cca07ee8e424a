//! What the read-only methods about the chain's record and the live market return
//! (`audit_*`, `market_*`, `provider_bond` / `provider_offers`) and a job's attested artifacts
//! (`job_logs` / `job_outputs`) and its live logs (`job_liveLogs`); their traits are in
//! [`crate::api`]. Amounts are NTX base units as [`Amount`]s (decimal strings), times POSIX ms,
//! keys and hashes hex.

use serde::{Deserialize, Serialize};

use crate::amount::Amount;

/// One named check of [`AuditReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCheck {
    /// What was checked, e.g. `spec_cid`, `acceptance[1]`, `payment[0]`.
    pub name: String,
    /// Whether it holds.
    pub pass: bool,
    /// What was compared, or why it failed.
    pub detail: String,
}

/// `audit_verify`: a job re-derived from the chain and IPFS only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Job id, hex (64 characters).
    pub job_id: String,
    /// True only when every check passes.
    pub pass: bool,
    /// One entry per item checked, in a fixed order (spec, assignment, then per provider).
    pub checks: Vec<AuditCheck>,
}

/// One provider's share of a job, as the chain records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditAssignment {
    /// Payment key hash, hex (56 characters).
    pub provider: String,
    /// ed25519 attest key of its bond, hex (64 characters).
    pub attest_key: String,
    /// GPUs it ran.
    pub gpus: u64,
    /// NTX per GPU-hour.
    pub rate: Amount,
    /// Its attestation, once it claimed.
    pub attestation: Option<AuditAttestation>,
    /// NTX paid to it by its claim.
    pub paid: Option<Amount>,
    /// Start of its paid window, POSIX ms: the assign's lower bound, or the rescale's that
    /// added it (a service's later replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// End of its paid window, POSIX ms: the deadline, or earlier when a rescale released it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
}

/// An attestation, with the CIDs in their text form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditAttestation {
    /// CID of the pinned outputs (empty when none).
    pub result: String,
    /// CID of the pinned logs (empty when none).
    pub logs: String,
    /// GPU-milliseconds attested.
    pub gpu_ms: u64,
    /// The container's exit code.
    pub exit_code: i64,
}

/// One transaction of a job's chain trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditTx {
    /// `lock`, `assign`, `claim`, `cancel`, `expire` or `slash`.
    pub kind: String,
    /// Transaction id, hex.
    pub tx_id: String,
    /// Slot of its block.
    pub slot: u64,
    /// Height (block number) of its block.
    #[serde(default)]
    pub block: u64,
    /// Its fee, lovelace.
    #[serde(default)]
    pub fee: Amount,
}

/// `audit_job`: who ran what, on how many GPUs, with which inputs and outputs, for what pay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditJob {
    /// Job id, hex.
    pub job_id: String,
    /// `locked`, `assigned`, `claiming`, `claimed`, `cancelled` or `expired`.
    pub status: String,
    /// Orchestrator payment key hash, hex.
    pub orchestrator: String,
    /// CID of the ensemble spec (text form).
    pub spec: String,
    /// GPUs asked for.
    pub gpus: u64,
    /// Highest rate accepted, NTX per GPU-hour.
    pub max_rate: Amount,
    /// NTX locked.
    pub budget: Amount,
    /// Deadline, POSIX ms.
    pub deadline_ms: u64,
    /// When the assignment started, POSIX ms.
    pub started_at_ms: Option<u64>,
    /// The providers, in assignment order.
    pub assignments: Vec<AuditAssignment>,
    /// NTX returned to the orchestrator by the last claim, the cancel or the expire.
    pub refund: Option<Amount>,
    /// Every transaction of the job, oldest first.
    pub txs: Vec<AuditTx>,
    /// Blocks on top of the job's latest event.
    pub confirmations: u64,
}

/// A bond as the chain holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BondInfo {
    /// The bond UTxO, `<tx hash hex>#<index>`.
    pub bond: String,
    /// Provider payment key hash, hex.
    pub provider: String,
    /// ed25519 attest key, hex.
    pub attest_key: String,
    /// libp2p peer id (base58), or the raw bytes in hex when they do not parse.
    pub peer_id: String,
    /// GPUs the bond backs.
    pub gpus: u64,
    /// NTX staked.
    pub stake: Amount,
    /// GPUs not in assigned jobs (0 for an unbonding bond).
    pub free_gpus: u64,
    /// When unbonding started, POSIX ms; `None` while active.
    pub unbonding_since_ms: Option<u64>,
}

/// `audit_provider`: a provider's record on chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditProvider {
    /// Payment key hash, hex.
    pub provider: String,
    /// Live bonds (active and unbonding).
    pub bonds: Vec<BondInfo>,
    /// Jobs it was assigned, hex ids.
    pub jobs: Vec<String>,
    /// NTX earned from settled and expired jobs.
    pub earnings: Amount,
    /// Jobs it was assigned and never attested.
    pub defaults: Vec<String>,
    /// NTX slashed from its bonds.
    pub slashed: Amount,
}

/// `audit_cid`: one place the chain's record names a CID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCidUse {
    /// The job (hex id) whose lock or claim names the CID.
    pub job_id: String,
    /// `spec` (the lock's ensemble spec), `result` or `logs` (a claim's attestation).
    pub field: String,
    /// For `result` and `logs`: the claiming assignment's index (its node rank).
    pub index: Option<u64>,
    /// For `result` and `logs`: the claiming provider's payment key hash, hex.
    pub provider: Option<String>,
    /// Slot of the transaction that recorded it (the lock or the claim).
    pub slot: u64,
}

/// GPUs of one model in an offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferGpus {
    /// Model name.
    pub model: String,
    /// VRAM per GPU, MiB.
    pub vram_mib: u64,
    /// GPUs of this model free now.
    pub free: u32,
    /// Declared in config rather than detected.
    pub declared: bool,
}

/// A signed, verified offer in the node's live market.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketOffer {
    /// Provider payment key hash, hex.
    pub provider: String,
    /// libp2p peer id (base58).
    pub peer_id: String,
    /// The backing bond, `<tx hash hex>#<index>`.
    pub bond: String,
    /// GPUs the bond backs.
    pub bond_gpus: u32,
    /// NTX per GPU-hour.
    pub price_per_gpu_hour: Amount,
    /// Benchmark score.
    pub score: u32,
    /// The benchmark version behind `score` when the node measured it (its CUDA onboarding
    /// benchmark); `None` = unmeasured (declared GPUs, no GPU, the devnet): a neutral score.
    #[serde(default)]
    pub bench_version: Option<u32>,
    /// Uplink the offer advertises, Mbit/s: the provider's best measured throughput to a peer
    /// (its throughput probes), or the declared default until one is measured. Absent from
    /// older nodes = 0.
    #[serde(default)]
    pub uplink_mbps: u32,
    /// Reachable without a relay (declared, or a public address AutoNAT confirmed); the
    /// matcher prefers such providers at equal price and score.
    #[serde(default)]
    pub direct_capable: bool,
    /// GPUs by model.
    pub gpus: Vec<OfferGpus>,
    /// Listen multiaddrs.
    pub addrs: Vec<String>,
    /// When the offer stops counting, POSIX ms.
    pub expires_ms: u64,
}

/// One pair of providers of the latency matrix (`market_matrix`), or of the plan a job was
/// matched to (`job_status`'s `links`): what the providers' signed offers report of the path
/// between them, the worse end when both report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixPair {
    /// One provider's payment key hash, hex (56 characters; the smaller of the two).
    pub a: String,
    /// The other provider's payment key hash, hex.
    pub b: String,
    /// Median ping round trip, µs: what `placement.max_rtt_ms` is judged by.
    pub rtt_p50_us: u32,
    /// 90th-percentile ping round trip, µs.
    pub rtt_p90_us: u32,
    /// Measured throughput, Mbit/s; `null` = not measured.
    #[serde(default)]
    pub mbps: Option<u32>,
    /// When the (older) measurement was taken, POSIX ms.
    pub measured_ms: u64,
    /// Age of the measurement, seconds: at the answer (`market_matrix`), or when the plan was
    /// chosen (`job_status`).
    pub age_s: u64,
    /// Only one of the two providers reported the pair.
    #[serde(default)]
    pub one_sided: bool,
}

/// This node's own ping round trips to a provider (informational: an orchestrator is not
/// placed, so its row is not in the matrix the matcher uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnRtt {
    /// The provider's payment key hash, hex.
    pub provider: String,
    /// Its libp2p peer id (base58).
    pub peer_id: String,
    /// Latest round trip, µs.
    pub rtt_latest_us: u32,
    /// Median of the ping window, µs.
    pub rtt_p50_us: u32,
    /// 90th percentile of the ping window, µs.
    pub rtt_p90_us: u32,
    /// Samples in the window.
    pub samples: u32,
    /// Age of the latest sample, seconds.
    pub age_s: u64,
}

/// `market_matrix`: the provider-to-provider latency matrix this node's matcher would use now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketMatrix {
    /// Provider pairs with a fresh measurement, ordered by `(a, b)`. A pair of live offers
    /// missing here is out of any `placement.max_rtt_ms`.
    pub pairs: Vec<MatrixPair>,
    /// This node's row: its round trips to the providers it pings, by provider.
    pub own: Vec<OwnRtt>,
    /// The freshness bound, seconds: older measurements are dropped.
    pub max_age_s: u64,
}

/// `job_logs`: one provider's attested logs (its rank's container output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLog {
    /// The provider's index in the escrow's assignments, which is also its node rank.
    pub index: u64,
    /// Provider payment key hash, hex (56 characters).
    pub provider: String,
    /// CID of the pinned log file (text form); empty when the provider attested none.
    pub cid: String,
    /// Bytes of the log file; 0 when unread.
    pub bytes: u64,
    /// The log file's content (UTF-8, invalid sequences replaced by U+FFFD).
    pub text: String,
    /// Why the log could not be read (blocks neither held nor fetched), when it could not.
    pub error: Option<String>,
}

/// `job_liveLogs`: the latest live log one provider of a running job sent its orchestrator with
/// a heartbeat: the end (at most 64 KiB) of its rank's container output so far. Unattested and
/// informational (the attested log is `job_logs`'s, once the provider claims).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveJobLog {
    /// The provider's index in the escrow's assignments, which is also its node rank.
    pub index: u64,
    /// Provider payment key hash, hex (56 characters); empty when the chain does not show the
    /// assignment.
    pub provider: String,
    /// CID of the tail (text form): a raw block in the provider's blockstore, not pinned.
    pub cid: String,
    /// Where `text` starts in the provider's whole log, bytes from its first byte.
    pub offset: u64,
    /// The whole log's length when the provider took the tail, bytes; `total - offset` bytes
    /// were sent. Bytes before `offset` are no longer in the tail.
    pub total: u64,
    /// The log from `offset` on, as text of the same length in bytes (`text` is bytes
    /// `offset .. offset + text.len()` of the log): each byte that is not valid UTF-8 is a `?`,
    /// and a character cut at the tail's end is left out (the next tail brings it). Empty
    /// when `error` is set.
    pub text: String,
    /// When the orchestrator received it, POSIX ms (its clock).
    pub at_ms: u64,
    /// Why the tail could not be read (its block neither held nor fetched from the provider in
    /// time, or not what the heartbeat said), when it could not.
    pub error: Option<String>,
}

/// One regular file of a job's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputFile {
    /// Path inside the outputs directory, `/`-separated.
    pub path: String,
    /// CID of the file (text form).
    pub cid: String,
    /// Bytes of content.
    pub bytes: u64,
}

/// `job_outputs`: one provider's attested outputs (its rank's `/outputs` directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOutput {
    /// The provider's index in the escrow's assignments, which is also its node rank.
    pub index: u64,
    /// Provider payment key hash, hex (56 characters).
    pub provider: String,
    /// CID of the pinned outputs directory (text form); empty when the provider attested none.
    pub cid: String,
    /// Every regular file under it, sorted by path.
    pub files: Vec<OutputFile>,
    /// Where the directory was written (`<dir>/rank-<index>`), when a `dir` was given.
    pub written_to: Option<String>,
    /// Why the outputs could not be read (blocks neither held nor fetched), when they could not.
    pub error: Option<String>,
}
