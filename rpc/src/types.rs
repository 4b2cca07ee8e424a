//! Request and response types. Amounts are [`Amount`]s: lovelace for ADA, base units for NTX,
//! written as decimal strings (`"4000000"`), see [`crate::amount`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::amount::{Amount, AmountParam, InvalidAmount};

/// `node_info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's version (crate version).
    pub version: String,
    /// `devnet`, `preview`, `preprod` or `mainnet`.
    pub network: String,
    /// Ouroboros network magic.
    pub magic: u64,
    /// The wallet's address (bech32), when a key exists.
    pub wallet_address: Option<String>,
}

/// `node_gpus`: this node's GPUs as it sees them, and whether containers can use its NVIDIA
/// GPUs (the start-up GPU check of a provider).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuReport {
    /// Every GPU and MIG device listed, offered or not.
    pub gpus: Vec<GpuEntry>,
    /// One line per source that could not look (e.g. `NVML: NVIDIA driver library
    /// (libnvidia-ml.so.1) not found: …`).
    pub notes: Vec<String>,
    /// The container check; `null` when it did not run (no NVIDIA GPU to offer).
    pub containers: Option<ContainerGpus>,
}

/// One GPU (or MIG device) of [`GpuReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuEntry {
    /// Index within its source (for a MIG device: its parent's).
    pub index: u32,
    /// `nvml`, `sysfs` or `declared`.
    pub source: String,
    /// `nvidia` or `amd`.
    pub vendor: String,
    /// Product name; empty when the driver could not tell.
    pub name: String,
    /// `GPU-…`, `MIG-…` or another stable id.
    pub uuid: Option<String>,
    /// Total memory, MiB (a MIG device's own; an APU's is shared system memory).
    pub vram_total_mib: u64,
    /// For a MIG device: the parent GPU's UUID.
    pub mig_parent_uuid: Option<String>,
    /// The memory is shared system memory (an APU).
    pub shared_memory: bool,
    /// Whether the node offers it.
    pub offered: bool,
    /// Why not, when not offered.
    pub not_offered: Option<String>,
}

/// Whether containers can be given the node's NVIDIA GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerGpus {
    /// True when the smoke container got its GPUs.
    pub usable: bool,
    /// `cdi` or `nvidia` (the device request driver) when usable.
    pub driver: Option<String>,
    /// When not usable: `toolkit_missing`, `cdi_disabled`, `no_cdi_spec`, `cdi_unlisted` or
    /// `smoke_failed`.
    pub reason: Option<String>,
    /// When not usable: the reason in words, the engine's words and the fix.
    pub detail: Option<String>,
}

/// `node_tip`: the chain tip seen over N2C.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tip {
    /// Slot of the tip block.
    pub slot: u64,
    /// Block header hash, hex (64 characters).
    pub hash: String,
}

/// `wallet_balance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// Lovelace.
    pub lovelace: Amount,
    /// Native assets: `"<policy hex>.<asset name hex>"` → quantity (base units).
    pub assets: BTreeMap<String, Amount>,
    /// Number of UTxOs.
    pub utxos: usize,
}

/// `wallet_send` parameters (by name or position: `to`, `lovelace`, `ntx`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    /// Destination address, bech32 or hex, on the node's network.
    pub to: String,
    /// Lovelace to send (at least the output's min-UTxO).
    pub lovelace: Amount,
    /// NTX base units to send along; default 0.
    #[serde(default)]
    pub ntx: Amount,
}

/// `wallet_send` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// Transaction id, hex.
    pub tx_id: String,
    /// Fee paid, lovelace.
    pub fee: Amount,
}

/// `job_submit` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSubmitted {
    /// Job id (the escrow thread token's asset name), hex (64 characters).
    pub job_id: String,
}

/// `job_quote` result: whether today's market can place a spec, on whom, at what cost at
/// worst. Nothing was locked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQuote {
    /// True when the matcher found a placement now.
    pub placeable: bool,
    /// The providers it would pick (empty when not placeable).
    pub nodes: Vec<QuotedNode>,
    /// What the escrow could pay them at most: every GPU at its rate until the deadline, NTX
    /// base units (0 when not placeable).
    pub worst_case_ntx: Amount,
    /// The spec's budget, NTX base units: locked at submit, the rest refunded.
    pub budget_ntx: Amount,
    /// Why nothing fits (when not placeable).
    pub reason: Option<String>,
    /// When a pairwise limit keeps every plan out (`placement.max_rtt_ms`,
    /// `placement.groups.max_rtt_ms`, `placement.min_bandwidth_mbps` pair by pair): its
    /// closest failing pair, with the full key hashes `reason` shortens. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<FailingPair>,
}

/// One provider of a [`JobQuote`], in the order it would be assigned (group by group with
/// `placement.groups`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotedNode {
    /// Payment key hash, hex (56 characters).
    pub provider: String,
    /// GPUs placed on it.
    pub gpus: u64,
    /// Its rate, NTX base units per GPU-hour.
    pub rate: Amount,
    /// Its latency group (`placement.groups`), 0-based; absent without groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

/// The closest failing pair of a no-fit [`JobQuote`]: two candidate providers whose pair
/// misses a pairwise limit by the least (the measured pair nearest the bound, else a pair
/// never measured).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingPair {
    /// The limit: `placement.max_rtt_ms`, `placement.groups.max_rtt_ms` or
    /// `placement.min_bandwidth_mbps`.
    pub limit: String,
    /// One provider's payment key hash, hex (56 characters).
    pub a: String,
    /// The other provider's payment key hash, hex (56 characters).
    pub b: String,
    /// The pair's measured median round trip, µs; `None` = never measured.
    pub rtt_us: Option<u32>,
    /// The pair's measured throughput, Mbit/s; `None` = not measured.
    pub mbps: Option<u32>,
    /// The RTT bound it misses, µs (an RTT limit); else `None`.
    pub max_rtt_us: Option<u32>,
    /// The throughput floor it misses, Mbit/s (`placement.min_bandwidth_mbps`); else `None`.
    pub min_mbps: Option<u32>,
}

/// One transition of a job record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobTransition {
    /// The state entered (snake_case).
    pub state: String,
    /// When, POSIX ms.
    pub at_ms: u64,
}

/// One transaction of a job record's intent log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobTx {
    /// `lock`, `assign`, `settle`, `cancel` or `expire`.
    pub kind: String,
    /// Transaction id, hex.
    pub tx_id: String,
}

/// `job_status` / `job_cancel`: one role's record of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    /// Job id, hex.
    pub job_id: String,
    /// `orchestrator` or `provider`.
    pub role: String,
    /// Current state (snake_case, e.g. `matching`, `settled`, `running`, `paid`).
    pub state: String,
    /// Every state entered, oldest first.
    pub history: Vec<JobTransition>,
    /// Transactions submitted for the job by this node.
    pub txs: Vec<JobTx>,
    /// The last problem met, if any.
    pub last_error: Option<String>,
    /// The orchestrator's record only: each assigned provider's share as the chain shows it,
    /// in assignment order (empty before the assignment and in a provider's record).
    #[serde(default)]
    pub nodes: Vec<JobNode>,
    /// The orchestrator's record only, once every share is claimed or the escrow expired:
    /// `succeeded` when every node attested exit code 0, `stopped` when the orchestrator
    /// stopped it (`job_stop`), else `failed` (the failed nodes' `exit_code` and `reason` say
    /// why). `None` while the job runs, when it was cancelled,
    /// and in a provider's record.
    #[serde(default)]
    pub outcome: Option<String>,
    /// The orchestrator's record only: the measured provider pairs of the plan it chose (its
    /// latest match), as its matcher saw them; `age_s` is each measurement's age at the match.
    /// Empty before a match, for a single-node plan and in a provider's record.
    #[serde(default)]
    pub links: Vec<crate::audit::MatrixPair>,
    /// The orchestrator's record only: the job (hex id) that locked this one's spec again
    /// after its network did not form (its providers could not reach each other); `None`
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
    /// The orchestrator's record only: the job (hex id) whose network did not form, that this
    /// one matches again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<String>,
    /// A service's replicas, load and cost (`kind: service`, orchestrator only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<JobService>,
    /// The provider's record of a service's replica only: what it served, as the usage its
    /// best receipt carries (signed by the orchestrator; attested in its log when it ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ReplicaUsage>,
}

/// What a service's replica served through its orchestrator's gateway, cumulative, as the
/// orchestrator signed it with a receipt (issue #24 "pay by use": receipts pay GPU time,
/// these counts let the bill be read per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaUsage {
    /// Requests the replica answered (any HTTP status it sent).
    pub requests: u64,
    /// Requests that did not reach it or broke off before their response ended.
    pub failed: u64,
    /// Request body bytes sent to it.
    pub bytes_in: u64,
    /// Response body bytes received from it.
    pub bytes_out: u64,
    /// The receipt the counts were signed with: they run up to this moment, POSIX ms (absent
    /// where the node shows what it signed last without the receipt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
}

/// One assigned provider's share of a job, from the chain (its assignment and its claim's
/// signed attestation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobNode {
    /// Its index in the assignment, which is also its node rank.
    pub index: u64,
    /// Payment key hash, hex (56 characters).
    pub provider: String,
    /// GPUs it was assigned.
    pub gpus: u64,
    /// `assigned` (no claim yet), `running` (no claim yet, and this node acknowledged its
    /// heartbeat in the last two receipt intervals), `claimed`, or `defaulted` (the escrow
    /// expired without its claim: its bond was slashed).
    pub state: String,
    /// The container's exit code it attested (−1: nothing ran, or the code is unknown).
    pub exit_code: Option<i64>,
    /// GPU-milliseconds it attested (claimed), or last reported in a heartbeat (running).
    pub gpu_ms: Option<u64>,
    /// NTX base units its claim was paid.
    pub paid: Option<Amount>,
    /// CID of its attested log (text form; `ganglion job logs`).
    pub logs: Option<String>,
    /// Why its share failed, in the provider's words: the `[ganglion] …` line its attested log
    /// ends with, else the log's last line. Read only for a failed share whose log this node
    /// holds or can fetch.
    pub reason: Option<String>,
    /// Its latency group (`placement.groups`), 0-based, as the orchestrator's plan placed it;
    /// absent without groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// Its rate, NTX base units per GPU-hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Amount>,
    /// A service's replica released by a rescale: paid up to this time (POSIX ms), then it
    /// stops and claims. Absent while it runs to the deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_until_ms: Option<u64>,
    /// A service's replica: what it served, as this node (its orchestrator) last signed it
    /// with a receipt. Absent for a batch job and before the first such receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ReplicaUsage>,
}

/// A service's replicas, load and cost as its orchestrator's node sees them (`kind: service`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobService {
    /// Routed as `/<name>/…` on the node's gateway (`[gateway] listen`).
    pub name: String,
    /// Replicas wanted now, within the spec's `replicas.min..=replicas.max`.
    pub wanted: u32,
    /// Assignment indices running: not claimed, not released, not given up as lost.
    pub running: Vec<u64>,
    /// The gateway's load over its last 10 s; absent when this node routes no gateway, or no
    /// longer routes the service (it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<ServiceLoad>,
    /// NTX base units the service has cost so far: what its claims paid, plus the GPU time
    /// the running replicas reported in their last acknowledged heartbeats, at their rates.
    pub cost_so_far: Amount,
    /// Requests its replicas answered so far, as signed with their receipts (the sum of the
    /// nodes' `usage.requests`).
    #[serde(default)]
    pub requests: u64,
    /// `cost_so_far` per 1 000 requests answered, NTX base units (rounded down); absent before
    /// the first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_1k_requests: Option<Amount>,
}

/// A service's load at its gateway over the last 10 s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServiceLoad {
    /// Replicas taking requests.
    pub healthy: u32,
    /// Requests outstanding now.
    pub in_flight: u32,
    /// Responses per second.
    pub requests_per_s: f64,
    /// Median time to the response head, ms.
    pub p50_ms: Option<f64>,
    /// 90th percentile time to the response head, ms.
    pub p90_ms: Option<f64>,
}

/// `job_buildLock` result: the unsigned lock for a CIP-30 wallet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsignedLock {
    /// Job id, hex (64 characters).
    pub job_id: String,
    /// The unsigned transaction, hex CBOR (Conway): pass to CIP-30 `signTx(tx, false)`.
    pub tx_cbor_hex: String,
    /// Transaction id, hex: blake2b-256 of the body, what the wallet's key signs.
    pub tx_id: String,
    /// Fee, lovelace.
    pub fee: Amount,
    /// First slot at which the transaction is no longer valid.
    pub valid_until_slot: u64,
    /// Payment key hash the escrow names as orchestrator (this node's), hex.
    pub orchestrator: String,
}

/// `tx_submit` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxSubmitted {
    /// Transaction id, hex.
    pub tx_id: String,
    /// The job the transaction locks, hex, when it is a lock.
    pub job_id: Option<String>,
    /// Whether this node now orchestrates that job (a lock from its own `job_buildLock`).
    pub adopted: bool,
}

/// A `job_event` notification of `job_subscribe`: one transition of one role's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    /// Job id, hex.
    pub job_id: String,
    /// `orchestrator` or `provider`.
    pub role: String,
    /// The state entered (snake_case).
    pub state: String,
    /// When, POSIX ms.
    pub at_ms: u64,
    /// Slot of the chain event behind the transition, when one was.
    pub slot: Option<u64>,
    /// The record's transactions when the event was sent (kind and id).
    pub txs: Vec<JobTx>,
    /// Whether the state is final for this role.
    pub terminal: bool,
}

/// `provider_unbond` / `provider_withdraw` / `provider_post` / `provider_topUp` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BondTx {
    /// Transaction id, hex.
    pub tx_id: String,
    /// The bond UTxO spent (unbond, withdraw, top-up) or created (post),
    /// `<tx hash hex>#<index>`.
    pub bond: String,
    /// For an unbond: the first slot from which `provider_withdraw` can succeed (the unbonding
    /// clock starts at the transaction's upper validity bound, plus the network's unbonding
    /// delay); `None` for a withdraw.
    pub withdrawable_from_slot: Option<u64>,
    /// The same moment, POSIX ms.
    pub withdrawable_from_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::audit::{MarketOffer, OfferGpus};

    /// `docs/openrpc.json`, parsed.
    fn openrpc() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openrpc.json");
        let text = std::fs::read_to_string(path).expect("docs/openrpc.json");
        serde_json::from_str(&text).expect("JSON")
    }

    /// The property names of a schema object.
    fn documented(schema: &Value) -> Vec<String> {
        let mut v: Vec<String> = (schema["properties"].as_object())
            .unwrap_or_else(|| panic!("no properties in {schema}"))
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// The field names `v` serializes to (every optional field set, so none is skipped).
    fn served<T: Serialize>(v: &T) -> Vec<String> {
        let mut keys: Vec<String> = (serde_json::to_value(v).expect("JSON").as_object())
            .expect("an object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// The answers whose fields this crate grew (measured compute, uplink, latency groups,
    /// the failing pair) are documented field for field in `docs/openrpc.json`.
    #[test]
    fn openrpc_documents_every_field_of_offers_quotes_and_job_nodes() {
        let doc = openrpc();
        let schemas = &doc["components"]["schemas"];
        let offer = MarketOffer {
            provider: String::new(),
            peer_id: String::new(),
            bond: String::new(),
            bond_gpus: 1,
            price_per_gpu_hour: 1.into(),
            score: 1,
            bench_version: Some(1),
            uplink_mbps: 1,
            direct_capable: true,
            gpus: vec![OfferGpus {
                model: String::new(),
                vram_mib: 1,
                free: 1,
                declared: false,
            }],
            addrs: vec![],
            expires_ms: 1,
        };
        assert_eq!(documented(&schemas["MarketOffer"]), served(&offer));
        let node = JobNode {
            index: 0,
            provider: String::new(),
            gpus: 1,
            state: String::new(),
            exit_code: Some(0),
            gpu_ms: Some(1),
            paid: Some(1.into()),
            logs: Some(String::new()),
            reason: Some(String::new()),
            group: Some(0),
            rate: Some(1.into()),
            released_until_ms: Some(1),
            usage: Some(ReplicaUsage {
                requests: 1,
                failed: 0,
                bytes_in: 1,
                bytes_out: 1,
                until_ms: Some(1),
            }),
        };
        assert_eq!(documented(&schemas["JobNode"]), served(&node));
        assert_eq!(
            documented(&schemas["ReplicaUsage"]),
            served(&node.usage.expect("usage"))
        );
        let load = ServiceLoad {
            healthy: 1,
            in_flight: 0,
            requests_per_s: 1.0,
            p50_ms: Some(1.0),
            p90_ms: Some(1.0),
        };
        assert_eq!(documented(&schemas["ServiceLoad"]), served(&load));
        let service = JobService {
            name: String::new(),
            wanted: 1,
            running: vec![0],
            load: Some(load),
            cost_so_far: 1.into(),
            requests: 1,
            cost_per_1k_requests: Some(1.into()),
        };
        assert_eq!(documented(&schemas["JobService"]), served(&service));
        let quote = JobQuote {
            placeable: false,
            nodes: vec![QuotedNode {
                provider: String::new(),
                gpus: 1,
                rate: 1.into(),
                group: Some(0),
            }],
            worst_case_ntx: 0.into(),
            budget_ntx: 0.into(),
            reason: Some(String::new()),
            pair: Some(FailingPair {
                limit: String::new(),
                a: String::new(),
                b: String::new(),
                rtt_us: None,
                mbps: None,
                max_rtt_us: None,
                min_mbps: None,
            }),
        };
        let method = (doc["methods"].as_array().expect("methods").iter())
            .find(|m| m["name"] == "job_quote")
            .expect("job_quote is documented");
        let schema = &method["result"]["schema"];
        assert_eq!(documented(schema), served(&quote));
        assert_eq!(
            documented(&schema["properties"]["nodes"]["items"]),
            served(&quote.nodes[0])
        );
        assert_eq!(
            documented(&schema["properties"]["pair"]),
            served(&quote.pair)
        );
    }
}
