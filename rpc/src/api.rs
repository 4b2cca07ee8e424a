//! The method traits, one per namespace (`node`, `wallet`, `job`, `tx`, `provider`, `audit`,
//! `market`, `storage`); the node implements them and merges the
//! modules (`into_rpc()`) into one server. Mutating methods (`crate::auth::MUTATING`)
//! are refused without the bearer token by the server's middleware (`crate::auth::RequireToken`).

use jsonrpsee::core::RpcResult;
use jsonrpsee::proc_macros::rpc;

use crate::audit::{
    AuditJob, AuditProvider, AuditReport, BondInfo, JobLog, JobOutput, LiveJobLog, MarketOffer,
};
use crate::types::{AmountParam, Balance, GpuReport, JobStatus, JobSubmitted, NodeInfo, Sent, Tip};

/// `node_*`: about the node and its chain.
#[rpc(server, client, namespace = "node")]
pub trait NodeApi {
    /// Version, network, magic and wallet address.
    #[method(name = "info")]
    async fn info(&self) -> RpcResult<NodeInfo>;

    /// The chain tip over N2C; `null` at origin.
    #[method(name = "tip")]
    async fn tip(&self) -> RpcResult<Option<Tip>>;

    /// The node's GPUs, offered or not and why, and whether containers can use its NVIDIA
    /// GPUs (a provider's start-up GPU check).
    #[method(name = "gpus")]
    async fn gpus(&self) -> RpcResult<GpuReport>;
}

/// `wallet_*`: the node's payment key and funds.
#[rpc(server, client, namespace = "wallet")]
pub trait WalletApi {
    /// The wallet's address (bech32).
    #[method(name = "address")]
    async fn address(&self) -> RpcResult<String>;

    /// Lovelace and native assets at the wallet's address.
    #[method(name = "balance")]
    async fn balance(&self) -> RpcResult<Balance>;

    /// Pays `lovelace` (and `ntx` NTX base units, default 0) to `to` and submits
    /// (mutating: bearer token required). Params as in [`crate::types::SendRequest`]: the
    /// amounts are decimal strings or JSON integers, parsed exactly with
    /// [`crate::amount::AmountParam::parse`]; anything else is
    /// [`crate::error::INVALID_PARAMS`] naming the parameter
    /// ([`crate::amount::InvalidAmount`]).
    #[method(name = "send")]
    async fn send(
        &self,
        to: String,
        lovelace: AmountParam,
        ntx: Option<AmountParam>,
    ) -> RpcResult<Sent>;
}

/// `job_*`: jobs this node orchestrates or runs (answered by the node's job engine; without
/// one `submit`, `status`, `cancel`, `buildLock`, `subscribe` and `liveLogs` answer
/// [`crate::error::JOB`]), the CIP-30 lock of a wallet outside the
/// node (`job_buildLock`, submitted back through [`TxApi`]'s `tx_submit`), a job's transitions
/// as they happen (`job_subscribe`, WebSocket), its providers' live logs while it runs
/// (`job_liveLogs`, from the engine), and the artifacts its providers attested on
/// chain in their claims (`job_logs`, `job_outputs`: read from the node's blockstore or fetched
/// over bitswap from the providers; a server that follows no chain answers them
/// [`crate::error::CHAIN_UNAVAILABLE`]).
#[rpc(server, client, namespace = "job")]
pub trait JobApi {
    /// Pins the ensemble spec (a JSON object, `docs/ensemble-spec.md`; its NTX amounts
    /// `budget_ntx` and `limits.max_rate_ntx_per_gpu_hour` are amounts like every other:
    /// decimal strings or JSON integers, [`crate::amount`]) and locks its budget (mutating:
    /// bearer token required). Returns the job id.
    #[method(name = "submit")]
    async fn submit(&self, spec: serde_json::Value) -> RpcResult<JobSubmitted>;

    /// The node's records of a job (64 hex digits): one per role it plays in it; empty when
    /// unknown.
    #[method(name = "status")]
    async fn status(&self, job_id: String) -> RpcResult<Vec<JobStatus>>;

    /// Whether today's market could place `spec` (a JSON object, as `job_submit` takes), on
    /// whom, and what it could cost at worst; nothing is pinned or locked. Terms that cannot
    /// be met and bad specs: [`crate::error::INVALID_PARAMS`], as for `job_submit`.
    #[method(name = "quote")]
    async fn quote(&self, spec: serde_json::Value) -> RpcResult<crate::types::JobQuote>;

    /// Every job the node holds a record of, one entry per role it plays (orchestrator,
    /// provider), the most recently changed first; with `state` (snake_case, e.g. `running`,
    /// `settled`) only the records in that state.
    #[method(name = "list")]
    async fn list(&self, state: Option<String>) -> RpcResult<Vec<JobStatus>>;

    /// Cancels an orchestrated job whose escrow is still open (mutating: bearer token
    /// required). Returns the job's state afterwards.
    #[method(name = "cancel")]
    async fn cancel(&self, job_id: String) -> RpcResult<JobStatus>;

    /// Stops an orchestrated job (mutating: bearer token required): one still open is
    /// cancelled; a running one is stopped: its providers' heartbeats are refused from now on,
    /// so they stop their containers and claim the work acknowledged, and the last claim
    /// refunds the rest. Returns the orchestrator's record.
    #[method(name = "stop")]
    async fn stop(&self, job_id: String) -> RpcResult<JobStatus>;

    /// Pins the ensemble spec and builds its lock funded by the wallet at `change_address`
    /// (bech32 or hex, a key address on the node's network), spending `utxos` (CIP-30
    /// `getUtxos()` items, hex CBOR) or, when absent, the address's UTxOs on chain. The escrow
    /// names this node's key as orchestrator, so the node can drive the job once the lock is
    /// submitted through `tx_submit` (refunds go to the node's wallet). Mutating: bearer token
    /// required. The wallet signs the returned body (CIP-30 `signTx(tx, false)`).
    #[method(name = "buildLock")]
    async fn build_lock(
        &self,
        spec: serde_json::Value,
        change_address: String,
        utxos: Option<Vec<String>>,
    ) -> RpcResult<crate::types::UnsignedLock>;

    /// Streams [`crate::types::JobEvent`]s for `job_id` (64 hex digits) as `job_event`
    /// notifications: first every transition so far, then each new one, until every record
    /// the node holds for the job is terminal; then the server closes the subscription with a
    /// last `job_event` whose `params.error` (instead of `result`) says the job ended, which
    /// jsonrpsee clients read as the end of the stream.
    /// Unknown job or no engine: [`crate::error::JOB`]; a malformed id:
    /// [`crate::error::INVALID_PARAMS`].
    #[subscription(name = "subscribe" => "event", unsubscribe = "unsubscribe", item = crate::types::JobEvent)]
    async fn events(&self, job_id: String) -> jsonrpsee::core::SubscriptionResult;

    /// The log of each attested provider of `job_id` (64 hex digits), in assignment order.
    /// A job with no attestation on chain yet (no provider claimed), or unknown:
    /// [`crate::error::JOB`]; a malformed id: [`crate::error::INVALID_PARAMS`].
    #[method(name = "logs")]
    async fn logs(&self, job_id: String) -> RpcResult<Vec<JobLog>>;

    /// The live log of each provider of `job_id` (64 hex digits, a job this node
    /// orchestrates) that sent one while its share runs, in assignment order: the end (at most
    /// 64 KiB) of its rank's container output, as its latest heartbeat named it, read from the
    /// node's blockstore or fetched over bitswap from the provider (each within 10 s; one that
    /// cannot be read has its `error`). Unattested: `job_logs` gives the attested logs once the
    /// providers claim. In memory: empty after the node restarts, until the next heartbeats.
    /// Read-only. Unknown job, one this node does not orchestrate, or no engine:
    /// [`crate::error::JOB`]; a malformed id: [`crate::error::INVALID_PARAMS`].
    #[method(name = "liveLogs")]
    async fn live_logs(&self, job_id: String) -> RpcResult<Vec<LiveJobLog>>;

    /// The outputs of each attested provider of `job_id`, listed; with `dir` (an absolute
    /// path on the node's host) each provider's directory is also unpacked to
    /// `<dir>/rank-<index>` (existing files there are overwritten). Mutating (it writes
    /// files): bearer token required. Errors as `job_logs`, and
    /// [`crate::error::INVALID_PARAMS`] for a relative `dir`, [`crate::error::INTERNAL`] when
    /// writing fails.
    #[method(name = "outputs")]
    async fn outputs(&self, job_id: String, dir: Option<String>) -> RpcResult<Vec<JobOutput>>;
}

/// `tx_*`: transactions signed outside the node.
#[rpc(server, client, namespace = "tx")]
pub trait TxApi {
    /// Joins a CIP-30 witness set (hex CBOR, `signTx`'s answer) to the unsigned transaction
    /// (hex CBOR, e.g. from `job_buildLock`), checks every vkey witness against the transaction
    /// id, and submits. A lock built by `job_buildLock` on this node is then orchestrated by
    /// the node (`adopted`). Mutating: bearer token required.
    #[method(name = "submit")]
    async fn submit(
        &self,
        tx_cbor_hex: String,
        witness_set_cbor_hex: String,
    ) -> RpcResult<crate::types::TxSubmitted>;
}

/// `provider_*`: this node as a provider: its bonds and offers (read-only), and unbonding and
/// withdrawing its bond through its wallet (mutating: bearer token required; the wallet pays
/// the fee and signs).
#[rpc(server, client, namespace = "provider")]
pub trait ProviderApi {
    /// This node's bonds on chain (active and unbonding); empty when it has none.
    #[method(name = "bond")]
    async fn bond(&self) -> RpcResult<Vec<BondInfo>>;

    /// This node's offers as its market holds them; empty when it offers nothing.
    #[method(name = "offers")]
    async fn offers(&self) -> RpcResult<Vec<MarketOffer>>;

    /// Starts unbonding `bond` (`<tx hash hex>#<index>`), or this node's only active bond when
    /// absent: its GPUs leave the market and the unbonding delay (network parameter) starts.
    /// Errors: [`crate::error::INVALID_PARAMS`] (malformed reference), [`crate::error::JOB`]
    /// (no such active bond of this node, or several and none named),
    /// [`crate::error::WALLET`], [`crate::error::TX_REJECTED`],
    /// [`crate::error::CHAIN_UNAVAILABLE`].
    #[method(name = "unbond")]
    async fn unbond(&self, bond: Option<String>) -> RpcResult<crate::types::BondTx>;

    /// Withdraws the stake of unbonding `bond` (or this node's only unbonding bond) to the
    /// wallet and burns the bond token. Before the unbonding delay has passed:
    /// [`crate::error::JOB`] with a message giving the slot and POSIX ms from which it is
    /// possible. Other errors as `provider_unbond`.
    #[method(name = "withdraw")]
    async fn withdraw(&self, bond: Option<String>) -> RpcResult<crate::types::BondTx>;

    /// Posts a new bond naming this node's payment key, attest key and peer id: `stake_ntx`
    /// NTX base units (an [`AmountParam`]; at least the deployment's `min_bond_per_gpu ×
    /// gpus`) for `gpus` GPUs (default: the GPUs the node offers), paid by the node's wallet —
    /// e.g. after `provider_withdraw`, without a restart. The node offers its GPUs under the
    /// new bond once it is on chain. Errors: [`crate::error::INVALID_PARAMS`] (an amount that
    /// is not one), [`crate::error::JOB`] (this node is no provider, already has an active
    /// bond — top it up instead — or the stake is below the minimum),
    /// [`crate::error::WALLET`] (the wallet cannot pay it), [`crate::error::TX_REJECTED`],
    /// [`crate::error::CHAIN_UNAVAILABLE`]. Mutating.
    #[method(name = "post")]
    async fn post(
        &self,
        stake_ntx: AmountParam,
        gpus: Option<u64>,
    ) -> RpcResult<crate::types::BondTx>;

    /// Adds `add_ntx` NTX base units (an [`AmountParam`]) to `bond` (`<tx hash hex>#<index>`)
    /// or to this node's only active bond (validator redeemer `TopUp`: same datum, more
    /// stake) — e.g. back above its minimum after a slash, which took it out of the market
    /// until then. Errors as `provider_post` and `provider_unbond`. Mutating.
    #[method(name = "topUp")]
    async fn top_up(
        &self,
        add_ntx: AmountParam,
        bond: Option<String>,
    ) -> RpcResult<crate::types::BondTx>;
}

/// `audit_*`: the chain's record of jobs and providers, and independent verification.
#[rpc(server, client, namespace = "audit")]
pub trait AuditApi {
    /// The indexer's view of a job (64 hex digits).
    #[method(name = "job")]
    async fn job(&self, job_id: String) -> RpcResult<AuditJob>;

    /// A provider by payment key hash (56 hex digits) or libp2p peer id (base58).
    #[method(name = "provider")]
    async fn provider(&self, key: String) -> RpcResult<AuditProvider>;

    /// Re-derives a job from chain and IPFS only (blocks missing locally are fetched over
    /// bitswap from the job's providers) and reports each check.
    #[method(name = "verify")]
    async fn verify(&self, job_id: String) -> RpcResult<AuditReport>;

    /// Where the chain's record names `cid` (text form, CIDv0 or v1): jobs whose lock pins it
    /// as the spec, claims that attest it as a result or log; oldest first, empty when none.
    /// Not a CID: [`crate::error::INVALID_PARAMS`].
    #[method(name = "cid")]
    async fn cid(&self, cid: String) -> RpcResult<Vec<crate::audit::AuditCidUse>>;
}

/// `market_*`: what the node sees of the market.
#[rpc(server, client, namespace = "market")]
pub trait MarketApi {
    /// Live, verified offers (gossipsub), this node's own included.
    #[method(name = "offers")]
    async fn offers(&self) -> RpcResult<Vec<MarketOffer>>;

    /// The provider-to-provider latency matrix the node's matcher would use now (assembled
    /// from the live offers' signed links: fresh ones only, the worse end of a pair both
    /// report), and the node's own round trips to the providers.
    #[method(name = "matrix")]
    async fn matrix(&self) -> RpcResult<crate::audit::MarketMatrix>;
}

/// `storage_*`: the node's blockstore, which its swarm serves over bitswap (a job's inputs and
/// image archive are fetched from the orchestrator's node by its providers). CIDs as Kubo's
/// for the same options. Paths name files on the node's host and must be absolute; every
/// method but `pins` needs the bearer token (it writes the store or files).
/// Errors: [`crate::error::INVALID_PARAMS`] (a CID, option or path that is not one),
/// [`crate::error::STORAGE`] (a missing block, an unreadable path, a store failure),
/// [`crate::error::CHAIN_UNAVAILABLE`] (an RPC server without a running node).
#[rpc(server, client, namespace = "storage")]
pub trait StorageApi {
    /// Imports a file, a symlink (the link itself) or, recursively, a directory and pins its
    /// root (`ipfs add [-r]`).
    #[method(name = "add")]
    async fn add(
        &self,
        path: String,
        options: Option<crate::storage::AddOptions>,
    ) -> RpcResult<crate::storage::Added>;

    /// Writes a UnixFS file's content to `out` (`ipfs cat`).
    #[method(name = "cat")]
    async fn cat(&self, cid: String, out: String) -> RpcResult<crate::storage::Wrote>;

    /// Writes the DAG under `cid` as a CAR v1 file to `out` (`ipfs dag export`).
    #[method(name = "exportCar")]
    async fn export_car(&self, cid: String, out: String) -> RpcResult<crate::storage::Wrote>;

    /// Exports the DAG under `cid` as CAR v1 to `car_out` and computes its Filecoin piece CID.
    #[method(name = "pieceCid")]
    async fn piece_cid(&self, cid: String, car_out: String) -> RpcResult<crate::storage::Piece>;

    /// Pins the DAG under `cid` (every block must be held).
    #[method(name = "pin")]
    async fn pin(&self, cid: String) -> RpcResult<()>;

    /// Removes the pin of `cid` (its blocks go at the next GC unless another pin keeps them).
    #[method(name = "unpin")]
    async fn unpin(&self, cid: String) -> RpcResult<()>;

    /// The roots of every recursive pin (CID text form).
    #[method(name = "pins")]
    async fn pins(&self) -> RpcResult<Vec<String>>;

    /// Removes every block no pin keeps (`ipfs repo gc`).
    #[method(name = "gc")]
    async fn gc(&self) -> RpcResult<crate::storage::Collected>;
}
