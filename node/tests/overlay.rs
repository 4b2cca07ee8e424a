//! The overlay on real kernels (root): two "hosts" as network namespaces joined by a veth
//! underlay, each running a node's userspace WireGuard (boringtun) over one UDP socket and a
//! TUN; then the pod model with Docker sandboxes. Without root these tests print a loud SKIP;
//! as root, missing tools (`ip`, Docker, images) fail them.
//!
//! A binary of its own, apart from `tests/it` (the one integration binary): it needs root and
//! changes the host's network (namespaces, veth, TUNs), so it runs, or is skipped, on its own.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ganglion_dispatch::executor::network::ClusterNetwork;
use ganglion_dispatch::executor::plan::RunId;
use ganglion_dispatch::overlay::addressing::{JobOverlay, OverlayPool};
use ganglion_dispatch::overlay::keys::JobKeys;
use ganglion_dispatch::overlay::netns;
use ganglion_dispatch::overlay::network::{JobSetup, OverlayNetwork};
use ganglion_dispatch::overlay::node::OverlayNode;
use ganglion_dispatch::overlay::pod::{self, OVERLAY_IFNAME};
use ganglion_dispatch::overlay::router::{LinkMode, OverlayPeer};
use ganglion_dispatch::overlay::tun::{self, OVERLAY_MTU, TunDevice};
use ganglion_node::daemon::exchange::ClusterHellos;
use ganglion_p2p::protocols::ClusterResponse;

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

fn job_id(prefix: &str) -> RunId {
    RunId::new(format!("{prefix}-{}", std::process::id())).expect("job id")
}

/// Binds the node socket and creates the addressed TUN inside `ns`.
fn host_side(ns: &Path, bind: SocketAddr, address: ipnet::Ipv4Net) -> (UdpSocket, TunDevice) {
    netns::run_in(ns, move || {
        let socket =
            UdpSocket::bind(bind).map_err(|e| ganglion_dispatch::overlay::OverlayError::Io {
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
        relay: None,
    }
}

/// A one-connection TCP echo server bound inside `ns` on `address`; returns its port.
fn echo_server(ns: &Path, address: Ipv4Addr) -> u16 {
    let listener = netns::run_in(ns, move || {
        TcpListener::bind((address, 0)).map_err(|e| ganglion_dispatch::overlay::OverlayError::Io {
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
        let io = |e| ganglion_dispatch::overlay::OverlayError::Io {
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
    let net_a = OverlayNetwork::new(
        docker.clone(),
        format!("a-{}", std::process::id()),
        node_a.clone(),
        probe.clone(),
        sleep.clone(),
    )
    .with_mtu(1380);
    let net_b = OverlayNetwork::new(
        docker.clone(),
        format!("b-{}", std::process::id()),
        node_b.clone(),
        probe.clone(),
        sleep,
    );
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
    // Together: an attach returns once the job's links work, which needs the other side.
    let (att_a, att_b) = tokio::join!(net_a.attach(&job, 2, &[0]), net_b.attach(&job, 2, &[1]));
    let (att_a, att_b) = (att_a.expect("attach rank 0"), att_b.expect("attach rank 1"));
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
    let ns_a = pod::sandbox_netns(&docker, &OverlayNetwork::sandbox_name(&job, 0))
        .await
        .expect("netns a");
    let mtu_of = |ns: &Path| {
        let out = Command::new("nsenter")
            .arg(format!("--net={}", ns.display()))
            .args(["ip", "-o", "link", "show", OVERLAY_IFNAME])
            .output()
            .expect("nsenter ip");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .skip_while(|w| *w != "mtu")
            .nth(1)
            .map(str::to_string)
    };
    assert_eq!(
        mtu_of(&ns_a).as_deref(),
        Some("1380"),
        "[overlay] mtu applied"
    );
    assert_eq!(mtu_of(&ns_b).as_deref(), Some("1420"), "the default MTU");

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

/// The inode of network namespace `path` (`/proc/<pid>/ns/net`).
fn netns_inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).expect("netns").ino()
}

/// Whether any process on the machine still lives in the network namespace `inode`.
fn netns_in_use(inode: u64) -> bool {
    let want = format!("net:[{inode}]");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .any(|e| {
            std::fs::read_link(e.path().join("ns/net")).is_ok_and(|l| l.to_string_lossy() == want)
        })
}

/// Containers carrying `label` (`key=value`), any state.
fn containers_labelled(label: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={label}")])
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn setup(plan: &JobOverlay, keys: JobKeys, peers: Vec<OverlayPeer>) -> JobSetup {
    JobSetup {
        overlay: plan.clone(),
        keys,
        peers,
    }
}

/// A job whose network cannot form — neither UDP path works (each side's peer endpoint is a
/// port nobody answers on) and the relay is refused (node A's relay node is a swarm that does
/// not serve `/ganglion/overlay-relay/1`; node B has no relay) — never gets past `attach`:
/// both sides fail within the link timeout (an upper bound, not an exact time), naming the rank
/// that could not be reached, so the executor fails the share before any workload container
/// (a set-up failure: no GPU time, nothing billed). Their pods go with `detach`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_attach_fails_within_the_link_timeout_when_no_link_can_form() {
    use ganglion_dispatch::executor::ExecError;

    if !root("overlay_attach_fails_within_the_link_timeout_when_no_link_can_form") {
        return;
    }
    let docker = bollard::Docker::connect_with_local_defaults()
        .expect("overlay test needs Docker (bash scripts/ensure-docker.sh)")
        .negotiate_version()
        .await
        .expect("Docker Engine running");
    let probe = image("build-probe-image.sh");
    let sleep = vec!["sleep".to_string(), "120".to_string()];
    let job = job_id("unformed");
    let _guard = Containers(vec![
        OverlayNetwork::sandbox_name(&job, 0),
        OverlayNetwork::sandbox_name(&job, 1),
    ]);
    let plan = OverlayPool::default()
        .plan(&job, 2, &BTreeSet::new())
        .expect("plan");
    let nodes = [
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("a")),
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("b")),
    ];
    // A's relay: a swarm connected to one that refuses the relay protocol.
    let (relay_a, refusing) = (p2p_node(71).await, p2p_node(72).await);
    relay_a
        .client
        .dial(refusing.addr.clone())
        .await
        .expect("dials");
    let acceptor = nodes[0]
        .set_relay(relay_a.client.streams(), Duration::from_secs(1))
        .expect("relay");
    let _relay = tokio::spawn(acceptor.run());
    let nowhere: SocketAddr = "127.0.0.1:9".parse().expect("addr");
    let keys = [JobKeys::generate(), JobKeys::generate()];
    let link_timeout = Duration::from_secs(4);
    let nets: Vec<OverlayNetwork> = (0..2)
        .map(|side| {
            let net = OverlayNetwork::new(
                docker.clone(),
                format!("unformed-{side}-{}", std::process::id()),
                nodes[side].clone(),
                probe.clone(),
                sleep.clone(),
            )
            .with_link_timeout(link_timeout);
            let mut p = peer(&keys[1 - side], nowhere, plan.addresses[1 - side]);
            p.relay = (side == 0).then_some(refusing.peer);
            net.prepare(&job, setup(&plan, keys[side].clone(), vec![p]));
            net
        })
        .collect();
    let started = std::time::Instant::now();
    let (a, b) = tokio::join!(nets[0].attach(&job, 2, &[0]), nets[1].attach(&job, 2, &[1]));
    let took = started.elapsed();
    for (side, result) in [a, b].into_iter().enumerate() {
        let err = result
            .err()
            .unwrap_or_else(|| panic!("side {side} attached"));
        assert!(
            matches!(&err, ExecError::LinksDown { unreachable, .. } if *unreachable == [1 - side as u32]),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("did not form within 4 s")
                && text.contains(&format!("rank {}", 1 - side)),
            "{text}"
        );
    }
    assert!(
        nodes[0].links(&job).iter().all(|l| !l.established),
        "{:?}",
        nodes[0].links(&job)
    );
    assert!(took < link_timeout + Duration::from_secs(20), "{took:?}");
    for net in &nets {
        net.detach(&job).await.expect("detach");
    }
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

/// Pods of a job whose node crashed (dropped without `detach`) stay behind: sandboxes, a
/// workload joined to one, and their namespaces. A restarted node's sweep removes all of them
/// and leaves the pods of a job it still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_sweep_removes_orphaned_pods_after_a_crash() {
    use ganglion_dispatch::overlay::network::SANDBOX_LABEL;

    if !root("overlay_sweep_removes_orphaned_pods_after_a_crash") {
        return;
    }
    let docker = bollard::Docker::connect_with_local_defaults()
        .expect("overlay sweep test needs Docker (bash scripts/ensure-docker.sh)")
        .negotiate_version()
        .await
        .expect("Docker Engine running");
    let probe = image("build-probe-image.sh");
    let sleep = vec!["sleep".to_string(), "120".to_string()];
    let (orphan, kept) = (job_id("sweep-orphan"), job_id("sweep-kept"));
    let mut guard = Containers(vec![
        OverlayNetwork::sandbox_name(&orphan, 0),
        OverlayNetwork::sandbox_name(&orphan, 1),
        OverlayNetwork::sandbox_name(&kept, 0),
    ]);
    let plan = OverlayPool::default()
        .plan(&orphan, 2, &BTreeSet::new())
        .expect("plan");
    let kept_plan = OverlayPool::default()
        .plan(&kept, 1, &BTreeSet::from([plan.subnet]))
        .expect("kept plan");

    let mut namespaces = Vec::new();
    {
        let node_a =
            Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("a"));
        let node_b =
            Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("b"));
        let (keys_a, keys_b) = (JobKeys::generate(), JobKeys::generate());
        let net_a = OverlayNetwork::new(
            docker.clone(),
            format!("sweep-a-{}", std::process::id()),
            node_a.clone(),
            probe.clone(),
            sleep.clone(),
        );
        let net_b = OverlayNetwork::new(
            docker.clone(),
            format!("sweep-b-{}", std::process::id()),
            node_b.clone(),
            probe.clone(),
            sleep.clone(),
        );
        let at_a = node_a.local_addr().expect("a");
        let at_b = node_b.local_addr().expect("b");
        net_a.prepare(
            &orphan,
            setup(
                &plan,
                keys_a.clone(),
                vec![peer(&keys_b, at_b, plan.addresses[1])],
            ),
        );
        net_b.prepare(
            &orphan,
            setup(&plan, keys_b, vec![peer(&keys_a, at_a, plan.addresses[0])]),
        );
        net_a.prepare(&kept, setup(&kept_plan, JobKeys::generate(), vec![]));
        let (joined, b) = tokio::join!(
            net_a.attach(&orphan, 2, &[0]),
            net_b.attach(&orphan, 2, &[1])
        );
        let joined = joined.expect("attach 0");
        b.expect("attach 1");
        net_a.attach(&kept, 1, &[0]).await.expect("attach kept");
        for rank in 0..2 {
            let ns = pod::sandbox_netns(&docker, &OverlayNetwork::sandbox_name(&orphan, rank))
                .await
                .expect("sandbox netns");
            namespaces.push(netns_inode(&ns));
        }
        // A workload joined to rank 0's sandbox: it keeps the namespace alive on its own.
        let workload = format!("ganglion-{orphan}-workload-0");
        guard.0.push(workload.clone());
        let mode = &joined.endpoints[&0].network_mode;
        let status = Command::new("docker")
            .args([
                "run",
                "-d",
                "--name",
                &workload,
                "--network",
                mode,
                "--cap-drop",
                "ALL",
            ])
            .arg(&probe)
            .args(["sleep", "120"])
            .output()
            .expect("docker run");
        assert!(status.status.success(), "workload: {status:?}");
        // Crash: the nodes and networks go without detach.
    }
    let left = containers_labelled(&format!("{SANDBOX_LABEL}={orphan}"));
    assert_eq!(left.len(), 2, "the crash leaves both sandboxes behind");
    assert!(namespaces.iter().all(|ns| netns_in_use(*ns)));

    // The restarted node A (same owner id): new UDP socket, same engine; it still runs `kept`.
    // Node B's orphaned pod is B's to sweep: A's sweep must leave it.
    let node =
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("n"));
    let net_probe = probe.clone();
    let net = OverlayNetwork::new(
        docker.clone(),
        format!("sweep-a-{}", std::process::id()),
        node,
        probe,
        sleep,
    );
    let report = net
        .sweep_orphans(&BTreeSet::from([kept.clone()]))
        .await
        .expect("sweep");
    assert!(report.jobs.contains(orphan.as_str()), "{report:?}");
    assert!(!report.jobs.contains(kept.as_str()), "{report:?}");
    assert_eq!(report.workloads.len(), 1, "{report:?}");
    assert_eq!(report.sandboxes.len(), 1, "{report:?}");
    assert_eq!(
        containers_labelled(&format!("{SANDBOX_LABEL}={orphan}")).len(),
        1,
        "node B's pod is not node A's to sweep"
    );
    let node_b =
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("b"));
    let net_b = OverlayNetwork::new(
        docker.clone(),
        format!("sweep-b-{}", std::process::id()),
        node_b,
        net_probe.clone(),
        vec!["sleep".into(), "1".into()],
    );
    let report_b = net_b
        .sweep_orphans(&BTreeSet::new())
        .await
        .expect("sweep b");
    assert_eq!(report_b.sandboxes.len(), 1, "{report_b:?}");
    assert!(report_b.workloads.is_empty(), "{report_b:?}");
    assert!(containers_labelled(&format!("{SANDBOX_LABEL}={orphan}")).is_empty());
    let workload_left = Command::new("docker")
        .args(["inspect", &format!("ganglion-{orphan}-workload-0")])
        .output()
        .expect("docker inspect");
    assert!(!workload_left.status.success(), "joined workload removed");
    for ns in &namespaces {
        let mut gone = false;
        for _ in 0..50 {
            if !netns_in_use(*ns) {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "namespace net:[{ns}] (and its TUN) is gone");
    }
    assert_eq!(
        containers_labelled(&format!("{SANDBOX_LABEL}={kept}")).len(),
        1,
        "the job still running keeps its pod"
    );
    let again = net
        .sweep_orphans(&BTreeSet::from([kept.clone()]))
        .await
        .expect("sweep again");
    assert!(again.jobs.is_empty(), "idempotent: {again:?}");
    net.detach(&kept).await.expect("detach kept");
    assert!(containers_labelled(&format!("{SANDBOX_LABEL}={kept}")).is_empty());
}

/// A TCP echo server inside `ns` on `address`, serving any number of connections; its port.
fn echo_listener(ns: &Path, address: Ipv4Addr) -> u16 {
    let listener = netns::run_in(ns, move || {
        TcpListener::bind((address, 0)).map_err(|e| ganglion_dispatch::overlay::OverlayError::Io {
            operation: "listen",
            source: e,
        })
    })
    .expect("listener in namespace");
    let port = listener.local_addr().expect("port").port();
    std::thread::spawn(move || serve_echo(listener));
    port
}

fn serve_echo(listener: TcpListener) {
    for mut s in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
    }
}

/// The host's IPv4 addresses outside loopback (its LAN and Docker bridge gateways).
fn host_addresses() -> Vec<Ipv4Addr> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .expect("ip addr");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let cidr = l.split_whitespace().skip_while(|w| *w != "inet").nth(1)?;
            cidr.split('/').next()?.parse().ok()
        })
        .collect()
}

/// Runs a workload joined to `mode` (`container:<sandbox>`) as an unprivileged user with every
/// capability dropped; it tries TCP to each `label=host:port` target and prints `label open`
/// (echo came back) or `label blocked:<error>`. Returns label → result.
async fn probe_targets(
    docker: &bollard::Docker,
    guard: &mut Containers,
    name: String,
    image: &str,
    mode: &str,
    targets: &[(String, Ipv4Addr, u16)],
) -> std::collections::HashMap<String, String> {
    let script = "import errno, socket, sys\n\
        for t in sys.argv[1:]:\n\
        \x20   label, rest = t.split('=')\n\
        \x20   host, port = rest.rsplit(':', 1)\n\
        \x20   try:\n\
        \x20       s = socket.create_connection((host, int(port)), 2)\n\
        \x20       s.sendall(b'ping')\n\
        \x20       print(label, 'open' if s.recv(4) == b'ping' else 'closed', flush=True)\n\
        \x20   except OSError as e:\n\
        \x20       print(label, 'blocked:' + errno.errorcode.get(e.errno, type(e).__name__), flush=True)\n";
    let mut args = vec![
        "run".to_string(),
        "--name".into(),
        name.clone(),
        "--network".into(),
        mode.into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--user".into(),
        "65534:65534".into(),
        image.into(),
        "python3".into(),
        "-c".into(),
        script.into(),
    ];
    args.extend(targets.iter().map(|(l, h, p)| format!("{l}={h}:{p}")));
    guard.0.push(name.clone());
    let out = tokio::task::spawn_blocking(move || Command::new("docker").args(&args).output())
        .await
        .expect("join")
        .expect("docker run");
    let logs = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "workload {name}: {logs}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = docker;
    logs.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Two full jobs, each with a pod on each of two nodes: a workload of either job reaches its
/// own peer rank through the overlay, but neither pod of the other job (listening on its
/// overlay address) nor any of the host's addresses (listening on all of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_isolation_between_two_jobs() {
    if !root("overlay_isolation_between_two_jobs") {
        return;
    }
    let docker = bollard::Docker::connect_with_local_defaults()
        .expect("overlay isolation test needs Docker (bash scripts/ensure-docker.sh)")
        .negotiate_version()
        .await
        .expect("Docker Engine running");
    let probe = image("build-probe-image.sh");
    let torch = image("build-torch-image.sh");
    let sleep = vec!["sleep".to_string(), "120".to_string()];
    let (job_a, job_b) = (job_id("iso-a"), job_id("iso-b"));
    let mut guard = Containers(
        [&job_a, &job_b]
            .iter()
            .flat_map(|j| (0..2).map(|r| OverlayNetwork::sandbox_name(j, r)))
            .collect(),
    );
    let pool = OverlayPool::default();
    let plan_a = pool.plan(&job_a, 2, &BTreeSet::new()).expect("plan a");
    let plan_b = pool
        .plan(&job_b, 2, &BTreeSet::from([plan_a.subnet]))
        .expect("plan b");

    // Two provider nodes, each running one pod of each job.
    let node_1 =
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("1"));
    let node_2 =
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("2"));
    let net_1 = OverlayNetwork::new(
        docker.clone(),
        format!("1-{}", std::process::id()),
        node_1.clone(),
        probe.clone(),
        sleep.clone(),
    );
    let net_2 = OverlayNetwork::new(
        docker.clone(),
        format!("2-{}", std::process::id()),
        node_2.clone(),
        probe.clone(),
        sleep,
    );
    let (at_1, at_2) = (
        node_1.local_addr().expect("1"),
        node_2.local_addr().expect("2"),
    );
    for (job, plan) in [(&job_a, &plan_a), (&job_b, &plan_b)] {
        let (k1, k2) = (JobKeys::generate(), JobKeys::generate());
        net_1.prepare(
            job,
            setup(plan, k1.clone(), vec![peer(&k2, at_2, plan.addresses[1])]),
        );
        net_2.prepare(
            job,
            setup(plan, k2, vec![peer(&k1, at_1, plan.addresses[0])]),
        );
    }
    let mut modes = Vec::new();
    for job in [&job_a, &job_b] {
        let (att, two) = tokio::join!(net_1.attach(job, 2, &[0]), net_2.attach(job, 2, &[1]));
        let att = att.expect("attach rank 0");
        two.expect("attach rank 1");
        modes.push(att.endpoints[&0].network_mode.clone());
    }
    // Echo servers on every pod's overlay address and on all of the host's addresses.
    let mut ports = std::collections::HashMap::new();
    for (job, plan) in [(&job_a, &plan_a), (&job_b, &plan_b)] {
        for rank in 0..2u32 {
            let ns = pod::sandbox_netns(&docker, &OverlayNetwork::sandbox_name(job, rank))
                .await
                .expect("netns");
            let ip = plan.addresses[rank as usize];
            ports.insert(ip, echo_listener(&ns, ip));
        }
    }
    let host = TcpListener::bind("0.0.0.0:0").expect("host listener");
    let host_port = host.local_addr().expect("port").port();
    std::thread::spawn(move || serve_echo(host));
    let hosts = host_addresses();
    assert!(!hosts.is_empty(), "the host has global addresses");
    for h in &hosts {
        // Control: the listener is reachable from the host itself on each address.
        TcpStream::connect_timeout(&SocketAddr::from((*h, host_port)), Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("host listener on {h}: {e}"));
    }

    for (i, (own, other)) in [(&plan_a, &plan_b), (&plan_b, &plan_a)]
        .into_iter()
        .enumerate()
    {
        let mut targets = vec![(
            "peer".to_string(),
            own.addresses[1],
            ports[&own.addresses[1]],
        )];
        for rank in 0..2 {
            let ip = other.addresses[rank];
            targets.push((format!("other-job-rank-{rank}"), ip, ports[&ip]));
        }
        for (n, h) in hosts.iter().enumerate() {
            targets.push((format!("host-{n}"), *h, host_port));
        }
        let name = format!("ganglion-iso-{}-{i}", std::process::id());
        let results = probe_targets(&docker, &mut guard, name, &torch, &modes[i], &targets).await;
        eprintln!("job {i}: {results:?} (hosts {hosts:?})");
        assert_eq!(
            results.get("peer").map(String::as_str),
            Some("open"),
            "{results:?}"
        );
        for (label, ..) in &targets[1..] {
            let r = results.get(label).map(String::as_str).unwrap_or("missing");
            assert!(
                r.starts_with("blocked:"),
                "{label} must be unreachable: {results:?}"
            );
        }
    }
    assert_eq!(node_1.drops().not_allowed + node_2.drops().not_allowed, 0);

    // Even with a route into the overlay (added by root; the workload cannot, it has no
    // CAP_NET_ADMIN), job A's node carries nothing to job B: outside A's allowed_ips.
    let ns_a0 = pod::sandbox_netns(&docker, &OverlayNetwork::sandbox_name(&job_a, 0))
        .await
        .expect("netns a0");
    let routed = Command::new("nsenter")
        .arg(format!("--net={}", ns_a0.display()))
        .args([
            "ip",
            "route",
            "add",
            &plan_b.subnet.to_string(),
            "dev",
            OVERLAY_IFNAME,
        ])
        .status()
        .expect("nsenter");
    assert!(routed.success(), "route into the overlay");
    let before = node_1.drops().no_route;
    let targets: Vec<_> = (0..2)
        .map(|r| {
            let ip = plan_b.addresses[r];
            (format!("other-job-rank-{r}"), ip, ports[&ip])
        })
        .collect();
    let name = format!("ganglion-iso-{}-routed", std::process::id());
    let results = probe_targets(&docker, &mut guard, name, &torch, &modes[0], &targets).await;
    eprintln!("job 0 with a route to job 1: {results:?}");
    for (label, ..) in &targets {
        let r = results.get(label).map(String::as_str).unwrap_or("missing");
        assert!(
            r.starts_with("blocked:"),
            "{label} must stay unreachable: {results:?}"
        );
    }
    assert!(
        node_1.drops().no_route > before,
        "node 1 dropped the SYNs outside job A's allowed_ips"
    );
    for job in [&job_a, &job_b] {
        net_1.detach(job).await.expect("detach 1");
        net_2.detach(job).await.expect("detach 2");
    }
}

/// A p2p node on loopback TCP (port 0) with no bonds: enough for the `cluster` protocol. Its
/// inbound cluster hellos are answered from `hellos`, as a provider's job engine answers them
/// through its overlay set-up.
struct P2pNode {
    client: ganglion_p2p::Client,
    /// What this node announced (`exchange::exchange` registers there).
    hellos: Arc<ClusterHellos>,
    /// Every inbound hello's sender and the answer it got.
    answered: Arc<std::sync::Mutex<Vec<(libp2p::PeerId, ClusterResponse)>>>,
    peer: libp2p::PeerId,
    addr: libp2p::Multiaddr,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for P2pNode {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn p2p_node(seed: u8) -> P2pNode {
    use ganglion_p2p::{self as p2p, Config, offers::BondSnapshot};
    let key = libp2p::identity::Keypair::ed25519_from_bytes([seed; 32]).expect("32-byte seed");
    let peer = key.public().to_peer_id();
    let config = Config {
        listen: vec![],
        ..Config::default()
    };
    let (client, event_loop, events, mut inbound) =
        p2p::new(key, config, BondSnapshot::default()).expect("swarm builds");
    let task = tokio::spawn(event_loop.run());
    tokio::spawn(p2p::log_events(events));
    let hellos = Arc::new(ClusterHellos::default());
    let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let serve = tokio::spawn({
        let (client, hellos, answered) = (client.clone(), hellos.clone(), answered.clone());
        async move {
            while let Some(request) = inbound.recv().await {
                if let p2p::inbound::Inbound::Cluster {
                    peer,
                    request,
                    responder,
                } = request
                {
                    let answer = hellos.answer(peer, &request);
                    answered.lock().expect("lock").push((peer, answer.clone()));
                    let _ = client.respond_cluster(responder, answer).await;
                }
            }
        }
    });
    let addr = client
        .listen("/ip4/127.0.0.1/tcp/0".parse().expect("multiaddr"))
        .await
        .expect("listens")
        .with(libp2p::multiaddr::Protocol::P2p(peer));
    P2pNode {
        client,
        hellos,
        answered,
        peer,
        addr,
        tasks: [task, serve],
    }
}

/// Waits (10 s at most) until some connected peer has told `node` its observed address.
async fn observed(node: &P2pNode) -> Vec<libp2p::Multiaddr> {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let seen = node.client.observed_addrs().await.expect("p2p alive");
            if !seen.is_empty() {
                return seen.into_iter().map(|(_, a)| a).collect::<Vec<_>>();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("identify reported an observed address")
}

/// The overlay's keys, addresses and endpoint candidates travel over the p2p `cluster`
/// protocol between two swarms assigned to a job; a third swarm, not assigned, is refused and
/// never learns a key. As root, the exchanged peers then carry TCP between two namespaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_keys_exchanged_over_p2p_cluster_protocol() {
    use ganglion_contracts::v2::datum::JobId as ChainJobId;
    use ganglion_node::daemon::exchange;

    let (a, b, c) = (p2p_node(71).await, p2p_node(72).await, p2p_node(73).await);
    b.client.dial(a.addr.clone()).await.expect("b dials a");
    c.client.dial(a.addr.clone()).await.expect("c dials a");
    let (seen_a, seen_b) = (observed(&a).await, observed(&b).await);

    let chain_job = ChainJobId([0x42; 32]);
    let job = job_id("xchg");
    let plan = OverlayPool::default()
        .plan(&job, 2, &BTreeSet::new())
        .expect("plan");
    // WireGuard sockets on every loopback address; each announces 127.0.0.2 as its LAN
    // address, so the observed mapping (127.0.0.1, from identify) is a distinct candidate.
    let sock_a = UdpSocket::bind("0.0.0.0:0").expect("udp a");
    let sock_b = UdpSocket::bind("0.0.0.0:0").expect("udp b");
    let lan = |s: &UdpSocket| SocketAddr::from(([127, 0, 0, 2], s.local_addr().expect("a").port()));
    let cand_a = exchange::candidates(&[lan(&sock_a)], seen_a);
    let cand_b = exchange::candidates(&[lan(&sock_b)], seen_b);
    assert_eq!(cand_a.len(), 2, "LAN + observed: {cand_a:?}");
    assert_eq!(
        cand_a[1],
        SocketAddr::from(([127, 0, 0, 1], lan(&sock_a).port()))
    );
    let (keys_a, keys_b) = (JobKeys::generate(), JobKeys::generate());
    let hello_a = exchange::hello(chain_job, &keys_a, &[plan.addresses[0]], &cand_a);
    let hello_b = exchange::hello(chain_job, &keys_b, &[plan.addresses[1]], &cand_b);

    let timeout = Duration::from_secs(20);
    let (only_b, only_a) = ([b.peer], [a.peer]);
    let (got_a, got_b) = tokio::join!(
        exchange::exchange(&a.client, &a.hellos, hello_a.clone(), &only_b, timeout),
        exchange::exchange(&b.client, &b.hellos, hello_b.clone(), &only_a, timeout),
    );
    let (got_a, got_b) = (got_a.expect("a's exchange"), got_b.expect("b's exchange"));
    assert_eq!(got_a.get(&b.peer), Some(&hello_b));
    assert_eq!(got_b.get(&a.peer), Some(&hello_a));

    // C is connected to A but not assigned to the job: refused, both raw and via exchange().
    let hello_c = exchange::hello(
        chain_job,
        &JobKeys::generate(),
        &[plan.addresses[1]],
        &cand_b,
    );
    assert_eq!(
        c.client
            .cluster_hello(a.peer, hello_c.clone())
            .await
            .expect("answer"),
        ClusterResponse::NotAssigned
    );
    let err = exchange::exchange(&c.client, &c.hellos, hello_c, &[a.peer], timeout)
        .await
        .expect_err("not assigned");
    assert!(err.to_string().contains("not assigned"), "{err}");
    let answered = a.answered.lock().expect("lock").clone();
    let hellos_to = |peer| {
        answered
            .iter()
            .filter(|(p, r)| *p == peer && matches!(r, ClusterResponse::Hello(_)))
            .count()
    };
    assert_eq!(hellos_to(c.peer), 0, "A never gives C its hello");
    assert!(hellos_to(b.peer) >= 1, "A gave B its hello");

    // A knows no shared LAN (takes B's observed mapping); B shares 127/8 (takes A's LAN one).
    let peer_b = exchange::learn_peer(
        &got_a[&b.peer],
        chain_job,
        &plan,
        &[plan.addresses[0]],
        &[],
        Some(25),
    )
    .expect("b's hello is valid");
    let peer_a = exchange::learn_peer(
        &got_b[&a.peer],
        chain_job,
        &plan,
        &[plan.addresses[1]],
        &["127.0.0.0/8".parse().expect("net")],
        Some(25),
    )
    .expect("a's hello is valid");
    assert_eq!(peer_b.peer.endpoint, cand_b[1]);
    assert_eq!(peer_a.peer.endpoint, cand_a[0]);
    assert_eq!(peer_b.peer.public.as_bytes(), keys_b.public().as_bytes());

    if !root("overlay_keys_exchanged_over_p2p_cluster_protocol (tunnel part)") {
        return;
    }
    let pid = std::process::id();
    let ns_a = Netns::new(format!("glxa-{pid}"));
    let ns_b = Netns::new(format!("glxb-{pid}"));
    let tun_in = |ns: &Netns, rank: u32| {
        let net = plan.interface_net(rank).expect("rank");
        netns::run_in(&ns.path(), move || {
            let dev = TunDevice::create(OVERLAY_IFNAME)?;
            tun::configure(dev.name(), net, OVERLAY_MTU)?;
            Ok(dev)
        })
        .expect("TUN in namespace")
    };
    let (tun_a, tun_b) = (tun_in(&ns_a, 0), tun_in(&ns_b, 1));
    let node_a = OverlayNode::start(sock_a).expect("node a");
    let node_b = OverlayNode::start(sock_b).expect("node b");
    node_a
        .add_job(&job, keys_a, &[peer_b.peer], tun_a)
        .expect("job on a");
    node_b
        .add_job(&job, keys_b, &[peer_a.peer], tun_b)
        .expect("job on b");
    let port = echo_server(&ns_b.path(), plan.addresses[1]);
    let payload: Vec<u8> = (0..256 * 1024).map(|i: u32| (i % 253) as u8).collect();
    let (path_a, p, ip_b) = (ns_a.path(), payload.clone(), plan.addresses[1]);
    let back =
        tokio::task::spawn_blocking(move || echo_from(&path_a, SocketAddr::from((ip_b, port)), p))
            .await
            .expect("join")
            .expect("echo through the overlay built from the exchange");
    assert_eq!(back, payload);
    for (name, node) in [("a", &node_a), ("b", &node_b)] {
        let links = node.links(&job);
        assert_eq!(links.len(), 1, "{name}: {links:?}");
        assert_eq!(links[0].mode, LinkMode::Direct, "{name}: UDP works here");
    }
}

/// Runs `cmd` inside the network namespace at `ns` (`/run/netns/<name>` or
/// `/proc/<pid>/ns/net`) through nsenter; panics with the output when it fails.
fn run_in_ns(ns: &Path, cmd: &[&str]) {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", ns.display()))
        .args(cmd)
        .output()
        .unwrap_or_else(|e| panic!("nsenter (util-linux) needed as root: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} in {}: {}",
        ns.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two provider sites, each a router namespace doing MASQUERADE onto a shared "public" bridge
/// (10.77.0.0/24) and dropping unsolicited inbound packets, with a LAN behind it
/// (192.168.10.0/24, 192.168.20.0/24); a host (a named namespace or a container's) is plugged
/// into each LAN as `.2`. Everything is deleted on drop.
struct NatWorld {
    tag: String,
    _public: Netns,
    routers: [Netns; 2],
}

impl NatWorld {
    fn public_ip(side: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, 0, 2 + side as u8)
    }
    fn lan_ip(side: usize) -> Ipv4Addr {
        Ipv4Addr::new(192, 168, 10 + 10 * side as u8, 2)
    }
    fn lan_net(side: usize) -> ipnet::Ipv4Net {
        ipnet::Ipv4Net::new_assert(Ipv4Addr::new(192, 168, 10 + 10 * side as u8, 0), 24)
    }

    fn new(tag: &str) -> Self {
        let public = Netns::new(format!("{tag}-pub"));
        let routers = [
            Netns::new(format!("{tag}-ra")),
            Netns::new(format!("{tag}-rb")),
        ];
        ip(&["-n", &public.0, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &public.0, "addr", "add", "10.77.0.1/24", "dev", "br0"]);
        ip(&["-n", &public.0, "link", "set", "br0", "up"]);
        for (side, r) in routers.iter().enumerate() {
            let (p, b) = (format!("{tag}p{side}"), format!("{tag}b{side}"));
            let (l, h) = (format!("{tag}l{side}"), format!("{tag}h{side}"));
            ip(&["link", "add", &p, "type", "veth", "peer", "name", &b]);
            ip(&["link", "set", &p, "netns", &r.0]);
            ip(&["link", "set", &b, "netns", &public.0]);
            ip(&["-n", &public.0, "link", "set", &b, "master", "br0", "up"]);
            let public_ip = format!("{}/24", Self::public_ip(side));
            ip(&["-n", &r.0, "addr", "add", &public_ip, "dev", &p]);
            ip(&["-n", &r.0, "link", "set", &p, "up"]);
            ip(&["link", "add", &l, "type", "veth", "peer", "name", &h]);
            ip(&["link", "set", &l, "netns", &r.0]);
            let gw = format!("192.168.{}.1/24", 10 + 10 * side);
            ip(&["-n", &r.0, "addr", "add", &gw, "dev", &l]);
            ip(&["-n", &r.0, "link", "set", &l, "up"]);
            let ns = r.path();
            run_in_ns(&ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
            run_in_ns(
                &ns,
                &[
                    "iptables",
                    "-t",
                    "nat",
                    "-A",
                    "POSTROUTING",
                    "-o",
                    &p,
                    "-j",
                    "MASQUERADE",
                ],
            );
            // Like a home router: unsolicited inbound is dropped (not answered), to the router
            // itself and forwarded alike, unless a port forward (DNAT) asked for it.
            run_in_ns(
                &ns,
                &[
                    "iptables",
                    "-A",
                    "INPUT",
                    "-i",
                    &p,
                    "-m",
                    "conntrack",
                    "--ctstate",
                    "NEW,INVALID",
                    "-j",
                    "DROP",
                ],
            );
            run_in_ns(
                &ns,
                &[
                    "iptables",
                    "-A",
                    "FORWARD",
                    "-i",
                    &p,
                    "-m",
                    "conntrack",
                    "--ctstate",
                    "NEW,INVALID",
                    "-m",
                    "conntrack",
                    "!",
                    "--ctstate",
                    "DNAT",
                    "-j",
                    "DROP",
                ],
            );
        }
        Self {
            tag: tag.to_string(),
            _public: public,
            routers,
        }
    }

    /// Moves side `side`'s LAN cable into `target` (`ip link set … netns` takes a namespace
    /// name or a PID) as `lan0` with address `.2` and a default route through the router.
    fn plug(&self, side: usize, target: &str, ns: &Path) {
        let h = format!("{}h{side}", self.tag);
        ip(&["link", "set", &h, "netns", target]);
        run_in_ns(ns, &["ip", "link", "set", &h, "name", "lan0"]);
        let addr = format!("{}/24", Self::lan_ip(side));
        run_in_ns(ns, &["ip", "addr", "add", &addr, "dev", "lan0"]);
        run_in_ns(ns, &["ip", "link", "set", "lan0", "up"]);
        run_in_ns(ns, &["ip", "link", "set", "lo", "up"]);
        let gw = format!("192.168.{}.1", 10 + 10 * side);
        run_in_ns(ns, &["ip", "route", "add", "default", "via", &gw]);
    }

    /// Port forward on side `side`'s router: TCP `port` on its public address to the LAN host.
    fn forward_tcp(&self, side: usize, port: u16) {
        let to = format!("{}:{port}", Self::lan_ip(side));
        let p = format!("{}p{side}", self.tag);
        run_in_ns(
            &self.routers[side].path(),
            &[
                "iptables",
                "-t",
                "nat",
                "-A",
                "PREROUTING",
                "-i",
                &p,
                "-p",
                "tcp",
                "--dport",
                &port.to_string(),
                "-j",
                "DNAT",
                "--to-destination",
                &to,
            ],
        );
    }

    /// Packets MASQUERADE rewrote on side `side` (from `iptables -t nat -L -v -x`).
    fn masqueraded(&self, side: usize) -> u64 {
        let out = Command::new("nsenter")
            .arg(format!("--net={}", self.routers[side].path().display()))
            .args([
                "iptables",
                "-t",
                "nat",
                "-L",
                "POSTROUTING",
                "-v",
                "-n",
                "-x",
            ])
            .output()
            .expect("iptables");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("MASQUERADE"))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }
}

const MASTER_PORT: u16 = 29500;

/// Runs `ddp_train.py` (from the checkout, read-only) in the torch image as rank `rank` of 2,
/// joined to network `mode`, with `env`; returns the container name (started, detached).
fn start_ddp_rank(
    guard: &mut Containers,
    name: String,
    torch: &str,
    mode: &str,
    rank: u32,
    env: &[(&str, String)],
) {
    start_ddp_node(guard, name, torch, mode, rank, 1, env);
}

/// Node rank `rank` of a 2-node job with `per_node` processes in its container, each with the
/// torch env (`RANK` = `rank * per_node + local rank`, `WORLD_SIZE` = `2 * per_node`). (The
/// image's `torch.distributed.run`, torch 1.13 on Python 3.11, fails in its own argument
/// handling, so a shell starts the processes; the container fails if any process does.)
fn start_ddp_node(
    guard: &mut Containers,
    name: String,
    torch: &str,
    mode: &str,
    rank: u32,
    per_node: u32,
    env: &[(&str, String)],
) {
    let workloads = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workloads");
    let mut args = vec![
        "run".to_string(),
        "-d".into(),
        "--name".into(),
        name.clone(),
        "--network".into(),
        mode.into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--user".into(),
        "65534:65534".into(),
        "-v".into(),
        format!("{}:/workloads:ro", workloads.display()),
    ];
    let mut all: Vec<(&str, String)> = vec![
        ("MASTER_PORT", MASTER_PORT.to_string()),
        ("WORLD_SIZE", (2 * per_node).to_string()),
        ("OUT_DIR", "/tmp/out".into()),
        ("HOME", "/tmp".into()),
        ("TRAIN_EPOCHS", "2".into()),
        ("TRAIN_SAMPLES", "1024".into()),
    ];
    all.extend(env.iter().cloned());
    for (k, v) in all {
        args.push("-e".into());
        args.push(format!("{k}={v}"));
    }
    args.push(torch.to_string());
    let launch: Vec<String> = (0..per_node)
        .map(|local| {
            format!(
                "RANK={} LOCAL_RANK={local} python3 /workloads/ddp_train.py & p{local}=$!",
                rank * per_node + local
            )
        })
        .collect();
    let wait: Vec<String> = (0..per_node)
        .map(|local| format!("wait $p{local} || rc=1"))
        .collect();
    args.extend([
        "sh".to_string(),
        "-c".into(),
        format!("rc=0; {}; {}; exit $rc", launch.join("; "), wait.join("; ")),
    ]);
    guard.0.push(name.clone());
    let out = Command::new("docker")
        .args(&args)
        .output()
        .expect("docker run");
    assert!(
        out.status.success(),
        "start {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits for container `name` (at most `limit_s`, then kills it); its exit code (None when
/// killed) and logs.
async fn finish(name: String, limit_s: u32) -> (Option<i64>, String) {
    tokio::task::spawn_blocking(move || {
        let waited = Command::new("timeout")
            .args([&limit_s.to_string(), "docker", "wait", &name])
            .output()
            .expect("docker wait");
        let code = String::from_utf8_lossy(&waited.stdout).trim().parse().ok();
        let _ = Command::new("docker").args(["kill", &name]).output();
        let logs = Command::new("docker")
            .args(["logs", &name])
            .output()
            .expect("docker logs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&logs.stdout),
            String::from_utf8_lossy(&logs.stderr)
        );
        (code.filter(|_| waited.status.success()), text)
    })
    .await
    .expect("join")
}

/// Every `checksum=<hex>` the ranks in `logs` printed.
fn checksums(logs: &str) -> Vec<String> {
    logs.lines()
        .filter_map(|l| l.split("checksum=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Two provider "hosts" as namespaces, each behind its own NAT; a 2-rank DDP job (torch, gloo)
/// trains across them through the overlay: the job's pods (on this host's engine, network
/// `none`) have no route but the overlay, whose datagrams leave each host through its NAT.
/// Both ranks end with the same checksum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_ddp_across_two_natted_hosts() {
    if !root("overlay_ddp_across_two_natted_hosts") {
        return;
    }
    ddp_across_nat("gn", 1).await;
}

/// The same with 4 ranks (2 + 2): each pod runs two processes under `torch.distributed.run`;
/// all four end with the same checksum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_ddp_4_ranks_2_plus_2_across_two_natted_hosts() {
    if !root("overlay_ddp_4_ranks_2_plus_2_across_two_natted_hosts") {
        return;
    }
    ddp_across_nat("go", 2).await;
}

async fn ddp_across_nat(prefix: &str, per_node: u32) {
    use ganglion_contracts::v2::datum::JobId as ChainJobId;
    use ganglion_node::daemon::exchange;

    let docker = bollard::Docker::connect_with_local_defaults()
        .expect("needs Docker (bash scripts/ensure-docker.sh)")
        .negotiate_version()
        .await
        .expect("Docker Engine running");
    let probe = image("build-probe-image.sh");
    let torch = image("build-torch-image.sh");
    let pid = std::process::id();
    let tag = format!("{prefix}{}", pid % 100_000);
    let world = NatWorld::new(&tag);
    let hosts = [
        Netns::new(format!("{tag}-ha")),
        Netns::new(format!("{tag}-hb")),
    ];
    for (side, h) in hosts.iter().enumerate() {
        world.plug(side, &h.0, &h.path());
    }
    // Each node's one WireGuard socket lives on its host, behind its NAT.
    let sockets: Vec<UdpSocket> = hosts
        .iter()
        .map(|h| {
            netns::run_in(&h.path(), || {
                UdpSocket::bind("0.0.0.0:0").map_err(|e| {
                    ganglion_dispatch::overlay::OverlayError::Io {
                        operation: "bind",
                        source: e,
                    }
                })
            })
            .expect("socket on host")
        })
        .collect();
    let ports: Vec<u16> = sockets
        .iter()
        .map(|s| s.local_addr().expect("port").port())
        .collect();

    let job = job_id(&format!("natddp{per_node}"));
    let chain_job = ChainJobId([0x17; 32]);
    let plan = OverlayPool::default()
        .plan(&job, 2, &BTreeSet::new())
        .expect("plan");
    let keys = [JobKeys::generate(), JobKeys::generate()];
    // The hellos as the `cluster` exchange carries them: LAN address, then the public mapping
    // a peer on the public side observes (the router's address; MASQUERADE keeps the port).
    let hellos: Vec<_> = (0..2)
        .map(|side| {
            let observed: libp2p::Multiaddr =
                format!("/ip4/{}/tcp/4001", NatWorld::public_ip(side))
                    .parse()
                    .expect("multiaddr");
            let cands = exchange::candidates(
                &[SocketAddr::from((NatWorld::lan_ip(side), ports[side]))],
                [observed],
            );
            exchange::hello(chain_job, &keys[side], &[plan.addresses[side]], &cands)
        })
        .collect();
    let learned: Vec<_> = (0..2)
        .map(|side| {
            exchange::learn_peer(
                &hellos[1 - side],
                chain_job,
                &plan,
                &[plan.addresses[side]],
                &[NatWorld::lan_net(side)],
                Some(25),
            )
            .expect("peer hello valid")
        })
        .collect();
    for side in 0..2 {
        assert_eq!(
            learned[side].peer.endpoint,
            SocketAddr::from((NatWorld::public_ip(1 - side), ports[1 - side])),
            "no shared LAN: the public mapping"
        );
    }

    let mut guard = Containers(vec![
        OverlayNetwork::sandbox_name(&job, 0),
        OverlayNetwork::sandbox_name(&job, 1),
    ]);
    let sleep = vec!["sleep".to_string(), "300".to_string()];
    let mut nets = Vec::new();
    let mut nodes = Vec::new();
    for (side, socket) in sockets.into_iter().enumerate() {
        let node = Arc::new(OverlayNode::start(socket).expect("node"));
        let net = OverlayNetwork::new(
            docker.clone(),
            format!("nat-{side}-{pid}"),
            node.clone(),
            probe.clone(),
            sleep.clone(),
        );
        net.prepare(
            &job,
            setup(&plan, keys[side].clone(), vec![learned[side].peer.clone()]),
        );
        nodes.push(node);
        nets.push(net);
    }
    let mut modes = Vec::new();
    // Together: an attach returns once the job's links work, which needs the other side.
    let ranks: Vec<[u32; 1]> = (0..nets.len() as u32).map(|r| [r]).collect();
    let attached = futures::future::join_all(
        nets.iter()
            .zip(&ranks)
            .map(|(net, r)| net.attach(&job, 2, r)),
    )
    .await;
    for (rank, att) in attached.into_iter().enumerate() {
        let att = att.expect("attach");
        assert_eq!(att.hosts.interface, OVERLAY_IFNAME);
        modes.push(att.endpoints[&(rank as u32)].network_mode.clone());
    }
    let names: Vec<String> = (0..2).map(|r| format!("ganglion-{job}-ddp-{r}")).collect();
    for rank in 0..2u32 {
        let env = [
            ("MASTER_ADDR", "rank-0".to_string()),
            ("GLOO_SOCKET_IFNAME", OVERLAY_IFNAME.to_string()),
            ("DDP_TIMEOUT", "90".to_string()),
        ];
        start_ddp_node(
            &mut guard,
            names[rank as usize].clone(),
            &torch,
            &modes[rank as usize],
            rank,
            per_node,
            &env,
        );
    }
    let (r0, r1) = tokio::join!(finish(names[0].clone(), 150), finish(names[1].clone(), 150));
    eprintln!("node 0: {:?}\n{}\nnode 1: {:?}\n{}", r0.0, r0.1, r1.0, r1.1);
    assert_eq!(r0.0, Some(0), "node 0 failed:\n{}", r0.1);
    assert_eq!(r1.0, Some(0), "node 1 failed:\n{}", r1.1);
    let sums: Vec<String> = [&r0.1, &r1.1]
        .iter()
        .flat_map(|logs| checksums(logs))
        .collect();
    assert_eq!(
        sums.len(),
        2 * per_node as usize,
        "every rank printed a checksum: {sums:?}"
    );
    assert!(
        sums.iter().all(|c| *c == sums[0]),
        "every rank ends with the same weights: {sums:?}"
    );
    assert!(
        world.masqueraded(0) > 0 && world.masqueraded(1) > 0,
        "the tunnel's datagrams went through both NATs"
    );
    for (side, node) in nodes.iter().enumerate() {
        let links = node.links(&job);
        assert_eq!(links.len(), 1, "node {side}: {links:?}");
        assert_eq!(
            links[0].mode,
            LinkMode::Direct,
            "node {side}: punched, not relayed"
        );
    }
    for net in &nets {
        net.detach(&job).await.expect("detach");
    }
}

/// The counter-test on the same topology: no overlay, each rank's pod plugged straight into
/// its host's LAN, and the one thing port forwarding can do: rank 0's router forwards
/// `MASTER_PORT`. The rendezvous gets through (the forward carries it), but gloo then connects
/// to each rank's own interface address on random ports, which the other side cannot reach:
/// the job fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_counter_test_master_port_forwarding_alone_fails_behind_nat() {
    if !root("overlay_counter_test_master_port_forwarding_alone_fails_behind_nat") {
        return;
    }
    let probe = image("build-probe-image.sh");
    let torch = image("build-torch-image.sh");
    let pid = std::process::id();
    let tag = format!("gm{}", pid % 100_000);
    let world = NatWorld::new(&tag);
    let mut guard = Containers(vec![]);
    let mut modes = Vec::new();
    for side in 0..2 {
        let name = format!("ganglion-fwd-{pid}-pod-{side}");
        guard.0.push(name.clone());
        let out = Command::new("docker")
            .args([
                "run",
                "-d",
                "--name",
                &name,
                "--network",
                "none",
                "--cap-drop",
                "ALL",
            ])
            .arg(&probe)
            .args(["sleep", "300"])
            .output()
            .expect("docker run");
        assert!(out.status.success(), "pod {side}: {out:?}");
        let inspect = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Pid}}", &name])
            .output()
            .expect("inspect");
        let pod_pid = String::from_utf8_lossy(&inspect.stdout).trim().to_string();
        world.plug(
            side,
            &pod_pid,
            Path::new(&format!("/proc/{pod_pid}/ns/net")),
        );
        modes.push(format!("container:{name}"));
    }
    world.forward_tcp(0, MASTER_PORT);
    let names: Vec<String> = (0..2)
        .map(|r| format!("ganglion-fwd-{pid}-ddp-{r}"))
        .collect();
    for rank in 0..2usize {
        // Rank 0 serves the store on its own address; rank 1 reaches it through the forward.
        let master = if rank == 0 {
            NatWorld::lan_ip(0)
        } else {
            NatWorld::public_ip(0)
        };
        let env = [
            ("MASTER_ADDR", master.to_string()),
            ("GLOO_SOCKET_IFNAME", "lan0".to_string()),
            ("DDP_TIMEOUT", "15".to_string()),
        ];
        start_ddp_rank(
            &mut guard,
            names[rank].clone(),
            &torch,
            &modes[rank],
            rank as u32,
            &env,
        );
    }
    // Rank 1 gives up first (gloo cannot connect); rank 0 would wait out its timeout for a peer
    // that never comes, so it gets a few seconds more and is then killed.
    let r1 = finish(names[1].clone(), 60).await;
    let r0 = finish(names[0].clone(), 5).await;
    eprintln!("rank 0: {:?}\n{}\nrank 1: {:?}\n{}", r0.0, r0.1, r1.0, r1.1);
    let dnat = {
        let out = Command::new("nsenter")
            .arg(format!("--net={}", world.routers[0].path().display()))
            .args([
                "iptables",
                "-t",
                "nat",
                "-L",
                "PREROUTING",
                "-v",
                "-n",
                "-x",
            ])
            .output()
            .expect("iptables");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("DNAT"))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    assert!(
        dnat > 0,
        "the forward carried rank 1's rendezvous connection"
    );
    let both_ok = r0.0 == Some(0) && r1.0 == Some(0);
    assert!(
        !both_ok,
        "port forwarding alone must not be enough:\n{}\n{}",
        r0.1, r1.1
    );
    assert!(
        checksums(&r0.1).is_empty() && checksums(&r1.1).is_empty(),
        "no rank finished training"
    );
    assert!(
        r1.1.contains(&NatWorld::lan_ip(0).to_string()),
        "gloo tried rank 0's own (private) address:\n{}",
        r1.1
    );
}

/// Packets that the `udp … DROP` rule in `FORWARD` of side `side`'s router dropped.
fn udp_dropped(world: &NatWorld, side: usize) -> u64 {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", world.routers[side].path().display()))
        .args(["iptables", "-L", "FORWARD", "-v", "-n", "-x"])
        .output()
        .expect("iptables");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            // pkts bytes target prot …; `-n` prints the protocol as a number on some builds.
            let cols: Vec<&str> = l.split_whitespace().collect();
            let udp_drop =
                cols.get(2) == Some(&"DROP") && matches!(cols.get(3), Some(&("udp" | "17")));
            udp_drop.then(|| cols[0].parse::<u64>().ok()).flatten()
        })
        .sum()
}

/// Drops (`-I`) or stops dropping (`-D`) every UDP datagram side `side`'s router forwards,
/// both ways: the direct WireGuard path between the two sites is gone, TCP is left alone.
fn block_udp(world: &NatWorld, side: usize, op: &str) {
    run_in_ns(
        &world.routers[side].path(),
        &["iptables", op, "FORWARD", "-p", "udp", "-j", "DROP"],
    );
}

/// Waits (`limit` at most) until every link of `job` on both nodes is in `mode`.
async fn links_become(nodes: [&OverlayNode; 2], job: &RunId, mode: LinkMode, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let links: Vec<_> = nodes.iter().map(|n| n.links(job)).collect();
        if links
            .iter()
            .all(|l| !l.is_empty() && l.iter().all(|l| l.mode == mode))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "links not {mode:?} after {limit:?}: {links:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The relay fallback: the two NATed sites of the DDP tests, but every UDP datagram
/// between them is dropped by both routers, so no WireGuard handshake can complete directly.
/// The keys come over the p2p `cluster` exchange, each peer's relay node is the swarm its hello
/// came from, and `relay_fallback_s` later both links switch to `Relayed`: 1 MiB echoed
/// through the overlay comes back byte for byte over `/ganglion/overlay-relay/1` streams. Once
/// the block is lifted, the UDP probes find the direct path and both links turn `Direct`.
///
/// (The two swarms run on this host's loopback, not inside the sites: the relay stream only
/// needs some libp2p connection between the nodes, whether direct, hole-punched or through a
/// circuit relay.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_relay_fallback_when_direct_udp_is_blocked() {
    use ganglion_contracts::v2::datum::JobId as ChainJobId;
    use ganglion_node::daemon::exchange;

    if !root("overlay_relay_fallback_when_direct_udp_is_blocked") {
        return;
    }
    let pid = std::process::id();
    let tag = format!("gr{}", pid % 100_000);
    let world = NatWorld::new(&tag);
    let hosts = [
        Netns::new(format!("{tag}-ha")),
        Netns::new(format!("{tag}-hb")),
    ];
    for (side, h) in hosts.iter().enumerate() {
        world.plug(side, &h.0, &h.path());
        block_udp(&world, side, "-I");
    }
    let job = job_id("relay");
    let chain_job = ChainJobId([0x52; 32]);
    let plan = OverlayPool::default()
        .plan(&job, 2, &BTreeSet::new())
        .expect("plan");
    // Each host: its WireGuard socket and its TUN (rank = side), behind its NAT.
    let (sockets, tuns): (Vec<UdpSocket>, Vec<TunDevice>) = hosts
        .iter()
        .enumerate()
        .map(|(side, h)| {
            let net = plan.interface_net(side as u32).expect("rank");
            host_side(&h.path(), "0.0.0.0:0".parse().expect("addr"), net)
        })
        .unzip();
    let ports: Vec<u16> = sockets
        .iter()
        .map(|s| s.local_addr().expect("port").port())
        .collect();

    let (a, b) = (p2p_node(81).await, p2p_node(82).await);
    b.client.dial(a.addr.clone()).await.expect("b dials a");
    let keys = [JobKeys::generate(), JobKeys::generate()];
    let hellos: Vec<_> = (0..2)
        .map(|side| {
            let observed: libp2p::Multiaddr =
                format!("/ip4/{}/tcp/4001", NatWorld::public_ip(side))
                    .parse()
                    .expect("multiaddr");
            let cands = exchange::candidates(
                &[SocketAddr::from((NatWorld::lan_ip(side), ports[side]))],
                [observed],
            );
            exchange::hello(chain_job, &keys[side], &[plan.addresses[side]], &cands)
        })
        .collect();
    let timeout = Duration::from_secs(20);
    let (only_b, only_a) = ([b.peer], [a.peer]);
    let (got_a, got_b) = tokio::join!(
        exchange::exchange(&a.client, &a.hellos, hellos[0].clone(), &only_b, timeout),
        exchange::exchange(&b.client, &b.hellos, hellos[1].clone(), &only_a, timeout),
    );
    let got = [got_a.expect("a's exchange"), got_b.expect("b's exchange")];
    let relay_after = Duration::from_secs(2);
    let mut nodes = Vec::new();
    for (side, (socket, tun)) in sockets.into_iter().zip(tuns).enumerate() {
        let learned = exchange::learn_peers(
            &got[side],
            chain_job,
            &plan,
            &[plan.addresses[side]],
            &[NatWorld::lan_net(side)],
            Some(25),
        )
        .expect("peer hello valid");
        let relay_node = [b.peer, a.peer][side];
        assert_eq!(learned.len(), 1);
        assert_eq!(learned[0].peer.relay, Some(relay_node));
        let node = OverlayNode::start(socket).expect("node");
        let client = [&a.client, &b.client][side];
        tokio::spawn(
            node.set_relay(client.streams(), relay_after)
                .expect("relay on")
                .run(),
        );
        let err = node
            .set_relay(client.streams(), relay_after)
            .expect_err("one relay per swarm");
        assert!(err.to_string().contains("overlay relay"), "{err}");
        node.add_job(&job, keys[side].clone(), &[learned[0].peer.clone()], tun)
            .expect("job");
        assert_eq!(node.links(&job)[0].mode, LinkMode::Pending);
        nodes.push(node);
    }
    links_become(
        [&nodes[0], &nodes[1]],
        &job,
        LinkMode::Relayed,
        Duration::from_secs(15),
    )
    .await;
    let port = echo_server(&hosts[1].path(), plan.addresses[1]);
    let payload: Vec<u8> = (0..1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let (path_a, p, ip_b) = (hosts[0].path(), payload.clone(), plan.addresses[1]);
    let started = std::time::Instant::now();
    let back =
        tokio::task::spawn_blocking(move || echo_from(&path_a, SocketAddr::from((ip_b, port)), p))
            .await
            .expect("join")
            .expect("echo through the relayed overlay");
    eprintln!(
        "relayed echo: {} KiB each way in {:?}",
        payload.len() / 1024,
        started.elapsed()
    );
    assert_eq!(back, payload, "every byte came back through the relay");
    for (side, node) in nodes.iter().enumerate() {
        let links = node.links(&job);
        assert_eq!(links[0].mode, LinkMode::Relayed, "node {side}: {links:?}");
        assert_eq!(links[0].relay, Some([b.peer, a.peer][side]));
        assert!(
            udp_dropped(&world, side) > 0,
            "side {side}: the direct UDP path was tried and dropped"
        );
    }

    // Lift the block: the probes (one initiation over UDP every `relay_after`) punch both
    // NATs and the links go direct again.
    for side in 0..2 {
        block_udp(&world, side, "-D");
    }
    links_become(
        [&nodes[0], &nodes[1]],
        &job,
        LinkMode::Direct,
        Duration::from_secs(20),
    )
    .await;
    let port = echo_server(&hosts[1].path(), plan.addresses[1]);
    let (path_a, p) = (hosts[0].path(), payload[..64 * 1024].to_vec());
    let back =
        tokio::task::spawn_blocking(move || echo_from(&path_a, SocketAddr::from((ip_b, port)), p))
            .await
            .expect("join")
            .expect("echo through the direct overlay");
    assert_eq!(back, payload[..64 * 1024]);
    for node in &nodes {
        node.remove_job(&job);
    }
}

/// The overlay MTU the node resolves is the one the kernel enforces on the pod interface (field
/// README, "Overlay MTU"): on a PPPoE path (1492 → 1412) a don't-fragment UDP payload of
/// M − 28 bytes leaves whole (and arrives on the TUN as an M-byte packet), M − 27 is refused
/// locally with EMSGSIZE ("message too long").
#[test]
fn a_df_payload_of_mtu_less_28_crosses_and_one_byte_more_is_refused_locally() {
    use std::os::fd::AsRawFd as _;
    if !root("a_df_payload_of_mtu_less_28_crosses_and_one_byte_more_is_refused_locally") {
        return;
    }
    let ns = Netns::new(format!("gmtu-{}", std::process::id()));
    let m = ganglion_dispatch::overlay::config::OverlayConfig {
        path_mtu: Some(1492),
        ..Default::default()
    }
    .resolve_mtu(None)
    .expect("mtu");
    assert_eq!(m, 1412);
    let io = |operation: &'static str| {
        move |source| ganglion_dispatch::overlay::OverlayError::Io { operation, source }
    };
    let (fits, too_big, seen) = netns::run_in(&ns.path(), move || {
        let dev = TunDevice::create(OVERLAY_IFNAME)?;
        tun::configure(dev.name(), "100.96.7.1/24".parse().expect("net"), m)?;
        let s = UdpSocket::bind("100.96.7.1:0").map_err(io("bind"))?;
        let on: libc::c_int = libc::IP_PMTUDISC_DO;
        // SAFETY: a valid socket and an option value of the size given.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                (&raw const on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io("IP_MTU_DISCOVER")(std::io::Error::last_os_error()));
        }
        let m = m as usize;
        let fits = s.send_to(&vec![7u8; m - 28], "100.96.7.2:9");
        let too_big = s.send_to(&vec![7u8; m - 27], "100.96.7.2:9");
        let fd = dev.into_fd();
        let mut seen = None;
        let mut buf = vec![0u8; 65536];
        loop {
            let mut pfd = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 5000) } <= 0 {
                break;
            }
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            // The UDP packet (protocol 17) of the payload that fitted; skip anything else.
            if buf[0] >> 4 == 4 && buf[9] == 17 {
                seen = Some(n as usize);
                break;
            }
        }
        Ok((
            fits.map_err(|e| e.raw_os_error()),
            too_big.map_err(|e| e.raw_os_error()),
            seen,
        ))
    })
    .expect("in the namespace");
    let m = m as usize;
    assert_eq!(fits, Ok(m - 28), "M − 28 leaves");
    assert_eq!(
        too_big,
        Err(Some(libc::EMSGSIZE)),
        "M − 27: message too long"
    );
    assert_eq!(seen, Some(m), "the packet on the TUN is exactly M bytes");
}
