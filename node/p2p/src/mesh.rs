//! Keeping a provider connected to the other providers: ping only measures connections, and
//! the matcher needs the paths between providers (a provider's offer carries its fresh ping
//! windows as links, [`crate::links`]). A provider otherwise only connects to its bootstrap
//! peers and to the providers of jobs it runs.
//!
//! [`keep_connected`] looks at the live market every [`MeshConfig::every`]: while fewer than
//! [`MESH_TARGET`] providers are connected, it dials up to [`MAX_DIALS_PER_ROUND`] of the
//! others (each at most once per [`MeshConfig::retry`]); a provider the swarm knows no address
//! of is looked up in the DHT for the next round.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use libp2p::PeerId;

use super::client::Client;
use super::error::Error;
use super::links::MAX_OFFER_LINKS;

/// Providers a provider keeps connections to: as many as its offer can carry links to.
pub const MESH_TARGET: usize = MAX_OFFER_LINKS;
/// Dials started per round, at most.
pub const MAX_DIALS_PER_ROUND: usize = 8;
/// Longest wait for one DHT lookup of a provider without a known address.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the mesh is looked at. Defaults in [`MeshConfig::default`].
#[derive(Debug, Clone)]
pub struct MeshConfig {
    /// Between two rounds (default 30 s).
    pub every: Duration,
    /// A provider is dialled at most this often (default 60 s).
    pub retry: Duration,
}

impl Default for MeshConfig {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(30),
            retry: Duration::from_secs(60),
        }
    }
}

/// The providers to dial this round: those of `providers` (peers with a live offer) that are
/// not `own`, not connected and not tried within `retry` (`tried`: when each was last
/// dialled), in peer id order, while fewer than [`MESH_TARGET`] are connected, at most
/// [`MAX_DIALS_PER_ROUND`].
pub fn due(
    providers: &[PeerId],
    connected: &HashSet<PeerId>,
    own: &PeerId,
    tried: &HashMap<PeerId, Instant>,
    retry: Duration,
    now: Instant,
) -> Vec<PeerId> {
    let mut others: Vec<PeerId> = providers.iter().copied().filter(|p| p != own).collect();
    others.sort_by_key(|p| p.to_bytes());
    others.dedup();
    let have = others.iter().filter(|p| connected.contains(*p)).count();
    let room = MESH_TARGET.saturating_sub(have).min(MAX_DIALS_PER_ROUND);
    others
        .into_iter()
        .filter(|p| !connected.contains(p))
        .filter(|p| {
            tried
                .get(p)
                .is_none_or(|at| now.saturating_duration_since(*at) >= retry)
        })
        .take(room)
        .collect()
}

/// Keeps this provider (`own`) connected to the market's other providers until the swarm
/// stops.
pub async fn keep_connected(client: Client, own: PeerId, config: MeshConfig) {
    let mut tried: HashMap<PeerId, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(config.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (Ok(connected), Ok(market)) = (client.connected_peers().await, client.market().await)
        else {
            return; // the swarm stopped
        };
        let providers: Vec<PeerId> = market
            .iter()
            .filter_map(|o| PeerId::from_bytes(&o.body.peer_id).ok())
            .collect();
        let connected: HashSet<PeerId> = connected.into_iter().collect();
        let now = Instant::now();
        tried.retain(|_, at| now.saturating_duration_since(*at) < config.retry);
        for peer in due(&providers, &connected, &own, &tried, config.retry, now) {
            tried.insert(peer, now);
            match client.dial_peer(peer).await {
                Ok(_) => {}
                Err(Error::Stopped) => return,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "provider not dialled: looking it up");
                    let found = tokio::time::timeout(LOOKUP_TIMEOUT, client.find_peer(peer)).await;
                    for addr in found.ok().and_then(Result::ok).unwrap_or_default() {
                        let _ = client.add_peer(peer, addr).await;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dials_unconnected_providers_within_the_bounds() {
        let own = PeerId::random();
        let now = Instant::now() + Duration::from_secs(3600);
        let mut providers: Vec<PeerId> = (0..20).map(|_| PeerId::random()).collect();
        providers.push(own);
        let connected: HashSet<PeerId> = providers[..2].iter().copied().collect();
        let recent: HashMap<PeerId, Instant> =
            [(providers[2], now - Duration::from_secs(10))].into();
        let retry = Duration::from_secs(60);
        let dial = due(&providers, &connected, &own, &recent, retry, now);
        assert_eq!(dial.len(), MAX_DIALS_PER_ROUND);
        assert!(!dial.contains(&own));
        assert!(!dial.iter().any(|p| connected.contains(p)));
        assert!(!dial.contains(&providers[2]), "tried 10 s ago");
        let mut sorted = dial.clone();
        sorted.sort_by_key(|p| p.to_bytes());
        assert_eq!(dial, sorted, "peer id order");
        // Tried long enough ago: due again.
        let old: HashMap<PeerId, Instant> = [(providers[2], now - retry)].into();
        let all = due(&providers[2..3], &connected, &own, &old, retry, now);
        assert_eq!(all, vec![providers[2]]);
    }

    #[test]
    fn nothing_to_dial_once_the_target_is_connected() {
        let own = PeerId::random();
        let providers: Vec<PeerId> = (0..MESH_TARGET + 5).map(|_| PeerId::random()).collect();
        let connected: HashSet<PeerId> = providers[..MESH_TARGET].iter().copied().collect();
        let now = Instant::now();
        assert!(
            due(
                &providers,
                &connected,
                &own,
                &HashMap::new(),
                Duration::ZERO,
                now
            )
            .is_empty()
        );
    }
}
