//! A JSON-RPC client of the local node for the CLI: the address from the settings'
//! `[rpc] listen`, the bearer token from the data dir's `rpc.cookie` (written by
//! `ganglion node run` at each start).

use std::time::Duration;

use anyhow::Context as _;
use ganglion_node::datadir::DataDir;
use ganglion_node::settings::Settings;
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};

/// How long one call may take.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A client of the node `settings` describe, holding its cookie's token.
///
/// # Errors
/// No data dir or no cookie (the node never ran there), a malformed token.
pub fn connect(settings: &Settings) -> anyhow::Result<HttpClient> {
    let dir = DataDir::open(settings.data_dir().context("the data dir")?)
        .context("opening the data dir")?;
    let token = dir.read_rpc_cookie().with_context(|| {
        format!(
            "reading {} (is `ganglion node run` running with this config?)",
            dir.rpc_cookie().display()
        )
    })?;
    let mut headers = HeaderMap::new();
    headers.insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .context("the cookie's token is not a valid header value")?,
    );
    HttpClientBuilder::default()
        .set_headers(headers)
        .request_timeout(TIMEOUT)
        .build(format!("http://{}", settings.daemon.rpc.listen))
        .context("building the JSON-RPC client")
}
