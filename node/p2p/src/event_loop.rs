//! The event loop: sole owner of the [`Swarm`]; selects over swarm events, client commands and
//! the market prune timer, and keeps the pending requests (ours, by request id). Requests the
//! node answers (accept, cluster, heartbeat) go to the job engine with their response channel
//! ([`super::inbound`]); the loop keeps no job state.

use std::collections::HashMap;
use std::time::Instant;

use futures::StreamExt;
use libp2p::gossipsub::{self, MessageAcceptance};
use libp2p::request_response::{self, OutboundRequestId};
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::swarm::{ConnectionId, SwarmEvent};
use libp2p::{Multiaddr, PeerId, Swarm, autonat, core::transport::ListenerId, identify, kad, ping};
use tokio::sync::{mpsc, oneshot};

use super::behaviour::{Behaviour, BehaviourEvent};
use super::bitswap::DagFetches;
use super::client::Command;
use super::inbound::{Inbound, Responder};
use super::limits::{InFlight, RateLimiter};
use super::listen::PendingListen;
use super::offers::{BondSnapshot, Market, SignedOffer, verify_offer};
use super::protocols::{
    self, AcceptResponse, ClusterHello, ClusterResponse, HeartbeatRequest, HeartbeatResponse,
    RefusalReason,
};
use super::relayed::RelayRoutes;
use super::rtt::RttMatrix;
use super::{Config, Error, Event, MAX_HEARTBEATS_IN_FLIGHT};

type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// Hands a response (or an outbound failure) to the command waiting for it. Returns the
/// event when it is something else (an inbound request) for the protocol's handler.
fn complete_outbound<Req, Resp>(
    pending: &mut HashMap<OutboundRequestId, (PeerId, Reply<Resp>)>,
    event: request_response::Event<Req, Resp>,
) -> Option<request_response::Event<Req, Resp>> {
    match event {
        request_response::Event::Message {
            message:
                request_response::Message::Response {
                    request_id,
                    response,
                },
            ..
        } => {
            if let Some((_, reply)) = pending.remove(&request_id) {
                let _ = reply.send(Ok(response));
            }
            None
        }
        request_response::Event::OutboundFailure {
            peer,
            request_id,
            error,
            ..
        } => {
            if let Some((_, reply)) = pending.remove(&request_id) {
                let _ = reply.send(Err(Error::Request {
                    peer,
                    source: error,
                }));
            }
            None
        }
        other => Some(other),
    }
}

/// Owns the swarm. Run it with [`EventLoop::run`].
pub struct EventLoop {
    swarm: Swarm<Behaviour>,
    config: Config,
    topic: gossipsub::IdentTopic,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
    dropped_events: u64,
    inbound: mpsc::Sender<Inbound>,
    bonds: BondSnapshot,
    market: Market,
    rtts: RttMatrix,
    limiter: RateLimiter,
    /// Heartbeats with the job engine, unanswered, per peer.
    heartbeats_in_flight: InFlight,
    pending_listen: HashMap<ListenerId, PendingListen<Reply<Multiaddr>>>,
    pending_dial: HashMap<ConnectionId, Reply<PeerId>>,
    pending_accept: HashMap<OutboundRequestId, (PeerId, Reply<AcceptResponse>)>,
    pending_cluster: HashMap<OutboundRequestId, (PeerId, Reply<ClusterResponse>)>,
    pending_heartbeat: HashMap<OutboundRequestId, (PeerId, Reply<HeartbeatResponse>)>,
    /// Our address as each connected peer observed it (identify).
    observed: HashMap<PeerId, Multiaddr>,
    relays: RelayRoutes,
    fetches: DagFetches,
    pending_find: HashMap<kad::QueryId, (PeerId, oneshot::Sender<Vec<Multiaddr>>)>,
}

impl EventLoop {
    pub(crate) fn new(
        mut swarm: Swarm<Behaviour>,
        config: Config,
        bonds: BondSnapshot,
        commands: mpsc::Receiver<Command>,
        events: mpsc::Sender<Event>,
        inbound: mpsc::Sender<Inbound>,
    ) -> Result<Self, Error> {
        let topic = protocols::offer_topic(config.network_magic);
        swarm.behaviour_mut().gossipsub.subscribe(&topic)?;
        let fetches = DagFetches::new(config.blockstore.as_ref().map(|b| b.store().clone()));
        let relays = RelayRoutes::new(config.relay_via_bootstrap, &config.bootstrap);
        Ok(Self {
            swarm,
            limiter: RateLimiter::new(config.inbound_burst, config.inbound_per_second),
            heartbeats_in_flight: InFlight::new(MAX_HEARTBEATS_IN_FLIGHT),
            config,
            topic,
            commands,
            events,
            dropped_events: 0,
            inbound,
            bonds,
            market: Market::default(),
            rtts: RttMatrix::default(),
            pending_listen: HashMap::new(),
            pending_dial: HashMap::new(),
            pending_accept: HashMap::new(),
            pending_cluster: HashMap::new(),
            pending_heartbeat: HashMap::new(),
            observed: HashMap::new(),
            relays,
            fetches,
            pending_find: HashMap::new(),
        })
    }

    /// This node's peer id.
    pub fn local_peer_id(&self) -> PeerId {
        *self.swarm.local_peer_id()
    }

    /// Runs until every [`super::Client`] is dropped. Listens on `config.listen` and dials
    /// `config.bootstrap` first (failures there are logged, not fatal).
    pub async fn run(mut self) {
        for addr in self.config.listen.clone() {
            if let Err(e) = self.swarm.listen_on(addr.clone()) {
                tracing::warn!(target: "p2p", %addr, error = %e, "cannot listen");
            }
        }
        for addr in self.config.bootstrap.clone() {
            if let Some(libp2p::multiaddr::Protocol::P2p(peer)) = addr.iter().last() {
                self.swarm
                    .behaviour_mut()
                    .kad
                    .add_address(&peer, addr.clone());
            }
        }
        self.dial_bootstrap();
        if !self.config.bootstrap.is_empty() {
            let _ = self.swarm.behaviour_mut().kad.bootstrap();
        }
        let mut prune = tokio::time::interval(self.config.prune_interval);
        prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut redial = tokio::time::interval(self.config.redial_interval);
        redial.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        redial.reset();
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                command = self.commands.recv() => match command {
                    Some(c) => self.on_command(c),
                    None => break,
                },
                _ = prune.tick() => self.prune(),
                _ = redial.tick() => {
                    self.dial_bootstrap();
                    self.relays.refresh(&mut self.swarm);
                }
            }
        }
        tracing::debug!(target: "p2p", "event loop stopped: no client left");
    }

    /// Dials every bootstrap peer this node is not connected to (all of them at start).
    fn dial_bootstrap(&mut self) {
        for addr in self.config.bootstrap.clone() {
            let peer = match addr.iter().last() {
                Some(libp2p::multiaddr::Protocol::P2p(peer)) => Some(peer),
                _ => None,
            };
            if peer.is_some_and(|p| self.swarm.is_connected(&p)) {
                continue;
            }
            if let Err(e) = self.swarm.dial(addr.clone()) {
                tracing::warn!(target: "p2p", %addr, error = %e, "cannot dial bootstrap peer");
            }
        }
    }

    fn emit(&mut self, event: Event) {
        if self.events.try_send(event).is_err() {
            self.dropped_events += 1;
            if self.dropped_events.is_power_of_two() {
                tracing::warn!(target: "p2p", dropped = self.dropped_events, "event channel full or closed; events dropped");
            }
        }
    }

    fn prune(&mut self) {
        for provider in self.market.prune((self.config.clock)(), &self.bonds) {
            self.emit(Event::OfferExpired { provider });
        }
        if self.fetches.len() > 0 {
            let timeout = self.config.fetch_timeout;
            let bitswap = self.swarm.behaviour_mut().bitswap.as_mut();
            self.fetches.expire(Instant::now(), timeout, bitswap);
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Listen(addr, reply) => match self.swarm.listen_on(addr.clone()) {
                Ok(id) => {
                    self.pending_listen
                        .insert(id, PendingListen::new(&addr, reply));
                }
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                }
            },
            Command::Dial(addr, reply) => {
                let opts = DialOpts::from(addr);
                let id = opts.connection_id();
                match self.swarm.dial(opts) {
                    Ok(()) => {
                        self.pending_dial.insert(id, reply);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            Command::DialPeer(peer, reply) => {
                let started = if self.swarm.is_connected(&peer) {
                    Ok(false)
                } else {
                    self.relays.route(&mut self.swarm, &peer);
                    let opts = DialOpts::peer_id(peer)
                        .condition(PeerCondition::DisconnectedAndNotDialing)
                        .build();
                    match self.swarm.dial(opts) {
                        Ok(()) => Ok(true),
                        Err(libp2p::swarm::DialError::DialPeerConditionFalse(_)) => Ok(false),
                        Err(e) => Err(Error::Dial(e)),
                    }
                };
                let _ = reply.send(started);
            }
            Command::AddPeer(peer, addr, reply) => {
                self.swarm.behaviour_mut().kad.add_address(&peer, addr);
                let _ = reply.send(());
            }
            Command::AddExternalAddress(addr, reply) => {
                self.swarm.add_external_address(addr);
                let _ = reply.send(());
            }
            Command::PublishOffer(offer, reply) => {
                let bytes = offer.encode();
                let res = self
                    .swarm
                    .behaviour_mut()
                    .gossipsub
                    .publish(self.topic.clone(), bytes)
                    .map(|_| ())
                    .map_err(Error::from);
                if res.is_ok() {
                    self.market.insert(*offer);
                }
                let _ = reply.send(res);
            }
            Command::RawGossip(bytes, reply) => {
                let res = self
                    .swarm
                    .behaviour_mut()
                    .gossipsub
                    .publish(self.topic.clone(), bytes)
                    .map(|_| ())
                    .map_err(Error::from);
                let _ = reply.send(res);
            }
            Command::SetBonds(bonds, reply) => {
                self.bonds = bonds;
                self.prune();
                let _ = reply.send(());
            }
            Command::Market(reply) => {
                let now = (self.config.clock)();
                let live = self
                    .market
                    .offers()
                    .filter(|o| o.body.expires_ms > now)
                    .cloned()
                    .collect();
                let _ = reply.send(live);
            }
            Command::Rtts(reply) => {
                let _ = reply.send(self.rtts.iter().map(|(p, r)| (*p, *r)).collect());
            }
            Command::PeerScore(peer, reply) => {
                let _ = reply.send(self.swarm.behaviour().gossipsub.peer_score(&peer));
            }
            Command::ConnectedPeers(reply) => {
                let _ = reply.send(self.swarm.connected_peers().copied().collect());
            }
            Command::ListenAddrs(reply) => {
                let mut addrs: Vec<Multiaddr> = self.swarm.listeners().cloned().collect();
                // Routable first: these are what another host can dial.
                addrs.sort_by_key(crate::listen::is_loopback);
                let _ = reply.send(addrs);
            }
            Command::Accept(peer, req, reply) => {
                self.relays.route(&mut self.swarm, &peer);
                let id = self.swarm.behaviour_mut().accept.send_request(&peer, req);
                self.pending_accept.insert(id, (peer, reply));
            }
            Command::Cluster(peer, hello, reply) => {
                self.relays.route(&mut self.swarm, &peer);
                let id = self
                    .swarm
                    .behaviour_mut()
                    .cluster
                    .send_request(&peer, *hello);
                self.pending_cluster.insert(id, (peer, reply));
            }
            Command::ObservedAddrs(reply) => {
                let _ = reply.send(self.observed.iter().map(|(p, a)| (*p, a.clone())).collect());
            }
            Command::Heartbeat(peer, request, reply) => {
                self.relays.route(&mut self.swarm, &peer);
                let id = self
                    .swarm
                    .behaviour_mut()
                    .heartbeat
                    .send_request(&peer, *request);
                self.pending_heartbeat.insert(id, (peer, reply));
            }
            Command::FindPeer(peer, reply) => {
                let id = self.swarm.behaviour_mut().kad.get_closest_peers(peer);
                self.pending_find.insert(id, (peer, reply));
            }
            Command::NatStatus(reply) => {
                let _ = reply.send(self.swarm.behaviour().autonat.nat_status());
            }
            Command::FetchDag(root, peer, reply) => {
                self.relays.route(&mut self.swarm, &peer);
                if !self.swarm.is_connected(&peer)
                    && let Err(e) = self.swarm.dial(peer)
                {
                    let _ = reply.send(Err(e.into()));
                    return;
                }
                let bitswap = self.swarm.behaviour_mut().bitswap.as_mut();
                self.fetches.start(root, reply, bitswap, Instant::now());
            }
            Command::RespondAccept(responder, response) => {
                // Fails only when the requester is gone; it then sees its request fail.
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .accept
                    .send_response(responder.0, response);
            }
            Command::RespondCluster(responder, response) => {
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .cluster
                    .send_response(responder.0, *response);
            }
            Command::RespondHeartbeat(responder, response) => {
                // The request leaves `heartbeats_in_flight` when request-response reports the
                // response sent (or the request failed).
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .heartbeat
                    .send_response(responder.0, *response);
            }
        }
    }

    fn on_swarm_event(&mut self, event: SwarmEvent<BehaviourEvent>) {
        match event {
            SwarmEvent::NewListenAddr {
                listener_id,
                address,
            } => {
                tracing::info!(target: "p2p", %address, "listening");
                if let Some(pending) = self.pending_listen.get_mut(&listener_id)
                    && let Some(answer) = pending.on_address(address)
                    && let Some(pending) = self.pending_listen.remove(&listener_id)
                {
                    let _ = pending.reply.send(Ok(answer));
                }
            }
            SwarmEvent::ListenerClosed { listener_id, .. } => {
                self.relays.on_listener_closed(listener_id);
                if let Some(pending) = self.pending_listen.remove(&listener_id) {
                    let _ = pending.reply.send(Err(Error::ListenerClosed));
                }
            }
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                num_established,
                endpoint,
                ..
            } => {
                if let Some(reply) = self.pending_dial.remove(&connection_id) {
                    let _ = reply.send(Ok(peer_id));
                }
                if endpoint.is_dialer() {
                    let addr = endpoint.get_remote_address().clone();
                    self.swarm.behaviour_mut().kad.add_address(&peer_id, addr);
                }
                if num_established.get() == 1 {
                    self.emit(Event::PeerConnected { peer: peer_id });
                }
                self.relays.on_connected(&mut self.swarm, peer_id);
                if endpoint.is_relayed() {
                    self.emit(Event::RelayedConnection { peer: peer_id });
                }
            }
            SwarmEvent::OutgoingConnectionError {
                connection_id,
                error,
                ..
            } => {
                if let Some(reply) = self.pending_dial.remove(&connection_id) {
                    let _ = reply.send(Err(error.into()));
                }
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                num_established: 0,
                ..
            } => {
                self.limiter.forget(&peer_id);
                self.heartbeats_in_flight.forget(&peer_id);
                self.observed.remove(&peer_id);
                self.emit(Event::PeerDisconnected { peer: peer_id });
            }
            SwarmEvent::Behaviour(event) => self.on_behaviour_event(event),
            _ => {}
        }
    }

    fn on_behaviour_event(&mut self, event: BehaviourEvent) {
        match event {
            BehaviourEvent::Gossipsub(e) => self.on_gossip(e),
            BehaviourEvent::Ping(ping::Event {
                peer,
                result: Ok(rtt),
                ..
            }) => {
                self.rtts.record(peer, rtt, Instant::now());
                self.emit(Event::RttMeasured { peer, rtt });
            }
            BehaviourEvent::Identify(identify::Event::Received { peer_id, info, .. }) => {
                self.observed.insert(peer_id, info.observed_addr.clone());
                for addr in info.listen_addrs {
                    if is_routable_for_kad(&addr) {
                        self.swarm.behaviour_mut().kad.add_address(&peer_id, addr);
                    }
                }
            }
            BehaviourEvent::Accept(e) => self.on_accept(e),
            BehaviourEvent::Cluster(e) => self.on_cluster(e),
            BehaviourEvent::Heartbeat(e) => self.on_heartbeat(e),
            BehaviourEvent::Kad(kad::Event::OutboundQueryProgressed {
                id,
                result: kad::QueryResult::GetClosestPeers(result),
                step,
                ..
            }) => self.on_closest_peers(id, result, step.last),
            BehaviourEvent::Autonat(autonat::Event::StatusChanged { old, new }) => {
                tracing::info!(target: "p2p", ?old, ?new, "AutoNAT status changed");
                self.emit(Event::NatStatusChanged { status: new });
            }
            BehaviourEvent::Autonat(autonat::Event::OutboundProbe(
                autonat::OutboundProbeEvent::Error { peer, error, .. },
            )) => {
                tracing::debug!(target: "p2p", ?peer, ?error, "AutoNAT probe failed");
                self.emit(Event::NatProbeFailed {
                    peer,
                    reason: format!("{error:?}"),
                });
            }
            BehaviourEvent::Bitswap(e) => {
                if let Some(bitswap) = self.swarm.behaviour_mut().bitswap.as_mut() {
                    self.fetches.on_event(e, bitswap, Instant::now());
                }
            }
            BehaviourEvent::Dcutr(e) => {
                let succeeded = e.result.is_ok();
                match &e.result {
                    Ok(_) => {
                        tracing::info!(target: "p2p", peer = %e.remote_peer_id, "hole punch succeeded")
                    }
                    Err(error) => {
                        tracing::info!(target: "p2p", peer = %e.remote_peer_id, %error, "hole punch failed")
                    }
                }
                self.emit(Event::HolePunchFinished {
                    peer: e.remote_peer_id,
                    succeeded,
                });
            }
            _ => {}
        }
    }

    fn on_gossip(&mut self, event: gossipsub::Event) {
        match event {
            gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            } => {
                let verdict = SignedOffer::decode(&message.data).and_then(|offer| {
                    verify_offer(
                        &offer,
                        self.config.network_magic,
                        message.source.as_ref(),
                        &self.bonds,
                        (self.config.clock)(),
                    )
                    .map(|()| offer)
                });
                let acceptance = match verdict {
                    Ok(offer) => {
                        let provider = offer.body.market.provider;
                        let peer = message.source.unwrap_or(propagation_source);
                        self.market.insert(offer);
                        self.emit(Event::OfferAccepted {
                            provider,
                            peer,
                            via: propagation_source,
                        });
                        MessageAcceptance::Accept
                    }
                    Err(reason) => {
                        tracing::debug!(target: "p2p", peer = %propagation_source, %reason, "offer rejected");
                        self.emit(Event::OfferRejected {
                            via: propagation_source,
                            reason,
                        });
                        MessageAcceptance::Reject
                    }
                };
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .gossipsub
                    .report_message_validation_result(&message_id, &propagation_source, acceptance);
            }
            gossipsub::Event::Subscribed { peer_id, topic } if topic == self.topic.hash() => {
                self.emit(Event::TopicPeerJoined { peer: peer_id });
            }
            _ => {}
        }
    }

    /// Answers a [`Command::FindPeer`] as soon as a step of its query names the peer with
    /// addresses; with no addresses when the query ends without it.
    fn on_closest_peers(
        &mut self,
        id: kad::QueryId,
        result: kad::GetClosestPeersResult,
        last: bool,
    ) {
        let Some((target, _)) = self.pending_find.get(&id) else {
            return;
        };
        let peers = match result {
            Ok(ok) => ok.peers,
            Err(kad::GetClosestPeersError::Timeout { peers, .. }) => peers,
        };
        let found: Vec<Multiaddr> = peers
            .into_iter()
            .filter(|p| p.peer_id == *target)
            .flat_map(|p| p.addrs)
            .collect();
        if (!found.is_empty() || last)
            && let Some((_, reply)) = self.pending_find.remove(&id)
        {
            let _ = reply.send(found);
        }
    }

    fn allow(&mut self, peer: PeerId) -> bool {
        let ok = self.limiter.allow(peer, Instant::now());
        if !ok {
            self.emit(Event::RateLimited { peer });
        }
        ok
    }

    fn on_accept(
        &mut self,
        event: request_response::Event<protocols::AcceptRequest, AcceptResponse>,
    ) {
        let Some(event) = complete_outbound(&mut self.pending_accept, event) else {
            return;
        };
        if let request_response::Event::Message {
            peer,
            message:
                request_response::Message::Request {
                    request, channel, ..
                },
            ..
        } = event
        {
            let refused = AcceptResponse::Refused(RefusalReason::RateLimited);
            if !self.allow(peer) {
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .accept
                    .send_response(channel, refused);
                return;
            }
            let inbound = Inbound::Accept {
                peer,
                request,
                responder: Responder(channel),
            };
            if let Err(e) = self.inbound.try_send(inbound)
                && let Inbound::Accept { responder, .. } = e.into_inner()
            {
                tracing::debug!(target: "p2p", %peer, "accept request not handed over: the engine is busy or gone");
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .accept
                    .send_response(responder.0, refused);
            }
        }
    }

    /// Another node's cluster hello: per-peer token bucket, then the engine's channel; either
    /// full answers `RateLimited` at once and hands nothing over.
    fn on_cluster(&mut self, event: request_response::Event<ClusterHello, ClusterResponse>) {
        let Some(event) = complete_outbound(&mut self.pending_cluster, event) else {
            return;
        };
        if let request_response::Event::Message {
            peer,
            message:
                request_response::Message::Request {
                    request, channel, ..
                },
            ..
        } = event
        {
            if !self.allow(peer) {
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .cluster
                    .send_response(channel, ClusterResponse::RateLimited);
                return;
            }
            let inbound = Inbound::Cluster {
                peer,
                request,
                responder: Responder(channel),
            };
            if let Err(e) = self.inbound.try_send(inbound)
                && let Inbound::Cluster { responder, .. } = e.into_inner()
            {
                tracing::debug!(target: "p2p", %peer, "cluster hello not handed over: the engine is busy or gone");
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .cluster
                    .send_response(responder.0, ClusterResponse::RateLimited);
            }
        }
    }

    /// A provider's heartbeat: per-peer token bucket, then at most
    /// [`MAX_HEARTBEATS_IN_FLIGHT`] per peer with the engine, then the engine's channel; any
    /// of them full answers `RateLimited` at once and hands nothing over.
    fn on_heartbeat(
        &mut self,
        event: request_response::Event<HeartbeatRequest, HeartbeatResponse>,
    ) {
        let Some(event) = complete_outbound(&mut self.pending_heartbeat, event) else {
            return;
        };
        match event {
            request_response::Event::Message {
                peer,
                message:
                    request_response::Message::Request {
                        request_id,
                        request,
                        channel,
                    },
                ..
            } => {
                let admitted = if !self.allow(peer) {
                    false
                } else if self.heartbeats_in_flight.try_start(peer, request_id) {
                    true
                } else {
                    tracing::debug!(target: "p2p", %peer, "heartbeat refused: too many in flight");
                    self.emit(Event::RateLimited { peer });
                    false
                };
                if !admitted {
                    let _ = self
                        .swarm
                        .behaviour_mut()
                        .heartbeat
                        .send_response(channel, HeartbeatResponse::RateLimited);
                    return;
                }
                let inbound = Inbound::Heartbeat {
                    peer,
                    request,
                    responder: Responder(channel),
                };
                if let Err(e) = self.inbound.try_send(inbound)
                    && let Inbound::Heartbeat { responder, .. } = e.into_inner()
                {
                    tracing::debug!(target: "p2p", %peer, "heartbeat not handed over: the engine is busy or gone");
                    self.heartbeats_in_flight.finish(request_id);
                    let _ = self
                        .swarm
                        .behaviour_mut()
                        .heartbeat
                        .send_response(responder.0, HeartbeatResponse::RateLimited);
                }
            }
            request_response::Event::ResponseSent { request_id, .. }
            | request_response::Event::InboundFailure { request_id, .. } => {
                self.heartbeats_in_flight.finish(request_id);
            }
            _ => {}
        }
    }
}

/// Kademlia gets every address but unspecified ones (`0.0.0.0`) and relayed circuits.
fn is_routable_for_kad(addr: &Multiaddr) -> bool {
    use libp2p::multiaddr::Protocol;
    !addr.iter().any(|p| match p {
        Protocol::Ip4(ip) => ip.is_unspecified(),
        Protocol::Ip6(ip) => ip.is_unspecified(),
        Protocol::P2pCircuit => true,
        _ => false,
    })
}
