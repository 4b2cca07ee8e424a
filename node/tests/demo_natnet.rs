//! The demo's NAT topology (`ganglion_node::demo::natnet`) as built on this host:
//! providers reach the host only through their own NAT (the host sees the router's public
//! address), reach neither each other's LAN nor each other's router unsolicited, and this host
//! reaches a provider only on the JSON-RPC port. Dropping the topology, or sweeping after its
//! owner died, leaves no namespace behind.
//!
//! Needs root (namespaces, iptables); not root: skipped loudly. CI runs as root.
//!
//! A binary of its own, apart from `tests/it` (the one integration binary): it needs root and
//! changes the host's network (namespaces, iptables), so it runs, or is skipped, on its own.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ganglion_dispatch::overlay::netns;
use ganglion_node::demo::natnet::{self, NatNet, RPC_PORT};

fn usable(test: &str) -> bool {
    match natnet::unavailable() {
        None => true,
        Some(why) if why.starts_with("not root") => {
            eprintln!("\n*** SKIPPED {test}: {why}; CI runs it as root\n");
            false
        }
        Some(why) => panic!("running as root but the NAT topology cannot be built: {why}"),
    }
}

fn ns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// A TCP listener bound inside namespace `ns` at `ip` (port `port`, 0 = any).
fn listen_in(ns: &str, ip: std::net::Ipv4Addr, port: u16) -> TcpListener {
    netns::run_in(&ns_path(ns), move || {
        TcpListener::bind((ip, port)).map_err(|e| ganglion_dispatch::overlay::OverlayError::Io {
            operation: "bind",
            source: e,
        })
    })
    .expect("listener in the namespace")
}

/// Connects from namespace `ns` (or this host) to `to`, 2 s at most; true when connected.
fn connects_from(ns: Option<&str>, to: SocketAddr) -> bool {
    let attempt = move || {
        Ok(TcpStream::connect_timeout(&to, Duration::from_secs(2))
            .map(|mut s| s.write_all(b"x").is_ok())
            .unwrap_or(false))
    };
    match ns {
        Some(ns) => netns::run_in(&ns_path(ns), attempt).expect("thread in the namespace"),
        None => attempt().unwrap_or(false),
    }
}

fn namespaces_of(slot: u8) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("gdm{slot}-")))
        .map(str::to_string)
        .collect()
}

#[test]
fn natnet_providers_reach_the_host_through_their_nat_and_nothing_else_unsolicited() {
    if !usable("natnet_providers_reach_the_host_through_their_nat_and_nothing_else_unsolicited") {
        return;
    }
    let nat = NatNet::create(2).expect("topology");
    let slot = nat.slot();
    assert_eq!(namespaces_of(slot).len(), 5, "pub, two routers, two hosts");
    let (a, b) = (
        nat.host(0).expect("a").clone(),
        nat.host(1).expect("b").clone(),
    );

    // Out through the NAT: the host sees the router's public address.
    let host = TcpListener::bind((nat.host_ip(), 0)).expect("listener on the host");
    let host_addr = host.local_addr().expect("addr");
    assert!(
        connects_from(Some(&a.netns), host_addr),
        "a reaches the host"
    );
    let (mut conn, seen) = host.accept().expect("accept");
    let mut byte = [0u8; 1];
    conn.read_exact(&mut byte).expect("the byte");
    assert_eq!(
        seen.ip(),
        IpAddr::V4(a.public_ip),
        "masqueraded as its router"
    );

    // Unsolicited: neither the other provider nor this host gets in, except on the RPC port
    // from this host.
    let other = listen_in(&a.netns, a.lan_ip, 0);
    let port = other.local_addr().expect("addr").port();
    assert!(
        !connects_from(Some(&b.netns), SocketAddr::from((a.lan_ip, port))),
        "no route to a's LAN"
    );
    assert!(
        !connects_from(Some(&b.netns), SocketAddr::from((a.public_ip, port))),
        "a's router drops unsolicited inbound"
    );
    assert!(
        !connects_from(None, SocketAddr::from((a.lan_ip, port))),
        "the host reaches no port but the RPC one"
    );
    let _rpc = listen_in(&a.netns, a.lan_ip, RPC_PORT);
    assert!(
        connects_from(None, SocketAddr::from((a.lan_ip, RPC_PORT))),
        "the host reaches the provider's JSON-RPC (management)"
    );

    drop(nat);
    assert!(namespaces_of(slot).is_empty(), "all namespaces deleted");
}

#[test]
fn natnet_sweep_removes_the_namespaces_of_a_demo_that_died() {
    if !usable("natnet_sweep_removes_the_namespaces_of_a_demo_that_died") {
        return;
    }
    let nat = NatNet::create(1).expect("topology");
    let slot = nat.slot();
    // As if its owner died: a pid that cannot exist (above pid_max's ceiling, 2^22).
    let status = Command::new("ip")
        .args(["link", "set", &format!("gdm{slot}-x"), "alias", "4194305"])
        .status()
        .expect("ip link set alias");
    assert!(status.success());
    std::mem::forget(nat);
    assert_eq!(namespaces_of(slot).len(), 3);
    natnet::sweep().expect("sweep");
    assert!(namespaces_of(slot).is_empty(), "swept");
    let link = Command::new("ip")
        .args(["link", "show", &format!("gdm{slot}-x")])
        .output()
        .expect("ip link show");
    assert!(!link.status.success(), "the host link is gone too");
}
