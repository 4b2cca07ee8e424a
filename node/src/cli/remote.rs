//! What the commands that talk to a running node share: finding it (settings → data dir →
//! `node.json` and `rpc.cookie`), one call on a small runtime, and printing.

use std::future::Future;
use std::path::Path;

use anyhow::Context as _;
use ganglion_node::rpc_client::{ClientCallError, NodeClient};
use ganglion_node::settings::Settings;
use ganglion_rpc::jsonrpsee::core::client::Error as ClientError;
use jsonrpsee::http_client::HttpClient;

/// `--json` and `--config`, taken by every command that talks to a running node.
#[derive(Debug, clap::Args)]
pub(crate) struct RemoteArgs {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Node config (TOML); `GANGLION_*` variables override it. The node is found through its
    /// data dir (`node.json`, `rpc.cookie`).
    #[arg(long, env = "GANGLION_CONFIG", global = true)]
    pub config: Option<std::path::PathBuf>,
}

/// Makes one call on the node of the settings at `config` (or the defaults and `GANGLION_*`):
/// `call` is given the node's JSON-RPC client and calls one of the generated `*Client` traits
/// of `ganglion_rpc` on it, e.g. `|rpc| async move { JobApiClient::status(&rpc, id).await }`.
pub(crate) fn call<T, F, Fut>(config: Option<&Path>, call: F) -> anyhow::Result<T>
where
    F: FnOnce(HttpClient) -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let settings = Settings::load(config).context("loading the settings")?;
    let dir = settings.data_dir().context("finding the data dir")?;
    let client = NodeClient::of_data_dir(&dir)
        .with_context(|| format!("finding the node of {}", dir.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(call(client.rpc().clone()))
        .map_err(ClientCallError::from)
        .with_context(|| format!("asking the node at {}", client.addr))
}

/// Prints `v` as pretty JSON.
pub(crate) fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}
