//! The overlay's I/O driver on one node: a single UDP socket for every job's tunnels, one TUN
//! per job pod, and the 250 ms timer tick, all on tokio (the namespace work happens before,
//! on dedicated threads; see [`super::netns`]). With a relay ([`OverlayNode::set_relay`]),
//! links without a direct handshake fall back to libp2p streams ([`super::relay`]) and
//! [`OverlayNode::links`] reports each link as direct, relayed or pending.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use super::OverlayError;
use super::config::OverlayConfig;
use super::keys::JobKeys;
use super::relay::{self, RelaySender};
use super::router::{Action, Drops, LinkReport, OverlayPeer, Router};
use super::tun::TunDevice;
use crate::executor::plan::RunId;

/// The tick of boringtun's timers (handshake retry, keepalive, rekey).
const TICK: Duration = Duration::from_millis(250);
/// Read buffer for TUN packets and datagrams.
const BUF: usize = 65_536;
/// Kernel receive and send buffer asked for the node's UDP socket, bytes. The default (about
/// 208 KiB) overflows under one TCP flow's bursts while the driver is busy (measured: 16% of
/// datagrams dropped, `RcvbufErrors` in `/proc/net/snmp`), and every drop costs TCP a backoff.
const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// Enlarges `socket`'s kernel buffers to [`SOCKET_BUFFER`]: the `*FORCE` options (root or
/// `CAP_NET_ADMIN`, past `net.core.rmem_max`) first, else the plain ones (capped by the
/// sysctl). Best effort: a smaller buffer still works, only slower.
fn enlarge_buffers(socket: &std::net::UdpSocket) {
    let fd = socket.as_raw_fd();
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let size: libc::c_int = SOCKET_BUFFER;
        let set = |opt: libc::c_int| {
            // SAFETY: setsockopt on an fd we own with a c_int value of the right size.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&raw const size).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            }
        };
        if set(force) < 0 && set(plain) < 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "overlay socket buffer");
        }
    }
}

struct Inner {
    router: Mutex<Router>,
    socket: UdpSocket,
    tuns: Mutex<HashMap<RunId, JobTun>>,
    relay: OnceLock<Relay>,
}

/// The relay fallback of a node: where relayed datagrams go, and after how long a link falls
/// back.
struct Relay {
    sender: RelaySender,
    after: Duration,
}

/// A job's TUN on this node and the task reading it.
struct JobTun {
    fd: Arc<AsyncFd<OwnedFd>>,
    reader: JoinHandle<()>,
}

/// Accepts the relay streams this node's peers open and feeds their datagrams to the node's
/// links ([`OverlayNode::set_relay`]). [`RelayAcceptor::run`] returns only when the swarm's
/// stream control is gone.
pub struct RelayAcceptor {
    incoming: libp2p_stream::IncomingStreams,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RelayAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayAcceptor").finish_non_exhaustive()
    }
}

impl RelayAcceptor {
    /// Accepts streams until the swarm is gone; each stream's reader ends with this future
    /// (dropping it, e.g. at a node's shutdown, stops them all).
    pub async fn run(self) {
        use futures::StreamExt;
        let Self {
            mut incoming,
            inner,
        } = self;
        // Readers die with this future (the set aborts them on drop).
        let mut readers = tokio::task::JoinSet::new();
        while let Some((peer, stream)) = incoming.next().await {
            tracing::debug!(%peer, "relay stream accepted");
            let inner = inner.clone();
            readers.spawn(relay::read_frames(peer, stream, move |datagram| {
                let inner = inner.clone();
                async move {
                    let actions = lock(&inner.router).inbound_relayed(peer, &datagram);
                    inner.execute(actions).await;
                }
            }));
            while readers.try_join_next().is_some() {}
        }
        tracing::warn!("overlay relay: the swarm's stream control is gone");
    }
}

/// The node's overlay: started once, jobs added and removed as they run.
pub struct OverlayNode {
    inner: Arc<Inner>,
    /// The driver loops, aborted when the node drops.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// The same loops, named, until [`OverlayNode::driver`] takes them to watch.
    loops: Mutex<Option<Vec<DriverLoop>>>,
}

/// A driver loop of the node: its name and its task.
type DriverLoop = (&'static str, JoinHandle<()>);

impl std::fmt::Debug for OverlayNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OverlayNode")
            .field("local", &self.inner.socket.local_addr().ok())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    async fn execute(&self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send { to, datagram } => {
                    if let Err(e) = self.socket.send_to(&datagram, to).await {
                        tracing::debug!(%to, error = %e, "overlay send failed");
                    }
                }
                Action::Relay { peer, datagram } => match self.relay.get() {
                    Some(relay) => relay.sender.send(peer, datagram),
                    None => tracing::debug!(%peer, "no relay: datagram dropped"),
                },
                Action::Deliver { job, packet } => {
                    let fd = lock(&self.tuns).get(&job).map(|t| t.fd.clone());
                    if let Some(fd) = fd {
                        // SAFETY: writes `packet` to an fd we own; a full queue (EAGAIN)
                        // drops the packet as a NIC would.
                        let n = unsafe {
                            libc::write(
                                fd.get_ref().as_raw_fd(),
                                packet.as_ptr().cast(),
                                packet.len(),
                            )
                        };
                        if n < 0 {
                            tracing::debug!(%job, error = %std::io::Error::last_os_error(), "TUN write failed");
                        }
                    }
                }
            }
        }
    }
}

impl OverlayNode {
    /// Starts the driver on `socket` (bound wherever the caller chose, possibly inside another
    /// namespace). Must run inside a tokio runtime.
    ///
    /// # Errors
    /// [`OverlayError::Io`] when the socket cannot be registered with tokio.
    pub fn start(socket: std::net::UdpSocket) -> Result<Self, OverlayError> {
        socket
            .set_nonblocking(true)
            .map_err(OverlayError::io("socket nonblocking"))?;
        enlarge_buffers(&socket);
        let socket = UdpSocket::from_std(socket).map_err(OverlayError::io("register socket"))?;
        let inner = Arc::new(Inner {
            router: Mutex::new(Router::new()),
            socket,
            tuns: Mutex::new(HashMap::new()),
            relay: OnceLock::new(),
        });
        let rx = inner.clone();
        let recv = tokio::spawn(async move {
            let mut buf = vec![0u8; BUF];
            loop {
                match rx.socket.recv_from(&mut buf).await {
                    Ok((n, from)) => {
                        let actions = lock(&rx.router).inbound(from, &buf[..n]);
                        rx.execute(actions).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "overlay recv failed"),
                }
            }
        });
        let tk = inner.clone();
        let tick = tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let actions = {
                    let mut router = lock(&tk.router);
                    let mut actions = router.tick();
                    if let Some(relay) = tk.relay.get() {
                        actions.extend(router.relay_fallback(Instant::now(), relay.after));
                    }
                    actions
                };
                tk.execute(actions).await;
            }
        });
        Ok(Self {
            inner,
            tasks: Mutex::new(vec![recv.abort_handle(), tick.abort_handle()]),
            loops: Mutex::new(Some(vec![("receive", recv), ("timer", tick)])),
        })
    }

    /// A future that ends, with [`OverlayError::DriverStopped`] naming it, when one of this
    /// node's driver loops (UDP receive, timer) ends: they run for as long as the node lives,
    /// so that only happens when one panics; without them no packet moves. Run it as a
    /// critical task (the daemon's `overlay driver`). `None` when it was taken already.
    pub fn driver(
        &self,
    ) -> Option<impl std::future::Future<Output = Result<(), OverlayError>> + Send + 'static> {
        let loops = lock(&self.loops).take()?;
        Some(async move {
            let (names, handles): (Vec<_>, Vec<_>) = loops.into_iter().unzip();
            let (ended, index, _) = futures::future::select_all(handles).await;
            Err(OverlayError::DriverStopped {
                which: names[index],
                how: match ended {
                    Ok(()) => "returned",
                    Err(e) if e.is_panic() => "panicked",
                    Err(_) => "cancelled",
                },
            })
        })
    }

    /// Turns on the relay fallback: links whose peer names a relay node
    /// ([`OverlayPeer::relay`]) and that have no direct handshake `after` they started
    /// (`[overlay] relay_fallback_s`, default 10 s) carry their datagrams over libp2p streams
    /// opened through `streams` (the node's `p2p::Client::streams` of this node's swarm); this
    /// node also accepts the streams its peers open: run the returned [`RelayAcceptor`] for as
    /// long as the node lives (the daemon supervises it as a critical task). Call once, after
    /// [`Self::start`] or [`Self::bind`], before adding jobs.
    ///
    /// # Errors
    /// [`OverlayError::RelayAlreadySet`] when this node set its relay up before,
    /// [`OverlayError::Relay`] when another one already registered the relay
    /// protocol on the same swarm.
    pub fn set_relay(
        &self,
        mut streams: libp2p_stream::Control,
        after: Duration,
    ) -> Result<RelayAcceptor, OverlayError> {
        let incoming = relay::accept(&mut streams)?;
        self.inner
            .relay
            .set(Relay {
                sender: RelaySender::new(streams),
                after,
            })
            .map_err(|_| OverlayError::RelayAlreadySet)?;
        Ok(RelayAcceptor {
            incoming,
            inner: self.inner.clone(),
        })
    }

    /// Every link of `job` on this node: the peer, its addresses, and whether datagrams go
    /// direct (UDP), over the relay, or are still pending (UDP, no handshake yet). Empty for an
    /// unknown job.
    pub fn links(&self, job: &RunId) -> Vec<LinkReport> {
        lock(&self.inner.router).links(job)
    }

    /// Binds the node's one UDP socket on all IPv4 addresses at `[overlay] listen_port` (0: any
    /// free port) and starts the driver. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// [`OverlayError::Bind`] when the port is taken; [`OverlayError::Io`] when the socket
    /// cannot be registered.
    pub fn bind(config: &OverlayConfig) -> Result<Self, OverlayError> {
        let socket =
            std::net::UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, config.listen_port))
                .map_err(|source| OverlayError::Bind {
                    port: config.listen_port,
                    source,
                })?;
        Self::start(socket)
    }

    /// The UDP endpoint peers send to (a LAN candidate for the `cluster` exchange).
    ///
    /// # Errors
    /// [`OverlayError::Io`] from the socket.
    pub fn local_addr(&self) -> Result<SocketAddr, OverlayError> {
        self.inner
            .socket
            .local_addr()
            .map_err(OverlayError::io("local address"))
    }

    /// Dropped-packet counters.
    pub fn drops(&self) -> Drops {
        lock(&self.inner.router).drops()
    }

    /// Runs `job`'s tunnels: this node's `keys`, the job's other nodes, and the TUN of the
    /// job's pod here (already addressed, see [`super::pod`]); then punches (one handshake
    /// initiation to each peer), so two nodes adding the job after the same `cluster`
    /// exchange open their NATs for each other.
    ///
    /// # Errors
    /// From [`Router::add_job`], or [`OverlayError::Io`] when the TUN cannot be registered.
    pub fn add_job(
        &self,
        job: &RunId,
        keys: JobKeys,
        peers: &[OverlayPeer],
        tun: TunDevice,
    ) -> Result<(), OverlayError> {
        // SAFETY: an OwnedFd is open and refers to the same TUN for as long as it lives.
        let fd = unsafe { AsyncFd::register(tun.into_fd()) }.map_err(|e| OverlayError::Io {
            operation: "register TUN",
            source: e.into_parts().1,
        })?;
        let fd = Arc::new(fd);
        lock(&self.inner.router).add_job(job, keys, peers)?;
        let inner = self.inner.clone();
        let reader_fd = fd.clone();
        let reader_job = job.clone();
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; BUF];
            loop {
                let Ok(mut guard) = reader_fd.readable().await else {
                    return;
                };
                let read = guard.try_io(|fd| {
                    // SAFETY: reads into our buffer from an fd we own.
                    let n = unsafe {
                        libc::read(fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                    };
                    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
                });
                match read {
                    Ok(Ok(n)) => {
                        let actions = lock(&inner.router).outbound(&reader_job, &buf[..n]);
                        inner.execute(actions).await;
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(job = %reader_job, error = %e, "TUN read failed");
                        return;
                    }
                    Err(_would_block) => {}
                }
            }
        });
        if let Some(old) = lock(&self.inner.tuns).insert(job.clone(), JobTun { fd, reader }) {
            old.reader.abort();
        }
        self.punch(job);
        Ok(())
    }

    /// Sends a handshake initiation to every peer of `job` now (hole punching; see
    /// [`Router::punch`]). [`Self::add_job`] does it once; call again when the peers
    /// agreed on a new time over libp2p. Unknown job: nothing.
    pub fn punch(&self, job: &RunId) {
        let actions = lock(&self.inner.router).punch(job);
        let inner = self.inner.clone();
        tokio::spawn(async move { inner.execute(actions).await });
    }

    /// Stops `job`'s tunnels and closes its TUN (the interface goes with the fd); absent is
    /// fine.
    pub fn remove_job(&self, job: &RunId) {
        lock(&self.inner.router).remove_job(job);
        if let Some(old) = lock(&self.inner.tuns).remove(job) {
            old.reader.abort();
        }
    }
}

impl Drop for OverlayNode {
    fn drop(&mut self) {
        for task in lock(&self.tasks).iter() {
            task.abort();
        }
        for (_, old) in lock(&self.inner.tuns).drain() {
            old.reader.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bind_takes_the_configured_port_and_refuses_a_taken_one() {
        let any = OverlayConfig {
            listen_port: 0,
            ..OverlayConfig::default()
        };
        let node = OverlayNode::bind(&any).expect("any free port");
        let port = node.local_addr().expect("addr").port();
        assert_ne!(port, 0);
        let taken = OverlayConfig {
            listen_port: port,
            ..OverlayConfig::default()
        };
        let err = OverlayNode::bind(&taken).expect_err("port in use");
        assert!(
            matches!(err, OverlayError::Bind { port: p, .. } if p == port),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("UDP port {port}")) && text.contains("[overlay] listen_port"),
            "the error names the port and the key: {text}"
        );
    }

    #[tokio::test]
    async fn the_driver_watch_names_a_loop_that_stopped() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let node = OverlayNode::start(socket).expect("starts");
        let driver = node.driver().expect("the watch");
        assert!(node.driver().is_none(), "taken once");
        // Dropping the node aborts its loops: the watch says which stopped and how.
        drop(node);
        let err = driver.await.expect_err("a loop stopped");
        assert!(
            matches!(
                err,
                OverlayError::DriverStopped {
                    how: "cancelled",
                    ..
                }
            ),
            "{err}"
        );
    }
}
