//! The handle the rest of the node uses: commands to the [`super::EventLoop`], oneshot replies.
//!
//! Every method is cancel-safe in the sense that dropping its future never corrupts the loop: a
//! dropped reply channel is ignored there. A command already sent is still carried out.

use std::collections::HashMap;
use std::time::Instant;

use libp2p::{Multiaddr, PeerId};
use tokio::sync::{mpsc, oneshot};

use super::Error;
use super::inbound::Responder;
use super::offers::{BondSnapshot, SignedOffer};
use super::probe::{MBPS_MAX_AGE, SharedThroughputs};
use super::protocols::{
    AcceptRequest, AcceptResponse, ClusterHello, ClusterResponse, HeartbeatRequest,
    HeartbeatResponse,
};
use super::rtt::Rtt;

/// Capacity of the command channel (Client → EventLoop). Commands are small and the loop handles
/// each in microseconds; 256 absorbs a burst of parallel requests while still applying
/// back-pressure to a runaway caller.
pub const COMMAND_CHANNEL: usize = 256;

/// A command for the event loop.
#[derive(Debug)]
pub(crate) enum Command {
    Listen(Multiaddr, oneshot::Sender<Result<Multiaddr, Error>>),
    Dial(Multiaddr, oneshot::Sender<Result<PeerId, Error>>),
    DialPeer(PeerId, oneshot::Sender<Result<bool, Error>>),
    AddPeer(PeerId, Multiaddr, oneshot::Sender<()>),
    AddExternalAddress(Multiaddr, oneshot::Sender<()>),
    PublishOffer(Box<SignedOffer>, oneshot::Sender<Result<(), Error>>),
    SetBonds(BondSnapshot, oneshot::Sender<()>),
    Market(oneshot::Sender<Vec<SignedOffer>>),
    Rtts(oneshot::Sender<Vec<(PeerId, Rtt)>>),
    PeerScore(PeerId, oneshot::Sender<Option<f64>>),
    ConnectedPeers(oneshot::Sender<Vec<PeerId>>),
    ListenAddrs(oneshot::Sender<Vec<Multiaddr>>),
    Accept(
        PeerId,
        AcceptRequest,
        oneshot::Sender<Result<AcceptResponse, Error>>,
    ),
    Cluster(
        PeerId,
        Box<ClusterHello>,
        oneshot::Sender<Result<ClusterResponse, Error>>,
    ),
    ObservedAddrs(oneshot::Sender<Vec<(PeerId, Multiaddr)>>),
    Heartbeat(
        PeerId,
        Box<HeartbeatRequest>,
        oneshot::Sender<Result<HeartbeatResponse, Error>>,
    ),
    RespondAccept(Responder<AcceptResponse>, AcceptResponse),
    RespondCluster(Responder<ClusterResponse>, Box<ClusterResponse>),
    RespondHeartbeat(Responder<HeartbeatResponse>, Box<HeartbeatResponse>),
    RawGossip(Vec<u8>, oneshot::Sender<Result<(), Error>>),
    FindPeer(PeerId, oneshot::Sender<Vec<Multiaddr>>),
    NatStatus(oneshot::Sender<libp2p::autonat::NatStatus>),
    FetchDag(
        cid::Cid,
        PeerId,
        oneshot::Sender<Result<super::bitswap::FetchedDag, Error>>,
    ),
}

/// Cloneable handle to the p2p event loop.
#[derive(Clone)]
pub struct Client {
    tx: mpsc::Sender<Command>,
    streams: libp2p_stream::Control,
    /// Send rates the [`super::probe::Prober`] measured (shared by every clone).
    throughputs: SharedThroughputs,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    pub(crate) fn new(tx: mpsc::Sender<Command>, streams: libp2p_stream::Control) -> Self {
        Self {
            tx,
            streams,
            throughputs: SharedThroughputs::default(),
        }
    }

    /// This node's send rate to each peer a throughput probe measured in the last
    /// [`MBPS_MAX_AGE`], Mbit/s ([`super::probe`]; empty where no [`super::probe::Prober`]
    /// runs).
    pub fn throughputs(&self) -> HashMap<PeerId, u32> {
        self.throughputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .fresh(MBPS_MAX_AGE, Instant::now())
    }

    /// Records a probe's result (the prober's side of [`Client::throughputs`]).
    pub(crate) fn record_throughput(&self, peer: PeerId, mbps: u32, at: Instant) {
        self.throughputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .record(peer, mbps, at);
    }

    /// A handle for raw streams on this swarm's connections (`libp2p-stream`): open one to a
    /// peer for a protocol, or accept a protocol's inbound streams (once per protocol per
    /// swarm). The overlay's relay fallback uses it (`ganglion_dispatch::overlay::relay`).
    pub fn streams(&self) -> libp2p_stream::Control {
        self.streams.clone()
    }

    async fn send(&self, command: Command) -> Result<(), Error> {
        self.tx.send(command).await.map_err(|_| Error::Stopped)
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(|_| Error::Stopped)?;
        rx.await.map_err(|_| Error::Stopped)
    }

    /// Listens on `addr`; returns the first concrete address (port 0 resolved).
    ///
    /// # Errors
    /// [`Error::Listen`], [`Error::ListenerClosed`], [`Error::Stopped`].
    pub async fn listen(&self, addr: Multiaddr) -> Result<Multiaddr, Error> {
        self.ask(|r| Command::Listen(addr, r)).await?
    }

    /// Dials `addr` (which may end in `/p2p/<id>`); returns the peer once connected.
    ///
    /// # Errors
    /// [`Error::Dial`], [`Error::Stopped`].
    pub async fn dial(&self, addr: Multiaddr) -> Result<PeerId, Error> {
        self.ask(|r| Command::Dial(addr, r)).await?
    }

    /// Starts connecting to `peer` at the addresses the swarm knows for it (Kademlia's,
    /// identify's; through the bootstrap relays with [`super::Config::relay_via_bootstrap`]);
    /// does not wait for the connection. Returns whether a dial started (`false`: already
    /// connected or dialling).
    ///
    /// # Errors
    /// [`Error::Dial`] (e.g. no address known: look the peer up with [`Client::find_peer`]
    /// and [`Client::add_peer`] it), [`Error::Stopped`].
    pub async fn dial_peer(&self, peer: PeerId) -> Result<bool, Error> {
        self.ask(|r| Command::DialPeer(peer, r)).await?
    }

    /// Adds a known address of `peer` to Kademlia.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn add_peer(&self, peer: PeerId, addr: Multiaddr) -> Result<(), Error> {
        self.ask(|r| Command::AddPeer(peer, addr, r)).await
    }

    /// Declares `addr` a confirmed external address of this node (a public address from the
    /// config, or one AutoNAT confirmed). A relay server only serves reservations once it has one.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn add_external_address(&self, addr: Multiaddr) -> Result<(), Error> {
        self.ask(|r| Command::AddExternalAddress(addr, r)).await
    }

    /// Publishes this node's signed offer on the network's topic (and keeps it in its own
    /// market view).
    ///
    /// # Errors
    /// [`Error::Publish`] (e.g. `NoPeersSubscribedToTopic` before any peer joined), [`Error::Stopped`].
    pub async fn publish_offer(&self, offer: SignedOffer) -> Result<(), Error> {
        self.ask(|r| Command::PublishOffer(Box::new(offer), r))
            .await?
    }

    /// Publishes arbitrary bytes on the offer topic. Only for tests of the validators (forged
    /// offers, garbage); never used by the node itself.
    ///
    /// # Errors
    /// [`Error::Publish`], [`Error::Stopped`].
    #[doc(hidden)]
    pub async fn publish_raw(&self, bytes: Vec<u8>) -> Result<(), Error> {
        self.ask(|r| Command::RawGossip(bytes, r)).await?
    }

    /// Replaces the live-bond snapshot (from the indexer's `active_bonds()`); offers whose bond
    /// left it drop out of the market at once.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn set_bonds(&self, bonds: BondSnapshot) -> Result<(), Error> {
        self.ask(|r| Command::SetBonds(bonds, r)).await
    }

    /// The live market: one verified, unexpired offer per provider.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn market(&self) -> Result<Vec<SignedOffer>, Error> {
        self.ask(Command::Market).await
    }

    /// The latency matrix row of this node: RTT to each peer pinged, with the sample's time.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn rtts(&self) -> Result<Vec<(PeerId, Rtt)>, Error> {
        self.ask(Command::Rtts).await
    }

    /// Gossipsub score of `peer` as this node sees it.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn peer_score(&self, peer: PeerId) -> Result<Option<f64>, Error> {
        self.ask(|r| Command::PeerScore(peer, r)).await
    }

    /// Peers with an open connection.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn connected_peers(&self) -> Result<Vec<PeerId>, Error> {
        self.ask(Command::ConnectedPeers).await
    }

    /// Every address this node listens on now: one per interface for a listen on `0.0.0.0`
    /// or `::` (libp2p reports each), routable ones first, loopback last.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn listen_addrs(&self) -> Result<Vec<Multiaddr>, Error> {
        self.ask(Command::ListenAddrs).await
    }

    /// Asks provider `peer` to accept its share of a job.
    ///
    /// # Errors
    /// [`Error::Request`] (dial failure, timeout, protocol or codec error), [`Error::Stopped`].
    pub async fn accept(&self, peer: PeerId, req: AcceptRequest) -> Result<AcceptResponse, Error> {
        self.ask(|r| Command::Accept(peer, req, r)).await?
    }

    /// This node's addresses as connected peers observed them (identify's `observed_addr`),
    /// one per connected peer: behind a NAT, the public side of the mapping.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn observed_addrs(&self) -> Result<Vec<(PeerId, Multiaddr)>, Error> {
        self.ask(Command::ObservedAddrs).await
    }

    /// Sends this node's cluster hello to a peer of the job; returns the peer's answer (its
    /// hello, or why not: the peer's job engine decides, [`super::inbound::Inbound::Cluster`]).
    ///
    /// # Errors
    /// [`Error::Request`], [`Error::Stopped`].
    pub async fn cluster_hello(
        &self,
        peer: PeerId,
        hello: ClusterHello,
    ) -> Result<ClusterResponse, Error> {
        self.ask(|r| Command::Cluster(peer, Box::new(hello), r))
            .await?
    }

    /// Answers an inbound accept request ([`super::inbound::Inbound::Accept`]).
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn respond_accept(
        &self,
        responder: Responder<AcceptResponse>,
        response: AcceptResponse,
    ) -> Result<(), Error> {
        self.send(Command::RespondAccept(responder, response)).await
    }

    /// Answers an inbound cluster hello ([`super::inbound::Inbound::Cluster`]).
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn respond_cluster(
        &self,
        responder: Responder<ClusterResponse>,
        response: ClusterResponse,
    ) -> Result<(), Error> {
        self.send(Command::RespondCluster(responder, Box::new(response)))
            .await
    }

    /// Sends a provider's heartbeat to the job's orchestrator `peer` and returns its answer: a
    /// signed receipt (check it with [`super::protocols::SignedReceipt::verify`] against the
    /// escrow's `receipt_key` before keeping it), a refusal, or `RateLimited`.
    ///
    /// # Errors
    /// [`Error::Request`] (dial failure, timeout, protocol or codec error), [`Error::Stopped`].
    pub async fn request_receipt(
        &self,
        peer: PeerId,
        request: HeartbeatRequest,
    ) -> Result<HeartbeatResponse, Error> {
        self.ask(|r| Command::Heartbeat(peer, Box::new(request), r))
            .await?
    }

    /// Answers an inbound heartbeat ([`super::inbound::Inbound::Heartbeat`]).
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn respond_heartbeat(
        &self,
        responder: Responder<HeartbeatResponse>,
        response: HeartbeatResponse,
    ) -> Result<(), Error> {
        self.send(Command::RespondHeartbeat(responder, Box::new(response)))
            .await
    }

    /// Fetches the whole DAG under `root` into the node's blockstore over bitswap, every block
    /// checked against its CID ([`super::bitswap`]). `peer` is dialled (from known addresses)
    /// when not connected; blocks may also come from other connected peers that have them.
    /// Blocks already stored are read from the store, not fetched. Pin `root` afterwards to keep
    /// the DAG through GC.
    ///
    /// # Errors
    /// [`Error::Fetch`] ([`super::bitswap::FetchError`]: no blockstore, stalled for
    /// [`super::Config::fetch_timeout`], a block that does not match its CID, a store failure),
    /// [`Error::Dial`], [`Error::Stopped`].
    pub async fn fetch_dag(
        &self,
        root: cid::Cid,
        peer: PeerId,
    ) -> Result<super::bitswap::FetchedDag, Error> {
        self.ask(|r| Command::FetchDag(root, peer, r)).await?
    }

    /// Looks `peer` up in the Kademlia DHT (`/ganglion/kad/1`, a closest-peers query from the
    /// bootstrap peers outward); returns the addresses learnt for it, empty when not found. Then
    /// [`Client::dial`] one of them.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn find_peer(&self, peer: PeerId) -> Result<Vec<Multiaddr>, Error> {
        self.ask(|r| Command::FindPeer(peer, r)).await
    }

    /// AutoNAT's current view of this node's reachability.
    ///
    /// # Errors
    /// [`Error::Stopped`].
    pub async fn nat_status(&self) -> Result<libp2p::autonat::NatStatus, Error> {
        self.ask(Command::NatStatus).await
    }
}
