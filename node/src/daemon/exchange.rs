//! The overlay's side of the p2p `cluster` exchange (DESIGN §6): each node of a job
//! announces its ephemeral public key, its containers' overlay addresses and the endpoint
//! candidates of its WireGuard socket to the job's other assigned nodes, and turns their
//! answers into [`OverlayPeer`]s.
//!
//! - Binding: a node keeps its hello for exactly the peers assigned to the job
//!   ([`ClusterHellos`]); another node's hello reaches the job engine from the swarm
//!   (`ganglion_p2p::inbound::Inbound::Cluster`), which asks the overlay set-up, which answers
//!   from its [`ClusterHellos`]: an assigned peer gets the hello, any other peer `NotAssigned`
//!   and no key, a job with no hello (yet) `UnknownJob`.
//! - Candidates, in order: the socket's LAN address(es), then the public mapping a connected
//!   peer observed for this node (identify's `observed_addr`) with the WireGuard socket's port
//!   (MASQUERADE keeps a source port when it is free; simultaneous punching then opens both
//!   NATs). The receiver picks a candidate on a LAN it shares, else the first observed one.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use boringtun::x25519::PublicKey;
use ganglion_contracts::v2::datum::JobId as ChainJobId;
use ipnet::Ipv4Net;
use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId};

use ganglion_dispatch::overlay::OverlayError;
use ganglion_dispatch::overlay::addressing::JobOverlay;
use ganglion_dispatch::overlay::keys::JobKeys;
use ganglion_dispatch::overlay::router::OverlayPeer;
use ganglion_p2p::Client;
use ganglion_p2p::protocols::{ClusterHello, ClusterResponse, MAX_CLUSTER_CANDIDATES};

/// Pause between tries while a peer has not registered the job yet.
const RETRY: Duration = Duration::from_millis(200);

/// Most jobs a node keeps its hello for; registering one more drops the oldest registration
/// (jobs that old are long settled).
pub const MAX_CLUSTER_JOBS: usize = 256;

/// This node's side of the exchange: its hello per job and the peers assigned to the job with
/// it, the only ones [`ClusterHellos::answer`] gives it to. A hello stays registered after its
/// job's run ended (a peer late to the exchange still gets it), at most [`MAX_CLUSTER_JOBS`]
/// jobs, the oldest dropped first.
#[derive(Debug, Default)]
pub struct ClusterHellos {
    book: Mutex<HelloBook>,
}

#[derive(Debug, Default)]
struct HelloBook {
    jobs: HashMap<ChainJobId, (ClusterHello, HashSet<PeerId>)>,
    /// Registration order, oldest first.
    order: VecDeque<ChainJobId>,
}

impl ClusterHellos {
    /// Registers `hello` for its job, given to the peers in `assigned` (the job's other
    /// nodes) only. Registering a job again replaces both.
    pub fn register(&self, hello: ClusterHello, assigned: impl IntoIterator<Item = PeerId>) {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let job = hello.job_id;
        book.order.retain(|j| *j != job);
        while book.order.len() >= MAX_CLUSTER_JOBS {
            if let Some(oldest) = book.order.pop_front() {
                book.jobs.remove(&oldest);
            }
        }
        book.order.push_back(job);
        book.jobs
            .insert(job, (hello, assigned.into_iter().collect()));
    }

    /// The answer to `peer`'s `hello`: this node's hello for the job when `peer` is assigned
    /// to it, [`ClusterResponse::NotAssigned`] when it is not, [`ClusterResponse::UnknownJob`]
    /// when no hello is registered for the job.
    pub fn answer(&self, peer: PeerId, hello: &ClusterHello) -> ClusterResponse {
        let book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        match book.jobs.get(&hello.job_id) {
            Some((_, assigned)) if !assigned.contains(&peer) => {
                tracing::debug!(%peer, job = %hello.job_id,
                    "cluster hello from a peer not assigned to the job");
                ClusterResponse::NotAssigned
            }
            Some((own, _)) => {
                tracing::debug!(%peer, job = %hello.job_id, "cluster hello answered");
                ClusterResponse::Hello(own.clone())
            }
            None => ClusterResponse::UnknownJob,
        }
    }
}

/// The endpoint candidates of a WireGuard socket: `lan` (concrete addresses, not `0.0.0.0`)
/// first, then every distinct IPv4 address in `observed` (what peers saw as this node's
/// address) with the port of the first LAN candidate; at most [`MAX_CLUSTER_CANDIDATES`].
pub fn candidates(
    lan: &[SocketAddr],
    observed: impl IntoIterator<Item = Multiaddr>,
) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for addr in lan {
        if !addr.ip().is_unspecified() && !out.contains(addr) {
            out.push(*addr);
        }
    }
    let Some(port) = lan.first().map(SocketAddr::port) else {
        return out;
    };
    for ma in observed {
        let ip = ma.iter().find_map(|p| match p {
            Protocol::Ip4(ip) => Some(ip),
            _ => None,
        });
        if let Some(ip) = ip.filter(|ip| !ip.is_unspecified()) {
            let candidate = SocketAddr::from((ip, port));
            if !out.contains(&candidate) {
                out.push(candidate);
            }
        }
    }
    out.truncate(MAX_CLUSTER_CANDIDATES);
    out
}

/// This node's hello for `job`: its public key, its containers' `addresses` (as `/32`s) and
/// its endpoint `candidates`.
pub fn hello(
    job: ChainJobId,
    keys: &JobKeys,
    addresses: &[Ipv4Addr],
    candidates: &[SocketAddr],
) -> ClusterHello {
    ClusterHello {
        job_id: job,
        overlay_key: *keys.public().as_bytes(),
        overlay_addrs: addresses.iter().map(|a| format!("{a}/32")).collect(),
        endpoints: candidates.iter().map(ToString::to_string).collect(),
    }
}

/// A peer node as learned from its hello.
#[derive(Debug, Clone)]
pub struct LearnedPeer {
    /// The tunnel peer (endpoint = the chosen candidate).
    pub peer: OverlayPeer,
    /// Every candidate it announced, in its order.
    pub candidates: Vec<SocketAddr>,
}

fn bad(reason: impl Into<String>) -> OverlayError {
    OverlayError::BadHello(reason.into())
}

/// Checks a peer's `hello` for `job` against the job's `plan` and turns it into a tunnel peer.
/// `own` are this node's containers' addresses; `local_nets` this node's LAN networks (a
/// candidate inside one is preferred); `keepalive_s` from `[overlay]`.
///
/// # Errors
/// [`OverlayError::BadHello`] when the hello names another job, an all-zero key, no address,
/// an address that is not the job's or is this node's, or no parsable endpoint.
pub fn learn_peer(
    hello: &ClusterHello,
    job: ChainJobId,
    plan: &JobOverlay,
    own: &[Ipv4Addr],
    local_nets: &[Ipv4Net],
    keepalive_s: Option<u16>,
) -> Result<LearnedPeer, OverlayError> {
    if hello.job_id != job {
        return Err(bad("hello for another job"));
    }
    if hello.overlay_key == [0; 32] {
        return Err(bad("all-zero public key"));
    }
    let mut addresses = Vec::new();
    for text in &hello.overlay_addrs {
        let ip = match text.parse::<Ipv4Net>() {
            Ok(net) if net.prefix_len() == 32 => net.addr(),
            Ok(_) => return Err(bad(format!("overlay address {text} is not a /32"))),
            Err(_) => text
                .parse::<Ipv4Addr>()
                .map_err(|_| bad(format!("overlay address {text} does not parse")))?,
        };
        if !plan.addresses.contains(&ip) || own.contains(&ip) || addresses.contains(&ip) {
            return Err(OverlayError::BadPeer(ip));
        }
        addresses.push(ip);
    }
    if addresses.is_empty() {
        return Err(bad("no overlay address"));
    }
    let candidates: Vec<SocketAddr> = hello
        .endpoints
        .iter()
        .map(|e| {
            e.parse::<SocketAddr>()
                .map_err(|_| bad(format!("endpoint {e} does not parse")))
        })
        .collect::<Result<_, _>>()?;
    let on_lan = candidates.iter().find(|c| match c.ip() {
        IpAddr::V4(ip) => local_nets.iter().any(|n| n.contains(&ip)),
        IpAddr::V6(_) => false,
    });
    let endpoint = on_lan
        .or_else(|| candidates.get(1))
        .or_else(|| candidates.first())
        .copied()
        .ok_or_else(|| bad("no endpoint candidate"))?;
    Ok(LearnedPeer {
        peer: OverlayPeer {
            public: PublicKey::from(hello.overlay_key),
            endpoint,
            addresses,
            keepalive_s,
            relay: None,
        },
        candidates,
    })
}

/// [`learn_peer`] for every hello [`exchange`] returned, each peer's relay node set to the
/// p2p peer its hello came from (so the relay fallback can reach it), in peer-id order.
///
/// # Errors
/// The first hello [`learn_peer`] refuses.
pub fn learn_peers(
    hellos: &HashMap<PeerId, ClusterHello>,
    job: ChainJobId,
    plan: &JobOverlay,
    own: &[Ipv4Addr],
    local_nets: &[Ipv4Net],
    keepalive_s: Option<u16>,
) -> Result<Vec<LearnedPeer>, OverlayError> {
    let mut ids: Vec<&PeerId> = hellos.keys().collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let mut learned = learn_peer(&hellos[id], job, plan, own, local_nets, keepalive_s)?;
            learned.peer.relay = Some(*id);
            Ok(learned)
        })
        .collect()
}

/// After a request to `peer` failed (typically: no address, or only a stale one after the peer
/// restarted on a new port), asks the DHT where `peer` is now and remembers what it finds, so
/// the next try dials the right address. A node restarted right after its bootstrap peer did
/// learns nothing from its start-up DHT bootstrap, and its old address stays in the others'
/// routing tables until this lookup replaces it.
async fn relearn(client: &Client, peer: PeerId) {
    match client.find_peer(peer).await {
        Ok(addrs) => {
            tracing::debug!(%peer, found = addrs.len(), "cluster peer looked up in the DHT");
            for addr in addrs {
                let _ = client.add_peer(peer, addr).await;
            }
        }
        Err(e) => tracing::debug!(%peer, error = %e, "cluster peer lookup failed"),
    }
}

/// Runs the exchange for one job from this node: registers `own` in `hellos` for the
/// `assigned` peers (the job's other nodes; whoever answers this node's inbound hellos answers
/// from `hellos`), then sends it to each of them until each answers with its own hello for the
/// job; a peer that has not registered yet is asked again every 200 ms, one that cannot be
/// reached is looked up in the DHT first ([`relearn`]).
/// Returns every peer's hello.
///
/// # Errors
/// [`OverlayError::Exchange`] naming the peer when it refuses (`NotAssigned`), answers with
/// another job's hello, or has not answered within `timeout`; [`OverlayError::Exchange`] too
/// when the p2p layer has stopped.
pub async fn exchange(
    client: &Client,
    hellos: &ClusterHellos,
    own: ClusterHello,
    assigned: &[PeerId],
    timeout: Duration,
) -> Result<HashMap<PeerId, ClusterHello>, OverlayError> {
    let fail = |peer: &PeerId, reason: String| OverlayError::Exchange {
        peer: peer.to_string(),
        reason,
    };
    hellos.register(own.clone(), assigned.iter().copied());
    let deadline = tokio::time::Instant::now() + timeout;
    let ask = |peer: PeerId| {
        let own = own.clone();
        async move {
            let mut last = String::from("no answer");
            while tokio::time::Instant::now() < deadline {
                match client.cluster_hello(peer, own.clone()).await {
                    Ok(ClusterResponse::Hello(h)) if h.job_id == own.job_id => {
                        return Ok((peer, h));
                    }
                    Ok(ClusterResponse::Hello(_)) => {
                        return Err(fail(&peer, "answered for another job".into()));
                    }
                    Ok(ClusterResponse::NotAssigned) => {
                        return Err(fail(&peer, "refused: not assigned to the job".into()));
                    }
                    Ok(other) => last = format!("{other:?}"),
                    Err(e @ ganglion_p2p::Error::Stopped) => {
                        return Err(fail(&peer, format!("p2p stopped: {e}")));
                    }
                    Err(e) => {
                        last = e.to_string();
                        relearn(client, peer).await;
                    }
                }
                tokio::time::sleep(RETRY).await;
            }
            Err(fail(&peer, format!("timed out after {timeout:?}: {last}")))
        }
    };
    futures::future::try_join_all(assigned.iter().map(|p| ask(*p)))
        .await
        .map(|v| v.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use ganglion_dispatch::executor::plan::RunId;
    use ganglion_dispatch::overlay::addressing::OverlayPool;

    fn plan() -> JobOverlay {
        OverlayPool::default()
            .plan(&RunId::new("x-1").expect("id"), 3, &BTreeSet::new())
            .expect("plan")
    }

    #[test]
    fn candidates_put_lan_first_then_observed_mappings_with_the_socket_port() {
        let lan: SocketAddr = "192.168.10.2:51820".parse().expect("addr");
        let observed: Vec<Multiaddr> = vec![
            "/ip4/10.77.0.2/tcp/40000".parse().expect("ma"),
            "/ip4/10.77.0.2/tcp/40001".parse().expect("ma"),
            "/ip4/192.168.10.2/tcp/4001".parse().expect("ma"),
            "/ip6/::1/tcp/1".parse().expect("ma"),
        ];
        let got = candidates(&[lan], observed);
        assert_eq!(
            got,
            vec![lan, "10.77.0.2:51820".parse().expect("addr")],
            "deduplicated, IPv4 only, the WireGuard port"
        );
        assert!(candidates(&[], vec!["/ip4/1.2.3.4/tcp/1".parse().expect("ma")]).is_empty());
    }

    #[test]
    fn learned_peer_prefers_a_shared_lan_else_the_observed_mapping() {
        let plan = plan();
        let keys = JobKeys::generate();
        let job = ChainJobId([7; 32]);
        let lan: SocketAddr = "192.168.10.2:51820".parse().expect("addr");
        let public: SocketAddr = "10.77.0.2:51820".parse().expect("addr");
        let h = hello(job, &keys, &[plan.addresses[1]], &[lan, public]);
        let own = [plan.addresses[0]];
        let same_lan = ["192.168.10.0/24".parse().expect("net")];
        let p = learn_peer(&h, job, &plan, &own, &same_lan, Some(25)).expect("valid");
        assert_eq!(p.peer.endpoint, lan);
        assert_eq!(p.peer.addresses, vec![plan.addresses[1]]);
        assert_eq!(p.peer.public.as_bytes(), keys.public().as_bytes());
        let elsewhere = ["192.168.20.0/24".parse().expect("net")];
        let p = learn_peer(&h, job, &plan, &own, &elsewhere, None).expect("valid");
        assert_eq!(p.peer.endpoint, public);
        assert_eq!(p.candidates, vec![lan, public]);
    }

    #[test]
    fn bad_hellos_are_refused() {
        let plan = plan();
        let job = ChainJobId([7; 32]);
        let keys = JobKeys::generate();
        let ep: SocketAddr = "10.0.0.1:1".parse().expect("addr");
        let own = [plan.addresses[0]];
        let check = |h: &ClusterHello| learn_peer(h, job, &plan, &own, &[], None);
        let good = hello(job, &keys, &[plan.addresses[2]], &[ep]);
        check(&good).expect("good");
        let other_job = ClusterHello {
            job_id: ChainJobId([8; 32]),
            ..good.clone()
        };
        assert!(matches!(check(&other_job), Err(OverlayError::BadHello(_))));
        let zero = ClusterHello {
            overlay_key: [0; 32],
            ..good.clone()
        };
        assert!(check(&zero).is_err());
        let mine = hello(job, &keys, &[plan.addresses[0]], &[ep]);
        assert!(matches!(check(&mine), Err(OverlayError::BadPeer(_))));
        let foreign = hello(job, &keys, &["100.127.0.9".parse().expect("ip")], &[ep]);
        assert!(matches!(check(&foreign), Err(OverlayError::BadPeer(_))));
        let wide = ClusterHello {
            overlay_addrs: vec![format!("{}/24", plan.addresses[2])],
            ..good.clone()
        };
        assert!(check(&wide).is_err());
        let no_ep = ClusterHello {
            endpoints: vec![],
            ..good.clone()
        };
        assert!(check(&no_ep).is_err());
        let garbage = ClusterHello {
            endpoints: vec!["nowhere".into()],
            ..good
        };
        assert!(check(&garbage).is_err());
    }

    #[test]
    fn a_hello_goes_to_the_assigned_peers_only() {
        let keys = JobKeys::generate();
        let ep: SocketAddr = "10.0.0.1:1".parse().expect("addr");
        let own = hello(ChainJobId([7; 32]), &keys, &[plan().addresses[0]], &[ep]);
        let theirs = hello(ChainJobId([7; 32]), &keys, &[plan().addresses[1]], &[ep]);
        let (assigned, other) = (PeerId::random(), PeerId::random());
        let book = ClusterHellos::default();
        assert_eq!(book.answer(assigned, &theirs), ClusterResponse::UnknownJob);
        book.register(own.clone(), [assigned]);
        assert_eq!(
            book.answer(assigned, &theirs),
            ClusterResponse::Hello(own.clone())
        );
        assert_eq!(book.answer(other, &theirs), ClusterResponse::NotAssigned);
        let elsewhere = ClusterHello {
            job_id: ChainJobId([8; 32]),
            ..theirs.clone()
        };
        assert_eq!(
            book.answer(assigned, &elsewhere),
            ClusterResponse::UnknownJob
        );
        // Registering the job again replaces its peers.
        book.register(own, [other]);
        assert_eq!(book.answer(assigned, &theirs), ClusterResponse::NotAssigned);
    }

    #[test]
    fn a_full_book_drops_its_oldest_registration() {
        let hello_of = |n: usize| {
            let mut job = [0u8; 32];
            job[..8].copy_from_slice(&(n as u64).to_be_bytes());
            ClusterHello {
                job_id: ChainJobId(job),
                overlay_key: [1; 32],
                overlay_addrs: vec![],
                endpoints: vec![],
            }
        };
        let peer = PeerId::random();
        let book = ClusterHellos::default();
        for n in 0..MAX_CLUSTER_JOBS {
            book.register(hello_of(n), [peer]);
        }
        // Job 0 registered again is the newest; one more job drops job 1, now the oldest.
        book.register(hello_of(0), [peer]);
        book.register(hello_of(MAX_CLUSTER_JOBS), [peer]);
        assert_eq!(book.answer(peer, &hello_of(1)), ClusterResponse::UnknownJob);
        for n in [0, 2, MAX_CLUSTER_JOBS] {
            assert_eq!(
                book.answer(peer, &hello_of(n)),
                ClusterResponse::Hello(hello_of(n))
            );
        }
    }

    #[test]
    fn learn_peers_names_each_hello_sender_as_the_relay_node() {
        let plan = plan();
        let job = ChainJobId([7; 32]);
        let ep: SocketAddr = "10.0.0.1:1".parse().expect("addr");
        let (p1, p2) = (PeerId::random(), PeerId::random());
        let hellos = HashMap::from([
            (
                p1,
                hello(job, &JobKeys::generate(), &[plan.addresses[1]], &[ep]),
            ),
            (
                p2,
                hello(job, &JobKeys::generate(), &[plan.addresses[2]], &[ep]),
            ),
        ]);
        let own = [plan.addresses[0]];
        let learned = learn_peers(&hellos, job, &plan, &own, &[], Some(25)).expect("valid");
        assert_eq!(learned.len(), 2);
        for l in &learned {
            let from = if l.peer.addresses == [plan.addresses[1]] {
                p1
            } else {
                p2
            };
            assert_eq!(l.peer.relay, Some(from));
        }
        let bad = HashMap::from([(p1, hello(job, &JobKeys::generate(), &own, &[ep]))]);
        assert!(learn_peers(&bad, job, &plan, &own, &[], None).is_err());
    }
}
