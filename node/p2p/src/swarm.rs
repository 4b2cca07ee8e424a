//! Building a node's swarm: [`new`] makes the libp2p swarm (TCP + QUIC + relay-client
//! transports, noise, yamux, the composed [`Behaviour`]) and hands back its [`Parts`]: the
//! [`Client`], the [`EventLoop`] that owns the swarm (its `run` drives it), and the two
//! channels it feeds.

use libp2p::request_response::{self, ProtocolSupport};
use libp2p::{
    StreamProtocol, Swarm, autonat, dcutr, gossipsub, identify, kad, noise, ping, relay, tcp, yamux,
};

use super::behaviour::Behaviour;
use super::client::{COMMAND_CHANNEL, Client};
use super::event::{EVENT_CHANNEL, Event};
use super::event_loop::EventLoop;
use super::limits::MAX_CONCURRENT_STREAMS;
use super::offers::{self, INVALID_OFFER_WEIGHT};
use super::protocols::{self, ACCEPT_PROTOCOL, CLUSTER_PROTOCOL, CborCodec, HEARTBEAT_PROTOCOL};
use super::{Config, Error, bitswap, inbound};

/// The parts [`new`] returns: the client, the event loop to spawn, the swarm's events and the
/// inbound requests the job engine answers ([`inbound`]).
pub type Parts = (
    Client,
    EventLoop,
    tokio::sync::mpsc::Receiver<Event>,
    tokio::sync::mpsc::Receiver<inbound::Inbound>,
);

/// Builds the swarm from `keypair` and `config`; `bonds` is the initial live-bond snapshot.
/// Spawn [`EventLoop::run`] on a tokio runtime; it subscribes to the offer topic, listens on
/// `config.listen` and dials `config.bootstrap`. Drain the inbound receiver (the job engine
/// does): while it is full, the loop refuses accept requests, cluster hellos and heartbeats
/// as rate-limited.
///
/// # Errors
/// [`Error::Build`] when a transport or behaviour cannot be built, [`Error::Subscribe`].
pub fn new(
    keypair: libp2p::identity::Keypair,
    config: Config,
    bonds: offers::BondSnapshot,
) -> Result<Parts, Error> {
    let swarm = build_swarm(keypair, &config)?;
    let streams = swarm.behaviour().streams.new_control();
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::channel(COMMAND_CHANNEL);
    let (ev_tx, ev_rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL);
    let (in_tx, in_rx) = tokio::sync::mpsc::channel(inbound::INBOUND_CHANNEL);
    let event_loop = EventLoop::new(swarm, config, bonds, cmd_rx, ev_tx, in_tx)?;
    Ok((Client::new(cmd_tx, streams), event_loop, ev_rx, in_rx))
}

/// Builds the swarm: TCP + QUIC + relay client transports, noise, yamux, and [`Behaviour`].
fn build_swarm(
    keypair: libp2p::identity::Keypair,
    config: &Config,
) -> Result<Swarm<Behaviour>, Error> {
    let cfg = config.clone();
    let swarm = libp2p::SwarmBuilder::with_existing_identity(keypair)
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            noise::Config::new,
            yamux::Config::default,
        )
        .map_err(|e| Error::Build(Box::new(e)))?
        .with_quic()
        .with_relay_client(noise::Config::new, yamux::Config::default)
        .map_err(|e| Error::Build(Box::new(e)))?
        .with_behaviour(|key, relay_client| make_behaviour(key, relay_client, &cfg))
        .map_err(|e| Error::Build(e.to_string().into()))?
        .with_swarm_config(|c| c.with_idle_connection_timeout(cfg.idle_timeout))
        .build();
    Ok(swarm)
}

fn make_behaviour(
    key: &libp2p::identity::Keypair,
    relay_client: relay::client::Behaviour,
    cfg: &Config,
) -> Result<Behaviour, Box<dyn std::error::Error + Send + Sync>> {
    let peer_id = key.public().to_peer_id();
    let topic = protocols::offer_topic(cfg.network_magic);
    let gossip_config = gossipsub::ConfigBuilder::default()
        .heartbeat_interval(cfg.gossip_heartbeat)
        .validation_mode(gossipsub::ValidationMode::Strict)
        .validate_messages()
        .max_transmit_size(offers::MAX_OFFER_BYTES)
        .message_id_fn(|m: &gossipsub::Message| {
            use std::hash::{DefaultHasher, Hash, Hasher};
            let mut h = DefaultHasher::new();
            m.data.hash(&mut h);
            m.source.hash(&mut h);
            gossipsub::MessageId::from(h.finish().to_be_bytes().to_vec())
        })
        .build()?;
    let mut gossipsub = gossipsub::Behaviour::new(
        gossipsub::MessageAuthenticity::Signed(key.clone()),
        gossip_config,
    )?;
    let mut score = gossipsub::PeerScoreParams::default();
    let topic_score = gossipsub::TopicScoreParams {
        topic_weight: 1.0,
        mesh_message_deliveries_weight: 0.0,
        mesh_failure_penalty_weight: 0.0,
        invalid_message_deliveries_weight: INVALID_OFFER_WEIGHT,
        invalid_message_deliveries_decay: 0.5,
        ..Default::default()
    };
    score.topics.insert(topic.hash(), topic_score);
    // Loopback tests and devnets run many peers on one IP.
    score.ip_colocation_factor_weight = 0.0;
    gossipsub.with_peer_score(score, gossipsub::PeerScoreThresholds::default())?;

    let rr_config = request_response::Config::default()
        .with_request_timeout(cfg.request_timeout)
        .with_max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let mut kad = kad::Behaviour::with_config(
        peer_id,
        kad::store::MemoryStore::new(peer_id),
        kad::Config::new(StreamProtocol::new("/ganglion/kad/1")),
    );
    kad.set_mode(Some(kad::Mode::Server));
    Ok(Behaviour {
        relay_client,
        relay_server: cfg
            .relay_server
            .then(|| relay::Behaviour::new(peer_id, relay::Config::default()))
            .into(),
        dcutr: dcutr::Behaviour::new(peer_id),
        autonat: autonat::Behaviour::new(
            peer_id,
            autonat::Config {
                boot_delay: cfg.autonat_boot_delay,
                only_global_ips: cfg.autonat_only_global_ips,
                // Serving is opt-in: with no dial-back budget every probe is refused.
                throttle_clients_global_max: if cfg.autonat_server { 30 } else { 0 },
                ..autonat::Config::default()
            },
        ),
        kad,
        // Pushing listen-address changes keeps Kademlia's view of a peer right when it starts
        // listening after it dialled its bootstrap peers.
        identify: identify::Behaviour::new(
            identify::Config::new("/ganglion/id/1".into(), key.public())
                .with_push_listen_addr_updates(true),
        ),
        ping: ping::Behaviour::new(ping::Config::new().with_interval(cfg.ping_interval)),
        gossipsub,
        accept: request_response::Behaviour::with_codec(
            CborCodec::new(protocols::MAX_ACCEPT_BYTES),
            [(ACCEPT_PROTOCOL, ProtocolSupport::Full)],
            rr_config.clone(),
        ),
        cluster: request_response::Behaviour::with_codec(
            CborCodec::new(protocols::MAX_CLUSTER_BYTES),
            [(CLUSTER_PROTOCOL, ProtocolSupport::Full)],
            rr_config.clone(),
        ),
        heartbeat: request_response::Behaviour::with_codec(
            CborCodec::new(protocols::MAX_HEARTBEAT_BYTES),
            [(HEARTBEAT_PROTOCOL, ProtocolSupport::Full)],
            rr_config,
        ),
        bitswap: cfg.blockstore.clone().map(bitswap::behaviour).into(),
        streams: libp2p_stream::Behaviour::new(),
    })
}
