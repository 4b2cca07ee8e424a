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

/// Prints `v` as pretty JSON (through [`print_stdout`]: a closed pipe ends it quietly).
pub(crate) fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    print_stdout(&format!("{}\n", serde_json::to_string_pretty(v)?))
}

/// Writes `text` to stdout as is. A reader that closed the pipe early (`ganglion … | head`)
/// is not an error: the rest is dropped quietly, where `println!` would panic. Shared by every
/// command that prints more than a line, remote or not (`ganglion gpus`).
pub(crate) fn print_stdout(text: &str) -> anyhow::Result<()> {
    write_quietly(&mut std::io::stdout().lock(), text).context("writing to stdout")
}

/// Writes and flushes `text` to `out`, treating a broken pipe as done.
fn write_quietly(out: &mut impl std::io::Write, text: &str) -> std::io::Result<()> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader is gone, as stdout into `| head` after it exits.
    struct ClosedPipe;

    impl std::io::Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_ends_the_output_quietly_and_other_errors_still_fail() {
        assert!(write_quietly(&mut ClosedPipe, "{}\n").is_ok());
        let mut full = [0u8; 2];
        let e = write_quietly(&mut &mut full[..], "abc").expect_err("no room");
        assert_eq!(e.kind(), std::io::ErrorKind::WriteZero);
        let mut v = Vec::new();
        write_quietly(&mut v, "abc").expect("written");
        assert_eq!(v, b"abc");
    }
}
