//! One p2p node as a process, for the NAT test (`node/tests/p2p_nat.sh`), where each node runs in
//! its own network namespace.
//!
//! `p2p_peer relay <listen-addr>`: relay server; prints `ADDR <multiaddr>` and serves forever.
//! `p2p_peer listen <relay-multiaddr>`: reserves a slot on the relay, prints `ADDR <circuit>`,
//!   then waits for a peer and reports `CONNECTED relayed=<bool>` and `HOLEPUNCH ok=<bool>`.
//! `p2p_peer dial <relay-multiaddr> <circuit-multiaddr>`: dials through the relay, reports the
//!   same lines, exits 0 after a hole-punch result (or after 20 s without one).

use std::time::Duration;

use ganglion_p2p::offers::BondSnapshot;
use ganglion_p2p::{self as p2p, Config, Event};
use libp2p::Multiaddr;
use libp2p::identity::Keypair;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let config = Config {
        listen: vec![],
        relay_server: mode == "relay",
        ..Config::default()
    };
    let key = Keypair::generate_ed25519();
    let me = key.public().to_peer_id();
    let (client, event_loop, mut events, _inbound) =
        p2p::new(key, config, BondSnapshot::default())?;
    tokio::spawn(event_loop.run());
    match mode {
        "relay" => {
            let addr: Multiaddr = args.get(1).ok_or("listen addr")?.parse()?;
            let a = client.listen(addr).await?;
            let full = a.with(libp2p::multiaddr::Protocol::P2p(me));
            client.add_external_address(full.clone()).await?;
            println!("ADDR {full}");
            futures::future::pending::<()>().await;
        }
        "listen" | "dial" => {
            let relay: Multiaddr = args.get(1).ok_or("relay addr")?.parse()?;
            // A local TCP port: DCUtR dials from it (port reuse) so the NAT mapping matches.
            client.listen("/ip4/0.0.0.0/tcp/0".parse()?).await?;
            client.dial(relay.clone()).await?;
            if mode == "listen" {
                let circuit = client
                    .listen(relay.with(libp2p::multiaddr::Protocol::P2pCircuit))
                    .await?;
                // The reported circuit address already ends in `/p2p/<this peer>`.
                println!("ADDR {circuit}");
            } else {
                let target: Multiaddr = args.get(2).ok_or("circuit addr")?.parse()?;
                client.dial(target).await?;
            }
            let deadline = tokio::time::sleep(Duration::from_secs(20));
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    e = events.recv() => match e {
                        Some(Event::RelayedConnection { peer }) => println!("CONNECTED relayed=true peer={peer}"),
                        Some(Event::HolePunchFinished { succeeded, .. }) => {
                            println!("HOLEPUNCH ok={succeeded}");
                            if mode == "dial" { break; }
                        }
                        Some(_) => {}
                        None => break,
                    },
                    _ = &mut deadline => { println!("HOLEPUNCH none"); break; }
                }
            }
            let peers = client.connected_peers().await?;
            println!("PEERS {}", peers.len());
        }
        _ => return Err("usage: p2p_peer relay|listen|dial ...".into()),
    }
    Ok(())
}
