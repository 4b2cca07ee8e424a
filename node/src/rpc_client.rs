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
    /// `node.json` names a process that is not running: the node stopped (or crashed) after
    /// writing it.
    #[error(
        "no running node found: {path} names process {pid}, which is not running (the node \
         stopped; start it with `ganglion node run`)"
    )]
    Stale {
        /// The `node.json` read.
        path: PathBuf,
        /// The process id it names.
        pid: u32,
    },
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
    /// [`ClientCallError::NotRunning`], [`ClientCallError::Stale`],
    /// [`ClientCallError::Cookie`].
    pub fn of_data_dir(data_dir: &Path) -> Result<Self, ClientCallError> {
        let path = data_dir.join(crate::daemon::node::NODE_INFO);
        let info =
            NodeInfo::read(data_dir).ok_or_else(|| ClientCallError::NotRunning(path.clone()))?;
        if !process_exists(info.pid) {
            return Err(ClientCallError::Stale {
                path,
                pid: info.pid,
            });
        }
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

/// Whether process `pid` exists (signal 0: nothing is sent, only the check is made; a process
/// of another user still exists, `EPERM`).
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that `pid` can be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_json(dir: &Path, pid: u32) {
        let info = NodeInfo {
            pid,
            peer_id: "12D3KooW".into(),
            p2p: vec![],
            rpc: "127.0.0.1:1".parse().expect("addr"),
            payment_key_hash: "00".into(),
            bond: None,
            metrics: None,
            console: None,
            gateway: None,
            indexer_api: None,
        };
        std::fs::write(
            dir.join(crate::daemon::node::NODE_INFO),
            serde_json::to_string(&info).expect("json"),
        )
        .expect("write");
    }

    #[test]
    fn a_node_json_left_by_a_stopped_node_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A process that has exited: its pid names no process now.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let gone = child.id();
        child.wait().expect("exits");
        node_json(dir.path(), gone);
        let e = NodeClient::of_data_dir(dir.path()).expect_err("stale");
        assert!(
            matches!(e, ClientCallError::Stale { pid, .. } if pid == gone),
            "{e}"
        );
        assert!(e.to_string().contains("ganglion node run"), "{e}");
        // A live process (this one): past the pid check, to the cookie, which is missing.
        node_json(dir.path(), std::process::id());
        let e = NodeClient::of_data_dir(dir.path()).expect_err("no cookie");
        assert!(matches!(e, ClientCallError::Cookie(_)), "{e}");
    }
}
