//! Why a node could not start or stopped.

use std::path::PathBuf;

/// A step of starting the node failed. Each variant names the step; the cause is its source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// Settings (data dir, N2C endpoint).
    #[error("settings: {0}")]
    Settings(#[from] crate::settings::Error),
    /// The network preset (unknown network, the deployment a public network requires).
    #[error("network: {0}")]
    Network(#[from] crate::network::Error),
    /// The data dir (its layout, the RPC cookie).
    #[error("data dir: {0}")]
    DataDir(#[from] crate::datadir::Error),
    /// The payment key file.
    #[error("payment key: {0}")]
    PaymentKey(#[from] crate::wallet::key::Error),
    /// No payment key in the data dir.
    #[error("no payment key at {0}: run `ganglion wallet new` first")]
    NoPaymentKey(PathBuf),
    /// A key file could not be read or written.
    #[error("key file {path}: {source}")]
    Key {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: crate::datadir::Error,
    },
    /// No `[validator]` in the config and no reference script at the validator's address:
    /// the validator is not deployed on this chain with these parameters.
    #[error(
        "the validator is not deployed: no UTxO at its address carries its reference script \
         (on a devnet run `ganglion devnet deploy`; else set [validator] reference = \
         {{ tx_hash = \"<64 hex>\", index = N }}, the UTxO holding it)"
    )]
    NoValidator,
    /// The configured reference UTxO is not at the script address.
    #[error("the reference script UTxO {0} is not at the validator's address on chain")]
    ReferenceMissing(String),
    /// Talking to the chain (N2C: connection, query, submission) failed.
    #[error("chain: {0}")]
    Chain(#[from] crate::wallet::chain::Error),
    /// A transaction of the node's start (deploy, bond) could not be built.
    #[error("building a transaction: {0}")]
    Build(#[from] ganglion_contracts::Error),
    /// A transaction of the node's start (deploy, bond) could not be balanced, signed or
    /// submitted.
    #[error("transaction: {0}")]
    Tx(#[from] crate::job::chain::ChainError),
    /// The indexer (sled store or sync).
    #[error("indexer: {0}")]
    Indexer(#[from] ganglion_indexer::Error),
    /// The indexer did not reach the chain's tip in time.
    #[error("the indexer did not reach the chain tip (slot {tip}) within {waited_s} s")]
    CatchUp {
        /// The chain tip's slot.
        tip: u64,
        /// Seconds waited.
        waited_s: u64,
    },
    /// A provider without a live bond and no `[bond]` to post one.
    #[error(
        "no live bond for this node's payment key, attest key and peer id: add [bond] \
         stake_ntx = N to post one at start"
    )]
    NoBond,
    /// The bond posted at start did not appear on chain in time.
    #[error("the bond transaction {0} did not appear on chain within 120 s")]
    BondTimeout(String),
    /// `[provider]` is set but no GPU can be offered (the reason says which and what to do).
    #[error("provider: {0}")]
    NoOfferableGpus(String),
    /// Declared GPUs on a network other than the devnet.
    #[error("provider: {0}")]
    Declared(#[from] crate::config::DeclaredOnRealNetwork),
    /// A `[provider] pool` entry matches no GPU.
    #[error("provider: {0}")]
    Pool(#[from] ganglion_market::limits::PoolError),
    /// A pooled GPU cannot be attached to containers.
    #[error("provider: {0}")]
    Attach(#[from] super::gpus::AttachError),
    /// The per-job overlay (its config, its UDP socket, the relay protocol).
    #[error("overlay: {0}")]
    Overlay(#[from] ganglion_dispatch::overlay::OverlayError),
    /// The blockstore.
    #[error("blockstore: {0}")]
    Blockstore(#[source] Box<ganglion_storage::blockstore::Error>),
    /// `[storage] kubo_rpc` is not a URL.
    #[error("[storage] kubo_rpc: {0}")]
    KuboRpc(#[source] Box<ganglion_storage::pin::Error>),
    /// The p2p swarm.
    #[error("p2p: {0}")]
    P2p(#[from] ganglion_p2p::Error),
    /// This provider's throughput prober could not register its protocol.
    #[error("throughput probe: {0}")]
    Probe(#[from] ganglion_p2p::probe::ProbeError),
    /// The executor (Docker).
    #[error("executor: {0}")]
    Executor(#[from] ganglion_dispatch::executor::ExecError),
    /// The job engine.
    #[error("job engine: {0}")]
    Engine(#[from] crate::job::EngineError),
    /// A critical task (indexer sync, swarm, engine, RPC, metrics, overlay relay) stopped while
    /// the node ran.
    #[error(transparent)]
    Stopped(#[from] super::supervisor::TaskEnded),
    /// The JSON-RPC server.
    #[error("rpc: {0}")]
    Rpc(#[from] crate::rpc::Error),
    /// Writing `node.json`.
    #[error("writing {path}: {source}")]
    Info {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The metrics endpoint could not bind its `[metrics] listen` address.
    #[error("metrics endpoint {addr}: {source}")]
    Metrics {
        /// The configured address.
        addr: std::net::SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The index's read API could not bind its `[indexer] listen` address.
    #[error("the index's read API {addr}: {source}")]
    IndexerApi {
        /// The configured address.
        addr: std::net::SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The web console could not bind its `[console] listen` address.
    #[error("web console {addr}: {source}")]
    Console {
        /// The configured address.
        addr: std::net::SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The service gateway could not bind its `[gateway] listen` address.
    #[error("service gateway: {0}")]
    Gateway(#[from] ganglion_gateway::GatewayError),
    /// `/ganglion/service/1` was already taken on the swarm.
    #[error("service streams: {0}")]
    ServiceStreams(String),
}

impl From<ganglion_storage::blockstore::Error> for DaemonError {
    fn from(e: ganglion_storage::blockstore::Error) -> Self {
        Self::Blockstore(Box::new(e))
    }
}
