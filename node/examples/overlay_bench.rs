//! Overlay numbers: TCP throughput and round-trip time between two job pods through
//! the overlay (two nodes' userspace WireGuard over loopback UDP, the TUN inside each sandbox)
//! against two containers on one plain Docker bridge network, in the same run, printed with
//! their ratios; then the DDP step time of a 2-rank CPU job (`examples/workloads/ddp_train.py`
//! in `ganglion/torch-cpu:bookworm-1`, when present) through the overlay against the same job
//! on one bridge. Issue targets: the overlay adds at most 0.5 ms of RTT on loopback hosts; step
//! time within 1.10x.
//!
//! Then the same TCP numbers for a relayed link (`--relay-mib`, default 64): a second job
//! between the same two nodes whose peers announce a UDP endpoint nothing answers, so no
//! direct handshake completes and both links fall back to `/ganglion/overlay-relay/1` streams
//! between two libp2p swarms on loopback (the relay fallback).
//!
//! The DDP step is measured `--ddp-rounds` times (default 3), overlay and bridge interleaved
//! (overlay first in even rounds, bridge first in odd ones, so drift in the machine's load
//! hits both alike), and the median of the per-round ratios is the result: single runs on a
//! busy 2-core machine ranged 0.70–1.38x.
//!
//! `cargo run -p ganglion-node --example overlay_bench [-- --mib N --pings N --ddp-rounds N]` (root: setns
//! into the pods; Docker Engine and the probe image, scripts/ensure-docker.sh). The workspace
//! builds dependencies (boringtun, its ChaCha20-Poly1305) optimised even in dev; `--release`
//! optimises the node's own driver too.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ganglion_dispatch::executor::network::ClusterNetwork;
use ganglion_dispatch::executor::plan::RunId;
use ganglion_dispatch::overlay::OverlayError;
use ganglion_dispatch::overlay::addressing::OverlayPool;
use ganglion_dispatch::overlay::keys::JobKeys;
use ganglion_dispatch::overlay::netns;
use ganglion_dispatch::overlay::network::{JobSetup, OverlayNetwork};
use ganglion_dispatch::overlay::node::OverlayNode;
use ganglion_dispatch::overlay::pod;
use ganglion_dispatch::overlay::router::{LinkMode, OverlayPeer};

const CHUNK: usize = 64 * 1024;

/// Containers and the bridge network, removed on drop.
struct Cleanup {
    containers: Vec<String>,
    network: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = Command::new("docker").args(["rm", "-f", c]).output();
        }
        if let Some(n) = &self.network {
            let _ = Command::new("docker").args(["network", "rm", n]).output();
        }
    }
}

fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .context("docker")?;
    if !out.status.success() {
        bail!(
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn io(operation: &'static str) -> impl FnOnce(std::io::Error) -> OverlayError {
    move |source| OverlayError::Io { operation, source }
}

/// One path's numbers.
struct Numbers {
    mib_per_s: f64,
    rtt_p50_us: f64,
    rtt_p99_us: f64,
}

/// Throughput (`mib` MiB one way) and 1-byte ping-pong RTT (`pings` rounds) from namespace
/// `from` to `to_ip` inside namespace `to`.
fn measure(
    from: &Path,
    to: &Path,
    to_ip: Ipv4Addr,
    mib: usize,
    pings: usize,
) -> anyhow::Result<Numbers> {
    let listener = netns::run_in(to, move || {
        TcpListener::bind((to_ip, 0)).map_err(io("listen"))
    })?;
    let port = listener.local_addr()?.port();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        // Connection 1: sink, then report the byte count. Connection 2: 1-byte echo.
        let (mut sink, _) = listener.accept()?;
        let mut buf = vec![0u8; CHUNK];
        let mut total: u64 = 0;
        loop {
            let n = sink.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        sink.write_all(&total.to_be_bytes())?;
        let (mut echo, _) = listener.accept()?;
        echo.set_nodelay(true)?;
        let mut b = [0u8; 1];
        while echo.read(&mut b)? == 1 {
            echo.write_all(&b)?;
        }
        Ok(())
    });
    let to_addr = SocketAddr::from((to_ip, port));
    let from = from.to_path_buf();
    let connect = move || {
        netns::run_in(&from, move || {
            TcpStream::connect_timeout(&to_addr, Duration::from_secs(10)).map_err(io("connect"))
        })
    };

    let mut s = connect()?;
    let chunk = vec![0x5au8; CHUNK];
    let started = Instant::now();
    for _ in 0..(mib * 1024 * 1024 / CHUNK) {
        s.write_all(&chunk)?;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let mut count = [0u8; 8];
    s.read_exact(&mut count)?;
    let elapsed = started.elapsed().as_secs_f64();
    let got = u64::from_be_bytes(count);
    if got != (mib * 1024 * 1024) as u64 {
        bail!("sent {mib} MiB, the far side counted {got} bytes");
    }

    let mut p = connect()?;
    p.set_nodelay(true)?;
    let mut rtts = Vec::with_capacity(pings);
    let mut b = [1u8; 1];
    for _ in 0..pings {
        let t = Instant::now();
        p.write_all(&b)?;
        p.read_exact(&mut b)?;
        rtts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(p);
    server
        .join()
        .map_err(|_| anyhow::anyhow!("server panicked"))??;
    rtts.sort_by(f64::total_cmp);
    let pct = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize];
    Ok(Numbers {
        mib_per_s: mib as f64 / elapsed,
        rtt_p50_us: pct(0.5),
        rtt_p99_us: pct(0.99),
    })
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn probe_image() -> anyhow::Result<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-probe-image.sh");
    let out = Command::new("bash").arg(script).output()?;
    if !out.status.success() {
        bail!("build-probe-image.sh failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string())
}

/// A libp2p swarm on loopback TCP (port 0) with no bonds, for the relay streams: its client,
/// peer id, address and the event receiver (kept open).
async fn p2p_swarm(
    seed: u8,
) -> anyhow::Result<(
    ganglion_p2p::Client,
    libp2p::PeerId,
    libp2p::Multiaddr,
    tokio::sync::mpsc::Receiver<ganglion_p2p::Event>,
)> {
    use ganglion_p2p::{self as p2p, Config, offers::BondSnapshot};
    let key = libp2p::identity::Keypair::ed25519_from_bytes([seed; 32])?;
    let peer = key.public().to_peer_id();
    let config = Config {
        listen: vec![],
        ..Config::default()
    };
    let (client, event_loop, events, _inbound) = p2p::new(key, config, BondSnapshot::default())?;
    tokio::spawn(event_loop.run());
    let addr = client
        .listen("/ip4/127.0.0.1/tcp/0".parse()?)
        .await?
        .with(libp2p::multiaddr::Protocol::P2p(peer));
    Ok((client, peer, addr, events))
}

const TORCH_IMAGE: &str = "ganglion/torch-cpu:bookworm-1";
const EPOCHS: usize = 6;
const SAMPLES: usize = 8192;

/// Seconds of the RFC 3339 timestamp `docker logs -t` puts first on a line (time of day only:
/// the runs are short).
fn stamp(line: &str) -> Option<f64> {
    let t = line.split_whitespace().next()?.split('T').nth(1)?;
    let t = t.trim_end_matches('Z');
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// Runs the 2-rank DDP job: rank `r` in a container made by `run_args(r)` (network flags),
/// with `ifname` for gloo; returns milliseconds per training step of rank 0 (between its
/// first and last epoch lines, so imports and rendezvous are not counted).
fn ddp_step_ms(
    cleanup: &mut Cleanup,
    tag: &str,
    run_args: &dyn Fn(usize) -> Vec<String>,
    ifname: &str,
) -> anyhow::Result<f64> {
    let workloads = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workloads");
    let mut names = Vec::new();
    for rank in 0..2 {
        let name = format!("ganglion-bench-{}-{tag}-ddp-{rank}", std::process::id());
        cleanup.containers.push(name.clone());
        let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), name.clone()];
        args.extend(run_args(rank));
        for (k, v) in [
            ("MASTER_ADDR", "rank-0".to_string()),
            ("MASTER_PORT", "29500".into()),
            ("WORLD_SIZE", "2".into()),
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", "0".into()),
            ("GLOO_SOCKET_IFNAME", ifname.into()),
            ("OUT_DIR", "/tmp/out".into()),
            ("HOME", "/tmp".into()),
            ("TRAIN_EPOCHS", EPOCHS.to_string()),
            ("TRAIN_SAMPLES", SAMPLES.to_string()),
        ] {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        args.extend([
            "--user".into(),
            "65534:65534".into(),
            "-v".into(),
            format!("{}:/workloads:ro", workloads.display()),
            TORCH_IMAGE.into(),
            "python3".into(),
            "/workloads/ddp_train.py".into(),
        ]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&refs)?;
        names.push(name);
    }
    for name in &names {
        let code = docker(&["wait", name])?;
        if code != "0" {
            let logs = Command::new("docker").args(["logs", name]).output()?;
            bail!(
                "{name} exited {code}: {}",
                String::from_utf8_lossy(&logs.stderr)
            );
        }
    }
    let logs = Command::new("docker")
        .args(["logs", "-t", &names[0]])
        .output()?;
    let text = String::from_utf8_lossy(&logs.stdout);
    let epochs: Vec<f64> = text
        .lines()
        .filter(|l| l.contains("[rank 0] epoch"))
        .filter_map(stamp)
        .collect();
    let (Some(first), Some(last)) = (epochs.first(), epochs.last()) else {
        bail!("no epoch lines in rank 0's log:\n{text}");
    };
    for name in &names {
        // Free the `rank-N` alias and the CPU for the next run.
        let _ = Command::new("docker").args(["rm", "-f", name]).output();
    }
    let steps_per_epoch = (SAMPLES / 2).div_ceil(64) as f64;
    Ok((last - first) * 1000.0 / ((epochs.len() - 1) as f64 * steps_per_epoch))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let (mib, pings) = (arg("--mib", 256), arg("--pings", 2000));
    let probe = probe_image()?;
    let pid = std::process::id();
    let mut cleanup = Cleanup {
        containers: vec![],
        network: None,
    };

    // Plain Docker bridge: two containers on one user-defined bridge network.
    let network = format!("ganglion-bench-{pid}");
    docker(&["network", "create", &network])?;
    cleanup.network = Some(network.clone());
    let mut bridge = Vec::new();
    for i in 0..2 {
        let name = format!("ganglion-bench-{pid}-bridge-{i}");
        cleanup.containers.push(name.clone());
        docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            &network,
            &probe,
            "sleep",
            "600",
        ])?;
        let pid = docker(&["inspect", "-f", "{{.State.Pid}}", &name])?;
        let ip: Ipv4Addr = docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &name,
        ])?
        .parse()?;
        bridge.push((PathBuf::from(format!("/proc/{pid}/ns/net")), ip));
    }

    // The overlay: two nodes on loopback, one pod each.
    let engine = bollard::Docker::connect_with_local_defaults()?
        .negotiate_version()
        .await?;
    let job = RunId::new(format!("bench-{pid}"))?;
    let plan = OverlayPool::default().plan(&job, 2, &BTreeSet::new())?;
    let keys = [JobKeys::generate(), JobKeys::generate()];
    let nodes = [
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0")?)?),
        Arc::new(OverlayNode::start(UdpSocket::bind("127.0.0.1:0")?)?),
    ];
    let sleep = vec!["sleep".to_string(), "600".to_string()];
    let mut nets = Vec::new();
    for side in 0..2 {
        cleanup
            .containers
            .push(OverlayNetwork::sandbox_name(&job, side as u32));
        let net = OverlayNetwork::new(
            engine.clone(),
            format!("bench-{side}-{pid}"),
            nodes[side].clone(),
            probe.clone(),
            sleep.clone(),
        );
        net.prepare(
            &job,
            JobSetup {
                overlay: plan.clone(),
                keys: keys[side].clone(),
                peers: vec![OverlayPeer {
                    public: keys[1 - side].public(),
                    endpoint: nodes[1 - side].local_addr()?,
                    addresses: vec![plan.addresses[1 - side]],
                    keepalive_s: Some(25),
                    relay: None,
                }],
            },
        );
        nets.push(net);
    }
    attach_both(&nets, &job).await?;
    let mut overlay = Vec::new();
    for side in 0..2u32 {
        let ns = pod::sandbox_netns(&engine, &OverlayNetwork::sandbox_name(&job, side)).await?;
        overlay.push((ns, plan.addresses[side as usize]));
    }

    let (b, o) = tokio::task::spawn_blocking(move || -> anyhow::Result<(Numbers, Numbers)> {
        // A warm-up round each (handshake, ARP, slow start), then the measured one.
        measure(&bridge[0].0, &bridge[1].0, bridge[1].1, 16, 100)?;
        let b = measure(&bridge[0].0, &bridge[1].0, bridge[1].1, mib, pings)?;
        measure(&overlay[0].0, &overlay[1].0, overlay[1].1, 16, 100)?;
        let o = measure(&overlay[0].0, &overlay[1].0, overlay[1].1, mib, pings)?;
        Ok((b, o))
    })
    .await??;

    println!("overlay_bench: {mib} MiB one way, {pings} 1-byte ping-pongs, loopback hosts");
    println!(
        "{:<16} {:>12} {:>14} {:>14}",
        "path", "MiB/s", "RTT p50 µs", "RTT p99 µs"
    );
    for (name, n) in [("docker bridge", &b), ("overlay", &o)] {
        println!(
            "{name:<16} {:>12.1} {:>14.1} {:>14.1}",
            n.mib_per_s, n.rtt_p50_us, n.rtt_p99_us
        );
    }
    let added_ms = (o.rtt_p50_us - b.rtt_p50_us) / 1000.0;
    println!(
        "ratio overlay/bridge: throughput {:.3}x, RTT p50 {:.2}x; overlay adds {added_ms:.3} ms RTT (target <= 0.5 ms: {})",
        o.mib_per_s / b.mib_per_s,
        o.rtt_p50_us / b.rtt_p50_us,
        if added_ms <= 0.5 { "met" } else { "NOT met" }
    );

    // The relay fallback: job 2 on the same nodes, peers at an endpoint nothing answers (the
    // discard port), relayed over libp2p streams between two swarms on loopback.
    let relay_mib = arg("--relay-mib", 64);
    let swarms = [p2p_swarm(91).await?, p2p_swarm(92).await?];
    swarms[1].0.dial(swarms[0].2.clone()).await?;
    for side in 0..2 {
        tokio::spawn(
            nodes[side]
                .set_relay(swarms[side].0.streams(), Duration::from_secs(1))?
                .run(),
        );
    }
    let job2 = RunId::new(format!("bench-relay-{pid}"))?;
    let plan2 = OverlayPool::default().plan(&job2, 2, &BTreeSet::from([plan.subnet]))?;
    let keys2 = [JobKeys::generate(), JobKeys::generate()];
    let nowhere: SocketAddr = "127.0.0.1:9".parse()?;
    let mut nets2 = Vec::new();
    for side in 0..2 {
        cleanup
            .containers
            .push(OverlayNetwork::sandbox_name(&job2, side as u32));
        let net = OverlayNetwork::new(
            engine.clone(),
            format!("bench-relay-{side}-{pid}"),
            nodes[side].clone(),
            probe.clone(),
            sleep.clone(),
        );
        net.prepare(
            &job2,
            JobSetup {
                overlay: plan2.clone(),
                keys: keys2[side].clone(),
                peers: vec![OverlayPeer {
                    public: keys2[1 - side].public(),
                    endpoint: nowhere,
                    addresses: vec![plan2.addresses[1 - side]],
                    keepalive_s: Some(25),
                    relay: Some(swarms[1 - side].1),
                }],
            },
        );
        nets2.push(net);
    }
    attach_both(&nets2, &job2).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| {
        let links = n.links(&job2);
        !links.is_empty() && links.iter().all(|l| l.mode == LinkMode::Relayed)
    }) {
        if Instant::now() > deadline {
            bail!("job 2's links did not fall back to the relay in 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut relayed = Vec::new();
    for side in 0..2u32 {
        let ns = pod::sandbox_netns(&engine, &OverlayNetwork::sandbox_name(&job2, side)).await?;
        relayed.push((ns, plan2.addresses[side as usize]));
    }
    let relay_pings = (pings / 4).max(10);
    let r = tokio::task::spawn_blocking(move || -> anyhow::Result<Numbers> {
        measure(&relayed[0].0, &relayed[1].0, relayed[1].1, 4, 20)?;
        measure(
            &relayed[0].0,
            &relayed[1].0,
            relayed[1].1,
            relay_mib,
            relay_pings,
        )
    })
    .await??;
    println!(
        "{:<16} {:>12.1} {:>14.1} {:>14.1}   ({relay_mib} MiB, {relay_pings} pings; links Relayed)",
        "overlay relayed", r.mib_per_s, r.rtt_p50_us, r.rtt_p99_us
    );
    println!(
        "ratio relayed/bridge: throughput {:.3}x, RTT p50 {:.2}x; relayed/direct overlay: throughput {:.3}x, RTT p50 {:.2}x",
        r.mib_per_s / b.mib_per_s,
        r.rtt_p50_us / b.rtt_p50_us,
        r.mib_per_s / o.mib_per_s,
        r.rtt_p50_us / o.rtt_p50_us,
    );
    for net in &nets2 {
        net.detach(&job2).await?;
    }

    let has_torch = Command::new("docker")
        .args(["image", "inspect", TORCH_IMAGE])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if has_torch {
        let bridge_net = network.clone();
        let on_bridge = move |rank: usize| {
            vec![
                "--network".to_string(),
                bridge_net.clone(),
                "--network-alias".into(),
                format!("rank-{rank}"),
                "--hostname".into(),
                format!("rank-{rank}"),
            ]
        };
        let sandboxes: Vec<String> = (0..2u32)
            .map(|r| OverlayNetwork::sandbox_name(&job, r))
            .collect();
        let on_overlay =
            move |rank: usize| vec!["--network".to_string(), pod::join_mode(&sandboxes[rank])];
        let rounds = arg("--ddp-rounds", 3).max(1);
        let mut ratios = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            let (mut overlay_ms, mut bridge_ms) = (0.0, 0.0);
            for on_the_overlay in order {
                if on_the_overlay {
                    let tag = format!("overlay{round}");
                    overlay_ms = ddp_step_ms(&mut cleanup, &tag, &on_overlay, pod::OVERLAY_IFNAME)?;
                } else {
                    let tag = format!("bridge{round}");
                    bridge_ms = ddp_step_ms(&mut cleanup, &tag, &on_bridge, "eth0")?;
                }
            }
            println!(
                "ddp step round {round} (2 ranks, CPU/gloo, {EPOCHS} epochs of {SAMPLES} samples): bridge {bridge_ms:.2} ms, overlay {overlay_ms:.2} ms, ratio {:.3}x",
                overlay_ms / bridge_ms
            );
            ratios.push(overlay_ms / bridge_ms);
        }
        ratios.sort_by(f64::total_cmp);
        let median = if rounds % 2 == 1 {
            ratios[rounds / 2]
        } else {
            (ratios[rounds / 2 - 1] + ratios[rounds / 2]) / 2.0
        };
        println!(
            "ddp step ratio overlay/bridge, median of {rounds} interleaved rounds: {median:.3}x (min {:.3}x, max {:.3}x; target <= 1.10x: {})",
            ratios[0],
            ratios[rounds - 1],
            if median <= 1.10 { "met" } else { "NOT met" }
        );
    } else {
        println!("ddp step: SKIPPED, {TORCH_IMAGE} is not built (scripts/build-torch-image.sh)");
    }
    for net in &nets {
        net.detach(&job).await?;
    }
    Ok(())
}

/// Attaches rank 0 on `nets[0]` and rank 1 on `nets[1]` together: an attach returns once the
/// job's links work, which needs the other side attached too.
async fn attach_both(nets: &[OverlayNetwork], job: &RunId) -> anyhow::Result<()> {
    let (a, b) = tokio::join!(nets[0].attach(job, 2, &[0]), nets[1].attach(job, 2, &[1]));
    a?;
    b?;
    Ok(())
}
