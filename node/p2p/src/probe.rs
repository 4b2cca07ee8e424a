//! Throughput probes between providers: `/ganglion/probe/1`, a raw libp2p stream
//! (`libp2p-stream`, as the overlay's relay fallback).
//!
//! **Wire.** The prober opens a stream and writes exactly [`PROBE_BYTES`] (2 MiB) of zeros,
//! then reads the answer: 16 bytes, two big-endian `u64`s — the bytes the answerer received
//! after its first read, and the µs between that first read and the last byte. The prober's
//! figure is `bytes × 8 / µs` Mbit/s, this node's send rate to that peer (the first read's
//! bytes are left out, as their transfer time is not in the interval). The answerer reads
//! exactly [`PROBE_BYTES`] and nothing more.
//!
//! **Bounds.** [`Prober::run`] probes connected peers that have a live offer (providers),
//! one probe at a time, each peer at most once per [`ProbeConfig::every`] (10 minutes), each
//! probe under [`ProbeConfig::timeout`]. Inbound, a peer is answered at most once per
//! [`ProbeConfig::inbound_gap`] and at most [`ProbeConfig::max_inbound`] probes run at once;
//! any other stream is dropped unread. The results go into the [`Client`]'s table
//! ([`Client::throughputs`]) for [`MBPS_MAX_AGE`]; the provider's offer carries them in its
//! links (`Link::mbps`) and its best one as its `uplink_mbps`.
//!
//! Like every link, a figure is the provider's own claim; an answerer that lies about its
//! timing only changes what the prober advertises for the pair, and an orchestrator takes the
//! lower figure of the two ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{AsyncReadExt as _, AsyncWriteExt as _, StreamExt as _};
use libp2p::{PeerId, StreamProtocol};
use tokio::sync::Semaphore;

use super::client::Client;
use super::rtt::MAX_RTT_PEERS;

/// The stream protocol of a throughput probe.
pub const PROBE_PROTOCOL: StreamProtocol = StreamProtocol::new("/ganglion/probe/1");
/// Bytes one probe sends (2 MiB).
pub const PROBE_BYTES: u64 = 2 * 1024 * 1024;
/// How long a measured figure is advertised, from its probe (30 minutes: three probe rounds).
pub const MBPS_MAX_AGE: Duration = Duration::from_secs(30 * 60);

/// Write and read chunk, bytes.
const CHUNK: usize = 64 * 1024;

/// How probes are paced. Defaults in [`ProbeConfig::default`].
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Each peer is probed at most this often (default 10 minutes).
    pub every: Duration,
    /// How often the prober looks for a peer that is due, one probe per look (default 5 s:
    /// 64 providers are all probed within 6 minutes).
    pub tick: Duration,
    /// A peer's probe is answered at most this often (default 5 minutes: a peer that
    /// restarted may probe again before its 10 minutes, but no faster).
    pub inbound_gap: Duration,
    /// Inbound probes answered at once (default 2).
    pub max_inbound: usize,
    /// One probe, either side, from open to answer (default 30 s).
    pub timeout: Duration,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(600),
            tick: Duration::from_secs(5),
            inbound_gap: Duration::from_secs(300),
            max_inbound: 2,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The stream could not be opened (the peer does not speak the protocol, or is gone).
    #[error("opening the probe stream: {0}")]
    Open(#[from] libp2p_stream::OpenStreamError),
    /// The stream broke.
    #[error("probe stream: {0}")]
    Io(#[from] std::io::Error),
    /// It took longer than [`ProbeConfig::timeout`].
    #[error("the probe took longer than {0:?}")]
    Timeout(Duration),
    /// The answer makes no sense (no time, or more bytes than were sent).
    #[error("bad probe answer: {bytes} bytes in {micros} µs")]
    BadAnswer {
        /// Bytes the answerer says it timed.
        bytes: u64,
        /// µs it says they took.
        micros: u64,
    },
    /// This swarm already answers probes (one [`Prober`] per swarm).
    #[error("this swarm already answers {PROBE_PROTOCOL}")]
    AlreadyRegistered,
}

/// Measured send rates to peers, Mbit/s, with when each was measured. At most
/// [`MAX_RTT_PEERS`] peers; with more, the oldest figure goes.
#[derive(Debug, Default)]
pub struct Throughputs {
    by_peer: HashMap<PeerId, (u32, Instant)>,
}

impl Throughputs {
    /// Records a probe's result.
    pub fn record(&mut self, peer: PeerId, mbps: u32, at: Instant) {
        if !self.by_peer.contains_key(&peer)
            && self.by_peer.len() >= MAX_RTT_PEERS
            && let Some(oldest) = self
                .by_peer
                .iter()
                .min_by_key(|(_, v)| v.1)
                .map(|(p, _)| *p)
        {
            self.by_peer.remove(&oldest);
        }
        self.by_peer.insert(peer, (mbps, at));
    }

    /// Figures measured at most `max_age` before `now`, by peer.
    pub fn fresh(&self, max_age: Duration, now: Instant) -> HashMap<PeerId, u32> {
        self.by_peer
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) <= max_age)
            .map(|(p, (mbps, _))| (*p, *mbps))
            .collect()
    }
}

/// The table a [`Client`] shares with its [`Prober`].
pub(crate) type SharedThroughputs = Arc<Mutex<Throughputs>>;

/// Mbit/s of `bytes` in `micros` µs (bits per µs), saturating; `None` for no time or no bytes.
pub fn mbps(bytes: u64, micros: u64) -> Option<u32> {
    if micros == 0 || bytes == 0 {
        return None;
    }
    Some(u32::try_from(bytes.saturating_mul(8) / micros).unwrap_or(u32::MAX))
}

/// Probes `peer` once: sends [`PROBE_BYTES`], returns the send rate its answer gives, Mbit/s
/// (at least 1).
///
/// # Errors
/// [`ProbeError`]: the stream, the peer's answer, or the timeout.
pub async fn probe(
    control: &mut libp2p_stream::Control,
    peer: PeerId,
    timeout: Duration,
) -> Result<u32, ProbeError> {
    let run = async {
        let mut stream = control.open_stream(peer, PROBE_PROTOCOL).await?;
        let chunk = vec![0u8; CHUNK];
        let mut left = PROBE_BYTES;
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
            stream.write_all(&chunk[..n]).await?;
            left -= n as u64;
        }
        stream.flush().await?;
        let mut answer = [0u8; 16];
        stream.read_exact(&mut answer).await?;
        let _ = stream.close().await;
        let (b, m) = answer.split_at(8);
        let bytes = u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
        let micros = u64::from_be_bytes(m.try_into().unwrap_or([0; 8]));
        if bytes > PROBE_BYTES {
            return Err(ProbeError::BadAnswer { bytes, micros });
        }
        mbps(bytes, micros)
            .map(|x| x.max(1))
            .ok_or(ProbeError::BadAnswer { bytes, micros })
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| ProbeError::Timeout(timeout))?
}

/// Answers one inbound probe on `stream`: reads exactly [`PROBE_BYTES`], times them from the
/// first read on, writes the answer.
///
/// # Errors
/// [`ProbeError::Io`] (a short or broken stream), [`ProbeError::Timeout`].
pub async fn answer(mut stream: libp2p::Stream, timeout: Duration) -> Result<(), ProbeError> {
    let run = async {
        let mut buf = vec![0u8; CHUNK];
        let mut left = PROBE_BYTES;
        let mut first: Option<Instant> = None;
        let mut timed = 0u64;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
            let n = stream.read(&mut buf[..want]).await?;
            if n == 0 {
                return Err(ProbeError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            left -= n as u64;
            match first {
                None => first = Some(Instant::now()),
                Some(_) => timed += n as u64,
            }
        }
        let micros = first.map_or(0, |t| {
            u64::try_from(t.elapsed().as_micros())
                .unwrap_or(u64::MAX)
                .max(1)
        });
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&timed.to_be_bytes());
        out[8..].copy_from_slice(&micros.to_be_bytes());
        stream.write_all(&out).await?;
        stream.flush().await?;
        let _ = stream.close().await;
        Ok(())
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| ProbeError::Timeout(timeout))?
}

/// Runs this node's probes: answers inbound ones within the bounds and probes the connected
/// providers in turn. One per swarm; the daemon runs it on a provider node.
pub struct Prober {
    client: Client,
    own: PeerId,
    config: ProbeConfig,
    incoming: libp2p_stream::IncomingStreams,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("own", &self.own)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Prober {
    /// Registers `/ganglion/probe/1` on `client`'s swarm (whose peer id is `own`).
    ///
    /// # Errors
    /// [`ProbeError::AlreadyRegistered`] when a prober already runs on this swarm.
    pub fn new(client: &Client, own: PeerId, config: ProbeConfig) -> Result<Self, ProbeError> {
        let incoming = client
            .streams()
            .accept(PROBE_PROTOCOL)
            .map_err(|_| ProbeError::AlreadyRegistered)?;
        Ok(Self {
            client: client.clone(),
            own,
            config,
            incoming,
        })
    }

    /// Answers and probes until the swarm stops.
    pub async fn run(self) {
        let Self {
            client,
            own,
            config,
            incoming,
        } = self;
        futures::join!(
            serve(incoming, config.clone()),
            probe_providers(client, own, config)
        );
    }
}

/// The inbound side: each peer at most once per `inbound_gap`, at most `max_inbound` at once.
async fn serve(mut incoming: libp2p_stream::IncomingStreams, config: ProbeConfig) {
    let slots = Arc::new(Semaphore::new(config.max_inbound));
    let mut last: HashMap<PeerId, Instant> = HashMap::new();
    while let Some((peer, stream)) = incoming.next().await {
        let now = Instant::now();
        last.retain(|_, at| now.saturating_duration_since(*at) < config.inbound_gap);
        if last.contains_key(&peer) {
            tracing::debug!(%peer, "probe refused: this peer probed less than the gap ago");
            continue;
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "probe refused: enough probes running");
            continue;
        };
        if last.len() < MAX_RTT_PEERS {
            last.insert(peer, now);
        }
        let timeout = config.timeout;
        tokio::spawn(async move {
            if let Err(e) = answer(stream, timeout).await {
                tracing::debug!(%peer, error = %e, "probe not answered");
            }
            drop(slot);
        });
    }
}

/// The outbound side: one probe per tick at most, to a connected provider not probed within
/// `every` (lowest peer id first).
async fn probe_providers(client: Client, own: PeerId, config: ProbeConfig) {
    let mut control = client.streams();
    let mut last: HashMap<PeerId, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(config.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (Ok(connected), Ok(market)) = (client.connected_peers().await, client.market().await)
        else {
            return; // the swarm stopped
        };
        let now = Instant::now();
        last.retain(|_, at| now.saturating_duration_since(*at) < config.every);
        let due = market
            .iter()
            .filter_map(|o| PeerId::from_bytes(&o.body.peer_id).ok())
            .filter(|p| *p != own && connected.contains(p) && !last.contains_key(p))
            .min_by_key(|p| p.to_bytes());
        let Some(peer) = due else { continue };
        last.insert(peer, now);
        match probe(&mut control, peer, config.timeout).await {
            Ok(mbps) => {
                tracing::debug!(%peer, mbps, "throughput probe");
                client.record_throughput(peer, mbps, Instant::now());
            }
            Err(e) => tracing::debug!(%peer, error = %e, "throughput probe failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbps_is_bits_per_microsecond() {
        assert_eq!(mbps(PROBE_BYTES, 16_777), Some(1000));
        assert_eq!(mbps(1, 8), Some(1));
        assert_eq!(mbps(0, 8), None);
        assert_eq!(mbps(8, 0), None);
        assert_eq!(mbps(u64::MAX, 1), Some(u32::MAX));
    }

    #[test]
    fn the_table_keeps_fresh_figures_and_is_bounded() {
        let mut t = Throughputs::default();
        let t0 = Instant::now();
        let first = PeerId::random();
        t.record(first, 10, t0);
        for i in 1..MAX_RTT_PEERS {
            t.record(PeerId::random(), 20, t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(t.fresh(Duration::MAX, t0).len(), MAX_RTT_PEERS);
        t.record(PeerId::random(), 30, t0 + Duration::from_secs(100));
        let all = t.fresh(Duration::MAX, t0);
        assert_eq!(all.len(), MAX_RTT_PEERS);
        assert!(!all.contains_key(&first), "the oldest went");
        let recent = t.fresh(Duration::from_secs(1), t0 + Duration::from_secs(100));
        assert_eq!(recent.values().copied().collect::<Vec<_>>(), vec![30]);
    }
}
