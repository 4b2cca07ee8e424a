//! The provider's hook between the on-chain assignment and the executor: before a multi-node
//! job's container starts, this node and the job's other assigned providers must agree on the
//! job's network (the `cluster` exchange of overlay keys, addresses and endpoints;
//! DESIGN §6). The engine knows the assignment; [`ClusterSetup`] knows the network. The daemon
//! implements it with the overlay (`ganglion_node::daemon::overlay`); without one (tests, a single
//! Docker host) the executor's own network needs no set-up.
//!
//! The other side of the exchange: another node's hello reaches the engine from the swarm
//! ([`ganglion_p2p::inbound::Inbound::Cluster`]) and is answered by `on_hello`, which asks
//! the [`ClusterSetup`]: it holds what this node announced for each job, and to whom.

use async_trait::async_trait;
use ganglion_contracts::v2::datum::{Assignment, JobId};
use ganglion_indexer::Indexer;
use ganglion_indexer::store::Kv;
use libp2p::PeerId;

use ganglion_dispatch::executor::plan::RunId;
use ganglion_p2p::Client;
use ganglion_p2p::protocols::{ClusterHello, ClusterResponse};

/// One job's nodes as the assignment names them, seen from this provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPeers {
    /// The job on chain.
    pub job: JobId,
    /// This node's executor job id (what the executor's network is keyed by).
    pub exec_job: RunId,
    /// This node's index in the assignment: its node rank (rank 0 = the first assignment).
    pub rank: u32,
    /// Node ranks in the job (= assignments).
    pub world: u32,
    /// The libp2p peer id of every other node, by node rank (this node's rank absent).
    pub peers: Vec<(u32, PeerId)>,
}

/// Why a job's network could not be agreed with its other nodes (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct SetupFailure {
    /// Node ranks that did not answer, or answered wrongly; empty when the failure is this
    /// node's own.
    pub unreachable: Vec<u32>,
    /// What went wrong.
    pub detail: String,
}

impl From<String> for SetupFailure {
    fn from(detail: String) -> Self {
        Self {
            unreachable: Vec::new(),
            detail,
        }
    }
}

/// Sets up a job's network with its other nodes before dispatch.
#[async_trait]
pub trait ClusterSetup: Send + Sync {
    /// Agrees on `job`'s network with every peer over `p2p` and makes it ready for the
    /// executor's `attach`. Called again (same job) when a previous call failed; an
    /// implementation keeps what it announced so a peer that already answered stays valid.
    ///
    /// # Errors
    /// A [`SetupFailure`], logged by the engine, which retries on its next pass — until
    /// [`ClusterSetup::give_up_after`] from the dispatch, when the share ends as a job network
    /// that did not form (nothing ran, nothing is claimed, the orchestrator is told who could
    /// not be reached).
    async fn prepare(&self, p2p: &Client, job: &ClusterPeers) -> Result<(), SetupFailure>;

    /// How long after the dispatch a set-up that keeps failing is given up (the overlay's
    /// `[overlay] link_timeout_s`).
    fn give_up_after(&self) -> std::time::Duration;

    /// Forgets `job` (its run ended).
    fn forget(&self, job: &JobId);

    /// Answers `peer`'s cluster `hello` (`/ganglion/cluster/1`): this node's hello for the
    /// job when `peer` is one of the job's other assigned nodes,
    /// [`ClusterResponse::NotAssigned`] (no key, no endpoint) when it is not, and
    /// [`ClusterResponse::UnknownJob`] when this node has announced nothing for the job (yet).
    fn answer(&self, peer: PeerId, hello: &ClusterHello) -> ClusterResponse;
}

/// The engine's answer to `peer`'s cluster `hello`: the [`ClusterSetup`]'s, when `cluster` (the
/// provider side's) is one; [`ClusterResponse::UnknownJob`] otherwise (an orchestrator, or a
/// provider whose executor network needs no exchange, runs no job network with others).
pub(crate) fn on_hello(
    cluster: Option<&dyn ClusterSetup>,
    peer: PeerId,
    hello: &ClusterHello,
) -> ClusterResponse {
    match cluster {
        Some(setup) => setup.answer(peer, hello),
        None => ClusterResponse::UnknownJob,
    }
}

/// The peers of `assignments` for the provider at `index`: each other assignment's provider's
/// peer id from its live bond on chain (the bond whose attest key the assignment names; the
/// bond datum carries the peer id).
///
/// # Errors
/// A reason naming the assignment whose bond or peer id cannot be found.
pub fn peers_of<S: Kv>(
    indexer: &Indexer<S>,
    assignments: &[Assignment],
    index: u32,
) -> Result<Vec<(u32, PeerId)>, String> {
    let mut peers = Vec::new();
    for (i, a) in assignments.iter().enumerate() {
        let rank = u32::try_from(i).map_err(|_| "too many assignments".to_string())?;
        if rank == index {
            continue;
        }
        let bonds = indexer
            .provider(&a.provider)
            .map_err(|e| format!("indexer: {e}"))?
            .bonds;
        let peer = bonds
            .iter()
            .filter(|b| b.datum.attest_key == a.attest_key)
            .chain(bonds.iter())
            .find_map(|b| PeerId::from_bytes(&b.datum.peer_id).ok())
            .ok_or_else(|| {
                format!(
                    "assignment {i}: no bond with a peer id for provider {}",
                    hex::encode(a.provider)
                )
            })?;
        peers.push((rank, peer));
    }
    Ok(peers)
}
