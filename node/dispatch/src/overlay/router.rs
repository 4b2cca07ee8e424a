//! The WireGuard state of one node, free of I/O: one noise session ([`Tunn`]) per peer node of
//! each job, datagrams of the node's single UDP socket told apart by receiver index, and
//! `allowed_ips` enforced in both directions (a job's peers are exactly the addresses of its
//! other containers).
//!
//! The driver ([`super::node`]) feeds it TUN packets ([`Router::outbound`]), UDP datagrams
//! ([`Router::inbound`]), datagrams that came over the libp2p relay
//! ([`Router::inbound_relayed`]) and timer ticks ([`Router::tick`], [`Router::relay_fallback`])
//! and carries out the returned [`Action`]s.
//!
//! Each link has a [`LinkMode`] (reported as direct or relayed):
//! - `Pending` → `Direct` when a handshake response or data (a keepalive counts) arrives over
//!   UDP, which proves both directions of the UDP path (the peer only sends data after our
//!   response reached it, and we only get a response to an initiation that reached it);
//! - `Pending` → `Relayed` when the link is still not direct `relay_after` after it started
//!   (DESIGN §6: about 10 s, `[overlay] relay_fallback_s`), or at once when the peer already
//!   sends over the relay;
//! - `Relayed` → `Direct` when a handshake initiation sent over UDP every `relay_after` (a probe)
//!   is answered over UDP;
//! - `Direct` → `Relayed` when the peer's persistent keepalive has been silent on UDP for
//!   `keepalive + relay_after` (the direct path died, e.g. a NAT mapping expired).
//!
//! Only links whose peer has a relay node ([`OverlayPeer::relay`]) leave `Pending` for
//! `Relayed`. Relayed datagrams are the same WireGuard ciphertext: the relay never sees a key.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use boringtun::noise::handshake::parse_handshake_anon;
use boringtun::noise::{Packet, Tunn, TunnResult};
use boringtun::x25519::PublicKey;
use ipnet::Ipv4Net;
use libp2p::PeerId;

use super::OverlayError;
use super::keys::JobKeys;
use crate::executor::plan::RunId;

/// Scratch buffer size: the largest IP packet plus WireGuard's 32 bytes of framing.
const BUF: usize = 65_536 + 32;
/// Receiver indices are 24 bits (boringtun shifts them left by 8 for the session id).
const MAX_INDEX: u32 = (1 << 24) - 1;

/// One peer node of a job, as announced in the `cluster` exchange.
#[derive(Debug, Clone)]
pub struct OverlayPeer {
    /// The peer's public key for this job.
    pub public: PublicKey,
    /// Where the peer's UDP socket is reached (updated when it roams).
    pub endpoint: SocketAddr,
    /// The overlay addresses of the peer's containers in this job (each becomes a /32 in
    /// `allowed_ips`).
    pub addresses: Vec<Ipv4Addr>,
    /// Persistent keepalive in seconds (25 behind NAT), or none.
    pub keepalive_s: Option<u16>,
    /// The peer node's libp2p id: when the UDP path does not work, the link's datagrams are
    /// relayed over a libp2p stream to it (see the module docs). `None`: UDP only (the link
    /// stays `Pending` until a direct handshake). Set it to the peer the `cluster` hello came
    /// from (the node's `daemon::exchange::learn_peers` does).
    pub relay: Option<PeerId>,
}

/// How a link's datagrams travel (see the module docs for the transitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkMode {
    /// No handshake has proven the UDP path yet; datagrams go over UDP.
    Pending,
    /// Over the node's UDP socket, peer to peer (LAN, public mapping or punched NAT).
    Direct,
    /// Over a libp2p stream to the peer node (`/ganglion/overlay-relay/1`).
    Relayed,
}

/// One link of a job as [`Router::links`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkReport {
    /// The peer's public key for the job.
    pub public: PublicKey,
    /// The peer's overlay addresses (`allowed_ips`).
    pub addresses: Vec<Ipv4Addr>,
    /// How datagrams travel now.
    pub mode: LinkMode,
    /// The peer's UDP endpoint (used when `Direct` or `Pending`; probed when `Relayed`).
    pub endpoint: SocketAddr,
    /// The peer node datagrams are relayed to when `Relayed`.
    pub relay: Option<PeerId>,
    /// A handshake response or data has come from the peer (directly or over the relay): the
    /// session works both ways. Until then the job's ranks must not start (DESIGN §6: a job
    /// whose network cannot form ends before anything is paid).
    pub established: bool,
}

/// What the driver must do.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `datagram` from the node's UDP socket to `to`.
    Send {
        /// Destination endpoint.
        to: SocketAddr,
        /// The WireGuard message.
        datagram: Vec<u8>,
    },
    /// Send `datagram` over the libp2p relay stream to node `peer`.
    Relay {
        /// The peer node.
        peer: PeerId,
        /// The WireGuard message (ciphertext, as for UDP).
        datagram: Vec<u8>,
    },
    /// Write `packet` (a decrypted IPv4 packet) to `job`'s TUN interface.
    Deliver {
        /// The job whose pod receives it.
        job: RunId,
        /// The IP packet.
        packet: Vec<u8>,
    },
}

/// Packets dropped, by reason (monotonic counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drops {
    /// Outbound packets to an address that is no peer of the job.
    pub no_route: u64,
    /// Decrypted packets whose source is not in the sending peer's `allowed_ips`.
    pub not_allowed: u64,
    /// Datagrams that are not WireGuard, name an unknown index or key, or fail to decrypt.
    pub invalid: u64,
}

struct Link {
    job: RunId,
    tunn: Tunn,
    public: PublicKey,
    endpoint: SocketAddr,
    allowed: Vec<Ipv4Net>,
    keepalive_s: Option<u16>,
    relay: Option<PeerId>,
    mode: LinkMode,
    /// When the link was added (the fallback clock).
    started: Instant,
    /// Last authenticated datagram over UDP.
    last_udp: Option<Instant>,
    /// Last time the link switched to the relay or probed UDP from it.
    last_probe: Instant,
    /// A handshake response or data came from the peer, over either path: the session works
    /// both ways (see [`LinkReport::established`]).
    established: bool,
}

/// Where an inbound datagram came from.
#[derive(Debug, Clone, Copy)]
enum Via {
    Udp(SocketAddr),
    Relay(PeerId),
}

impl Link {
    /// The action that sends `datagram` on the link's current path.
    fn send(&self, datagram: &[u8]) -> Action {
        match (self.mode, self.relay) {
            (LinkMode::Relayed, Some(peer)) => Action::Relay {
                peer,
                datagram: datagram.to_vec(),
            },
            _ => Action::Send {
                to: self.endpoint,
                datagram: datagram.to_vec(),
            },
        }
    }

    fn switch(&mut self, mode: LinkMode, why: &'static str) {
        if self.mode != mode {
            tracing::info!(
                job = %self.job,
                endpoint = %self.endpoint,
                relay = ?self.relay,
                from = ?self.mode,
                to = ?mode,
                why,
                "overlay link switched"
            );
            self.mode = mode;
        }
    }
}

struct JobState {
    keys: JobKeys,
    /// Receiver indices of the job's links.
    links: Vec<u32>,
}

/// All WireGuard sessions of one node.
#[derive(Default)]
pub struct Router {
    links: HashMap<u32, Link>,
    jobs: HashMap<RunId, JobState>,
    next_index: u32,
    drops: Drops,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("jobs", &self.jobs.len())
            .field("links", &self.links.len())
            .field("drops", &self.drops)
            .finish()
    }
}

impl Router {
    /// An empty router.
    pub fn new() -> Self {
        Self {
            buf: vec![0; BUF],
            ..Self::default()
        }
    }

    /// Counters of dropped packets.
    pub fn drops(&self) -> Drops {
        self.drops
    }

    /// Adds `job` with this node's `keys` and its peer nodes.
    ///
    /// # Errors
    /// [`OverlayError::Job`] when the job exists, [`OverlayError::BadPeer`] when an address
    /// is claimed twice, [`OverlayError::IndicesExhausted`] when no index is free.
    pub fn add_job(
        &mut self,
        job: &RunId,
        keys: JobKeys,
        peers: &[OverlayPeer],
    ) -> Result<(), OverlayError> {
        if self.jobs.contains_key(job) {
            return Err(OverlayError::Job(job.to_string(), "already has an overlay"));
        }
        let mut seen = std::collections::HashSet::new();
        for ip in peers.iter().flat_map(|p| &p.addresses) {
            if !seen.insert(*ip) {
                return Err(OverlayError::BadPeer(*ip));
            }
        }
        let mut links = Vec::with_capacity(peers.len());
        for peer in peers {
            let index = self.free_index()?;
            let tunn = Tunn::new(
                keys.secret().clone(),
                peer.public,
                None,
                peer.keepalive_s,
                index,
                None,
            );
            self.links.insert(
                index,
                Link {
                    job: job.clone(),
                    tunn,
                    public: peer.public,
                    endpoint: peer.endpoint,
                    allowed: peer
                        .addresses
                        .iter()
                        .map(|ip| Ipv4Net::new_assert(*ip, 32))
                        .collect(),
                    keepalive_s: peer.keepalive_s,
                    relay: peer.relay,
                    mode: LinkMode::Pending,
                    started: Instant::now(),
                    last_udp: None,
                    last_probe: Instant::now(),
                    established: false,
                },
            );
            links.push(index);
        }
        self.jobs.insert(job.clone(), JobState { keys, links });
        Ok(())
    }

    /// Forgets `job` and its sessions; absent is fine.
    pub fn remove_job(&mut self, job: &RunId) {
        if let Some(state) = self.jobs.remove(job) {
            for index in state.links {
                self.links.remove(&index);
            }
        }
    }

    fn free_index(&mut self) -> Result<u32, OverlayError> {
        for _ in 0..=MAX_INDEX {
            self.next_index = (self.next_index + 1) & MAX_INDEX;
            if !self.links.contains_key(&self.next_index) {
                return Ok(self.next_index);
            }
        }
        Err(OverlayError::IndicesExhausted)
    }

    /// An IP packet read from `job`'s TUN: encrypt it for the peer whose `allowed_ips` hold its
    /// destination (or start the handshake and queue it); no such peer → dropped.
    pub fn outbound(&mut self, job: &RunId, packet: &[u8]) -> Vec<Action> {
        let Some(IpAddr::V4(dst)) = Tunn::dst_address(packet) else {
            self.drops.no_route += 1;
            return vec![];
        };
        let index = self.jobs.get(job).and_then(|state| {
            state.links.iter().copied().find(|i| {
                self.links
                    .get(i)
                    .is_some_and(|l| l.allowed.iter().any(|n| n.contains(&dst)))
            })
        });
        let Some(link) = index.and_then(|i| self.links.get_mut(&i)) else {
            self.drops.no_route += 1;
            return vec![];
        };
        match link.tunn.encapsulate(packet, &mut self.buf) {
            TunnResult::WriteToNetwork(d) => vec![link.send(d)],
            TunnResult::Err(_) => {
                self.drops.invalid += 1;
                vec![]
            }
            _ => vec![],
        }
    }

    /// The link a datagram is meant for: by receiver index, or for a handshake initiation by
    /// the initiator's static key (tried against every job's key).
    fn link_for(&self, datagram: &[u8]) -> Option<u32> {
        match Tunn::parse_incoming_packet(datagram).ok()? {
            Packet::HandshakeInit(init) => self.jobs.values().find_map(|state| {
                let half =
                    parse_handshake_anon(state.keys.secret(), &state.keys.public(), &init).ok()?;
                state.links.iter().copied().find(|i| {
                    self.links
                        .get(i)
                        .is_some_and(|l| l.public.as_bytes() == &half.peer_static_public)
                })
            }),
            Packet::HandshakeResponse(p) => Some(p.receiver_idx >> 8),
            Packet::PacketCookieReply(p) => Some(p.receiver_idx >> 8),
            Packet::PacketData(p) => Some(p.receiver_idx >> 8),
        }
    }

    /// A datagram received on the node's UDP socket from `from`.
    pub fn inbound(&mut self, from: SocketAddr, datagram: &[u8]) -> Vec<Action> {
        self.receive(Via::Udp(from), datagram)
    }

    /// A datagram that node `peer` relayed over its libp2p stream. Answers go back over the
    /// relay. Dropped (counted `invalid`) unless it belongs to a link whose relay node is
    /// `peer`.
    pub fn inbound_relayed(&mut self, peer: PeerId, datagram: &[u8]) -> Vec<Action> {
        self.receive(Via::Relay(peer), datagram)
    }

    fn receive(&mut self, via: Via, datagram: &[u8]) -> Vec<Action> {
        let proves_udp = matches!(
            Tunn::parse_incoming_packet(datagram),
            Ok(Packet::HandshakeResponse(_) | Packet::PacketData(_))
        );
        let Some(index) = self
            .link_for(datagram)
            .filter(|i| self.links.contains_key(i))
        else {
            self.drops.invalid += 1;
            return vec![];
        };
        let Some(link) = self.links.get_mut(&index) else {
            return vec![];
        };
        if let Via::Relay(peer) = via
            && link.relay != Some(peer)
        {
            self.drops.invalid += 1;
            return vec![];
        }
        let answer = |d: &[u8]| match via {
            Via::Udp(to) => Action::Send {
                to,
                datagram: d.to_vec(),
            },
            Via::Relay(peer) => Action::Relay {
                peer,
                datagram: d.to_vec(),
            },
        };
        let mut actions = Vec::new();
        let mut input = datagram;
        let mut src = match via {
            Via::Udp(from) => Some(from.ip()),
            Via::Relay(_) => None,
        };
        let mut authenticated = false;
        loop {
            match link.tunn.decapsulate(src, input, &mut self.buf) {
                TunnResult::Done => {
                    // A keepalive or a cookie reply (first call), or the end of the queue.
                    authenticated = true;
                    break;
                }
                TunnResult::Err(_) => {
                    if !authenticated {
                        self.drops.invalid += 1;
                    }
                    break;
                }
                TunnResult::WriteToNetwork(d) => {
                    authenticated = true;
                    actions.push(answer(d));
                    // Flush queued packets with repeated empty calls, as boringtun asks.
                    input = &[];
                    src = None;
                }
                TunnResult::WriteToTunnelV4(p, source) => {
                    authenticated = true;
                    if link.allowed.iter().any(|n| n.contains(&source)) {
                        actions.push(Action::Deliver {
                            job: link.job.clone(),
                            packet: p.to_vec(),
                        });
                    } else {
                        self.drops.not_allowed += 1;
                    }
                    break;
                }
                TunnResult::WriteToTunnelV6(..) => {
                    self.drops.not_allowed += 1;
                    break;
                }
            }
        }
        if authenticated && proves_udp {
            // A response or data: the peer got our handshake (over this path or the other).
            link.established = true;
        }
        if authenticated {
            match via {
                Via::Udp(from) => {
                    // Authenticated: the peer is at `from` now (WireGuard roaming).
                    link.endpoint = from;
                    link.last_udp = Some(Instant::now());
                    if proves_udp {
                        link.switch(LinkMode::Direct, "handshake or data over UDP");
                    }
                }
                Via::Relay(_) if link.mode == LinkMode::Pending => {
                    link.switch(LinkMode::Relayed, "the peer sends over the relay");
                    link.last_probe = Instant::now();
                }
                Via::Relay(_) => {}
            }
        }
        actions
    }

    /// Every link of `job` and how it carries datagrams now; empty for an unknown job.
    pub fn links(&self, job: &RunId) -> Vec<LinkReport> {
        let Some(state) = self.jobs.get(job) else {
            return vec![];
        };
        state
            .links
            .iter()
            .filter_map(|i| self.links.get(i))
            .map(|l| LinkReport {
                public: l.public,
                addresses: l.allowed.iter().map(Ipv4Net::addr).collect(),
                mode: l.mode,
                endpoint: l.endpoint,
                relay: l.relay,
                established: l.established,
            })
            .collect()
    }

    /// The relay fallback's clock (see the module docs), at `now`, with `relay_after` from
    /// `[overlay] relay_fallback_s`: links with a relay node that are still `Pending`
    /// `relay_after` after they started, or `Direct` but silent on UDP for their keepalive plus
    /// `relay_after`, switch to `Relayed` and send a fresh handshake initiation over the relay;
    /// `Relayed` links probe UDP with an initiation every `relay_after`. Call it with the timer
    /// tick when the node has a relay.
    pub fn relay_fallback(&mut self, now: Instant, relay_after: Duration) -> Vec<Action> {
        let mut actions = Vec::new();
        for link in self.links.values_mut() {
            if link.relay.is_none() {
                continue;
            }
            let since = |t: Instant| now.saturating_duration_since(t);
            let dead_direct = link.mode == LinkMode::Direct
                && link.keepalive_s.is_some_and(|k| {
                    let silent = Duration::from_secs(k.into()) + relay_after;
                    link.last_udp.is_none_or(|t| since(t) >= silent)
                });
            let unproven = link.mode == LinkMode::Pending && since(link.started) >= relay_after;
            if unproven || dead_direct {
                link.switch(
                    LinkMode::Relayed,
                    if unproven {
                        "no direct handshake in time"
                    } else {
                        "direct path silent"
                    },
                );
                link.last_probe = now;
                if let TunnResult::WriteToNetwork(d) =
                    link.tunn.format_handshake_initiation(&mut self.buf, true)
                {
                    actions.push(link.send(d));
                }
            } else if link.mode == LinkMode::Relayed && since(link.last_probe) >= relay_after {
                link.last_probe = now;
                if let TunnResult::WriteToNetwork(d) =
                    link.tunn.format_handshake_initiation(&mut self.buf, false)
                {
                    actions.push(Action::Send {
                        to: link.endpoint,
                        datagram: d.to_vec(),
                    });
                }
            }
        }
        actions
    }

    /// Hole punching: a handshake initiation to every peer of `job` now, so that when both
    /// nodes of a link call this at about the same time (right after the `cluster` exchange),
    /// each NAT has an outbound mapping when the other side's initiation arrives. Unknown
    /// job: nothing.
    pub fn punch(&mut self, job: &RunId) -> Vec<Action> {
        let Some(state) = self.jobs.get(job) else {
            return vec![];
        };
        let mut actions = Vec::new();
        for index in &state.links {
            if let Some(link) = self.links.get_mut(index)
                && let TunnResult::WriteToNetwork(d) =
                    link.tunn.format_handshake_initiation(&mut self.buf, false)
            {
                actions.push(Action::Send {
                    to: link.endpoint,
                    datagram: d.to_vec(),
                });
            }
        }
        actions
    }

    /// Timers (handshake retries, keepalives, rekeying): call about every 250 ms.
    pub fn tick(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        for link in self.links.values_mut() {
            if let TunnResult::WriteToNetwork(d) = link.tunn.update_timers(&mut self.buf) {
                actions.push(link.send(d));
            }
        }
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal IPv4 header (20 bytes, no options) + payload; checksum is not checked here.
    fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
        let len = u16::try_from(20 + payload.len()).expect("small");
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        p.extend_from_slice(payload);
        p
    }

    fn job() -> RunId {
        RunId::new("job-1").expect("id")
    }

    struct Pair {
        a: Router,
        b: Router,
        a_at: SocketAddr,
        b_at: SocketAddr,
        a_ip: Ipv4Addr,
        b_ip: Ipv4Addr,
    }

    fn pair() -> Pair {
        pair_with(None)
    }

    /// Node ids of A and B for the relay, B's peer id in A's link and A's in B's.
    fn nodes() -> (PeerId, PeerId) {
        (PeerId::random(), PeerId::random())
    }

    fn pair_with(relays: Option<(PeerId, PeerId)>) -> Pair {
        let (ka, kb) = (JobKeys::generate(), JobKeys::generate());
        let a_at: SocketAddr = "192.0.2.1:51820".parse().expect("addr");
        let b_at: SocketAddr = "192.0.2.2:51820".parse().expect("addr");
        let a_ip = Ipv4Addr::new(100, 96, 0, 1);
        let b_ip = Ipv4Addr::new(100, 96, 0, 2);
        let mut a = Router::new();
        let mut b = Router::new();
        let peer = |k: &JobKeys, at, ip, relay: Option<PeerId>| OverlayPeer {
            public: k.public(),
            endpoint: at,
            addresses: vec![ip],
            keepalive_s: relay.map(|_| 25),
            relay,
        };
        let (a_node, b_node) = (relays.map(|r| r.0), relays.map(|r| r.1));
        a.add_job(&job(), ka.clone(), &[peer(&kb, b_at, b_ip, b_node)])
            .expect("a");
        b.add_job(&job(), kb.clone(), &[peer(&ka, a_at, a_ip, a_node)])
            .expect("b");
        Pair {
            a,
            b,
            a_at,
            b_at,
            a_ip,
            b_ip,
        }
    }

    /// Shuttles datagrams between the two routers until quiet; returns what was delivered
    /// to each side's TUN.
    fn pump(p: &mut Pair, mut to_b: Vec<Action>) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let (mut at_a, mut at_b) = (vec![], vec![]);
        let mut to_a = vec![];
        for _ in 0..16 {
            let mut next_a = vec![];
            let mut next_b = vec![];
            for act in to_b.drain(..) {
                if let Action::Send { to, datagram } = act {
                    assert_eq!(to, p.b_at);
                    for out in p.b.inbound(p.a_at, &datagram) {
                        match out {
                            Action::Deliver { packet, .. } => at_b.push(packet),
                            send => next_a.push(send),
                        }
                    }
                }
            }
            for act in to_a.drain(..) {
                if let Action::Send { to, datagram } = act {
                    assert_eq!(to, p.a_at);
                    for out in p.a.inbound(p.b_at, &datagram) {
                        match out {
                            Action::Deliver { packet, .. } => at_a.push(packet),
                            send => next_b.push(send),
                        }
                    }
                }
            }
            if next_a.is_empty() && next_b.is_empty() {
                break;
            }
            to_a = next_a;
            to_b = next_b;
        }
        (at_a, at_b)
    }

    #[test]
    fn punch_sends_one_initiation_per_peer_and_completes_the_handshake() {
        let mut p = pair();
        assert!(p.a.punch(&RunId::new("other").expect("id")).is_empty());
        let out = p.a.punch(&job());
        assert_eq!(out.len(), 1);
        let Action::Send { to, datagram } = &out[0] else {
            panic!("a send: {out:?}");
        };
        assert_eq!(*to, p.b_at);
        let reply = p.b.inbound(p.a_at, datagram);
        assert!(
            matches!(reply.as_slice(), [Action::Send { to, .. }] if *to == p.a_at),
            "B answers the initiation: {reply:?}"
        );
    }

    #[test]
    fn handshake_then_packets_flow_both_ways() {
        let mut p = pair();
        let first = ipv4(p.a_ip, p.b_ip, b"hello");
        let out = p.a.outbound(&job(), &first);
        assert_eq!(out.len(), 1, "a handshake initiation");
        let (_, at_b) = pump(&mut p, out);
        assert_eq!(
            at_b,
            vec![first],
            "the queued packet arrives after the handshake"
        );
        let back = ipv4(p.b_ip, p.a_ip, b"world");
        let out = p.b.outbound(&job(), &back);
        let (at_a, _) = pump_reverse(&mut p, out);
        assert_eq!(at_a, vec![back]);
        assert_eq!(p.a.drops(), Drops::default());
        assert_eq!(p.b.drops(), Drops::default());
    }

    fn pump_reverse(p: &mut Pair, to_a: Vec<Action>) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut at_a = vec![];
        for act in to_a {
            if let Action::Send { datagram, .. } = act {
                for out in p.a.inbound(p.b_at, &datagram) {
                    if let Action::Deliver { packet, .. } = out {
                        at_a.push(packet);
                    }
                }
            }
        }
        (at_a, vec![])
    }

    #[test]
    fn destination_outside_allowed_ips_is_dropped() {
        let mut p = pair();
        let stray = ipv4(p.a_ip, Ipv4Addr::new(100, 96, 0, 9), b"x");
        assert!(p.a.outbound(&job(), &stray).is_empty());
        let host = ipv4(p.a_ip, Ipv4Addr::new(192, 0, 2, 2), b"x");
        assert!(p.a.outbound(&job(), &host).is_empty());
        assert_eq!(p.a.drops().no_route, 2);
        let other_job = RunId::new("job-2").expect("id");
        assert!(
            p.a.outbound(&other_job, &ipv4(p.a_ip, p.b_ip, b"x"))
                .is_empty()
        );
        assert_eq!(p.a.drops().no_route, 3);
    }

    #[test]
    fn spoofed_source_is_dropped_by_the_receiver() {
        let mut p = pair();
        let hello = ipv4(p.a_ip, p.b_ip, b"hello");
        let out = p.a.outbound(&job(), &hello);
        let (_, at_b) = pump(&mut p, out);
        assert_eq!(at_b.len(), 1);
        // A sends (encrypted, valid session) a packet claiming another job address as source.
        let spoofed = ipv4(Ipv4Addr::new(100, 96, 0, 7), p.b_ip, b"spoof");
        let out = p.a.outbound(&job(), &spoofed);
        let (_, at_b) = pump(&mut p, out);
        assert!(at_b.is_empty());
        assert_eq!(p.b.drops().not_allowed, 1);
    }

    #[test]
    fn garbage_and_unknown_indices_are_counted() {
        let mut p = pair();
        assert!(p.b.inbound(p.a_at, b"not wireguard").is_empty());
        let mut data = vec![4, 0, 0, 0];
        data.extend_from_slice(&(0xABCDu32 << 8).to_le_bytes());
        data.extend_from_slice(&[0; 40]);
        assert!(p.b.inbound(p.a_at, &data).is_empty());
        assert_eq!(p.b.drops().invalid, 2);
    }

    #[test]
    fn duplicate_job_and_address_are_refused() {
        let mut p = pair();
        assert!(matches!(
            p.a.add_job(&job(), JobKeys::generate(), &[]),
            Err(OverlayError::Job(..))
        ));
        let k = JobKeys::generate();
        let peer = OverlayPeer {
            public: k.public(),
            endpoint: p.b_at,
            addresses: vec![p.b_ip],
            keepalive_s: Some(25),
            relay: None,
        };
        let j2 = RunId::new("job-2").expect("id");
        assert!(matches!(
            p.a.add_job(&j2, k.clone(), &[peer.clone(), peer]),
            Err(OverlayError::BadPeer(_))
        ));
        p.a.remove_job(&job());
        assert!(p.a.outbound(&job(), &ipv4(p.a_ip, p.b_ip, b"x")).is_empty());
    }

    fn mode(r: &Router) -> LinkMode {
        let links = r.links(&job());
        assert_eq!(links.len(), 1, "one link: {links:?}");
        links[0].mode
    }

    /// Carries `Relay` actions between A (node `a_node`) and B (node `b_node`) until quiet,
    /// dropping every UDP `Send` (the direct path is blocked); what each TUN got.
    fn relay_pump(
        p: &mut Pair,
        (a_node, b_node): (PeerId, PeerId),
        first: Vec<Action>,
        from_a: bool,
    ) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let (mut at_a, mut at_b) = (vec![], vec![]);
        let mut queue: Vec<(bool, Action)> = first.into_iter().map(|x| (from_a, x)).collect();
        for _ in 0..64 {
            let Some((from_a, act)) = queue.pop() else {
                break;
            };
            let Action::Relay { peer, datagram } = act else {
                continue;
            };
            let (to, via, sink) = if from_a {
                assert_eq!(peer, b_node, "A relays to B's node");
                (&mut p.b, a_node, &mut at_b)
            } else {
                assert_eq!(peer, a_node, "B relays to A's node");
                (&mut p.a, b_node, &mut at_a)
            };
            for out in to.inbound_relayed(via, &datagram) {
                match out {
                    Action::Deliver { packet, .. } => sink.push(packet),
                    other => queue.push((!from_a, other)),
                }
            }
        }
        (at_a, at_b)
    }

    #[test]
    fn links_start_pending_and_turn_direct_after_a_udp_handshake() {
        let mut p = pair();
        assert_eq!(
            (mode(&p.a), mode(&p.b)),
            (LinkMode::Pending, LinkMode::Pending)
        );
        let report = &p.a.links(&job())[0];
        assert_eq!(report.endpoint, p.b_at);
        assert_eq!(report.addresses, vec![p.b_ip]);
        assert!(!report.established, "no handshake yet");
        assert!(p.a.links(&RunId::new("other").expect("id")).is_empty());
        let out = p.a.outbound(&job(), &ipv4(p.a_ip, p.b_ip, b"hi"));
        let (_, at_b) = pump(&mut p, out);
        assert_eq!(at_b.len(), 1);
        assert_eq!(
            (mode(&p.a), mode(&p.b)),
            (LinkMode::Direct, LinkMode::Direct)
        );
        assert!(p.a.links(&job())[0].established && p.b.links(&job())[0].established);
        // Without a relay node a link never falls back, however long it waits.
        let mut lone = pair();
        let later = Instant::now() + Duration::from_secs(600);
        assert!(
            lone.a
                .relay_fallback(later, Duration::from_secs(10))
                .is_empty()
        );
        assert_eq!(mode(&lone.a), LinkMode::Pending);
    }

    #[test]
    fn unanswered_link_falls_back_to_the_relay_and_packets_flow_both_ways() {
        let ids = nodes();
        let mut p = pair_with(Some(ids));
        let after = Duration::from_secs(10);
        let start = Instant::now();
        let hello = ipv4(p.a_ip, p.b_ip, b"over the relay");
        let lost = p.a.outbound(&job(), &hello);
        assert!(matches!(lost.as_slice(), [Action::Send { .. }]), "{lost:?}");
        assert!(p.a.relay_fallback(start, after).is_empty(), "too early");
        assert_eq!(mode(&p.a), LinkMode::Pending);
        let out = p.a.relay_fallback(start + Duration::from_secs(11), after);
        assert!(
            matches!(out.as_slice(), [Action::Relay { peer, .. }] if *peer == ids.1),
            "a fresh initiation over the relay: {out:?}"
        );
        assert_eq!(mode(&p.a), LinkMode::Relayed);
        assert!(
            !p.a.links(&job())[0].established,
            "relayed is not yet working"
        );
        let (_, at_b) = relay_pump(&mut p, ids, out, true);
        assert!(
            p.a.links(&job())[0].established,
            "the response came over the relay"
        );
        assert_eq!(
            at_b,
            vec![hello],
            "the queued packet came through the relay"
        );
        assert_eq!(
            mode(&p.b),
            LinkMode::Relayed,
            "B answers on the peer's path"
        );
        let back = ipv4(p.b_ip, p.a_ip, b"and back");
        let out = p.b.outbound(&job(), &back);
        let (at_a, _) = relay_pump(&mut p, ids, out, false);
        assert_eq!(at_a, vec![back]);
        assert_eq!(p.a.drops(), Drops::default());
        assert_eq!(p.b.drops(), Drops::default());
    }

    #[test]
    fn relayed_datagram_from_a_node_that_is_not_the_peer_is_dropped() {
        let ids = nodes();
        let mut p = pair_with(Some(ids));
        let out = p.a.punch(&job());
        let [Action::Send { datagram, .. }] = out.as_slice() else {
            panic!("an initiation: {out:?}");
        };
        assert!(p.b.inbound_relayed(PeerId::random(), datagram).is_empty());
        assert_eq!(p.b.drops().invalid, 1);
        assert_eq!(mode(&p.b), LinkMode::Pending);
        let answer = p.b.inbound_relayed(ids.0, datagram);
        assert!(
            matches!(answer.as_slice(), [Action::Relay { peer, .. }] if *peer == ids.0),
            "{answer:?}"
        );
    }

    #[test]
    fn relayed_link_upgrades_to_direct_when_a_udp_probe_is_answered() {
        let ids = nodes();
        let mut p = pair_with(Some(ids));
        let after = Duration::from_secs(10);
        let start = Instant::now();
        let out = p.a.relay_fallback(start + Duration::from_secs(11), after);
        relay_pump(&mut p, ids, out, true);
        assert_eq!(
            (mode(&p.a), mode(&p.b)),
            (LinkMode::Relayed, LinkMode::Relayed)
        );
        assert!(
            p.a.relay_fallback(start + Duration::from_secs(15), after)
                .is_empty(),
            "no probe before `after` has passed again"
        );
        let probe = p.a.relay_fallback(start + Duration::from_secs(22), after);
        let [Action::Send { to, datagram }] = probe.as_slice() else {
            panic!("a UDP probe: {probe:?}");
        };
        assert_eq!(*to, p.b_at);
        let answer = p.b.inbound(p.a_at, datagram);
        let [Action::Send { to, datagram }] = answer.as_slice() else {
            panic!("answered over UDP: {answer:?}");
        };
        assert_eq!(*to, p.a_at);
        let confirm = p.a.inbound(p.b_at, datagram);
        assert_eq!(mode(&p.a), LinkMode::Direct);
        let (_, _) = pump(&mut p, confirm);
        assert_eq!(mode(&p.b), LinkMode::Direct, "B got data over UDP");
        let out = p.a.outbound(&job(), &ipv4(p.a_ip, p.b_ip, b"direct again"));
        assert!(matches!(out.as_slice(), [Action::Send { to, .. }] if *to == p.b_at));
    }

    #[test]
    fn direct_link_silent_past_keepalive_falls_back_to_the_relay() {
        let ids = nodes();
        let mut p = pair_with(Some(ids));
        let out = p.a.outbound(&job(), &ipv4(p.a_ip, p.b_ip, b"x"));
        pump(&mut p, out);
        assert_eq!(mode(&p.a), LinkMode::Direct);
        let after = Duration::from_secs(10);
        let now = Instant::now();
        assert!(
            p.a.relay_fallback(now + Duration::from_secs(30), after)
                .is_empty()
        );
        assert_eq!(mode(&p.a), LinkMode::Direct, "within keepalive + after");
        let out = p.a.relay_fallback(now + Duration::from_secs(36), after);
        assert!(matches!(out.as_slice(), [Action::Relay { peer, .. }] if *peer == ids.1));
        assert_eq!(mode(&p.a), LinkMode::Relayed);
    }
}
