//! When a `listen` is answered.
//!
//! A listener on an unspecified IP (`/ip4/0.0.0.0/tcp/0`) reports one address per interface,
//! one event each. libp2p-tcp's port reuse — a dial leaving from the listener's port, which
//! DCUtR's hole punch needs (the NAT mapping of the listen port is what the other side dials)
//! — only uses a listen address of the dial's kind: a dial to a routable peer needs a
//! non-loopback one. Answering `listen` at the first (loopback) address let a caller dial its
//! relay before the routable address was registered; that dial left from an ephemeral port, the
//! relay reported the ephemeral mapping as the node's observed address, and the hole punch
//! failed (seen 2 runs in 40 of `node/tests/p2p_nat.sh`). So such a listen is answered only
//! once a routable address of the listener is registered too, when the host has a routable
//! interface of that family (`if-addrs`); the answer is still the first address reported.

use libp2p::Multiaddr;
use libp2p::multiaddr::Protocol;

/// A `listen` command waiting for its answer.
#[derive(Debug)]
pub(crate) struct PendingListen<R> {
    /// Where the answer goes.
    pub(crate) reply: R,
    /// The first address the listener reported (the answer).
    first: Option<Multiaddr>,
    /// Whether a non-loopback address must be registered before answering.
    wants_routable: bool,
}

impl<R> PendingListen<R> {
    /// A pending listen on `addr`.
    pub(crate) fn new(addr: &Multiaddr, reply: R) -> Self {
        let wants_routable = unspecified_v4(addr).is_some_and(host_has_routable);
        Self::with(reply, wants_routable)
    }

    fn with(reply: R, wants_routable: bool) -> Self {
        Self {
            reply,
            first: None,
            wants_routable,
        }
    }

    /// The listener reported `address`: `Some(answer)` when the listen can be answered now.
    pub(crate) fn on_address(&mut self, address: Multiaddr) -> Option<Multiaddr> {
        let ready = !self.wants_routable || !is_loopback(&address);
        let first = self.first.get_or_insert(address).clone();
        ready.then_some(first)
    }
}

/// `Some(true)` for `/ip4/0.0.0.0/…`, `Some(false)` for `/ip6/::/…`, `None` otherwise.
fn unspecified_v4(addr: &Multiaddr) -> Option<bool> {
    addr.iter().find_map(|p| match p {
        Protocol::Ip4(ip) if ip.is_unspecified() => Some(true),
        Protocol::Ip6(ip) if ip.is_unspecified() => Some(false),
        _ => None,
    })
}

/// Whether this host has a non-loopback interface address of the family (`v4`: IPv4).
fn host_has_routable(v4: bool) -> bool {
    if_addrs::get_if_addrs()
        .map(|ifs| {
            ifs.iter()
                .any(|i| !i.is_loopback() && i.ip().is_ipv4() == v4)
        })
        .unwrap_or(false)
}

/// Whether `addr` is on a loopback IP (127.0.0.0/8, ::1).
pub(crate) fn is_loopback(addr: &Multiaddr) -> bool {
    addr.iter().any(|p| match p {
        Protocol::Ip4(ip) => ip.is_loopback(),
        Protocol::Ip6(ip) => ip.is_loopback(),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ma(s: &str) -> Multiaddr {
        s.parse().expect("multiaddr")
    }

    #[test]
    fn an_unspecified_listen_waits_for_a_routable_address_and_answers_the_first() {
        let mut p = PendingListen::with((), true);
        assert_eq!(p.on_address(ma("/ip4/127.0.0.1/tcp/4001")), None);
        assert_eq!(
            p.on_address(ma("/ip4/192.168.10.2/tcp/4001")),
            Some(ma("/ip4/127.0.0.1/tcp/4001")),
            "answered once the routable address is registered, with the first one"
        );
    }

    #[test]
    fn other_listens_are_answered_at_once() {
        let mut p = PendingListen::with((), false);
        assert_eq!(
            p.on_address(ma("/ip4/127.0.0.1/tcp/4001")),
            Some(ma("/ip4/127.0.0.1/tcp/4001"))
        );
        let mut r = PendingListen::with((), true);
        assert_eq!(
            r.on_address(ma("/ip4/10.0.0.5/tcp/4001")),
            Some(ma("/ip4/10.0.0.5/tcp/4001"))
        );
        assert_eq!(unspecified_v4(&ma("/ip4/127.0.0.1/tcp/0")), None);
        assert_eq!(unspecified_v4(&ma("/ip4/0.0.0.0/tcp/0")), Some(true));
        assert_eq!(unspecified_v4(&ma("/ip6/::/tcp/0")), Some(false));
    }
}
