//! [`run`]: one node process — data dir, keys, indexer, blockstore, swarm, optional provider
//! side, job engine, JSON-RPC server and the metrics endpoint — until a shutdown signal.

use std::path::Path;
use std::sync::Arc;

use ganglion_indexer::follow::Source;
use ganglion_indexer::store::Store;
use ganglion_indexer::sync::{self, SyncConfig};
use ganglion_indexer::{Indexer, Watch};
use ganglion_storage::bitswap::BitswapStore;
use ganglion_storage::blockstore::{Blockstore, SledBlockstore};
use ganglion_storage::pin::Embedded;
use libp2p::Multiaddr;
use libp2p::multiaddr::Protocol;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::DaemonError;
use super::chain::{self, BondOwner};
use super::overlay::{self as daemon_overlay, DaemonNetwork, OverlaySetup};
use super::supervisor::Supervisor;
use crate::config::Network;
use crate::datadir::DataDir;
use crate::job::accept::AcceptPolicy;
use crate::job::chain::ChainAccess;
use crate::job::provider::ProviderSide;
use crate::job::store::JobStore;
use crate::job::{Engine, EngineConfig, Parts};
use crate::network::NetworkPreset;
use crate::rpc::Api;
use crate::settings::{N2cEndpoint, Settings};
use crate::wallet::PaymentKey;
use ganglion_dispatch::executor::docker::{DockerExecutor, ExecutorConfig};
use ganglion_dispatch::executor::engine::{DEFAULT_SOCKET, DockerEngine};
use ganglion_dispatch::gpu;
use ganglion_p2p as p2p;

/// File in the data dir where a started node says where it listens.
pub const NODE_INFO: &str = "node.json";

/// How long a provider's GPUs stay reserved after it accepted, ms.
const RESERVATION_TTL_MS: u64 = 60_000;
/// Longest receipt interval a provider accepts, ms: a silent orchestrator costs it at most
/// `[engine] missed_receipts` such intervals of unpaid work.
const MAX_RECEIPT_INTERVAL_MS: u64 = 60_000;
/// Furthest deadline a provider accepts, ms from now (one day).
const MAX_DEADLINE_AHEAD_MS: u64 = 86_400_000;
/// Advertised uplink, Mbit/s, while unmeasured: a provider's offer carries the best send rate
/// its throughput probes (`p2p::probe`) measured once there is one.
pub const UPLINK_MBPS: u32 = 1000;

/// What a running node writes to `<data dir>/node.json` once everything is up (replaced
/// atomically at each start; read by `ganglion devnet demo` and tests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The process id.
    pub pid: u32,
    /// The libp2p peer id.
    pub peer_id: String,
    /// Listen multiaddrs, each ending in `/p2p/<peer id>` (bootstrap entries for others):
    /// every interface's address of a listen on `0.0.0.0`, routable ones first.
    pub p2p: Vec<String>,
    /// The JSON-RPC address (HTTP and WebSocket); the token is in `rpc.cookie`.
    pub rpc: std::net::SocketAddr,
    /// The payment key hash, hex.
    pub payment_key_hash: String,
    /// The bond UTxO (`<tx hash hex>#<index>`), for a provider.
    pub bond: Option<String>,
    /// The metrics endpoint's address (`GET /metrics`), when `[metrics] listen` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<std::net::SocketAddr>,
    /// The web console's address (`http://<addr>/`), when `[console] listen` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<std::net::SocketAddr>,
    /// The service gateway's address (`http://<addr>/<service>/`), when `[gateway] listen`
    /// is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<std::net::SocketAddr>,
    /// The index's read API (`http://<addr>/jobs`), when `[indexer] listen` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexer_api: Option<std::net::SocketAddr>,
}

impl NodeInfo {
    /// Reads `<data_dir>/node.json`; `None` while the node has not finished starting.
    pub fn read(data_dir: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(data_dir.join(NODE_INFO)).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn write(&self, data_dir: &Path) -> Result<(), DaemonError> {
        let path = data_dir.join(NODE_INFO);
        let tmp = data_dir.join(format!("{NODE_INFO}.tmp"));
        let err = |source| DaemonError::Info {
            path: path.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| err(e.into()))?;
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, &path).map_err(err)
    }
}

type Exec = DockerExecutor<SledBlockstore, DaemonNetwork>;

/// The executor's network for a provider: the overlay (`[overlay]`, owner = `peer`) when this
/// process may create TUNs (root) and the engine has the sandbox image, else one Docker bridge
/// per job, with a warning (see [`super::overlay`]).
///
/// # Errors
/// [`DaemonError::Overlay`] for an invalid `[overlay]` or a UDP port already taken.
async fn job_network(
    docker: &DockerEngine,
    settings: &Settings,
    peer: libp2p::PeerId,
    state_dir: std::path::PathBuf,
) -> Result<(DaemonNetwork, Option<Arc<OverlaySetup>>), DaemonError> {
    // The overlay node, once bound, gets its relay fallback after the swarm exists
    // ([`OverlaySetup::enable_relay`]).
    let bridge = DaemonNetwork::Bridge(ganglion_dispatch::executor::network::DockerBridge::new(
        docker.docker.clone(),
    ));
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        tracing::warn!(
            "not root: no per-job overlay (its TUN needs CAP_NET_ADMIN); jobs use one Docker \
             bridge, so this provider cannot share a job with another host"
        );
        return Ok((bridge, None));
    }
    let sandbox = daemon_overlay::probe_image_tag();
    if docker.docker.inspect_image(&sandbox).await.is_err() {
        tracing::warn!(image = %sandbox,
            "no pod sandbox image (bash scripts/build-probe-image.sh): no per-job overlay; jobs \
             use one Docker bridge, so this provider cannot share a job with another host");
        return Ok((bridge, None));
    }
    let config = settings.overlay.clone();
    config.validate()?;
    // The pods' MTU from the path (`[overlay] mtu`, else path − 80): a 1420 tunnel over a
    // PPPoE or VXLAN underlay would drop every full-size packet.
    let learned = ganglion_dispatch::overlay::config::learn_path_mtu();
    let mtu = config.resolve_mtu(learned.as_ref())?;
    let node = Arc::new(ganglion_dispatch::overlay::node::OverlayNode::bind(
        &config,
    )?);
    let port = node.local_addr()?.port();
    let network = ganglion_dispatch::overlay::network::OverlayNetwork::new(
        docker.docker.clone(),
        peer.to_string(),
        node.clone(),
        sandbox,
        daemon_overlay::sandbox_cmd(),
    )
    .with_mtu(mtu)
    .with_link_timeout(config.link_timeout());
    tracing::info!(port, pool = %config.pool, mtu,
        path = ?learned.as_ref().map(|l| (&l.interface, l.mtu)), "per-job overlay ready");
    let setup =
        Arc::new(OverlaySetup::new(network.clone(), node, config, port).with_state_dir(state_dir)?);
    Ok((DaemonNetwork::Overlay(network), Some(setup)))
}

/// Engine timing: `[engine]` over the defaults, depth from the preset.
fn engine_config(settings: &Settings, preset: &NetworkPreset) -> EngineConfig {
    settings.engine.resolve(preset)
}

/// Runs the node of `settings` until `shutdown` is cancelled, then stops the engine, the RPC
/// server, the swarm and the chain follower, in that order.
///
/// Start order: data dir → start record (`node.start.json`, [`super::start`]; it gets the
/// error when the start or the run fails and goes at a clean stop) → payment key (`keys/payment.skey`, from `ganglion wallet new`) →
/// attest and libp2p keys (created at first start) → chain (environment, deployment,
/// reference script) → indexer following N2C, caught up with the tip → for a provider
/// (`[provider]` set): detected and declared GPUs, the Docker Engine and the start-up GPU check
/// (`/info` plus one smoke container: NVIDIA GPUs containers cannot get are not offered, and a
/// provider left with none stops here, before any bond), the live bond (posted from `[bond]`
/// when missing) and the Docker executor → swarm (listening on `[p2p] listen`, dialling
/// `[p2p] bootstrap`) → job engine → JSON-RPC with a fresh cookie → metrics endpoint (`[metrics] listen`) →
/// `node.json`.
///
/// The indexer sync, the swarm, the engine, the RPC server, the metrics endpoint and (with
/// an overlay) its relay acceptor run as critical tasks ([`super::supervisor`]) until `shutdown` is cancelled.
///
/// # Errors
/// The first [`DaemonError`] of the start; once running, [`DaemonError::Stopped`] naming the
/// first critical task that stopped (e.g. the indexer's store failed). The engine's own
/// failures on a job are logged and retried by the engine.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> Result<(), DaemonError> {
    let dir = DataDir::open(settings.data_dir()?)?;
    // The start record: `ganglion node info --wait` tells this start from a dead one by it.
    let root = dir.root().to_path_buf();
    let mut record = super::start::StartRecord::now();
    if let Err(e) = record.write(&root) {
        tracing::warn!(data_dir = %root.display(), error = %e, "start record not written");
    }
    let result = run_on(settings, dir, shutdown).await;
    let recorded = match &result {
        Ok(()) => super::start::StartRecord::remove(&root),
        Err(e) => {
            record.error = Some(e.to_string());
            record.write(&root)
        }
    };
    if let Err(e) = recorded {
        tracing::warn!(data_dir = %root.display(), error = %e, "start record not updated");
    }
    result
}

/// [`run`] on the opened data dir.
async fn run_on(
    settings: Settings,
    dir: DataDir,
    shutdown: CancellationToken,
) -> Result<(), DaemonError> {
    let preset = NetworkPreset::of(settings.network());
    let endpoint = settings.n2c()?;
    if !dir.payment_key().exists() {
        return Err(DaemonError::NoPaymentKey(dir.payment_key()));
    }
    let payment = PaymentKey::load(&dir.payment_key())?;
    let key_hash = payment.key_hash();
    let attest = super::keys::attest_key(&dir)?;
    let libp2p_key = super::keys::p2p_key(&dir)?;
    let peer = libp2p_key.public().to_peer_id();
    tracing::info!(network = %preset.network, data_dir = %dir.root().display(), %peer,
        payment = %hex::encode(key_hash), "starting");

    let (env, deployment) = chain::resolve(&settings, &preset, &endpoint).await?;
    let watch = Watch::v2(deployment.script.hash, deployment.params.clone())
        .with_slot_config(env.slot_config);
    let spec = settings.indexer.store_spec(dir.indexer_db())?;
    tracing::info!(store = %spec, "chain index");
    // Blocks briefly (opening sled, or connecting and migrating), as opening sled always did.
    let store = Store::open(&spec)?;
    let indexer = Arc::new(Indexer::new(store, watch, preset.security_param));
    let follow = CancellationToken::new();
    let source = match &endpoint {
        N2cEndpoint::Tcp(addr) => Source::N2cTcp {
            addr: addr.to_string(),
            magic: preset.magic,
        },
        N2cEndpoint::Unix(socket) => Source::N2cUnix {
            socket: socket.clone(),
            magic: preset.magic,
        },
    };
    let mut tasks = Supervisor::new();
    tasks.spawn(
        "indexer sync",
        sync::run(indexer.clone(), SyncConfig::new(source), follow.clone()),
    );
    let result = run_following(RunParts {
        settings,
        preset,
        dir,
        endpoint,
        env,
        deployment,
        payment,
        attest,
        libp2p_key,
        indexer,
        shutdown,
        tasks: &mut tasks,
    })
    .await;
    follow.cancel();
    tasks.shutdown().await;
    result
}

struct RunParts<'a> {
    settings: Settings,
    preset: NetworkPreset,
    dir: DataDir,
    endpoint: N2cEndpoint,
    env: ganglion_contracts::env::Env,
    deployment: ganglion_contracts::v2::build::Deployment,
    payment: PaymentKey,
    attest: ed25519_dalek::SigningKey,
    libp2p_key: libp2p::identity::Keypair,
    indexer: Arc<Indexer<Store>>,
    shutdown: CancellationToken,
    tasks: &'a mut Supervisor,
}

async fn run_following(r: RunParts<'_>) -> Result<(), DaemonError> {
    chain::catch_up(&r.indexer, &r.endpoint, r.preset.magic).await?;
    tracing::info!(tip = ?r.indexer.tip()?.map(|p| p.slot), "indexer caught up");
    let key_hash = r.payment.key_hash();
    let peer = r.libp2p_key.public().to_peer_id();
    let access = || {
        ChainAccess::new(
            r.endpoint.clone(),
            r.preset.magic,
            r.env.clone(),
            r.deployment.clone(),
            r.payment.signing_key().clone(),
        )
    };
    let blocks = Arc::new(SledBlockstore::open(r.dir.blockstore_db())?);
    // One pinner for the executor and `storage_*`: imports and GC share its lock.
    let pinner = Embedded::new(blocks.clone());

    // The provider side: declared GPUs, the bond, the executor.
    let mut side = None;
    let mut overlay_setup: Option<Arc<OverlaySetup>> = None;
    let mut bond_ref = None;
    let mut executor_table = None;
    let mut gpu_report = None;
    let mut bond_owner = None;
    let mut replica_executor = None;
    if let Some(limits) = &r.settings.provider {
        // Detected (NVML, AMD sysfs) and, on the devnet only, declared GPUs.
        let mut inventory = gpu::detect(&r.settings.gpus.sysfs_root, &r.settings.gpus.declared);
        for note in &inventory.notes {
            tracing::info!(%note, "GPU detection");
        }
        // The start-up GPU check (`/info` plus one smoke container), before the bond: a
        // provider never bonds for GPUs its containers cannot get.
        let mut docker = DockerEngine::connect(Path::new(DEFAULT_SOCKET), 120).await?;
        let (nvidia, check) =
            super::gpus::startup_check(&docker, &mut inventory, &daemon_overlay::probe_image_tag())
                .await;
        docker.nvidia = nvidia;
        gpu_report = Some(crate::rpc::gpus::to_rpc(&inventory, check.as_ref()));
        let offerable = crate::config::offerable_on(&inventory, r.preset.network)?;
        let pooled = limits.pooled(&offerable)?;
        if pooled.is_empty() {
            let unusable = check.as_ref().and_then(|c| match &c.access {
                gpu::docker::NvidiaAccess::Missing { missing, .. } => Some(missing.clone()),
                _ => None,
            });
            return Err(DaemonError::NoOfferableGpus(match unusable {
                Some(reason) => format!(
                    "[provider] is set but its NVIDIA GPUs are present but not usable in \
                     containers: {reason} (no bond posted; see `ganglion gpus`)"
                ),
                None => {
                    "[provider] is set but no GPU is detected or declared (see `ganglion gpus`; \
                         on the devnet, [[gpus.declared]])"
                        .into()
                }
            }));
        }
        let attached = super::gpus::attachments(&pooled, &docker.nvidia)?;
        // Each pooled GPU with its attachment and the model it is offered as: a job's share
        // runs on GPUs meeting its spec, free, within the MIG rules (`job::gpu_pick`).
        let pool = crate::job::gpu_pick::pool(limits, &pooled, attached);
        let schedulable = pool.iter().filter(|g| g.offered.is_some()).count() as u64;
        // The job network (the overlay's UDP port bound) before the bond: a provider that
        // cannot run jobs never posts one.
        let (network, setup) =
            job_network(&docker, &r.settings, peer, r.dir.overlay_jobs()).await?;
        let (bond, stake) = chain::ensure_bond(
            &r.indexer,
            &access(),
            &r.deployment,
            &r.env,
            &BondOwner {
                provider: key_hash,
                attest: &r.attest,
                peer,
            },
            r.settings.bond.as_ref(),
            // The GPUs jobs can be given: a MIG-enabled card counts as its slices only.
            schedulable,
        )
        .await?;
        bond_ref = Some(bond);
        let min = r.deployment.params.min_bond_per_gpu.max(1);
        // The onboarding benchmark of the NVML GPUs: its CUDA score is what the offer advertises.
        let bench = if super::gpus::wants_benchmark(&pooled) {
            let (results, note) = tokio::task::spawn_blocking(|| {
                gpu::bench::measure_onboarding(gpu::cuda::CudaSizes::ONBOARDING)
            })
            .await
            .unwrap_or_else(|e| (vec![], Some(format!("the benchmark task failed: {e}"))));
            if let Some(note) = note {
                tracing::warn!(%note, "onboarding benchmark: no CUDA score, offering the neutral one");
            }
            results
        } else {
            vec![]
        };
        let offer = super::gpus::benchmarked_offer(
            limits,
            key_hash,
            crate::job::provider::bond_gpus(stake, min),
            r.settings.overlay.direct,
            &pooled,
            &bench,
        );
        tracing::info!(score = offer.score, compute = ?offer.compute, measured = bench.len(), "offer score");
        overlay_setup = setup.clone();
        let executor = Arc::new(Exec::with_network(
            docker,
            network.clone(),
            pinner.clone(),
            ExecutorConfig::new(r.dir.root().join("work")),
        )?);
        replica_executor = Some(executor.clone());
        executor_table = Some(executor.table().clone());
        if let DaemonNetwork::Overlay(overlay) = &network {
            // Pods of jobs the executor no longer runs (a crash left them) go now.
            let keep = executor
                .table()
                .all()?
                .into_iter()
                .filter(|rec| !rec.phase.is_terminal())
                .map(|rec| rec.plan.job)
                .collect();
            let swept = overlay.sweep_orphans(&keep).await?;
            if !swept.jobs.is_empty() {
                tracing::info!(jobs = ?swept.jobs, sandboxes = swept.sandboxes.len(),
                    workloads = swept.workloads.len(), "orphaned overlay pods removed");
            }
        }
        bond_owner = Some(crate::rpc::bond::Owner {
            attest_key: r.attest.verifying_key().to_bytes(),
            peer_id: peer.to_bytes(),
            gpus: schedulable,
        });
        side = Some(ProviderSide {
            executor,
            attest: r.attest.clone(),
            bond,
            peer_id: peer,
            gpus: pool,
            offer,
            kubo: r
                .settings
                .storage
                .kubo_rpc
                .as_deref()
                .map(ganglion_storage::pin::Kubo::new)
                .transpose()
                .map_err(|e| DaemonError::KuboRpc(Box::new(e)))?,
            policy: AcceptPolicy {
                // What can be given to jobs: a MIG-enabled card counts as its slices only.
                gpus: schedulable,
                min_rate: limits.price_ntx_per_gpu_hour,
                reservation_ttl_ms: RESERVATION_TTL_MS,
                max_deadline_ahead_ms: MAX_DEADLINE_AHEAD_MS,
                max_concurrent_jobs: limits.max_concurrent_jobs,
                max_receipt_interval_ms: MAX_RECEIPT_INTERVAL_MS,
                spec_limits: Some(limits.clone()),
            },
            cluster: setup.map(|s| s as Arc<dyn crate::job::cluster::ClusterSetup>),
        });
    }

    // The swarm; the job store keeps what its requests decide (reservations, attestations).
    let store = JobStore::open(&r.dir.root().join("jobs.sled"))
        .map_err(|e| DaemonError::Engine(crate::job::EngineError::Store(e)))?;
    let bonds = p2p::bonds::snapshot(&r.indexer)?;
    let (client, event_loop, events, inbound) = p2p::new(
        r.libp2p_key.clone(),
        p2p::Config {
            network_magic: r.preset.magic,
            listen: vec![],
            bootstrap: r.settings.p2p.bootstrap.clone(),
            relay_server: r.settings.p2p.relay_server,
            relay_via_bootstrap: r.settings.p2p.relay_via_bootstrap,
            blockstore: Some(BitswapStore::new(blocks.clone() as Arc<dyn Blockstore>)),
            autonat_only_global_ips: r.preset.network != Network::Devnet,
            ..p2p::Config::default()
        },
        bonds,
    )?;
    r.tasks.spawn("swarm", async move {
        event_loop.run().await;
        Ok::<(), String>(())
    });
    r.tasks.spawn("p2p events", async move {
        p2p::log_events(events).await;
        Ok::<(), String>(())
    });
    if bond_ref.is_some() {
        // A provider keeps connections to the other providers (so that ping measures the
        // paths a job would use), measures its send rate to them (`/ganglion/probe/1`,
        // rate-limited both ways) and answers theirs: its offer's links and uplink.
        let prober = p2p::probe::Prober::new(&client, peer, p2p::probe::ProbeConfig::default())?;
        let mesh =
            p2p::mesh::keep_connected(client.clone(), peer, p2p::mesh::MeshConfig::default());
        r.tasks.spawn("provider links", async move {
            futures::join!(mesh, prober.run());
            Ok::<(), String>(())
        });
    }
    if let Some(executor) = replica_executor {
        // The gateways of the jobs' orchestrators reach this provider's service replicas.
        let incoming = ganglion_gateway::p2p::accept(&mut client.streams())
            .map_err(|e| DaemonError::ServiceStreams(e.to_string()))?;
        let replicas = super::services::Replicas::new(store.clone(), executor);
        let stop = r.shutdown.child_token();
        r.tasks.spawn("service streams", async move {
            ganglion_gateway::p2p::serve(incoming, replicas, stop).await;
            Ok::<(), String>(())
        });
    }
    if let Some(setup) = &overlay_setup {
        if let Some(driver) = setup.driver() {
            r.tasks.spawn("overlay driver", driver);
        }
        if setup.relays() {
            let relay = setup.enable_relay(&client)?;
            r.tasks.spawn("overlay relay", async move {
                relay.run().await;
                Ok::<(), String>(())
            });
        } else {
            tracing::warn!(
                "[overlay] relay = false: no relay fallback and relayed datagrams refused; a \
                 job link that cannot go direct fails the job (unpaid) after link_timeout_s"
            );
        }
    }
    let mut p2p_addrs: Vec<Multiaddr> = Vec::new();
    for addr in &r.settings.p2p.listen {
        let bound = client.listen(addr.clone()).await?;
        if r.settings.p2p.relay_server {
            // The operator says these addresses are reachable: a relay needs one confirmed.
            client.add_external_address(bound.clone()).await?;
        }
        p2p_addrs.push(bound.with(Protocol::P2p(peer)));
    }
    // Every address of every listener (a listen on 0.0.0.0 has one per interface), routable
    // first: node.json's entries are what other hosts bootstrap from.
    if let Ok(all) = client.listen_addrs().await
        && !all.is_empty()
    {
        p2p_addrs = all
            .into_iter()
            .map(|a| a.with(Protocol::P2p(peer)))
            .collect();
    }
    for addr in &r.settings.p2p.bootstrap {
        if let Err(e) = client.dial(addr.clone()).await {
            tracing::warn!(%addr, error = %e, "bootstrap peer unreachable (Kademlia retries)");
        }
    }

    // The engine and the RPC server.
    let metrics_store = store.clone();
    let services_store = store.clone();
    let engine = Engine::start(
        Parts {
            store,
            indexer: r.indexer.clone(),
            p2p: client.clone(),
            inbound,
            chain: access(),
            blockstore: blocks.clone() as Arc<dyn Blockstore>,
            provider: side,
            receipt_key: super::keys::receipt_key(&r.dir)?,
        },
        engine_config(&r.settings, &r.preset),
    )?;
    let engine_finished = engine.finished();
    r.tasks.spawn("engine", async move {
        engine_finished.await;
        Ok::<(), String>(())
    });
    let token = r.dir.new_rpc_cookie()?;
    let listen = r.settings.rpc.listen;
    let mut api = Api::new(r.settings.clone())?;
    if let Some(report) = gpu_report {
        api = api.with_gpus(report);
    }
    // The service gateway (`[gateway] listen`), shown in `job_status` too.
    let service_gateway = r
        .settings
        .gateway
        .listen
        .map(|_| ganglion_gateway::Gateway::with_streams(Some(client.streams())));
    if let Some(gateway) = &service_gateway {
        api = api.with_gateway(gateway.clone());
    }
    let module = api
        .with_engine(engine.handle())
        .with_storage(pinner)
        .with_audit(
            crate::audit::service::AuditService::new(
                r.indexer.clone(),
                blocks.clone() as Arc<dyn Blockstore>,
            )
            .with_p2p(client.clone())
            .with_provider(key_hash)
            .with_clock(engine_config(&r.settings, &r.preset).clock),
        )
        .with_bonds({
            let bonds = crate::rpc::bond::BondRpc::new(
                r.indexer.clone(),
                access(),
                engine_config(&r.settings, &r.preset).validity_slots,
            );
            match bond_owner {
                Some(owner) => bonds.with_owner(owner),
                None => bonds,
            }
        })
        .into_module()?;
    let console_module = module.clone();
    let rpc = ganglion_rpc::server::start(listen, &token, module)
        .await
        .map_err(|source| crate::rpc::Error::Bind {
            addr: listen,
            source,
        })?;
    let rpc_stopped = rpc.handle.clone();
    r.tasks.spawn("rpc", async move {
        rpc_stopped.stopped().await;
        Ok::<(), String>(())
    });
    let http_stop = CancellationToken::new();
    let metrics = match r.settings.metrics.listen {
        Some(addr) => {
            let collector = Arc::new(crate::metrics::Collector::new(crate::metrics::Sources {
                store: metrics_store,
                executor: executor_table,
                p2p: client.clone(),
                indexer: r.indexer.clone(),
                clock: r.env.slot_config,
            }));
            let serving = crate::metrics::serve::start(addr, collector, http_stop.clone())
                .await
                .map_err(|source| DaemonError::Metrics { addr, source })?;
            tracing::info!(addr = %serving.addr, "metrics at GET /metrics");
            let addr = serving.addr;
            r.tasks.spawn("metrics", async move {
                serving.task.await.map_err(|e| e.to_string())
            });
            Some(addr)
        }
        None => None,
    };
    let console = match r.settings.console.listen {
        Some(addr) => {
            let serving = crate::console::start(
                addr,
                crate::console::Console {
                    source: crate::console::Source::new(console_module),
                    token: token.clone(),
                    blocks: blocks.clone() as Arc<dyn Blockstore>,
                },
                http_stop.clone(),
            )
            .await
            .map_err(|source| DaemonError::Console { addr, source })?;
            tracing::info!(addr = %serving.addr, "web console at http://{}/", serving.addr);
            let addr = serving.addr;
            r.tasks.spawn("console", async move {
                serving.task.await.map_err(|e| e.to_string())?
            });
            Some(addr)
        }
        None => None,
    };
    let indexer_api = match r.settings.indexer.listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| DaemonError::IndexerApi { addr, source })?;
            let addr = listener
                .local_addr()
                .map_err(|source| DaemonError::IndexerApi { addr, source })?;
            tracing::info!(%addr, "the index's read API at http://{addr}/jobs");
            let (indexer, stop) = (r.indexer.clone(), http_stop.clone());
            r.tasks.spawn("indexer-api", async move {
                ganglion_indexer::http::serve(listener, indexer, stop)
                    .await
                    .map_err(|e| e.to_string())
            });
            Some(addr)
        }
        None => None,
    };
    let gateway = match (r.settings.gateway.listen, service_gateway) {
        (Some(addr), Some(gateway)) => {
            let listening =
                ganglion_gateway::server::listen(addr, gateway.clone(), http_stop.clone()).await?;
            let addr = listening.addr;
            tracing::info!(%addr, "service gateway at http://{addr}/<service>/");
            r.tasks.spawn("gateway", async move {
                listening.task.await.map_err(|e| e.to_string())
            });
            let (indexer, stop) = (r.indexer.clone(), http_stop.clone());
            let depth = engine_config(&r.settings, &r.preset).depth;
            let scaler: Arc<dyn super::services::Scaler> = Arc::new(engine.handle());
            let me = peer;
            r.tasks.spawn("service routes", async move {
                super::services::route(gateway, services_store, indexer, depth, scaler, me, stop)
                    .await;
                Ok::<(), String>(())
            });
            Some(addr)
        }
        _ => None,
    };
    let info = NodeInfo {
        pid: std::process::id(),
        peer_id: peer.to_string(),
        p2p: p2p_addrs.iter().map(ToString::to_string).collect(),
        rpc: rpc.addr,
        payment_key_hash: hex::encode(key_hash),
        bond: bond_ref.map(|b| format!("{}#{}", hex::encode(b.tx_hash), b.index)),
        metrics,
        console,
        gateway,
        indexer_api,
    };
    info.write(r.dir.root())?;
    tracing::info!(rpc = %rpc.addr, p2p = ?info.p2p, provider = info.bond.is_some(), "node running");

    let outcome = r.tasks.until_shutdown(&r.shutdown).await;
    match &outcome {
        Ok(()) => tracing::info!("shutting down"),
        Err(e) => tracing::error!(task = e.name, reason = %e.reason,
            "a critical task stopped: the node stops"),
    }
    engine.shutdown().await;
    http_stop.cancel();
    let _ = rpc.handle.stop();
    rpc.handle.stopped().await;
    Ok(outcome?)
}
