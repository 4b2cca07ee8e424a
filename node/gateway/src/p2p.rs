//! HTTP to a replica through its provider's node over libp2p: `/ganglion/service/1`, a raw
//! stream (`libp2p-stream`, as the overlay's relay fallback) carrying one HTTP/1.1
//! connection, so a gateway reaches replicas behind NATs over the swarm's connection to the
//! provider (direct, hole-punched or relayed).
//!
//! **Wire.** The gateway opens a stream and writes a header: a big-endian `u16` length, then
//! that many bytes of JSON `{"job": "<64 hex>", "rank": n}` (at most [`MAX_HEADER`] bytes).
//! The provider's node answers one byte: `0` — it has connected to that replica's container
//! and from here on the stream carries the TCP connection's bytes both ways, unchanged; `1` —
//! refused, followed by a `u16` length and a UTF-8 reason, then the stream closes.
//!
//! **Who may.** The provider's [`Resolve`] decides from the peer, the job and the rank
//! (the node lets only the job's orchestrator through) and connects to the container; an
//! unknown job or rank is refused, never guessed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{AsyncReadExt as _, AsyncWriteExt as _, StreamExt as _};
use libp2p::{PeerId, StreamProtocol};
use libp2p_stream::{Control, IncomingStreams};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::compat::FuturesAsyncReadCompatExt as _;
use tokio_util::sync::CancellationToken;

/// The stream protocol.
pub const SERVICE_PROTOCOL: StreamProtocol = StreamProtocol::new("/ganglion/service/1");
/// Largest header, bytes.
pub const MAX_HEADER: usize = 512;
/// Time to read a header, or to connect to the container, before the stream is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Streams one provider's node carries at once; more wait for one to end.
const MAX_STREAMS: usize = 1024;

/// Which replica a stream is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    /// The job (escrow job id).
    #[serde(with = "hex::serde")]
    pub job: [u8; 32],
    /// The replica's rank in the job's assignment order.
    pub rank: u32,
}

/// Why a stream to a replica could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The stream could not be opened (no connection to the peer, or it does not speak the
    /// protocol).
    #[error("opening {SERVICE_PROTOCOL} to {peer}: {source}")]
    Open {
        /// The provider's node.
        peer: PeerId,
        /// The cause.
        source: libp2p_stream::OpenStreamError,
    },
    /// The stream broke during the header exchange.
    #[error("{SERVICE_PROTOCOL} header exchange: {0}")]
    Io(#[from] std::io::Error),
    /// The provider's node refused the stream.
    #[error("the provider's node refused the stream: {0}")]
    Refused(String),
    /// The header exchange took longer than 5 s.
    #[error("the provider's node did not answer the stream header in time")]
    Timeout,
}

/// Opens a stream to `peer` for `target` and completes the header exchange: the returned
/// stream carries the TCP connection to the replica's container.
///
/// # Errors
/// [`StreamError`].
pub async fn open(
    control: &mut Control,
    peer: PeerId,
    target: Target,
) -> Result<libp2p::Stream, StreamError> {
    let mut stream = control
        .open_stream(peer, SERVICE_PROTOCOL)
        .await
        .map_err(|source| StreamError::Open { peer, source })?;
    let exchange = async {
        let header = serde_json::to_vec(&target).map_err(std::io::Error::other)?;
        let len = u16::try_from(header.len()).map_err(std::io::Error::other)?;
        stream.write_all(&len.to_be_bytes()).await?;
        stream.write_all(&header).await?;
        stream.flush().await?;
        let mut status = [0u8; 1];
        stream.read_exact(&mut status).await?;
        if status[0] == 0 {
            return Ok(());
        }
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut reason = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut reason).await?;
        Err(StreamError::Refused(
            String::from_utf8_lossy(&reason).into_owned(),
        ))
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange).await {
        Ok(Ok(())) => Ok(stream),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(StreamError::Timeout),
    }
}

/// The provider's node's side: whether `peer` may reach the replica `target` names, and a TCP
/// connection to it (its container may be reachable only from inside its pod's network
/// namespace, so the node connects, not the gateway crate).
pub trait Resolve: Send + Sync + 'static {
    /// Connects to the container serving `target` when `peer` may reach it; otherwise why not
    /// (sent back as the refusal's reason).
    ///
    /// # Errors
    /// The reason, in words.
    fn connect(
        &self,
        peer: PeerId,
        target: Target,
    ) -> BoxFuture<'static, Result<TcpStream, String>>;
}

/// A boxed future, as [`Resolve::connect`] returns.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A [`Resolve`] from a function naming the replica's address (reachable from this process),
/// connected with a 5 s timeout.
pub fn by_address<F>(address: F) -> Arc<dyn Resolve>
where
    F: Fn(&PeerId, &Target) -> Result<SocketAddr, String> + Send + Sync + 'static,
{
    struct ByAddress<F>(F);
    impl<F> Resolve for ByAddress<F>
    where
        F: Fn(&PeerId, &Target) -> Result<SocketAddr, String> + Send + Sync + 'static,
    {
        fn connect(
            &self,
            peer: PeerId,
            target: Target,
        ) -> BoxFuture<'static, Result<TcpStream, String>> {
            let addr = (self.0)(&peer, &target);
            Box::pin(async move {
                let addr = addr?;
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(addr)).await {
                    Ok(Ok(tcp)) => Ok(tcp),
                    Ok(Err(e)) => Err(format!("the replica at {addr} refused: {e}")),
                    Err(_) => Err(format!("the replica at {addr} did not accept in time")),
                }
            })
        }
    }
    Arc::new(ByAddress(address))
}

/// Takes the inbound streams of [`SERVICE_PROTOCOL`] on `control`'s swarm (once per swarm).
///
/// # Errors
/// The protocol is already taken on this swarm.
pub fn accept(control: &mut Control) -> Result<IncomingStreams, libp2p_stream::AlreadyRegistered> {
    control.accept(SERVICE_PROTOCOL)
}

/// Serves `incoming` streams until `stop` is cancelled: each is resolved, connected to its
/// container and spliced (at most 1 024 at once).
pub async fn serve(
    mut incoming: IncomingStreams,
    resolve: Arc<dyn Resolve>,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(MAX_STREAMS));
    loop {
        let (peer, stream) = tokio::select! {
            () = stop.cancelled() => return,
            next = incoming.next() => match next {
                Some(s) => s,
                None => return,
            },
        };
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (resolve, stop) = (Arc::clone(&resolve), stop.clone());
        tokio::spawn(async move {
            let _permit = permit;
            tokio::select! {
                () = stop.cancelled() => {}
                served = splice(peer, stream, resolve.as_ref()) => if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "service stream ended");
                },
            }
        });
    }
}

async fn splice(
    peer: PeerId,
    mut stream: libp2p::Stream,
    resolve: &dyn Resolve,
) -> std::io::Result<()> {
    let header = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let len = usize::from(u16::from_be_bytes(len));
        if len > MAX_HEADER {
            return Err(std::io::Error::other(format!("header of {len} bytes")));
        }
        let mut header = vec![0u8; len];
        stream.read_exact(&mut header).await?;
        Ok(header)
    })
    .await
    .map_err(|_| std::io::Error::other("no header in time"))??;
    let target: Target = match serde_json::from_slice(&header) {
        Ok(t) => t,
        Err(e) => return refuse(stream, &format!("bad header: {e}")).await,
    };
    let tcp = match tokio::time::timeout(HANDSHAKE_TIMEOUT, resolve.connect(peer, target)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(reason)) => return refuse(stream, &reason).await,
        Err(_) => return refuse(stream, "the replica did not accept in time").await,
    };
    let _ = tcp.set_nodelay(true);
    stream.write_all(&[0]).await?;
    stream.flush().await?;
    let mut stream = stream.compat();
    let mut tcp = tcp;
    tokio::io::copy_bidirectional(&mut stream, &mut tcp).await?;
    Ok(())
}

async fn refuse(mut stream: libp2p::Stream, reason: &str) -> std::io::Result<()> {
    let reason = &reason.as_bytes()[..reason.len().min(1024)];
    let len = u16::try_from(reason.len()).unwrap_or(0);
    stream.write_all(&[1]).await?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(reason).await?;
    stream.close().await
}
