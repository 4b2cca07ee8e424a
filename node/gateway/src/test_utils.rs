//! For tests and benches (feature `test-utils`): a minimal libp2p swarm speaking only raw
//! streams, as a node's swarm does for `/ganglion/service/1`.

use std::time::Duration;

use libp2p::Swarm;

/// A swarm with only the stream behaviour (TCP + noise + yamux, `TCP_NODELAY`), listening on
/// a free loopback port; drive it to learn the address (`SwarmEvent::NewListenAddr`).
///
/// # Panics
/// When the transport cannot be built or the loopback listen fails (a broken test host).
pub fn stream_swarm() -> Swarm<libp2p_stream::Behaviour> {
    let mut swarm = libp2p::SwarmBuilder::with_new_identity()
        .with_tokio()
        .with_tcp(
            libp2p::tcp::Config::default().nodelay(true),
            libp2p::noise::Config::new,
            libp2p::yamux::Config::default,
        )
        .expect("a TCP + noise + yamux transport")
        .with_behaviour(|_| libp2p_stream::Behaviour::new())
        .expect("the stream behaviour")
        .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(600)))
        .build();
    swarm
        .listen_on("/ip4/127.0.0.1/tcp/0".parse().expect("a multiaddr"))
        .expect("a loopback listen");
    swarm
}
