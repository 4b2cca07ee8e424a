//! The relay fallback's transport (DESIGN §6): when a link's UDP path does not work,
//! its WireGuard datagrams travel over a libp2p stream, `/ganglion/overlay-relay/1`, between
//! the job's two nodes, on whatever connection libp2p has between them (direct, hole-punched
//! or through a circuit relay). The datagrams are already encrypted by the link's noise
//! session, so every hop on the way sees ciphertext only.
//!
//! Framing: each datagram is one frame, a 4-byte big-endian length then the bytes
//! (`tokio-util`'s [`LengthDelimitedCodec`]), at most [`MAX_FRAME`] bytes. Each node opens its
//! own stream to a peer for sending and reads every stream a peer opens to it; which link a
//! datagram belongs to is the router's business (receiver index), as for UDP.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::{SinkExt, StreamExt};
use libp2p::{PeerId, StreamProtocol};
use libp2p_stream::{Control, IncomingStreams};
use tokio::sync::mpsc;
use tokio_util::bytes::Bytes;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use tokio_util::compat::FuturesAsyncReadCompatExt;

use super::OverlayError;

/// The stream protocol carrying relayed datagrams.
pub const RELAY_PROTOCOL: StreamProtocol = StreamProtocol::new("/ganglion/overlay-relay/1");
/// Largest frame accepted or sent, bytes: the largest datagram the router makes (a 64 KiB TUN
/// read plus WireGuard's 32 bytes of framing), with room to spare.
pub const MAX_FRAME: usize = 65_536 + 64;
/// Datagrams queued for one peer's stream before new ones are dropped, as a full NIC queue
/// drops them (WireGuard and the TCP inside it recover).
const QUEUE: usize = 1024;
/// A writer with nothing to send for this long closes its stream (the libp2p connection may
/// then idle out); a relayed link sends at least a keepalive every 25 s, so only links of
/// removed jobs go quiet this long. The next datagram opens a new stream.
const WRITER_IDLE: std::time::Duration = std::time::Duration::from_secs(90);

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// The sending side: one stream per peer node, opened on first use and reopened after it
/// fails.
pub struct RelaySender {
    control: Control,
    writers: Mutex<HashMap<PeerId, mpsc::Sender<Vec<u8>>>>,
}

impl std::fmt::Debug for RelaySender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelaySender").finish_non_exhaustive()
    }
}

impl RelaySender {
    /// Sends through `control` (from the node's `p2p::Client::streams`).
    pub fn new(control: Control) -> Self {
        Self {
            control,
            writers: Mutex::new(HashMap::new()),
        }
    }

    /// Queues `datagram` for `peer` without waiting: starts the peer's writer (which opens the
    /// stream, dialling the peer if needed) when there is none or the last one failed; drops
    /// the datagram when the queue is full or it is larger than [`MAX_FRAME`]. Must run inside
    /// a tokio runtime.
    pub fn send(&self, peer: PeerId, datagram: Vec<u8>) {
        if datagram.len() > MAX_FRAME {
            tracing::debug!(%peer, len = datagram.len(), "relayed datagram too large");
            return;
        }
        let mut writers = self
            .writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let datagram = match writers.get(&peer) {
            Some(tx) => match tx.try_send(datagram) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::debug!(%peer, "relay queue full, datagram dropped");
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(d)) => d,
            },
            None => datagram,
        };
        let (tx, rx) = mpsc::channel(QUEUE);
        // A fresh channel has room for the first datagram.
        let _ = tx.try_send(datagram);
        tokio::spawn(write_frames(self.control.clone(), peer, rx));
        writers.insert(peer, tx);
    }
}

/// Registers this node for inbound relay streams on `control`: the returned streams are
/// `(peer, stream)` pairs, each to be read with [`read_frames`].
///
/// # Errors
/// [`OverlayError::Relay`] when the protocol is already registered on this swarm (one
/// [`super::node::OverlayNode`] per swarm).
pub fn accept(control: &mut Control) -> Result<IncomingStreams, OverlayError> {
    control.accept(RELAY_PROTOCOL).map_err(OverlayError::Relay)
}

/// Reads `stream`'s frames until it ends or breaks, handing each datagram to `on_datagram`.
pub async fn read_frames<F, Fut>(peer: PeerId, stream: libp2p::Stream, mut on_datagram: F)
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut frames = FramedRead::new(stream.compat(), codec());
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(bytes) => on_datagram(bytes.to_vec()).await,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "relay stream read failed");
                return;
            }
        }
    }
}

/// One peer's writer: opens the stream, then writes queued datagrams (batched, flushed when
/// the queue is empty) until the stream fails, the sender is dropped, or nothing came for
/// [`WRITER_IDLE`].
async fn write_frames(mut control: Control, peer: PeerId, mut rx: mpsc::Receiver<Vec<u8>>) {
    let stream = match control.open_stream(peer, RELAY_PROTOCOL).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "relay stream open failed");
            return;
        }
    };
    let mut sink = FramedWrite::new(stream.compat(), codec());
    while let Ok(Some(first)) = tokio::time::timeout(WRITER_IDLE, rx.recv()).await {
        if let Err(e) = sink.feed(Bytes::from(first)).await {
            tracing::debug!(%peer, error = %e, "relay stream write failed");
            return;
        }
        while let Ok(more) = rx.try_recv() {
            if let Err(e) = sink.feed(Bytes::from(more)).await {
                tracing::debug!(%peer, error = %e, "relay stream write failed");
                return;
            }
        }
        if let Err(e) = SinkExt::<Bytes>::flush(&mut sink).await {
            tracing::debug!(%peer, error = %e, "relay stream flush failed");
            return;
        }
    }
}
