//! Reaching peers from behind a NAT through the bootstrap peers as circuit relays
//! ([`super::Config::relay_via_bootstrap`], circuit relay v2, libp2p `relay` spec).
//!
//! A node behind a NAT has no address another such node can dial: its listen addresses are
//! private and its NAT drops unsolicited inbound packets. With this on, it
//! - reserves a slot on every bootstrap peer once connected to it (listens on
//!   `<bootstrap>/p2p-circuit`), again after the connection was lost, so others can reach it;
//! - before a request to a peer it is not connected to (accept, cluster, attest, a DAG fetch),
//!   adds `<bootstrap>/p2p-circuit/p2p/<peer>` to that peer's addresses, so the dial also goes
//!   through the relays.
//!
//! DCUtR then tries to upgrade each relayed connection to a direct one (a synchronised
//! simultaneous open, DESIGN §5). The bootstrap peers must serve as relays
//! ([`super::Config::relay_server`], with a confirmed external address).

use std::collections::HashMap;

use libp2p::core::transport::ListenerId;
use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId, Swarm};

use super::behaviour::Behaviour;

/// The relays (bootstrap peers) and this node's circuit listeners on them.
#[derive(Debug, Default)]
pub struct RelayRoutes {
    relays: Vec<(PeerId, Multiaddr)>,
    listeners: HashMap<PeerId, ListenerId>,
}

impl RelayRoutes {
    /// Routes through every bootstrap address that names its peer (`…/p2p/<id>`); none when
    /// `enabled` is false.
    pub fn new(enabled: bool, bootstrap: &[Multiaddr]) -> Self {
        let relays = if enabled {
            bootstrap
                .iter()
                .filter_map(|a| match a.iter().last() {
                    Some(Protocol::P2p(peer)) => Some((peer, a.clone())),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            relays,
            listeners: HashMap::new(),
        }
    }

    /// The circuit address through `relay` (`<relay addr>/p2p-circuit`).
    fn circuit(relay: &Multiaddr) -> Multiaddr {
        relay.clone().with(Protocol::P2pCircuit)
    }

    /// `peer` connected: when it is a relay without a reservation of ours, reserve one.
    pub fn on_connected(&mut self, swarm: &mut Swarm<Behaviour>, peer: PeerId) {
        if self.listeners.contains_key(&peer) {
            return;
        }
        let Some((_, addr)) = self.relays.iter().find(|(p, _)| *p == peer) else {
            return;
        };
        let circuit = Self::circuit(addr);
        match swarm.listen_on(circuit.clone()) {
            Ok(id) => {
                tracing::info!(target: "p2p", %circuit, "reserving a relay slot");
                self.listeners.insert(peer, id);
            }
            Err(e) => tracing::warn!(target: "p2p", %circuit, error = %e, "cannot reserve"),
        }
    }

    /// Reserves again on every connected relay whose reservation closed (refused, expired):
    /// called on the re-dial timer.
    pub fn refresh(&mut self, swarm: &mut Swarm<Behaviour>) {
        let connected: Vec<PeerId> = self
            .relays
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| swarm.is_connected(p))
            .collect();
        for peer in connected {
            self.on_connected(swarm, peer);
        }
    }

    /// A listener closed: when it was a circuit listener, the next connection to its relay
    /// reserves again.
    pub fn on_listener_closed(&mut self, id: ListenerId) {
        self.listeners.retain(|_, l| *l != id);
    }

    /// Before a request to `peer`: when not connected, its circuit addresses through every
    /// relay (but itself) join its known addresses.
    pub fn route(&self, swarm: &mut Swarm<Behaviour>, peer: &PeerId) {
        if self.relays.is_empty() || swarm.is_connected(peer) {
            return;
        }
        for (relay, addr) in &self.relays {
            if relay != peer {
                swarm.add_peer_address(*peer, Self::circuit(addr).with(Protocol::P2p(*peer)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bootstrap_addresses_naming_a_peer_become_relays_and_only_when_enabled() {
        let peer = PeerId::random();
        let named: Multiaddr = format!("/ip4/10.0.0.1/tcp/7071/p2p/{peer}")
            .parse()
            .expect("addr");
        let bare: Multiaddr = "/ip4/10.0.0.2/tcp/7071".parse().expect("addr");
        let on = RelayRoutes::new(true, &[named.clone(), bare.clone()]);
        assert_eq!(on.relays, vec![(peer, named.clone())]);
        assert_eq!(
            RelayRoutes::circuit(&named).to_string(),
            format!("/ip4/10.0.0.1/tcp/7071/p2p/{peer}/p2p-circuit")
        );
        assert!(RelayRoutes::new(false, &[named, bare]).relays.is_empty());
    }
}
