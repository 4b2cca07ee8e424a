//! How the gateway reaches a replica: directly over TCP (loopback, a LAN, the job's overlay
//! where the gateway is in it) or through the provider's node over a libp2p stream
//! ([`crate::p2p`]). One hyper client serves both: the request's authority names the
//! endpoint, and [`Connector`] opens the matching connection. Connections of either kind are
//! kept alive and reused per replica.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use hyper_util::rt::TokioIo;
use libp2p::PeerId;
use serde::Serialize;
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt as _};

use crate::p2p::{self, Target};

/// Where a replica answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// Its HTTP address, reached directly.
    Tcp(SocketAddr),
    /// Through its provider's node `peer`, over `/ganglion/service/1`, to the job's replica.
    P2p {
        /// The provider's node.
        peer: PeerId,
        /// The job and the replica's rank.
        target: Target,
    },
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "tcp://{addr}"),
            Self::P2p { peer, target } => write!(
                f,
                "p2p://{peer}/{}/{}",
                hex::encode(target.job),
                target.rank
            ),
        }
    }
}

impl Serialize for Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The endpoints behind the authorities of the gateway's requests: a TCP endpoint is its own
/// authority (`ip:port`); a libp2p one gets `p2p-<n>.invalid` (RFC 6761's reserved name, so
/// it can never be resolved by DNS), stable for the endpoint.
#[derive(Debug, Default)]
pub struct Endpoints {
    /// The libp2p endpoints seen; `p2p-<n>.invalid` names the one at index n.
    p2p: Mutex<Vec<Endpoint>>,
}

impl Endpoints {
    /// The authority requests to `endpoint` are sent to.
    pub fn authority(&self, endpoint: &Endpoint) -> String {
        if let Endpoint::Tcp(addr) = endpoint {
            return addr.to_string();
        }
        let mut seen = self
            .p2p
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = match seen.iter().position(|e| e == endpoint) {
            Some(n) => n,
            None => {
                seen.push(*endpoint);
                seen.len() - 1
            }
        };
        format!("p2p-{n}.invalid")
    }

    fn lookup(&self, host: &str) -> Option<Endpoint> {
        let n: usize = host
            .strip_prefix("p2p-")?
            .strip_suffix(".invalid")?
            .parse()
            .ok()?;
        self.p2p
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(n)
            .copied()
    }
}

/// Longest TCP connect to a replica.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Opens the connection an authority names (see [`Endpoints`]).
#[derive(Clone)]
pub struct Connector {
    http: HttpConnector,
    streams: Option<libp2p_stream::Control>,
    endpoints: Arc<Endpoints>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("libp2p", &self.streams.is_some())
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Over `endpoints`; libp2p endpoints need `streams` (the node's swarm).
    pub fn new(endpoints: Arc<Endpoints>, streams: Option<libp2p_stream::Control>) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        // A replica is on the same host, LAN or overlay: a connect that takes a second is a
        // replica gone (its address no longer answers ARP), and the request moves on.
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        Self {
            http,
            streams,
            endpoints,
        }
    }
}

/// Why a connection could not be opened.
pub type ConnectError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for Connector {
    type Response = Conn;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, ConnectError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let endpoint = uri.host().and_then(|h| self.endpoints.lookup(h));
        match endpoint {
            Some(Endpoint::P2p { peer, target }) => {
                let streams = self.streams.clone();
                Box::pin(async move {
                    let mut control = streams.ok_or_else(|| -> ConnectError {
                        "this gateway has no libp2p swarm to reach a provider's node".into()
                    })?;
                    let stream = open_again(&mut control, peer, target).await?;
                    Ok(Conn::P2p(TokioIo::new(stream.compat())))
                })
            }
            _ => {
                let connecting = self.http.call(uri);
                Box::pin(async move { Ok(Conn::Tcp(connecting.await?)) })
            }
        }
    }
}

/// Waits before each new try of [`open_again`]: the swarm notices a closed connection and
/// opens the next stream on another one (or dials) within a few hundred ms.
const REOPEN_AFTER: [std::time::Duration; 2] = [
    std::time::Duration::from_millis(50),
    std::time::Duration::from_millis(250),
];

/// [`p2p::open`], tried again (after [`REOPEN_AFTER`]) while the stream fails below the
/// protocol — its connection closed under it (`connection is closed`: the peer's yamux
/// session ended before the swarm noticed), or it could not be opened — so one connection
/// replaced under load does not take a replica out of rotation. A refusal or a provider's
/// node that does not answer the header in time is final.
async fn open_again(
    control: &mut libp2p_stream::Control,
    peer: libp2p::PeerId,
    target: Target,
) -> Result<libp2p::Stream, p2p::StreamError> {
    for wait in REOPEN_AFTER {
        match p2p::open(control, peer, target).await {
            Err(e @ (p2p::StreamError::Open { .. } | p2p::StreamError::Io(_))) => {
                tracing::debug!(%peer, error = %e, "service stream failed below the protocol: opening it again");
                tokio::time::sleep(wait).await;
            }
            opened => return opened,
        }
    }
    p2p::open(control, peer, target).await
}

/// One connection to a replica.
#[derive(Debug)]
pub enum Conn {
    /// Direct.
    Tcp(TokioIo<TcpStream>),
    /// A libp2p stream through the provider's node.
    P2p(TokioIo<Compat<libp2p::Stream>>),
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        match self {
            Self::Tcp(s) => s.connected(),
            Self::P2p(_) => Connected::new(),
        }
    }
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Self::P2p(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Self::P2p(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_flush(cx),
            Self::P2p(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Self::P2p(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The HTTP/1.1 client the gateway forwards and probes with.
pub type Client = HyperClient<Connector, Full<Bytes>>;

/// The client and the endpoints it reaches: what forwarding and health checks share.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: Client,
    endpoints: Arc<Endpoints>,
}

impl Upstream {
    /// Reaching replicas over TCP, and over libp2p through `streams` when given.
    pub fn new(streams: Option<libp2p_stream::Control>) -> Self {
        let endpoints = Arc::new(Endpoints::default());
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .pool_max_idle_per_host(256)
            .build(Connector::new(Arc::clone(&endpoints), streams));
        Self { client, endpoints }
    }

    /// The URL of `path_and_query` (starting with `/`) on `endpoint`.
    pub fn url(&self, endpoint: &Endpoint, path_and_query: &str) -> String {
        format!(
            "http://{}{path_and_query}",
            self.endpoints.authority(endpoint)
        )
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }
}
