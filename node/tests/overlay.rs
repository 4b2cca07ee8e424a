//! The overlay on real kernels (root): two "hosts" as network namespaces joined by a veth
//! underlay, each running a node's userspace WireGuard (boringtun) over one UDP socket and a
//! TUN; then the pod model with Docker sandboxes. Without root these tests print a loud SKIP;
//! as root, missing tools (`ip`, Docker, images) fail them.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ganglion_node::executor::network::ClusterNetwork;
use ganglion_node::executor::plan::JobId;
use ganglion_node::overlay::addressing::{JobOverlay, OverlayPool};
use ganglion_node::overlay::keys::JobKeys;
use ganglion_node::overlay::netns;
use ganglion_node::overlay::network::{JobSetup, OverlayNetwork};
use ganglion_node::overlay::node::OverlayNode;
use ganglion_node::overlay::pod::{self, OVERLAY_IFNAME};
use ganglion_node::overlay::router::OverlayPeer;
use ganglion_node::overlay::tun::{self, OVERLAY_MTU, TunDevice};

/// True when root; otherwise prints why the test is skipped.
fn root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED {test}: needs root (network namespaces, TUN, setns); CI runs it as root"
        );
        return false;
    }
    true
}

fn ip(args: &[&str]) {
    let status = Command::new("ip")
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("overlay tests need iproute2's `ip` as root: {e}"));
    assert!(status.success(), "ip {args:?} failed: {status}");
}

/// A named network namespace, deleted (with its interfaces) on drop.
struct Netns(String);

impl Netns {
    fn new(name: String) -> Self {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Self(name)
    }
    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.0))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn job_id(prefix: &str) -> JobId {
    JobId::new(format!("{prefix}-{}", std::process::id())).expect("job id")
}

/// Binds the node socket and creates the addressed TUN inside `ns`.
fn host_side(ns: &Path, bind: SocketAddr, address: ipnet::Ipv4Net) -> (UdpSocket, TunDevice) {
    netns::run_in(ns, move || {
        let socket =
            UdpSocket::bind(bind).map_err(|e| ganglion_node::overlay::OverlayError::Io {
                operation: "bind",
                source: e,
            })?;
        let dev = TunDevice::create(OVERLAY_IFNAME)?;
        tun::configure(dev.name(), address, OVERLAY_MTU)?;
        Ok((socket, dev))
    })
    .expect("host side in namespace")
}

fn peer(keys: &JobKeys, endpoint: SocketAddr, address: Ipv4Addr) -> OverlayPeer {
    OverlayPeer {
        public: keys.public(),
        endpoint,
        addresses: vec![address],
        keepalive_s: Some(25),
    }
}

/// A one-connection TCP echo server bound inside `ns` on `address`; returns its port.
fn echo_server(ns: &Path, address: Ipv4Addr) -> u16 {
    let listener = netns::run_in(ns, move || {
        TcpListener::bind((address, 0)).map_err(|e| ganglion_node::overlay::OverlayError::Io {
            operation: "listen",
            source: e,
        })
    })
    .expect("listener in namespace");
    let port = listener.local_addr().expect("port").port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    });
    port
}

/// Connects from inside `ns` to `to`, sends `payload` and reads it back.
fn echo_from(ns: &Path, to: SocketAddr, payload: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let result = netns::run_in(ns, move || {
        let io = |e| ganglion_node::overlay::OverlayError::Io {
            operation: "echo",
            source: e,
        };
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(5)).map_err(io)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(io)?;
        let mut w = s.try_clone().map_err(io)?;
        let sent = payload.clone();
        let writer = std::thread::spawn(move || w.write_all(&sent));
        let mut back = vec![0u8; payload.len()];
        s.read_exact(&mut back).map_err(io)?;
        let _ = writer.join();
        Ok(back)
    });
    result.map_err(|e| std::io::Error::other(e.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_tunnel_between_two_namespaces() {
    if !root("overlay_tunnel_between_two_namespaces") {
        return;
    }
    let pid = std::process::id();
    let a = Netns::new(format!("glov-a-{pid}"));
    let b = Netns::new(format!("glov-b-{pid}"));
    let (va, vb) = (format!("gla{pid}"), format!("glb{pid}"));
    ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
    ip(&["link", "set", &va, "netns", &a.0]);
    ip(&["link", "set", &vb, "netns", &b.0]);
    ip(&["-n", &a.0, "addr", "add", "192.0.2.1/24", "dev", &va]);
    ip(&["-n", &b.0, "addr", "add", "192.0.2.2/24", "dev", &vb]);
    ip(&["-n", &a.0, "link", "set", &va, "up"]);
    ip(&["-n", &b.0, "link", "set", &vb, "up"]);

    let job = job_id("tunnel");
    let plan: JobOverlay = OverlayPool::default()
        .plan(&job, 2, &BTreeSet::new())
        .expect("plan");
    let (ip_a, ip_b) = (plan.addresses[0], plan.addresses[1]);
    let (sock_a, tun_a) = host_side(
        &a.path(),
        "192.0.2.1:0".parse().expect("addr"),
        plan.interface_net(0).expect("rank 0"),
    );
    let (sock_b, tun_b) = host_side(
        &b.path(),
        "192.0.2.2:0".parse().expect("addr"),
        plan.interface_net(1).expect("rank 1"),
    );
    let node_a = OverlayNode::start(sock_a).expect("node a");
    let node_b = OverlayNode::start(sock_b).expect("node b");
    let (keys_a, keys_b) = (JobKeys::generate(), JobKeys::generate());
    let at_a = node_a.local_addr().expect("a addr");
    let at_b = node_b.local_addr().expect("b addr");
    node_a
        .add_job(&job, keys_a.clone(), &[peer(&keys_b, at_b, ip_b)], tun_a)
        .expect("job on a");
    node_b
        .add_job(&job, keys_b, &[peer(&keys_a, at_a, ip_a)], tun_b)
        .expect("job on b");

    // TCP through the overlay: 1 MiB echoed from A's namespace to B's overlay address.
    let port = echo_server(&b.path(), ip_b);
    let payload: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let (ns_a, p) = (a.path(), payload.clone());
    let back =
        tokio::task::spawn_blocking(move || echo_from(&ns_a, SocketAddr::from((ip_b, port)), p))
            .await
            .expect("join")
            .expect("echo through the overlay");
    assert_eq!(back, payload);
    assert_eq!(node_b.drops().not_allowed, 0);

    // Outside allowed_ips: a job address that is no peer, and a foreign subnet routed into
    // the TUN by hand, are both dropped by node A (counted, never sent).
    let stray = plan.subnet.hosts().nth(9).expect("host");
    ip(&[
        "-n",
        &a.0,
        "route",
        "add",
        "100.127.0.0/24",
        "dev",
        OVERLAY_IFNAME,
    ]);
    let before = node_a.drops().no_route;
    netns::run_in(&a.path(), move || {
        let s = UdpSocket::bind("0.0.0.0:0").expect("udp");
        s.send_to(b"stray", (stray, 9)).expect("send stray");
        s.send_to(b"foreign", ("100.127.0.5", 9))
            .expect("send foreign");
        Ok(())
    })
    .expect("send in a");
    let mut dropped = 0;
    for _ in 0..50 {
        dropped = node_a.drops().no_route - before;
        if dropped >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dropped, 2, "both packets outside allowed_ips are dropped");

    // Teardown: removing the job closes the TUN and the interface disappears.
    node_a.remove_job(&job);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let out = Command::new("ip")
        .args(["-n", &a.0, "link", "show", OVERLAY_IFNAME])
        .output()
        .expect("ip link");
    assert!(!out.status.success(), "TUN gone after remove_job");
}

/// `docker rm -f` on drop.
struct Containers(Vec<String>);

impl Drop for Containers {
    fn drop(&mut self) {
        for c in &self.0 {
            let _ = Command::new("docker").args(["rm", "-f", c]).output();
        }
    }
}

fn image(script: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(root.join("scripts").join(script))
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{script}: {e}"));
    assert!(out.status.success(), "scripts/{script} failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_pod_workload_reaches_peer_through_sandbox() {
    use bollard::Docker;
    use bollard::models::{ContainerCreateBody, HostConfig};
    use bollard::query_parameters::{
        CreateContainerOptionsBuilder, LogsOptionsBuilder, WaitContainerOptions,
    };
    use futures::StreamExt;

    if !root("overlay_pod_workload_reaches_peer_through_sandbox") {
        return;
    }
    let docker = Docker::connect_with_local_defaults()
        .expect("overlay pod test needs Docker (bash scripts/ensure-docker.sh)");
    let docker = docker
        .negotiate_version()
        .await
        .expect("Docker Engine running");
    let probe = image("build-probe-image.sh");
    let torch = image("build-torch-image.sh");

    let job = job_id("pod");
    let plan = OverlayPool::default()
        .plan(&job, 2, &BTreeSet::new())
        .expect("plan");
    // Two nodes on this host's loopback, one UDP socket each, each with the overlay as its
    // executor network; the pods have no route but the overlay.
    let node_a =
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("a"));
    let node_b =
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("b"));
    let (keys_a, keys_b) = (JobKeys::generate(), JobKeys::generate());
    let sleep = vec!["sleep".to_string(), "120".to_string()];
    let net_a = OverlayNetwork::new(docker.clone(), node_a.clone(), probe.clone(), sleep.clone());
    let net_b = OverlayNetwork::new(docker.clone(), node_b.clone(), probe.clone(), sleep);
    net_a.prepare(
        &job,
        JobSetup {
            overlay: plan.clone(),
            keys: keys_a.clone(),
            peers: vec![peer(
                &keys_b,
                node_b.local_addr().expect("b"),
                plan.addresses[1],
            )],
        },
    );
    net_b.prepare(
        &job,
        JobSetup {
            overlay: plan.clone(),
            keys: keys_b,
            peers: vec![peer(
                &keys_a,
                node_a.local_addr().expect("a"),
                plan.addresses[0],
            )],
        },
    );
    let mut guard = Containers(vec![
        OverlayNetwork::sandbox_name(&job, 0),
        OverlayNetwork::sandbox_name(&job, 1),
    ]);
    let att_a = net_a.attach(&job, 2, &[0]).await.expect("attach rank 0");
    let att_b = net_b.attach(&job, 2, &[1]).await.expect("attach rank 1");
    assert_eq!(att_a.hosts.interface, OVERLAY_IFNAME);
    assert_eq!(att_b.hosts.hostnames, vec!["rank-0", "rank-1"]);
    let joined = att_a.endpoints.get(&0).expect("rank 0 endpoint").clone();
    assert!(
        net_a.attach(&job, 2, &[0, 1]).await.is_err(),
        "one pod per node"
    );
    let ns_b = pod::sandbox_netns(&docker, &OverlayNetwork::sandbox_name(&job, 1))
        .await
        .expect("netns b");
    let port = echo_server(&ns_b, plan.addresses[1]);

    // The workload joins pod A, keeps cap_drop ALL, and reaches rank-1 by hostname; the host's
    // Docker bridge gateway must be unreachable from inside the pod.
    // Another job's overlay address (a different subnet of the same pool): unreachable too.
    let other = OverlayPool::default()
        .plan(&job_id("pod-other"), 1, &BTreeSet::from([plan.subnet]))
        .expect("other plan")
        .addresses[0];
    assert!(!plan.subnet.contains(&other));
    let script = format!(
        "import socket\n\
         s = socket.create_connection(('rank-1', {port}), 5)\n\
         s.sendall(b'over-the-overlay')\n\
         print('echo:', s.recv(64).decode())\n\
         try:\n    socket.create_connection(('172.17.0.1', 80), 2)\n    print('host reachable')\n\
         except OSError as e:\n    print('host unreachable:', e)\n\
         try:\n    socket.create_connection(('{other}', 80), 2)\n    print('other job reachable')\n\
         except OSError as e:\n    print('other job unreachable:', e)\n"
    );
    let name = format!("ganglion-ovl-{job}-rank-0");
    let body = ContainerCreateBody {
        image: Some(torch),
        cmd: Some(vec!["python3".into(), "-c".into(), script]),
        user: Some("65534:65534".into()),
        host_config: Some(HostConfig {
            network_mode: Some(joined.network_mode.clone()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    docker
        .create_container(
            Some(CreateContainerOptionsBuilder::new().name(&name).build()),
            body,
        )
        .await
        .expect("create workload");
    guard.0.push(name.clone());
    docker
        .start_container(
            &name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .expect("start workload");
    let code = match docker
        .wait_container(&name, None::<WaitContainerOptions>)
        .next()
        .await
    {
        Some(Ok(r)) => r.status_code,
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
        other => panic!("wait: {other:?}"),
    };
    let mut logs = String::new();
    let mut stream = docker.logs(
        &name,
        Some(LogsOptionsBuilder::new().stdout(true).stderr(true).build()),
    );
    while let Some(Ok(chunk)) = stream.next().await {
        logs.push_str(&chunk.to_string());
    }
    assert_eq!(code, 0, "workload exit; logs:\n{logs}");
    assert!(logs.contains("echo: over-the-overlay"), "logs:\n{logs}");
    assert!(logs.contains("host unreachable"), "logs:\n{logs}");
    assert!(logs.contains("other job unreachable"), "logs:\n{logs}");
    assert_eq!(node_b.drops().not_allowed, 0);
    let _ = docker
        .remove_container(
            &name,
            None::<bollard::query_parameters::RemoveContainerOptions>,
        )
        .await;
    net_a.detach(&job).await.expect("detach a");
    net_b.detach(&job).await.expect("detach b");
    for rank in 0..2 {
        let gone = docker
            .inspect_container(
                &OverlayNetwork::sandbox_name(&job, rank),
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .is_err();
        assert!(gone, "sandbox {rank} removed by detach");
    }
}
