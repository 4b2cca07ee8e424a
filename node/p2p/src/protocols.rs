//! Request-response protocols: `accept`, `cluster`, `heartbeat` ([`heartbeat`]).
//! Names, messages, CBOR codec, caps.
//!
//! Every protocol name carries its version (`/ganglion/accept/1`); a breaking change gets a new
//! name and both are served while old nodes remain. Messages are CBOR (`ciborium`, serde) framed
//! by an unsigned-varint length prefix; a frame larger than the protocol's cap is refused before
//! its bytes are read, so a peer cannot make the node buffer more than the cap.

use std::io;
use std::marker::PhantomData;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;
use libp2p::StreamProtocol;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

pub mod heartbeat;
pub use heartbeat::{
    HEARTBEAT_PROTOCOL, HeartbeatRefusal, HeartbeatRequest, HeartbeatResponse, LiveLog,
    MAX_HEARTBEAT_BYTES, MAX_UNFORMED_RANKS, RankSummary, ReceiptError, ServedUsage, SignedReceipt,
    SignedUsage, Unformed,
};

/// The `accept` protocol: orchestrator → provider.
pub const ACCEPT_PROTOCOL: StreamProtocol = StreamProtocol::new("/ganglion/accept/2");
/// The `cluster` protocol: between the providers of an assigned job.
pub const CLUSTER_PROTOCOL: StreamProtocol = StreamProtocol::new("/ganglion/cluster/1");

/// Cap on an `accept` request or response, bytes (the messages are < 300 bytes).
pub const MAX_ACCEPT_BYTES: usize = 4 * 1024;
/// Cap on a `cluster` message, bytes (keys + up to 32 candidates of ≤ 128 bytes each).
pub const MAX_CLUSTER_BYTES: usize = 16 * 1024;
/// Most endpoint candidates or addresses in a [`ClusterHello`].
pub const MAX_CLUSTER_CANDIDATES: usize = 32;

/// The gossipsub topic for offers on one network: `ganglion/offers/1/<magic>`.
pub fn offer_topic(network_magic: u64) -> libp2p::gossipsub::IdentTopic {
    libp2p::gossipsub::IdentTopic::new(format!("ganglion/offers/1/{network_magic}"))
}

/// An orchestrator asks a provider for GPUs on a job (escrow v2, `docs/escrow-v2.md`). The
/// provider signs `ganglion_contracts::v2::signed::Acceptance { job_id, spec, gpus, rate,
/// deadline_ms, accept_by_ms, receipt_interval_ms }` if it accepts: the escrow's `Assign` checks
/// that signature against the escrow's own terms, so an acceptance binds exactly these terms.
///
/// Version 2 of the protocol (`/ganglion/accept/2`): version 1 signed only `(job, GPUs, rate,
/// deadline)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptRequest {
    /// The job (escrow thread-token name).
    pub job_id: JobId,
    /// The bond the orchestrator will spend (and continue, committed) for this provider.
    pub bond: ganglion_contracts::tx::TxoRef,
    /// GPUs asked for.
    pub gpus: u64,
    /// NTX base units per GPU-hour offered.
    pub rate: u64,
    /// The escrow's deadline, POSIX ms.
    pub deadline_ms: u64,
    /// The escrow's spec: the binary CID of the ensemble spec (UnixFS, CIDv1).
    pub spec: Vec<u8>,
    /// The last moment (POSIX ms) the assign may be valid: its upper validity bound may not lie
    /// after it (checked on chain). The provider's GPUs stay reserved until then.
    pub accept_by_ms: u64,
    /// The escrow's receipt interval, ms: the orchestrator acknowledges the provider's work at
    /// least this often, and a provider's pay runs at most one interval past its last receipt.
    pub receipt_interval_ms: u64,
}

/// Why a provider refused an [`AcceptRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Fewer free, unreserved GPUs than asked.
    #[error("only {free} GPUs free")]
    NoCapacity {
        /// Free GPUs now.
        free: u64,
    },
    /// The provider holds its `[provider] max_concurrent_jobs` already (reserved or running).
    #[error("already holding {active} of at most {max} jobs")]
    TooManyJobs {
        /// Jobs reserved or running now.
        active: u32,
        /// The provider's maximum.
        max: u32,
    },
    /// Rate under the provider's price.
    #[error("rate below the price of {price} NTX/GPU-hour")]
    RateTooLow {
        /// The provider's price, NTX base units per GPU-hour.
        price: u64,
    },
    /// Deadline already past or further out than the provider's limit.
    #[error("deadline outside the provider's limits")]
    Deadline,
    /// The bond named is not this provider's.
    #[error("unknown bond")]
    UnknownBond,
    /// The request was zero GPUs.
    #[error("zero GPUs asked")]
    ZeroGpus,
    /// The provider is busy with too many requests.
    #[error("rate limited")]
    RateLimited,
    /// The node does not act as a provider.
    #[error("not a provider")]
    NotProvider,
    /// This provider already holds the job past its reservation (assigned, running) or has
    /// ended it here (e.g. its reservation lapsed): it does not accept the job a second time.
    #[error("the job is already tracked here past its reservation")]
    AlreadyTracked,
    /// The accept-by time is past, or further out than the provider holds a reservation.
    #[error("accept-by outside the provider's reservation limit of {max_ms} ms")]
    AcceptBy {
        /// The longest reservation the provider gives, ms.
        max_ms: u64,
    },
    /// The spec breaks the provider's `[provider]` limits: its duration, or the image policy
    /// (`allow_images`, `refuse_images`).
    #[error("the provider's limits refuse the spec: {reason}")]
    Limits {
        /// The limit and what the spec asked.
        reason: String,
    },
    /// The spec's local image is not on the provider's Docker Engine (images are never
    /// pulled; a spec can name an image archive by CID instead).
    #[error("image `{image}` is not on this provider")]
    ImageAbsent {
        /// The image name.
        image: String,
    },
    /// The spec named in the request could not be fetched from the requester, or is not one.
    #[error("the spec could not be read: {reason}")]
    SpecUnavailable {
        /// Why.
        reason: String,
    },
    /// The receipt interval is outside the provider's limits: a longer one risks more unpaid
    /// work to a silent orchestrator (DESIGN §3.1 G2).
    #[error("receipt interval outside {min_ms}..={max_ms} ms")]
    ReceiptInterval {
        /// Shortest interval accepted, ms.
        min_ms: u64,
        /// Longest interval accepted, ms.
        max_ms: u64,
    },
}

/// A provider's answer to an [`AcceptRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AcceptResponse {
    /// Accepted: the GPUs are reserved until `reserved_until_ms`.
    Accepted {
        /// ed25519 signature (64 bytes) by the bond's attest key over
        /// `Acceptance::signed_bytes()`: the escrow's `Assign` checks it.
        signature: Vec<u8>,
        /// The attest key that signed (the bond's).
        attest_key: [u8; 32],
        /// The provider's payment key hash (the assignment's `provider`).
        provider: KeyHash,
        /// Reservation end, POSIX ms: assign before it.
        reserved_until_ms: u64,
    },
    /// Refused.
    Refused(RefusalReason),
}

/// Overlay information one node of a job gives the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterHello {
    /// The job.
    pub job_id: JobId,
    /// WireGuard-protocol public key (x25519), 32 bytes.
    pub overlay_key: [u8; 32],
    /// The node's overlay address(es), as text (`100.64.0.2/32`).
    pub overlay_addrs: Vec<String>,
    /// UDP endpoint candidates for the tunnel, as text (`203.0.113.5:51820`).
    pub endpoints: Vec<String>,
}

/// Answer to a [`ClusterHello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterResponse {
    /// The receiver's own hello for the same job.
    Hello(ClusterHello),
    /// The receiver is not in that job (or has not registered its overlay info yet).
    UnknownJob,
    /// The receiver runs that job, but the sender is not one of the job's assigned nodes: it
    /// gets no keys or endpoints (the exchange is bound to the job's assignment).
    NotAssigned,
    /// Rate limited.
    RateLimited,
}

/// Why a frame did not decode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Declared or actual length over the cap.
    #[error("frame of {size} bytes, more than {max}")]
    TooLarge {
        /// Frame size, bytes.
        size: usize,
        /// Cap, bytes.
        max: usize,
    },
    /// The length prefix is not a valid varint.
    #[error("bad length prefix")]
    BadLength,
    /// The body is not CBOR of the expected message.
    #[error("bad CBOR: {0}")]
    Cbor(#[source] ciborium::de::Error<std::io::Error>),
    /// Bytes left after the message.
    #[error("{0} trailing bytes")]
    Trailing(usize),
    /// The message is well-formed but breaks a cap on its contents.
    #[error("too many entries in {0}")]
    TooManyEntries(&'static str),
}

impl From<DecodeError> for io::Error {
    fn from(e: DecodeError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// A message with contents caps checked after decoding.
pub trait Bounded {
    /// Checks caps on the decoded contents.
    ///
    /// # Errors
    /// [`DecodeError::TooManyEntries`].
    fn check(&self) -> Result<(), DecodeError> {
        Ok(())
    }
}
impl Bounded for AcceptRequest {}
impl Bounded for AcceptResponse {}
impl Bounded for ClusterHello {
    fn check(&self) -> Result<(), DecodeError> {
        if self.endpoints.len() > MAX_CLUSTER_CANDIDATES {
            return Err(DecodeError::TooManyEntries("endpoints"));
        }
        if self.overlay_addrs.len() > MAX_CLUSTER_CANDIDATES {
            return Err(DecodeError::TooManyEntries("overlay_addrs"));
        }
        Ok(())
    }
}
impl Bounded for ClusterResponse {
    fn check(&self) -> Result<(), DecodeError> {
        match self {
            ClusterResponse::Hello(h) => h.check(),
            _ => Ok(()),
        }
    }
}

/// Encodes `msg` as CBOR (no length prefix).
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    // Writing to a Vec cannot fail; our types always serialise.
    if ciborium::into_writer(msg, &mut out).is_err() {
        out.clear();
    }
    out
}

/// Decodes one CBOR message that must fill `bytes` exactly and fit `max` bytes.
///
/// # Errors
/// [`DecodeError`] for oversized input, bad CBOR, trailing bytes or broken content caps.
pub fn decode<T: DeserializeOwned + Bounded>(bytes: &[u8], max: usize) -> Result<T, DecodeError> {
    if bytes.len() > max {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            max,
        });
    }
    let mut rest = bytes;
    let msg: T = ciborium::from_reader(&mut rest).map_err(DecodeError::Cbor)?;
    if !rest.is_empty() {
        return Err(DecodeError::Trailing(rest.len()));
    }
    msg.check()?;
    Ok(msg)
}

/// Reads an unsigned-varint length prefix, then that many bytes (≤ `max`), then decodes.
async fn read_frame<T, R>(io: &mut R, max: usize) -> io::Result<T>
where
    T: DeserializeOwned + Bounded,
    R: AsyncRead + Unpin + Send,
{
    let mut len: u64 = 0;
    let mut shift = 0u32;
    loop {
        let mut b = [0u8; 1];
        io.read_exact(&mut b).await?;
        len |= u64::from(b[0] & 0x7f) << shift;
        if b[0] & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return Err(DecodeError::BadLength.into());
        }
    }
    let size = usize::try_from(len).map_err(|_| DecodeError::BadLength)?;
    if size > max {
        return Err(DecodeError::TooLarge { size, max }.into());
    }
    let mut buf = vec![0u8; size];
    io.read_exact(&mut buf).await?;
    Ok(decode(&buf, max)?)
}

/// Writes `body` (an encoded message) with its length prefix, then closes the write side.
async fn write_frame<W>(io: &mut W, body: Vec<u8>, max: usize) -> io::Result<()>
where
    W: AsyncWrite + Unpin + Send,
{
    if body.len() > max {
        return Err(DecodeError::TooLarge {
            size: body.len(),
            max,
        }
        .into());
    }
    let mut len = body.len();
    let mut prefix = Vec::with_capacity(5);
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            prefix.push(byte);
            break;
        }
        prefix.push(byte | 0x80);
    }
    io.write_all(&prefix).await?;
    io.write_all(&body).await?;
    io.close().await
}

/// A length-prefixed CBOR codec for one request/response pair, with one size cap for both.
pub struct CborCodec<Req, Resp> {
    max_bytes: usize,
    _types: PhantomData<fn() -> (Req, Resp)>,
}

impl<Req, Resp> CborCodec<Req, Resp> {
    /// A codec refusing frames over `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            _types: PhantomData,
        }
    }
}

impl<Req, Resp> Clone for CborCodec<Req, Resp> {
    fn clone(&self) -> Self {
        Self::new(self.max_bytes)
    }
}

#[async_trait::async_trait]
impl<Req, Resp> libp2p::request_response::Codec for CborCodec<Req, Resp>
where
    Req: Serialize + DeserializeOwned + Bounded + Send + 'static,
    Resp: Serialize + DeserializeOwned + Bounded + Send + 'static,
{
    type Protocol = StreamProtocol;
    type Request = Req;
    type Response = Resp;

    async fn read_request<T>(&mut self, _: &StreamProtocol, io: &mut T) -> io::Result<Req>
    where
        T: AsyncRead + Unpin + Send,
    {
        read_frame(io, self.max_bytes).await
    }

    async fn read_response<T>(&mut self, _: &StreamProtocol, io: &mut T) -> io::Result<Resp>
    where
        T: AsyncRead + Unpin + Send,
    {
        read_frame(io, self.max_bytes).await
    }

    async fn write_request<T>(&mut self, _: &StreamProtocol, io: &mut T, req: Req) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        write_frame(io, encode(&req), self.max_bytes).await
    }

    async fn write_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        res: Resp,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        write_frame(io, encode(&res), self.max_bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn accept_request() -> AcceptRequest {
        AcceptRequest {
            job_id: JobId([1; 32]),
            bond: ganglion_contracts::tx::TxoRef {
                tx_hash: [2; 32],
                index: 3,
            },
            gpus: 4,
            rate: 5,
            deadline_ms: 6,
            // A CIDv1 (raw bytes) is 36 bytes.
            spec: vec![7; 36],
            accept_by_ms: 8,
            receipt_interval_ms: 9,
        }
    }

    fn read<T: DeserializeOwned + Bounded>(bytes: &[u8], max: usize) -> io::Result<T> {
        futures::executor::block_on(read_frame(&mut futures::io::Cursor::new(bytes), max))
    }

    fn frame<T: Serialize>(msg: &T) -> Vec<u8> {
        let mut out = Vec::new();
        futures::executor::block_on(write_frame(
            &mut futures::io::Cursor::new(&mut out),
            encode(msg),
            1 << 20,
        ))
        .unwrap();
        out
    }

    #[test]
    fn frames_round_trip() {
        let req = accept_request();
        assert_eq!(
            read::<AcceptRequest>(&frame(&req), MAX_ACCEPT_BYTES).unwrap(),
            req
        );
        let resp = AcceptResponse::Refused(RefusalReason::NoCapacity { free: 2 });
        assert_eq!(
            read::<AcceptResponse>(&frame(&resp), MAX_ACCEPT_BYTES).unwrap(),
            resp
        );
    }

    #[test]
    fn an_oversized_length_prefix_is_refused_before_reading_the_body() {
        // Prefix says 1 GiB; only the prefix is present. The reader must refuse on the prefix
        // alone (an attempt to read the body would report UnexpectedEof instead).
        let mut bytes = Vec::new();
        let mut len: u64 = 1 << 30;
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                bytes.push(b);
                break;
            }
            bytes.push(b | 0x80);
        }
        let err = read::<AcceptRequest>(&bytes, MAX_ACCEPT_BYTES).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("more than"), "{err}");
    }

    #[test]
    fn too_many_candidates_are_refused() {
        let hello = ClusterHello {
            job_id: JobId([0; 32]),
            overlay_key: [0; 32],
            overlay_addrs: vec![],
            endpoints: vec!["x".into(); MAX_CLUSTER_CANDIDATES + 1],
        };
        assert!(matches!(
            decode::<ClusterHello>(&encode(&hello), MAX_CLUSTER_BYTES),
            Err(DecodeError::TooManyEntries("endpoints"))
        ));
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut bytes = encode(&accept_request());
        bytes.push(0);
        assert!(matches!(
            decode::<AcceptRequest>(&bytes, MAX_ACCEPT_BYTES),
            Err(DecodeError::Trailing(1))
        ));
    }

    proptest! {
        #[test]
        fn garbage_never_panics_any_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = decode::<AcceptRequest>(&bytes, MAX_ACCEPT_BYTES);
            let _ = decode::<AcceptResponse>(&bytes, MAX_ACCEPT_BYTES);
            let _ = decode::<ClusterHello>(&bytes, MAX_CLUSTER_BYTES);
            let _ = decode::<ClusterResponse>(&bytes, MAX_CLUSTER_BYTES);
            let _ = read::<AcceptRequest>(&bytes, MAX_ACCEPT_BYTES);
            let _ = read::<ClusterHello>(&bytes, MAX_CLUSTER_BYTES);
            let _ = crate::offers::SignedOffer::decode(&bytes);
        }

        #[test]
        fn mutated_valid_frames_decode_or_error(idx in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
            let mut bytes = encode(&accept_request());
            let i = idx.index(bytes.len());
            bytes[i] = byte;
            let _ = decode::<AcceptRequest>(&bytes, MAX_ACCEPT_BYTES);
            let n = cut.index(bytes.len());
            prop_assert!(decode::<AcceptRequest>(&encode(&accept_request())[..n], MAX_ACCEPT_BYTES).is_err());
        }

        #[test]
        fn accept_requests_round_trip(gpus in any::<u64>(), rate in any::<u64>(), deadline_ms in any::<u64>(), job in any::<[u8; 32]>()) {
            let req = AcceptRequest { job_id: JobId(job), gpus, rate, deadline_ms, ..accept_request() };
            prop_assert_eq!(decode::<AcceptRequest>(&encode(&req), MAX_ACCEPT_BYTES).unwrap(), req);
        }
    }
}
