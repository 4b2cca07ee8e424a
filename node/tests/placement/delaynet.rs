//! **Test boundary: a delaying network.** This kernel has no `netem`, so the delays between
//! hosts come from a userspace learning bridge of our own: every host is a network namespace
//! whose `eth0` is one end of a veth pair; the other ends stay in this (root) namespace and
//! are read and written whole frames at a time with `AF_PACKET` sockets. A frame from port
//! `i` to the port `j` that learned its destination MAC is sent on after half the round trip
//! `rtt_ms[i][j]` (broadcasts go to every other port, after the same delays), so a TCP or UDP
//! round trip between hosts `i` and `j` takes `rtt_ms[i][j]` more than it would.
//!
//! ```text
//!   this host: gdlK-r  10.213.K.1/24 ── veth ── gdlK-rb ┐
//!   host i (netns gdlK-h<i>): eth0 10.213.K.(10+i)/24 ── veth ── gdlK-b<i> ┤ userspace bridge
//! ```
//!
//! Port 0 is this host (the devnet and whatever the test runs here), with no delay to
//! anyone unless the matrix says so. Checksum and segmentation offloads are switched off on
//! every veth end (`ethtool -K`): a frame read from a raw socket must be complete and no
//! larger than the MTU to be sent on. Needs root, `ip` and `ethtool`.
//!
//! Dropping the [`DelayNet`] stops the bridge and deletes the namespaces and links.

use std::collections::{BinaryHeap, HashMap};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Namespace and link name prefix.
const PREFIX: &str = "gdl";
/// The lock file serialising slot choice between tests.
const LOCK: &str = "/run/ganglion-test-delaynet.lock";
/// Largest frame read (MTU 1500 plus headers, with room).
const FRAME: usize = 2048;
/// Most hosts of one net.
const MAX_HOSTS: usize = 16;

/// One host of the net.
#[derive(Debug, Clone)]
pub(crate) struct DelayHost {
    /// Its namespace (`ip netns exec <netns> …`).
    pub(crate) netns: String,
    /// Its address.
    pub(crate) ip: Ipv4Addr,
}

/// The namespaces, links and bridge threads of one delaying network.
pub(crate) struct DelayNet {
    slot: u8,
    hosts: Vec<DelayHost>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    queue: Arc<Queue>,
}

impl std::fmt::Debug for DelayNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayNet")
            .field("slot", &self.slot)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// Runs a command given as words; its stderr on failure.
fn run(words: &[&str]) -> Result<(), String> {
    let out = Command::new(words[0])
        .args(&words[1..])
        .output()
        .map_err(|e| format!("`{}`: {e} (apt-get install iproute2 ethtool)", words[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}` failed: {}",
            words.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why this machine cannot build a delaying net, or `None`.
pub(crate) fn unavailable() -> Option<String> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (namespaces and raw sockets need root)".into());
    }
    [&["ip", "netns", "list"][..], &["ethtool", "--version"][..]]
        .into_iter()
        .find_map(|w| run(w).err())
}

fn lock() -> Result<std::fs::File, String> {
    let file = std::fs::File::create(LOCK).map_err(|e| format!("{LOCK}: {e}"))?;
    // SAFETY: flock(2) on a descriptor this function owns; released when `file` closes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "locking {LOCK}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(file)
}

fn name(slot: u8, what: &str) -> String {
    format!("{PREFIX}{slot}-{what}")
}

fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Removes slot `slot`'s links and namespaces. The links go first and explicitly: deleting
/// a namespace frees its veths only later, asynchronously, so a slot reused at once would
/// find them still there.
fn remove(slot: u8) {
    let _ = run(&["ip", "link", "del", &name(slot, "r")]);
    for i in 0..MAX_HOSTS {
        let port = name(slot, &format!("b{i}"));
        if link_exists(&port) {
            let _ = run(&["ip", "link", "del", &port]);
        }
        let _ = run(&["ip", "netns", "del", &name(slot, &format!("h{i}"))]);
    }
}

/// Whether slot `slot` is taken by a live process: its `r` link exists and carries, as its
/// alias, the pid of a process that still runs.
fn taken(slot: u8) -> bool {
    let out = Command::new("ip")
        .args(["-o", "link", "show", &name(slot, "r")])
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        return false;
    };
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let pid = line
        .split("alias ")
        .nth(1)
        .and_then(|a| a.split_whitespace().next())
        .and_then(|a| a.parse::<i32>().ok());
    // SAFETY: kill(2) with signal 0 only checks whether the pid exists.
    pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0)
}

/// The interface index of `name` in this namespace.
fn ifindex(name: &str) -> Result<i32, String> {
    let c = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: if_nametoindex(3) reads a NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(format!("no interface {name}"));
    }
    i32::try_from(i).map_err(|e| e.to_string())
}

/// A raw socket bound to interface `name`, receiving every protocol, with a 100 ms receive
/// timeout (so its reader sees the stop flag).
fn packet_socket(name: &str) -> Result<OwnedFd, String> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
    if fd < 0 {
        return Err(format!(
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `fd` is a fresh descriptor this function owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_ll is valid; the fields set below are the ones bind reads.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = proto;
    addr.sll_ifindex = ifindex(name)?;
    // SAFETY: bind(2) with a valid sockaddr_ll and its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            std::ptr::from_ref(&addr).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc != 0 {
        return Err(format!("bind {name}: {}", std::io::Error::last_os_error()));
    }
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    // SAFETY: setsockopt(2) with a timeval and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::from_ref(&timeout).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        )
    };
    if rc != 0 {
        return Err(format!("SO_RCVTIMEO: {}", std::io::Error::last_os_error()));
    }
    Ok(fd)
}

/// A frame due on a port.
struct Due {
    at: Instant,
    seq: u64,
    port: usize,
    frame: Vec<u8>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    /// Earliest first in a max-heap.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Frames waiting for their time, and a bell for the sender.
#[derive(Default)]
struct Queue {
    due: Mutex<(BinaryHeap<Due>, u64)>,
    bell: Condvar,
}

impl Queue {
    fn push(&self, at: Instant, port: usize, frame: Vec<u8>) {
        let mut g = self.due.lock().unwrap_or_else(|e| e.into_inner());
        g.1 += 1;
        let seq = g.1;
        g.0.push(Due {
            at,
            seq,
            port,
            frame,
        });
        self.bell.notify_one();
    }

    /// The next frame once due; `None` when `stop` is raised.
    fn pop(&self, stop: &AtomicBool) -> Option<Due> {
        let mut g = self.due.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let now = Instant::now();
            let wait = match g.0.peek() {
                Some(d) if d.at <= now => return g.0.pop(),
                Some(d) => d.at - now,
                None => Duration::from_millis(100),
            };
            g = self
                .bell
                .wait_timeout(g, wait.min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl DelayNet {
    /// Builds `hosts` namespaces on one /24 and starts the bridge. `rtt_ms[i][j]` is the added
    /// round trip between port `i` and port `j`, ms, where port 0 is this host and port
    /// `h + 1` is host `h`; the matrix must be (hosts + 1) square (symmetry is the caller's).
    ///
    /// # Errors
    /// The command or socket call that failed, in words.
    pub(crate) fn new(hosts: usize, rtt_ms: Vec<Vec<u32>>) -> Result<Self, String> {
        if rtt_ms.len() != hosts + 1 || rtt_ms.iter().any(|r| r.len() != hosts + 1) {
            return Err(format!("the RTT matrix must be {0}×{0}", hosts + 1));
        }
        if hosts > MAX_HOSTS {
            return Err(format!("at most {MAX_HOSTS} hosts"));
        }
        let _lock = lock()?;
        let slot = (0..200u8).find(|s| !taken(*s)).ok_or("no free slot")?;
        remove(slot);
        let built = Self::build(slot, hosts);
        if let Err(e) = &built {
            remove(slot);
            return Err(e.clone());
        }
        let (ports, hosts) = built?;
        let mut net = Self {
            slot,
            hosts,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            queue: Arc::new(Queue::default()),
        };
        net.start(ports, rtt_ms)?;
        Ok(net)
    }

    /// The links and namespaces; returns the bridge ports' names (port 0 first) and the hosts.
    fn build(slot: u8, hosts: usize) -> Result<(Vec<String>, Vec<DelayHost>), String> {
        let root = name(slot, "r");
        let root_port = name(slot, "rb");
        let net = |last: u8| Ipv4Addr::new(10, 213, slot, last);
        run(&[
            "ip", "link", "add", &root, "type", "veth", "peer", "name", &root_port,
        ])?;
        run(&[
            "ip",
            "link",
            "set",
            &root,
            "alias",
            &std::process::id().to_string(),
        ])?;
        run(&["ip", "addr", "add", &format!("{}/24", net(1)), "dev", &root])?;
        let mut ports = vec![root_port.clone()];
        let mut out = Vec::new();
        for i in 0..hosts {
            let ns = name(slot, &format!("h{i}"));
            let port = name(slot, &format!("b{i}"));
            let ip = net(10 + i as u8);
            run(&["ip", "netns", "add", &ns])?;
            run(&[
                "ip", "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            run(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                "eth0",
            ])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
            run(&[
                "ip", "netns", "exec", &ns, "ethtool", "-K", "eth0", "tx", "off", "tso", "off",
                "gso", "off", "gro", "off",
            ])?;
            ports.push(port);
            out.push(DelayHost { netns: ns, ip });
        }
        for link in std::iter::once(&root).chain(&ports) {
            run(&["ip", "link", "set", link, "up"])?;
            run(&[
                "ethtool", "-K", link, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
            ])?;
        }
        Ok((ports, out))
    }

    fn start(&mut self, ports: Vec<String>, rtt_ms: Vec<Vec<u32>>) -> Result<(), String> {
        let sockets: Vec<Arc<OwnedFd>> = ports
            .iter()
            .map(|p| packet_socket(p).map(Arc::new))
            .collect::<Result<_, _>>()?;
        let macs: Arc<Mutex<HashMap<[u8; 6], usize>>> = Arc::default();
        let rtt = Arc::new(rtt_ms);
        for (i, sock) in sockets.iter().enumerate() {
            let (sock, stop, queue, macs, rtt) = (
                sock.clone(),
                self.stop.clone(),
                self.queue.clone(),
                macs.clone(),
                rtt.clone(),
            );
            let ports = sockets.len();
            self.threads.push(std::thread::spawn(move || {
                read_port(i, ports, &sock, &stop, &queue, &macs, &rtt);
            }));
        }
        let (stop, queue) = (self.stop.clone(), self.queue.clone());
        self.threads.push(std::thread::spawn(move || {
            while let Some(d) = queue.pop(&stop) {
                // SAFETY: send(2) of a buffer we own on an open socket. A frame the peer
                // cannot take (its namespace is gone) is dropped, as a switch would.
                unsafe {
                    libc::send(
                        sockets[d.port].as_raw_fd(),
                        d.frame.as_ptr().cast(),
                        d.frame.len(),
                        0,
                    )
                };
            }
        }));
        Ok(())
    }

    /// This host's address on the net (port 0): bind the devnet and local services here.
    pub(crate) fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 1)
    }

    /// Host `i`.
    pub(crate) fn host(&self, i: usize) -> &DelayHost {
        &self.hosts[i]
    }
}

/// Port `i`'s reader: learns source MACs, queues each frame for its destination port (every
/// other port for broadcast, multicast and unknown destinations) after half the round trip.
fn read_port(
    i: usize,
    ports: usize,
    sock: &OwnedFd,
    stop: &AtomicBool,
    queue: &Queue,
    macs: &Mutex<HashMap<[u8; 6], usize>>,
    rtt: &[Vec<u32>],
) {
    let mut buf = vec![0u8; FRAME];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: an all-zero sockaddr_ll is valid for recvfrom to fill.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        // SAFETY: recvfrom(2) into a buffer of FRAME bytes and a sockaddr_ll of `len` bytes.
        let n = unsafe {
            libc::recvfrom(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                std::ptr::from_mut(&mut from).cast(),
                &mut len,
            )
        };
        // A timeout (to look at `stop`), or a frame this bridge itself sent on this port.
        if n < 14 || from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let frame = buf[..n as usize].to_vec();
        let dst: [u8; 6] = frame[0..6].try_into().unwrap_or([0xff; 6]);
        let src: [u8; 6] = frame[6..12].try_into().unwrap_or([0; 6]);
        let out = {
            let mut m = macs.lock().unwrap_or_else(|e| e.into_inner());
            m.insert(src, i);
            (dst[0] & 1 == 0).then(|| m.get(&dst).copied()).flatten()
        };
        let now = Instant::now();
        let targets: Vec<usize> = match out {
            Some(j) if j != i => vec![j],
            Some(_) => Vec::new(),
            None => (0..ports).filter(|j| *j != i).collect(),
        };
        for j in targets {
            let half = Duration::from_micros(u64::from(rtt[i][j]) * 500);
            queue.push(now + half, j, frame.clone());
        }
    }
}

impl Drop for DelayNet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.queue.bell.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Ok(_lock) = lock() {
            remove(self.slot);
        }
    }
}

/// Runs `f` on a thread inside namespace `netns` (setns(2) moves only that thread). The
/// thread yields `None`, without running `f`, when it could not enter the namespace (this
/// function then returns the error).
///
/// # Errors
/// The namespace cannot be entered.
pub(crate) fn in_netns<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<Option<T>>, String> {
    let file = std::fs::File::open(format!("/var/run/netns/{netns}"))
        .map_err(|e| format!("netns {netns}: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        // SAFETY: setns(2) on an open namespace file; it changes only this thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        let entered = rc == 0;
        let _ = tx.send(if entered {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().to_string())
        });
        entered.then(f)
    });
    rx.recv()
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("setns {netns}: {e}"))?;
    Ok(handle)
}
