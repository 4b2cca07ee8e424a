//! Shared set-up: one in-process devnet with the validator deployed, and nodes (orchestrator or
//! provider) each with its own data dir, job store, sled indexer following the devnet over
//! N2C, libp2p swarm with a bitswap blockstore, chain access and — for a provider — a Docker
//! executor running the `ganglion/probe` image. Docker is required: a missing engine fails the
//! test loudly (CI starts it with scripts/ensure-docker.sh).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use ganglion_contracts::blueprint::{key_address, key_hash};
use ganglion_contracts::env::Env;
use ganglion_contracts::params::{AssetClass, KeyHash};
use ganglion_contracts::protocol::ProtocolParams;
use ganglion_contracts::tx::{TxoRef, Utxo};
use ganglion_contracts::v2::build::{self, BondRequest, Deployment};
use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::params::Params;
use ganglion_contracts::v2::payout::Payout;
use ganglion_dispatch::executor::docker::{DockerExecutor, ExecutorConfig};
use ganglion_dispatch::executor::engine::{DEFAULT_SOCKET, DockerEngine};
use ganglion_dispatch::executor::plan::GpuAttachment;
use ganglion_indexer::follow::Source;
use ganglion_indexer::store::SledKv;
use ganglion_indexer::sync::{self, SyncConfig};
use ganglion_indexer::{Indexer, Watch};
use ganglion_jobs::accept::AcceptPolicy;
use ganglion_jobs::engine::InboundRx;
use ganglion_jobs::gpu_pick::PooledGpu;
use ganglion_market::limits::PoolModel;
use ganglion_market::snapshot::{GpuModel, Offer as MarketOffer, OfferedGpus};
use ganglion_market::spec::{Ensemble, Interconnect, Vendor};
use ganglion_node::job::chain::ChainAccess;
use ganglion_node::job::provider::ProviderSide;
use ganglion_node::job::store::JobStore;
use ganglion_node::job::{Engine, EngineConfig, NoExecutor, Parts};
use ganglion_node::settings::N2cEndpoint;
use ganglion_p2p::{self as p2p, Client};
use ganglion_storage::bitswap::BitswapStore;
use ganglion_storage::blockstore::{Blockstore, SledBlockstore};
use ganglion_storage::pin::Embedded;
use ganglion_testnet::devnet::{self, DevnetConfig, DevnetHandle};
use ganglion_testnet::genesis::Genesis;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId};
use tokio_util::sync::CancellationToken;

/// Longest wait for any one condition. A healthy lifecycle takes ~10-20 s on the 2-core CI box.
pub(crate) const WAIT: Duration = Duration::from_secs(120);
/// Rate every provider asks: 3 600 000 NTX base units per GPU-hour = 1 000 per GPU-second.
pub(crate) const RATE: u64 = 3_600_000;
/// NTX each provider bonds (the deployment's minimum is 1 000 000 per GPU).
pub(crate) const STAKE: u64 = 5_000_000;
/// NTX base units a bond holds per GPU it backs (the deployment's minimum).
pub(crate) const MIN_BOND_PER_GPU: u64 = 1_000_000;
/// The deployment's claim window, ms: an expire comes this long after a deadline.
pub(crate) const CLAIM_WINDOW_MS: u64 = 5_000;

pub(crate) type Exec = DockerExecutor<SledBlockstore>;

/// Polls `f` every 100 ms until it yields `Some`, panicking with `what` after [`WAIT`].
pub(crate) async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The devnet key of `seed` (funded at genesis for seeds 0..4).
pub(crate) fn dev_key(seed: u32) -> SigningKey {
    let mut material = b"ganglion-devnet-key".to_vec();
    material.extend_from_slice(&seed.to_be_bytes());
    SigningKey::from_bytes(&pallas_crypto::hash::Hasher::<256>::hash(&material))
}

pub(crate) fn hash_of(key: &SigningKey) -> KeyHash {
    key_hash(&key.verifying_key().to_bytes())
}

/// The receipt key of the node paying with `payment` (stable across its engine's restarts,
/// as the daemon's `keys/receipt.key` is).
pub(crate) fn receipt_key_of(payment: &SigningKey) -> SigningKey {
    let mut material = b"ganglion-test-receipt-key".to_vec();
    material.extend_from_slice(&payment.to_bytes());
    SigningKey::from_bytes(&pallas_crypto::hash::Hasher::<256>::hash(&material))
}

/// The probe image's tag (built from scripts/images/probe/probe.c when absent).
pub(crate) fn probe_image() -> String {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        ganglion_node::demo::cluster::probe_image()
            .unwrap_or_else(|e| panic!("build-probe-image.sh failed: {e}"))
    })
    .clone()
}

/// A devnet (blocks forged every slot with pending transactions) and the deployed validator.
pub(crate) struct Chain {
    pub dir: tempfile::TempDir,
    pub handle: DevnetHandle,
    pub env: Env,
    pub deployment: Deployment,
    pub watch: Watch,
    /// Every engine's `EngineConfig::receipt_interval_ms` (the orchestrator's locks ask for
    /// it; default 3 s, so that a silent orchestrator is noticed within seconds).
    pub receipt_interval_ms: u64,
}

impl Chain {
    pub(crate) async fn start() -> Self {
        // The nodes' logs (all in this process), printed by the test runner with a failure.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info,libp2p=warn,bollard=warn".into()),
            )
            .with_test_writer()
            .try_init();
        let dir = tempfile::Builder::new()
            .prefix("ganglion-life-")
            .tempdir_in("/var/tmp")
            .expect("temp dir");
        let genesis = Genesis::devnet().expect("genesis");
        let mut config = DevnetConfig::new(genesis.clone(), dir.path().join("devnet"));
        // Its HTTP API in Blockfrost's conventions (the npm client's endpoint).
        config.http_addr = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let handle = devnet::start(config).await.expect("devnet starts");
        let env = Env {
            params: ProtocolParams::mainnet().expect("params"),
            slot_config: genesis.slot_config(),
            network: pallas_addresses::Network::Testnet,
        };
        let params = Params {
            ntx: AssetClass {
                policy: *genesis.ntx_policy_id().expect("policy"),
                name: genesis.ntx_asset_name().expect("name"),
            },
            min_bond_per_gpu: MIN_BOND_PER_GPU,
            // Short, so that a test can unbond and withdraw within seconds.
            unbonding_delay_ms: 5_000,
            // Short, so that a test sees an expire (and its slashes) within seconds of the
            // deadline.
            claim_window_ms: CLAIM_WINDOW_MS,
        };
        let script = ganglion_contracts::v2::blueprint()
            .and_then(|b| b.apply_data(params.to_plutus_data()))
            .expect("script");
        // Deployed by key 3, which no node uses.
        let draft = build::deploy(&env, &script).expect("deploy draft");
        let mut chain = Self {
            dir,
            handle,
            env: env.clone(),
            deployment: Deployment {
                params: params.clone(),
                script: script.clone(),
                reference: Utxo {
                    reference: TxoRef {
                        tx_hash: [0; 32],
                        index: 0,
                    },
                    output: ganglion_contracts::tx::Output::new(vec![], Default::default()),
                },
            },
            watch: Watch::v2(script.hash, params).with_slot_config(env.slot_config),
            receipt_interval_ms: 3_000,
        };
        let deployer = chain.access(dev_key(3));
        let tx = deployer
            .build(draft, p2p::now_ms())
            .await
            .expect("deploy builds");
        deployer
            .submit(&tx, p2p::now_ms())
            .await
            .expect("deploy submits");
        let address = script.address(env.network);
        chain.deployment.reference = wait_for("the reference script", || {
            let utxos = chain.handle.chain().utxos_at(&address).expect("utxos");
            let found = utxos.into_iter().find(|(r, _)| r.tx_hash == tx.hash);
            async move {
                found.map(|(r, bytes)| Utxo {
                    reference: r,
                    output: ganglion_contracts::tx::Output::from_chain(
                        &pallas_traverse::MultiEraOutput::decode(
                            pallas_traverse::Era::Conway,
                            &bytes,
                        )
                        .expect("output decodes"),
                    ),
                })
            }
        })
        .await;
        chain
    }

    pub(crate) fn n2c(&self) -> N2cEndpoint {
        N2cEndpoint::Tcp(self.handle.n2c_tcp_addr().expect("n2c tcp"))
    }

    /// Chain access paying and signing with `key`.
    pub(crate) fn access(&self, key: SigningKey) -> ChainAccess {
        ChainAccess::new(
            self.n2c(),
            self.handle.magic(),
            self.env.clone(),
            self.deployment.clone(),
            key,
        )
    }

    /// NTX base units at `key`'s address, from the devnet's ledger.
    pub(crate) fn ntx_of(&self, key: &KeyHash) -> u64 {
        let address = key_address(self.env.network, key);
        self.handle
            .chain()
            .utxos_at(&address)
            .expect("utxos")
            .iter()
            .map(|(_, bytes)| {
                ganglion_contracts::tx::Output::from_chain(
                    &pallas_traverse::MultiEraOutput::decode(pallas_traverse::Era::Conway, bytes)
                        .expect("output decodes"),
                )
                .value
                .quantity_of(&self.deployment.params.ntx)
            })
            .sum()
    }

    /// Posts a bond of [`STAKE`] for `gpus` GPUs by `payment`, naming `attest` and `peer`;
    /// returns the bond UTxO once on chain.
    pub(crate) async fn post_bond(
        &self,
        payment: &SigningKey,
        attest: &SigningKey,
        peer: PeerId,
        gpus: u64,
    ) -> TxoRef {
        let access = self.access(payment.clone());
        let draft = build::post_bond(
            &self.deployment,
            &self.env,
            &BondRequest {
                provider: hash_of(payment),
                attest_key: attest.verifying_key().to_bytes(),
                peer_id: peer.to_bytes(),
                payout: Payout::enterprise(hash_of(payment)),
                gpus,
                stake: STAKE,
            },
        )
        .expect("bond draft");
        let tx = access
            .build(draft, p2p::now_ms())
            .await
            .expect("bond builds");
        access
            .submit(&tx, p2p::now_ms())
            .await
            .expect("bond submits");
        let address = self.deployment.address(&self.env);
        wait_for("the bond", || {
            let found = self
                .handle
                .chain()
                .utxos_at(&address)
                .expect("utxos")
                .into_iter()
                .find(|(r, _)| r.tx_hash == tx.hash)
                .map(|(r, _)| r);
            async move { found }
        })
        .await
    }
}

/// A provider's identity: payment key (a funded devnet key), attest key, libp2p key.
pub(crate) struct ProviderIdent {
    pub payment: SigningKey,
    pub attest: SigningKey,
    pub libp2p: Keypair,
    pub bond: TxoRef,
}

impl ProviderIdent {
    /// The payment key hash (the provider on chain).
    pub(crate) fn payment_hash(&self) -> KeyHash {
        hash_of(&self.payment)
    }

    /// Identity from devnet key `seed`, bonded for one GPU on `chain`.
    pub(crate) async fn bonded(chain: &Chain, seed: u32) -> Self {
        let payment = dev_key(seed);
        let attest = SigningKey::from_bytes(&[0x40 + seed as u8; 32]);
        let libp2p = Keypair::ed25519_from_bytes([0x20 + seed as u8; 32]).expect("seed");
        let bond = chain
            .post_bond(&payment, &attest, libp2p.public().to_peer_id(), 1)
            .await;
        Self {
            payment,
            attest,
            libp2p,
            bond,
        }
    }
}

/// One node: its engine, swarm client and address, indexer, and data dir.
pub(crate) struct Node<E: ganglion_dispatch::executor::Executor + 'static> {
    pub engine: Engine<SledKv, E>,
    pub p2p: Client,
    pub addr: Multiaddr,
    pub indexer: Arc<Indexer<SledKv>>,
    pub key_hash: KeyHash,
    pub dir: PathBuf,
    pub cancel: CancellationToken,
    pub executor: Option<Arc<E>>,
    pub blocks: Arc<SledBlockstore>,
    payment: SigningKey,
    side: Option<SideParts<E>>,
}

/// What rebuilds a provider's [`ProviderSide`] after a restart.
#[derive(Clone)]
struct SideParts<E> {
    executor: Arc<E>,
    attest: SigningKey,
    bond: TxoRef,
    peer_id: PeerId,
    gpus: Vec<PooledGpu>,
    offer: MarketOffer,
    policy: AcceptPolicy,
    kubo: Option<ganglion_storage::pin::Kubo>,
    cluster: Option<Arc<dyn ganglion_node::job::cluster::ClusterSetup>>,
}

impl<E> SideParts<E> {
    fn side(&self) -> ProviderSide<E> {
        ProviderSide {
            executor: self.executor.clone(),
            attest: self.attest.clone(),
            bond: self.bond,
            peer_id: self.peer_id,
            gpus: self.gpus.clone(),
            offer: self.offer.clone(),
            policy: self.policy.clone(),
            cluster: self.cluster.clone(),
            kubo: self.kubo.clone(),
        }
    }
}

/// A node whose job engine was stopped (its store closed); everything else still runs.
pub(crate) struct Stopped<E: ganglion_dispatch::executor::Executor + 'static> {
    p2p: Client,
    addr: Multiaddr,
    indexer: Arc<Indexer<SledKv>>,
    key_hash: KeyHash,
    dir: PathBuf,
    cancel: CancellationToken,
    executor: Option<Arc<E>>,
    blocks: Arc<SledBlockstore>,
    payment: SigningKey,
    side: Option<SideParts<E>>,
    inbound: Option<InboundRx>,
}

impl<E: ganglion_dispatch::executor::Executor + 'static> Node<E> {
    /// This node's libp2p peer id (the last component of its address).
    pub(crate) fn peer(&self) -> libp2p::PeerId {
        match self.addr.iter().last() {
            Some(libp2p::multiaddr::Protocol::P2p(peer)) => peer,
            _ => panic!("the node's address ends in its peer id: {}", self.addr),
        }
    }

    /// Submits [`probe_spec`]`(sleep_s, deadline_in_ms)` through this node's engine (its lock
    /// goes out) and returns the job id.
    pub(crate) async fn submit_probe(&self, sleep_s: u32, deadline_in_ms: u64) -> JobId {
        self.engine
            .submit(&probe_spec(sleep_s, deadline_in_ms))
            .await
            .expect("lock submitted")
    }

    /// Stops the engine and drops its job store (a crash of the job engine, as far as the
    /// store can tell: every write was already flushed).
    pub(crate) async fn stop_engine(self) -> Stopped<E> {
        let Node {
            engine,
            p2p,
            addr,
            indexer,
            key_hash,
            dir,
            cancel,
            executor,
            blocks,
            payment,
            side,
        } = self;
        let inbound = engine.shutdown().await;
        Stopped {
            p2p,
            addr,
            indexer,
            key_hash,
            dir,
            cancel,
            executor,
            blocks,
            payment,
            side,
            inbound,
        }
    }

    /// Stops the node for good: its swarm and indexer tasks, then its engine.
    pub(crate) async fn shutdown(self) {
        self.cancel.cancel();
        self.engine.shutdown().await;
    }

    /// [`Node::stop_engine`] then [`Stopped::start_engine`].
    pub(crate) async fn restart_engine(self, chain: &Chain) -> Self {
        self.stop_engine().await.start_engine(chain)
    }
}

impl<E: ganglion_dispatch::executor::Executor + 'static> Stopped<E> {
    /// Reopens the job store from disk and starts a new engine on it (same indexer, swarm,
    /// blockstore and executor); it answers the swarm's inbound requests again.
    pub(crate) fn start_engine(self, chain: &Chain) -> Node<E> {
        let store = JobStore::open(&self.dir.join("jobs")).expect("job store reopens");
        let engine = Engine::start(
            Parts {
                store,
                indexer: self.indexer.clone(),
                p2p: self.p2p.clone(),
                inbound: self
                    .inbound
                    .expect("the stopped engine handed its inbound back"),
                chain: chain.access(self.payment.clone()),
                blockstore: self.blocks.clone() as Arc<dyn Blockstore>,
                provider: self.side.as_ref().map(SideParts::side),
                receipt_key: receipt_key_of(&self.payment),
            },
            engine_config(chain),
        )
        .expect("engine restarts");
        Node {
            engine,
            p2p: self.p2p,
            addr: self.addr,
            indexer: self.indexer,
            key_hash: self.key_hash,
            dir: self.dir,
            cancel: self.cancel,
            executor: self.executor,
            blocks: self.blocks,
            payment: self.payment,
            side: self.side,
        }
    }
}

pub(crate) fn engine_config(chain: &Chain) -> EngineConfig {
    EngineConfig {
        // The devnet forges only when a transaction is pending: nothing would ever bury the
        // last block, so act on the tip.
        depth: 0,
        poll: Duration::from_millis(200),
        allow_declared_gpus: true,
        offer_every: Duration::from_millis(500),
        // Short validity windows, so that a job may have a deadline 20 s out (the lock's
        // validity must end before it); the devnet forges within a slot.
        validity_slots: 10,
        receipt_interval_ms: chain.receipt_interval_ms,
        ..EngineConfig::default()
    }
}

fn p2p_config(magic: u64, blocks: &Arc<SledBlockstore>) -> p2p::Config {
    p2p::Config {
        network_magic: magic,
        listen: vec![],
        ping_interval: Duration::from_millis(500),
        gossip_heartbeat: Duration::from_millis(100),
        prune_interval: Duration::from_millis(200),
        blockstore: Some(BitswapStore::new(blocks.clone() as Arc<dyn Blockstore>)),
        fetch_timeout: Duration::from_secs(10),
        ..p2p::Config::default()
    }
}

struct Common {
    indexer: Arc<Indexer<SledKv>>,
    blocks: Arc<SledBlockstore>,
    store: JobStore,
    cancel: CancellationToken,
}

fn common(chain: &Chain, dir: &Path) -> Common {
    std::fs::create_dir_all(dir).expect("node dir");
    let indexer = Arc::new(Indexer::new(
        SledKv::open(&dir.join("index")).expect("index"),
        chain.watch.clone(),
        10,
    ));
    let cancel = CancellationToken::new();
    tokio::spawn(sync::run(
        indexer.clone(),
        SyncConfig::new(Source::N2cTcp {
            addr: chain.handle.n2c_tcp_addr().expect("n2c").to_string(),
            magic: chain.handle.magic(),
        }),
        cancel.clone(),
    ));
    Common {
        indexer,
        blocks: Arc::new(SledBlockstore::open(dir.join("blocks")).expect("blockstore")),
        store: JobStore::open(&dir.join("jobs")).expect("job store"),
        cancel,
    }
}

async fn listen(client: &Client, peer: PeerId) -> Multiaddr {
    client
        .listen("/ip4/127.0.0.1/tcp/0".parse().expect("literal"))
        .await
        .expect("listens")
        .with(Protocol::P2p(peer))
}

/// Gives `key` an asset-free UTxO whose transaction differs in every run and in every test of
/// a run: the engine seeds job ids from such a UTxO, and on a fresh devnet the genesis UTxOs —
/// hence the job ids — would otherwise be the same in every test. Its amount carries the
/// process id, a per-process counter and the clock's nanoseconds: the clock alone was the same
/// for tests released together (from [`probe_image`]'s lock), which then ran the same job id.
pub(crate) async fn fresh_seed(chain: &Chain, key: &SigningKey) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let access = chain.access(key.clone());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    let jitter = (u64::from(std::process::id()) * 7_919
        + CALLS.fetch_add(1, Ordering::Relaxed) * 104_729
        + nanos / 1_000)
        % 1_000_000;
    pay(
        chain,
        key,
        ganglion_contracts::tx::Output::new(
            access.address(),
            ganglion_contracts::tx::Value::lovelace(100_000_000 + jitter),
        ),
        "the fresh seed UTxO",
    )
    .await;
}

/// Pays `output` from devnet key `from` and waits until the devnet holds it (`what`, for the
/// wait's message).
async fn pay(chain: &Chain, from: &SigningKey, output: ganglion_contracts::tx::Output, what: &str) {
    let access = chain.access(from.clone());
    let address = output.address.clone();
    let mut draft = ganglion_contracts::tx::Draft::default();
    draft.pay(output);
    let tx = access
        .build(draft, p2p::now_ms())
        .await
        .expect("payment builds");
    access
        .submit(&tx, p2p::now_ms())
        .await
        .expect("payment submits");
    wait_for(what, || {
        let found = chain
            .handle
            .chain()
            .utxos_at(&address)
            .expect("utxos")
            .iter()
            .any(|(r, _)| r.tx_hash == tx.hash);
        async move { found.then_some(()) }
    })
    .await;
}

/// Pays devnet key `to` 50 ADA and twice [`STAKE`] NTX from devnet key `from`: a key beyond
/// the genesis' funded ones (seeds `0..FUNDED_KEYS`) can then bond and run a provider.
pub(crate) async fn fund(chain: &Chain, from: &SigningKey, to: &SigningKey) {
    let output = ganglion_contracts::tx::Output::new(
        chain.access(to.clone()).address(),
        ganglion_contracts::tx::Value::lovelace(50_000_000)
            .with_class(&chain.deployment.params.ntx, 2 * STAKE),
    );
    pay(chain, from, output, "the funding UTxO").await;
}

/// An orchestrator node paying with devnet key `seed`, its state in `dir`.
pub(crate) async fn orchestrator(chain: &Chain, seed: u32, dir: &Path) -> Node<NoExecutor> {
    orchestrator_with(chain, seed, dir, engine_config(chain)).await
}

/// [`orchestrator`] whose engine runs with `config`.
pub(crate) async fn orchestrator_with(
    chain: &Chain,
    seed: u32,
    dir: &Path,
    config: EngineConfig,
) -> Node<NoExecutor> {
    fresh_seed(chain, &dev_key(seed)).await;
    plain_node(chain, seed, dir, config).await
}

/// A node that neither orchestrates nor provides unless asked (no UTxO of its own is made for
/// devnet key `seed`, which need hold no funds): it follows the chain and joins the swarm, as
/// a gateway or an auditor does.
pub(crate) async fn plain_node(
    chain: &Chain,
    seed: u32,
    dir: &Path,
    config: EngineConfig,
) -> Node<NoExecutor> {
    let c = common(chain, dir);
    let key = Keypair::ed25519_from_bytes([0x10 + seed as u8; 32]).expect("seed");
    let peer = key.public().to_peer_id();
    let bonds = p2p::bonds::snapshot(&c.indexer).expect("bonds");
    let (client, event_loop, events, inbound) =
        p2p::new(key, p2p_config(chain.handle.magic(), &c.blocks), bonds).expect("swarm");
    tokio::spawn(event_loop.run());
    tokio::spawn(p2p::log_events(events));
    let addr = listen(&client, peer).await;
    let payment = dev_key(seed);
    let engine = Engine::start(
        Parts {
            store: c.store,
            indexer: c.indexer.clone(),
            p2p: client.clone(),
            inbound,
            chain: chain.access(payment.clone()),
            blockstore: c.blocks.clone() as Arc<dyn Blockstore>,
            provider: None,
            receipt_key: receipt_key_of(&payment),
        },
        config,
    )
    .expect("engine starts");
    Node {
        engine,
        p2p: client,
        addr,
        indexer: c.indexer,
        key_hash: hash_of(&payment),
        dir: dir.to_path_buf(),
        cancel: c.cancel,
        executor: None,
        blocks: c.blocks,
        payment,
        side: None,
    }
}

/// A provider node for `id` (one declared GPU at [`RATE`]), its state in `dir`.
pub(crate) async fn provider(chain: &Chain, id: &ProviderIdent, dir: &Path) -> Node<Exec> {
    provider_with(chain, id, dir, RATE, 100).await
}

/// A provider advertising [`RATE`] with benchmark `score`, whose accept policy refuses rates
/// below `min_rate`.
pub(crate) async fn provider_with(
    chain: &Chain,
    id: &ProviderIdent,
    dir: &Path,
    min_rate: u64,
    score: u32,
) -> Node<Exec> {
    provider_limited(chain, id, dir, min_rate, score, None).await
}

/// [`provider_with`], admitting specs under `spec_limits` at accept (`[provider]` image policy,
/// longest job).
pub(crate) async fn provider_limited(
    chain: &Chain,
    id: &ProviderIdent,
    dir: &Path,
    min_rate: u64,
    score: u32,
    spec_limits: Option<ganglion_market::limits::ProviderLimits>,
) -> Node<Exec> {
    let opts = ProviderOpts {
        min_rate,
        offering: Offering::Declared { score },
        spec_limits,
        ..ProviderOpts::default()
    };
    provider_opts(chain, id, dir, opts).await
}

/// How a test provider is made beyond its identity ([`ProviderOpts::default`]: [`provider`]'s).
pub(crate) struct ProviderOpts {
    /// Its accept policy's lowest rate.
    pub(crate) min_rate: u64,
    /// What it offers.
    pub(crate) offering: Offering,
    /// The spec limits its accept admits under.
    pub(crate) spec_limits: Option<ganglion_market::limits::ProviderLimits>,
    /// A Kubo RPC it fetches job content from.
    pub(crate) kubo: Option<ganglion_storage::pin::Kubo>,
    /// The job-network set-up its engine runs before the executor (none: the executor's
    /// own network, as on one Docker host).
    pub(crate) cluster: Option<Arc<dyn ganglion_node::job::cluster::ClusterSetup>>,
}

impl Default for ProviderOpts {
    fn default() -> Self {
        Self {
            min_rate: RATE,
            offering: Offering::Declared { score: 100 },
            spec_limits: None,
            kubo: None,
            cluster: None,
        }
    }
}

/// What a test provider offers.
pub(crate) enum Offering {
    /// Its one declared GPU at [`RATE`], unmeasured, advertising benchmark `score`.
    Declared {
        /// The advertised score.
        score: u32,
    },
    /// This offer, as built elsewhere (its `provider` is set to the provider's key hash).
    Exactly(MarketOffer),
}

/// [`provider`] advertising `offer` (its accept policy as [`provider`]'s).
pub(crate) async fn provider_offering(
    chain: &Chain,
    id: &ProviderIdent,
    dir: &Path,
    offer: MarketOffer,
) -> Node<Exec> {
    let opts = ProviderOpts {
        offering: Offering::Exactly(offer),
        ..ProviderOpts::default()
    };
    provider_opts(chain, id, dir, opts).await
}

/// [`provider`] with a Kubo RPC (`[storage] kubo_rpc`) it fetches job content from when the
/// orchestrator does not serve it.
pub(crate) async fn provider_fetching_from(
    chain: &Chain,
    id: &ProviderIdent,
    dir: &Path,
    kubo: ganglion_storage::pin::Kubo,
) -> Node<Exec> {
    let opts = ProviderOpts {
        kubo: Some(kubo),
        ..ProviderOpts::default()
    };
    provider_opts(chain, id, dir, opts).await
}

/// A provider made with `opts`.
pub(crate) async fn provider_opts(
    chain: &Chain,
    id: &ProviderIdent,
    dir: &Path,
    opts: ProviderOpts,
) -> Node<Exec> {
    let ProviderOpts {
        min_rate,
        offering,
        spec_limits,
        kubo,
        cluster,
    } = opts;
    let c = common(chain, dir);
    let peer = id.libp2p.public().to_peer_id();
    let bonds = p2p::bonds::snapshot(&c.indexer).expect("bonds");
    let provider_hash = hash_of(&id.payment);
    let (client, event_loop, events, inbound) = p2p::new(
        id.libp2p.clone(),
        p2p_config(chain.handle.magic(), &c.blocks),
        bonds,
    )
    .expect("swarm");
    tokio::spawn(event_loop.run());
    tokio::spawn(p2p::log_events(events));
    let addr = listen(&client, peer).await;
    let docker = match DockerEngine::connect(Path::new(DEFAULT_SOCKET), 120).await {
        Ok(e) => e,
        Err(e) => panic!(
            "lifecycle tests need a running Docker Engine: {e}\n\
             start one with `bash scripts/ensure-docker.sh` (CI does this in .ci/run)"
        ),
    };
    let executor = Arc::new(
        DockerExecutor::new(
            docker,
            Embedded::new(c.blocks.clone()),
            ExecutorConfig::new(dir.join("work")),
        )
        .expect("executor"),
    );
    let parts = SideParts {
        executor: executor.clone(),
        attest: id.attest.clone(),
        bond: id.bond,
        peer_id: peer,
        gpus: vec![PooledGpu {
            id: format!("declared-{}", hex::encode(&provider_hash[..4])),
            attachment: GpuAttachment::Declared {
                id: format!("declared-{}", hex::encode(&provider_hash[..4])),
            },
            offered: Some(PoolModel {
                model: declared_model(),
                nvlink_domain: None,
            }),
        }],
        offer: match offering {
            Offering::Declared { score } => MarketOffer {
                provider: provider_hash,
                bond_gpus: (STAKE / 1_000_000) as u32,
                price_per_gpu_hour: RATE,
                score,
                uplink_mbps: 1000,
                max_job_duration_s: None,
                max_job_nodes: None,
                gpus: vec![OfferedGpus {
                    model: declared_model(),
                    free: 1,
                    declared: true,
                }],
                direct_capable: false,
                compute: ganglion_market::snapshot::Compute::Unmeasured,
            },
            Offering::Exactly(offer) => MarketOffer {
                provider: provider_hash,
                ..offer
            },
        },
        policy: AcceptPolicy {
            gpus: 1,
            min_rate,
            reservation_ttl_ms: 60_000,
            max_deadline_ahead_ms: 3_600_000,
            max_concurrent_jobs: 4,
            max_receipt_interval_ms: 60_000,
            spec_limits,
        },
        kubo,
        cluster,
    };
    let engine = Engine::start(
        Parts {
            store: c.store,
            indexer: c.indexer.clone(),
            p2p: client.clone(),
            inbound,
            chain: chain.access(id.payment.clone()),
            blockstore: c.blocks.clone() as Arc<dyn Blockstore>,
            provider: Some(parts.side()),
            receipt_key: receipt_key_of(&id.payment),
        },
        engine_config(chain),
    )
    .expect("engine starts");
    Node {
        engine,
        p2p: client,
        addr,
        indexer: c.indexer,
        key_hash: provider_hash,
        dir: dir.to_path_buf(),
        cancel: c.cancel,
        executor: Some(executor),
        blocks: c.blocks,
        payment: id.payment.clone(),
        side: Some(parts),
    }
}

/// The one declared GPU each test provider pools and offers.
fn declared_model() -> GpuModel {
    GpuModel {
        vendor: Vendor::Any,
        name: "declared".into(),
        vram_mib: 0,
        compute_capability: None,
        gfx_target: None,
        interconnect: Interconnect::Any,
        ..GpuModel::default()
    }
}

/// A two-GPU probe job, one GPU per node on at most two nodes: writes 4 KiB of outputs, sleeps
/// `sleep_s` seconds. Deadline `deadline_in_ms` from now; `max_duration_s` 120 s, or what
/// fits before the deadline (the engine refuses a run that cannot end before it,
/// `ganglion_node::job::terms`).
pub(crate) fn probe_spec(sleep_s: u32, deadline_in_ms: u64) -> Ensemble {
    let fits_s =
        deadline_in_ms.saturating_sub(ganglion_node::job::terms::SETTLE_MARGIN_MS + 1_000) / 1000;
    let max_duration_s = fits_s.min(120);
    let json = serde_json::json!({
        "image": { "local": probe_image() },
        "command": ["write", "result.bin", "4096", "echo", "probe done", "sleep", sleep_s.to_string()],
        "gpus": { "count": 2 },
        "placement": { "min_gpus_per_node": 1, "max_gpus_per_node": 1, "max_nodes": 2 },
        "limits": { "max_duration_s": max_duration_s, "max_rate_ntx_per_gpu_hour": RATE },
        // The escrow pays every assignment until the deadline (G6): two GPUs at RATE (one
        // base unit per GPU-ms) for the whole window, and a little more.
        "budget_ntx": 2 * deadline_in_ms + 10_000,
        "deadline_ms": p2p::now_ms() + deadline_in_ms,
    });
    Ensemble::from_json_str(&json.to_string()).expect("spec parses")
}

/// `ganglion ARGS --config CONFIG` as a user runs it against a test node: the config file
/// only (no `GANGLION_CONFIG`, `GANGLION_RPC_LISTEN` or `GANGLION_DATA_DIR` from the test's
/// environment).
pub(crate) fn ganglion_cli(config: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ganglion"));
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env_remove("GANGLION_CONFIG")
        .env_remove("GANGLION_RPC_LISTEN")
        .env_remove("GANGLION_DATA_DIR");
    cmd
}

/// Writes `<data>/node.json` for an RPC server of this process at `rpc` (orchestrator key
/// `key_hash`): the CLI then finds it as it finds a node `ganglion node run` started.
pub(crate) fn write_node_json(data: &Path, rpc: std::net::SocketAddr, key_hash: &KeyHash) {
    let info = ganglion_node::daemon::NodeInfo {
        pid: std::process::id(),
        peer_id: String::new(),
        p2p: Vec::new(),
        rpc,
        payment_key_hash: hex::encode(key_hash),
        bond: None,
        metrics: None,
        console: None,
        gateway: None,
        indexer_api: None,
    };
    std::fs::write(
        data.join(ganglion_node::daemon::node::NODE_INFO),
        serde_json::to_string(&info).expect("node.json"),
    )
    .expect("node.json");
}

/// Connects every provider to the orchestrator and waits until the orchestrator's market holds
/// `n` offers.
pub(crate) async fn connect_market<E, F>(orch: &Node<E>, providers: &[&Node<F>], n: usize)
where
    E: ganglion_dispatch::executor::Executor + 'static,
    F: ganglion_dispatch::executor::Executor + 'static,
{
    for p in providers {
        p.p2p.dial(orch.addr.clone()).await.expect("dials");
    }
    for (i, p) in providers.iter().enumerate() {
        for q in &providers[i + 1..] {
            p.p2p.dial(q.addr.clone()).await.expect("dials");
        }
    }
    wait_for("offers in the orchestrator's market", || async {
        let m = orch.p2p.market().await.expect("market");
        (m.len() >= n).then_some(())
    })
    .await;
}

/// The preamble of every two-provider test: a devnet with two bonded providers (A: seed 1,
/// B: seed 2), an orchestrator (seed 0) and both providers' engines under the chain's temp
/// dir, all connected so that the orchestrator sees both offers. (B's bond is kept for the
/// tests that slash it.)
pub(crate) struct World {
    /// The devnet.
    pub chain: Chain,
    /// Provider B's bond and keys (seed 2).
    pub b: ProviderIdent,
    /// The orchestrator's node.
    pub orch: Node<NoExecutor>,
    /// Provider A's node.
    pub pa: Node<Exec>,
    /// Provider B's node.
    pub pb: Node<Exec>,
}

impl World {
    /// NTX (base units) of provider A, provider B and the orchestrator, in that order.
    pub(crate) fn ntx(&self) -> [u64; 3] {
        [
            self.chain.ntx_of(&self.pa.key_hash),
            self.chain.ntx_of(&self.pb.key_hash),
            self.chain.ntx_of(&self.orch.key_hash),
        ]
    }

    /// [`World`] on a fresh devnet.
    pub(crate) async fn two_providers() -> Self {
        Self::two_providers_on(Chain::start().await).await
    }

    /// [`World`] on `chain` (a chain whose settings a test changed first).
    pub(crate) async fn two_providers_on(chain: Chain) -> Self {
        let a = ProviderIdent::bonded(&chain, 1).await;
        let b = ProviderIdent::bonded(&chain, 2).await;
        let root = chain.dir.path().to_path_buf();
        let orch = orchestrator(&chain, 0, &root.join("orch")).await;
        let pa = provider(&chain, &a, &root.join("pa")).await;
        let pb = provider(&chain, &b, &root.join("pb")).await;
        connect_market(&orch, &[&pa, &pb], 2).await;
        Self {
            chain,
            b,
            orch,
            pa,
            pb,
        }
    }
}

/// Stops the orchestrator's and the providers' nodes (all told to stop first), then the
/// devnet.
pub(crate) async fn shutdown(chain: Chain, orch: Node<NoExecutor>, providers: Vec<Node<Exec>>) {
    orch.cancel.cancel();
    for p in &providers {
        p.cancel.cancel();
    }
    orch.shutdown().await;
    for p in providers {
        p.shutdown().await;
    }
    chain.handle.shutdown().await;
}
