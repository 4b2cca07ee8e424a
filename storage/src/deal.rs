//! Deal-ready records: what a Filecoin storage deal for a job artifact needs, computed while the
//! CAR is exported, and the interface a deal client plugs into.
//!
//! Making the deal itself needs a storage provider on the network, so this crate stops at the
//! record. A deal client takes a [`DealReady`] plus where the CAR can be fetched and maps it onto:
//! - Boost: `boost deal --provider=f0… --http-url=<car url> --commp=<piece_cid>
//!   --car-size=<car_bytes> --piece-size=<padded_piece_bytes> --payload-cid=<payload_cid>
//!   --duration=<epochs> --storage-price=<attoFIL/GiB/epoch> [--verified]`;
//! - Lotus: `ClientStartDeal` / `ClientDealPieceCID` with `DataRef { TransferType: "manual",
//!   Root: payload_cid, PieceCid: piece_cid, PieceSize: padded × 127/128 }`;
//! - an aggregator (e.g. one speaking FRC-0058 data segments) takes `(piece_cid, padded size)`.

use std::pin::Pin;
use std::task::{Context, Poll};

use cid::Cid;
use tokio::io::AsyncWrite;

use crate::blockstore::Blockstore;
use crate::commp::{CommP, PayloadTooSmall};

/// Errors of [`prepare`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Exporting the CAR failed.
    #[error(transparent)]
    Car(#[from] crate::car::Error),
    /// The CAR is below Filecoin's minimum piece payload (cannot happen for a real CAR, whose
    /// header alone is ~60 bytes, but the rule is kept).
    #[error(transparent)]
    TooSmall(#[from] PayloadTooSmall),
}

/// Everything a storage deal for one DAG needs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DealReady {
    /// Piece CID v1 (`baga6ea4seaq…`): CommP of the CAR.
    pub piece_cid: Cid,
    /// Piece CID v2 (FRC-0069 `bafkzcib…`): CommP with its size and padding.
    pub piece_cid_v2: Cid,
    /// Padded piece size in bytes (power of two): the deal's `PieceSize`.
    pub padded_piece_bytes: u64,
    /// The DAG root the CAR holds (the deal's `PayloadCid` / `Root`).
    pub payload_cid: Cid,
    /// CAR size in bytes (Boost's `--car-size`).
    pub car_bytes: u64,
}

/// Parameters a deal client adds to a [`DealReady`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DealParams {
    /// Storage provider actor address, e.g. `f01234`.
    pub provider: String,
    /// Where the provider downloads the CAR (HTTP URL).
    pub car_url: String,
    /// Deal duration in chain epochs (30 s each; Filecoin allows 518 400..=1 555 200 +).
    pub duration_epochs: u64,
    /// Price in attoFIL per GiB per epoch.
    pub price_attofil_per_gib_epoch: u128,
    /// Whether the deal uses DataCap (Filecoin Plus).
    pub verified: bool,
}

/// The interface a deal client (Boost, Lotus, an aggregator) implements; none ships here since
/// deals need the network.
pub trait DealClient: Send + Sync {
    /// The client's error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Proposes a deal for `piece`; returns the proposal's identifier (a deal UUID for Boost).
    ///
    /// # Errors
    /// The client's.
    fn propose(
        &self,
        piece: &DealReady,
        params: &DealParams,
    ) -> impl std::future::Future<Output = Result<String, Self::Error>> + Send;
}

/// Exports the CAR of `root` into `car_out` and computes its piece CID on the way.
///
/// # Errors
/// [`Error::Car`] when the DAG is incomplete or writing fails.
pub async fn prepare<S, W>(store: &S, root: &Cid, car_out: W) -> Result<DealReady, Error>
where
    S: Blockstore,
    W: AsyncWrite + Send + Unpin,
{
    let mut tee = CommPWriter {
        inner: car_out,
        hasher: CommP::new(),
    };
    let summary = crate::car::export(store, root, &mut tee).await?;
    let piece = tee.hasher.finish()?;
    Ok(DealReady {
        piece_cid: piece.cid_v1(),
        piece_cid_v2: piece.cid_v2(),
        padded_piece_bytes: piece.padded_bytes,
        payload_cid: *root,
        car_bytes: summary.bytes,
    })
}

/// An `AsyncWrite` that hashes what its inner writer accepted.
struct CommPWriter<W> {
    inner: W,
    hasher: CommP,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for CommPWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                this.hasher.update(&buf[..n]);
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
