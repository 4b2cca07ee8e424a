//! [`NodeClient`]: a JSON-RPC client of a running node on this machine, found through its data
//! dir — the address from `node.json` (written by `ganglion node run` once it serves), the
//! bearer token from `rpc.cookie`. Used by the CLI commands that talk to a node (`audit`,
//! `job`, `market`, `provider`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ganglion_rpc::jsonrpsee::core::client::Error as ClientError;
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};

use crate::daemon::NodeInfo;
use crate::datadir::DataDir;

/// How long one call may take (an `audit_verify` may fetch blocks over bitswap).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a call to the node failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientCallError {
    /// No `node.json`: the node is not running (or has not finished starting).
    #[error("no running node found: {0} is missing (start one with `ganglion node run`)")]
    NotRunning(PathBuf),
    /// The cookie could not be read from the data dir.
    #[error("reading the RPC cookie: {0}")]
    Cookie(#[source] crate::datadir::Error),
    /// The token cannot be sent as an HTTP header value.
    #[error("the RPC token cannot be an HTTP header: it holds a byte outside visible ASCII")]
    Token,
    /// The node answered with a JSON-RPC error.
    #[error("{message} (JSON-RPC error {code})")]
    Rpc {
        /// The error code ([`ganglion_rpc::error`]).
        code: i32,
        /// The node's message.
        message: String,
    },
    /// The node could not be reached, or its answer did not parse.
    #[error(transparent)]
    Transport(ClientError),
}

impl From<ClientError> for ClientCallError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Call(o) => Self::Rpc {
                code: o.code(),
                message: o.message().to_string(),
            },
            other => Self::Transport(other),
        }
    }
}

/// A client of the node whose data dir is given.
#[derive(Debug, Clone)]
pub struct NodeClient {
    http: HttpClient,
    /// Where the node listens.
    pub addr: std::net::SocketAddr,
}

impl NodeClient {
    /// Connects to the node of `data_dir` (address from `node.json`, token from
    /// `rpc.cookie`). Makes no request yet.
    ///
    /// # Errors
    /// [`ClientCallError::NotRunning`], [`ClientCallError::Cookie`].
    pub fn of_data_dir(data_dir: &Path) -> Result<Self, ClientCallError> {
        let info = NodeInfo::read(data_dir).ok_or_else(|| {
            ClientCallError::NotRunning(data_dir.join(crate::daemon::node::NODE_INFO))
        })?;
        let token = DataDir::open(data_dir)
            .and_then(|d| d.read_rpc_cookie())
            .map_err(ClientCallError::Cookie)?;
        Self::new(info.rpc, Some(&token))
    }

    /// A client of `addr`, sending `token` as the bearer token when given.
    ///
    /// # Errors
    /// [`ClientCallError::Token`] for a token that cannot be a header value.
    pub fn new(addr: std::net::SocketAddr, token: Option<&str>) -> Result<Self, ClientCallError> {
        let mut headers = HeaderMap::new();
        if let Some(t) = token {
            headers.insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| ClientCallError::Token)?,
            );
        }
        let http = HttpClientBuilder::default()
            .set_headers(headers)
            .request_timeout(CALL_TIMEOUT)
            .build(format!("http://{addr}"))
            .map_err(ClientCallError::Transport)?;
        Ok(Self { http, addr })
    }

    /// The JSON-RPC client: call the `*Client` traits `ganglion_rpc` generates for each
    /// namespace on it (e.g. `JobApiClient::status(node.rpc(), id)`), then map the error with
    /// [`ClientCallError::from`].
    pub fn rpc(&self) -> &HttpClient {
        &self.http
    }
}
