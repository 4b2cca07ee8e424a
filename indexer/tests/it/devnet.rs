//! A devnet for tests, and transactions built by `ganglion-contracts` submitted to it.

use std::time::Duration;

use ed25519_dalek::SigningKey;
use ganglion_cardano::protocol::ProtocolParams;
use ganglion_contracts::env::Env;
use ganglion_contracts::params::AssetClass;
use ganglion_contracts::test_utils::world::Party;
use ganglion_contracts::tx::{Balanced, Draft, Output, Utxo, balance, sign};
use ganglion_contracts::v2::build::{self, Deployment};
use ganglion_contracts::v2::datum::JobId;
use ganglion_contracts::v2::params::Params;
use ganglion_indexer::store::Kv;
use ganglion_indexer::{Indexer, Notification, Watch};
use ganglion_testnet::devnet::{self, DevnetConfig, DevnetHandle};
use ganglion_testnet::genesis::Genesis;
use pallas_traverse::{Era, MultiEraOutput};

pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// The same key as the devnet's `DevKey::from_seed(seed)`.
pub(crate) fn dev_party(env: &Env, seed: u32) -> Party {
    let mut material = b"ganglion-devnet-key".to_vec();
    material.extend_from_slice(&seed.to_be_bytes());
    let bytes: [u8; 32] = *pallas_crypto::hash::Hasher::<256>::hash(&material);
    let key = SigningKey::from_bytes(&bytes);
    let hash = ganglion_contracts::blueprint::key_hash(&key.verifying_key().to_bytes());
    Party {
        address: ganglion_contracts::blueprint::key_address(env.network, &hash),
        key,
        hash,
    }
}

pub(crate) struct Chain {
    pub handle: DevnetHandle,
    pub env: Env,
    pub genesis: Genesis,
}

impl Chain {
    pub(crate) fn utxos(&self, address: &[u8]) -> Vec<Utxo> {
        self.handle
            .chain()
            .utxos_at(address)
            .expect("utxos")
            .into_iter()
            .map(|(r, bytes)| Utxo {
                reference: r,
                output: Output::from_chain(
                    &MultiEraOutput::decode(Era::Conway, &bytes).expect("output decodes"),
                ),
            })
            .collect()
    }

    pub(crate) fn slot(&self) -> u64 {
        self.handle.chain().next_block_slot()
    }

    /// Balances `draft` from `payer`, signs, submits and forges a block with it.
    pub(crate) async fn run(&self, draft: Draft, payer: &Party, extra: &[&SigningKey]) -> Balanced {
        let utxos = self.utxos(&payer.address);
        let wallet = ganglion_contracts::tx::Wallet {
            utxos: &utxos,
            key_hash: payer.hash,
            change_address: payer.address.clone(),
        };
        let b = balance(draft, &wallet, &self.env).expect("balances");
        let mut keys = vec![&payer.key];
        keys.extend_from_slice(extra);
        let signed = sign(&b, &keys).expect("signs");
        self.handle
            .submit(signed)
            .await
            .expect("the devnet's ledger accepts it");
        self.handle
            .forge_now()
            .await
            .expect("forges")
            .expect("a block");
        b
    }
}

/// Waits until `ix` has applied the devnet's tip.
pub(crate) async fn caught_up<S: Kv>(
    rx: &std::sync::mpsc::Receiver<Notification>,
    chain: &Chain,
    ix: &Indexer<S>,
) {
    let want = chain.handle.tip().map(|t| *t.hash);
    let deadline = tokio::time::Instant::now() + WAIT;
    while ix.tip().expect("tip").map(|t| t.hash) != want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "indexer did not catch up within {WAIT:?}"
        );
        // Drain notifications as they arrive instead of sleeping for a fixed time.
        let _ = tokio::task::block_in_place(|| rx.recv_timeout(Duration::from_millis(200)));
    }
}

impl Chain {
    /// A devnet in `dir` that forges only when asked.
    pub(crate) async fn start(dir: &std::path::Path) -> Self {
        let genesis = Genesis::devnet().expect("genesis");
        let mut config = DevnetConfig::new(genesis.clone(), dir.join("devnet"));
        config.auto_forge = false;
        // The chain's own Kupo and Blockfrost answers, to compare the index's with.
        config.http_addr = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let handle = devnet::start(config).await.expect("devnet starts");
        let env = Env {
            params: ProtocolParams::mainnet().expect("params"),
            slot_config: genesis.slot_config(),
            network: pallas_addresses::Network::Testnet,
        };
        Self {
            handle,
            env,
            genesis,
        }
    }
}

/// The orchestrators' receipt key in these tests.
pub(crate) fn receipt_key() -> SigningKey {
    SigningKey::from_bytes(&[4; 32])
}

/// Deploys the validator (with devnet NTX parameters and a one-hour claim window) as a
/// reference script.
pub(crate) async fn deploy(chain: &Chain) -> (Deployment, Watch) {
    let params = Params {
        ntx: AssetClass {
            policy: *chain.genesis.ntx_policy_id().expect("policy"),
            name: chain.genesis.ntx_asset_name().expect("name"),
        },
        min_bond_per_gpu: 1_000_000,
        unbonding_delay_ms: 60_000,
        claim_window_ms: 3_600_000,
    };
    let script = ganglion_contracts::v2::blueprint()
        .and_then(|b| b.apply_data(params.to_plutus_data()))
        .expect("script");
    let deployer = dev_party(&chain.env, 0);
    let b = chain
        .run(
            build::deploy(&chain.env, &script).expect("deploy"),
            &deployer,
            &[],
        )
        .await;
    let reference = chain
        .utxos(&script.address(chain.env.network))
        .into_iter()
        .find(|u| u.reference.tx_hash == b.hash)
        .expect("reference script output");
    let watch = Watch::v2(script.hash, params.clone()).with_slot_config(chain.env.slot_config);
    (
        Deployment {
            params,
            script,
            reference,
        },
        watch,
    )
}

/// Locks a small job (1 GPU, 1 NTX base unit, deadline in an hour) from `orchestrator`'s
/// largest UTxO and forges it into a block.
pub(crate) async fn lock_small(chain: &Chain, dep: &Deployment, orchestrator: &Party) -> JobId {
    let seed = chain
        .utxos(&orchestrator.address)
        .into_iter()
        .max_by_key(|u| u.output.value.lovelace)
        .expect("funds");
    let slot = chain.slot();
    let req = build::LockRequest {
        orchestrator: orchestrator.hash,
        receipt_key: receipt_key().verifying_key().to_bytes(),
        spec: vec![1, 85],
        gpus: 1,
        max_rate: 1,
        budget: 1,
        deadline_ms: ganglion_cardano::time::slot_to_posix_ms(&chain.env.slot_config, slot + 3600)
            .expect("after zero"),
        receipt_interval_ms: 60_000,
        seed,
        valid_until_slot: slot + 300,
    };
    let (draft, job) = build::lock(dep, &chain.env, &req).expect("lock");
    chain.run(draft, orchestrator, &[]).await;
    job
}

impl Chain {
    /// The devnet's N2N endpoint as a follower source.
    pub(crate) fn n2n(&self) -> ganglion_indexer::follow::Source {
        ganglion_indexer::follow::Source::N2n {
            addr: self.handle.n2n_addr().to_string(),
            magic: self.handle.magic(),
        }
    }

    /// The devnet's N2C-over-TCP endpoint as a follower source.
    pub(crate) fn n2c(&self) -> ganglion_indexer::follow::Source {
        ganglion_indexer::follow::Source::N2cTcp {
            addr: self.handle.n2c_tcp_addr().expect("n2c tcp").to_string(),
            magic: self.handle.magic(),
        }
    }
}

/// A running sync loop: its indexer, its notifications and its task.
pub(crate) type Following<S> = (
    std::sync::Arc<Indexer<S>>,
    std::sync::mpsc::Receiver<Notification>,
    tokio::task::JoinHandle<ganglion_indexer::Result<()>>,
);

/// Subscribes to `ix`, then spawns the sync loop feeding it until `cancel` fires.
pub(crate) fn spawn_follower<S: Kv + 'static>(
    ix: Indexer<S>,
    config: ganglion_indexer::sync::SyncConfig,
    cancel: &tokio_util::sync::CancellationToken,
) -> Following<S> {
    let ix = std::sync::Arc::new(ix);
    let rx = ix.subscribe();
    let task = tokio::spawn(ganglion_indexer::sync::run(
        ix.clone(),
        config,
        cancel.clone(),
    ));
    (ix, rx, task)
}

/// Starts the `ganglion-indexer` binary with `args` (stderr to `stderr`); its stdout lines
/// arrive on the receiver.
pub(crate) fn spawn_indexer(
    args: &[impl AsRef<std::ffi::OsStr>],
    stderr: std::process::Stdio,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ganglion-indexer"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("the indexer binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}
