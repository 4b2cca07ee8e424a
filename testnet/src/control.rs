//! A tiny operator control socket (Unix, line based) for commands Ouroboros has no
//! message for: `rollback <n>` and `tip`. Each request is one line; each reply one JSON
//! line: `{"ok":true,"tip":{…}}` or `{"ok":false,"error":"…"}`.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::chain::Chain;
use crate::store::BlockRef;

/// Longest accepted request line (bytes).
pub const MAX_LINE: usize = 256;

fn tip_json(t: Option<BlockRef>) -> serde_json::Value {
    match t {
        None => json!(null),
        Some(t) => json!({"number": t.number, "slot": t.slot, "hash": t.hash.to_string()}),
    }
}

async fn handle(chain: &Arc<Chain>, line: &str) -> serde_json::Value {
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("tip"), None, _) => json!({"ok": true, "tip": tip_json(chain.tip())}),
        (Some("rollback"), Some(n), None) => match n.parse::<u64>() {
            Ok(n) => {
                let c = chain.clone();
                match tokio::task::spawn_blocking(move || c.rollback(n)).await {
                    Ok(Ok(tip)) => json!({"ok": true, "tip": tip_json(tip)}),
                    Ok(Err(e)) => json!({"ok": false, "error": e.to_string()}),
                    Err(_) => json!({"ok": false, "error": "rollback task failed"}),
                }
            }
            Err(_) => json!({"ok": false, "error": format!("not a block count: {n}")}),
        },
        _ => json!({"ok": false, "error": "commands: `tip`, `rollback <n>`"}),
    }
}

async fn connection(stream: UnixStream, chain: Arc<Chain>) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut lines = BufReader::new(r.take(64 * MAX_LINE as u64)).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = if line.len() > MAX_LINE {
            json!({"ok": false, "error": "line too long"})
        } else {
            handle(&chain, &line).await
        };
        w.write_all(format!("{reply}\n").as_bytes()).await?;
    }
    Ok(())
}

/// Serve the control socket until `cancel`.
pub async fn run(listener: UnixListener, chain: Arc<Chain>, cancel: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = cancel.cancelled() => break,
        };
        match accepted {
            Ok((stream, _)) => {
                let chain = chain.clone();
                let cancel = cancel.clone();
                tracker.spawn(async move {
                    tokio::select! {
                        r = connection(stream, chain) => {
                            if let Err(e) = r { tracing::debug!(error = %e, "control connection closed"); }
                        }
                        _ = cancel.cancelled() => {}
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "control accept failed"),
        }
    }
    tracker.close();
    tracker.wait().await;
}

/// Send one command line to a control socket and return the JSON reply.
///
/// # Errors
/// I/O errors, or `InvalidData` for a reply that is not JSON.
pub async fn request(path: &Path, command: &str) -> std::io::Result<serde_json::Value> {
    let stream = UnixStream::connect(path).await?;
    let (r, mut w) = stream.into_split();
    w.write_all(format!("{command}\n").as_bytes()).await?;
    let mut lines = BufReader::new(r).lines();
    let line = lines
        .next_line()
        .await?
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no reply"))?;
    serde_json::from_str(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
