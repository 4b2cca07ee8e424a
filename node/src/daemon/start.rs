//! `<data dir>/node.start.json`: a node's start, written as soon as `ganglion node run` has
//! opened its data dir, again with the error when the start or the run fails, and removed
//! after a clean stop. `ganglion node info --wait` reads it beside `node.json` to tell a node
//! still starting from one that died ([`liveness`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::NodeInfo;

/// The start record's file name in the data dir.
pub const START_RECORD: &str = "node.start.json";

/// One start of `ganglion node run` on a data dir.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRecord {
    /// The node's process id.
    pub pid: u32,
    /// When it started, POSIX ms.
    pub started_at_ms: u64,
    /// Why the start or the run failed (the error as `node run` printed it); `None` while it
    /// starts or runs.
    #[serde(default)]
    pub error: Option<String>,
}

impl StartRecord {
    /// This process, starting now.
    pub fn now() -> Self {
        Self {
            pid: std::process::id(),
            started_at_ms: ganglion_p2p::now_ms(),
            error: None,
        }
    }

    /// Reads `<data_dir>/node.start.json`; `None` when absent or unreadable.
    pub fn read(data_dir: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(data_dir.join(START_RECORD)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the record (through a temporary file and a rename: a reader never sees half).
    ///
    /// # Errors
    /// The file system's.
    pub fn write(&self, data_dir: &Path) -> std::io::Result<()> {
        let tmp = data_dir.join(format!("{START_RECORD}.tmp"));
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, data_dir.join(START_RECORD))
    }

    /// Removes the record (a clean stop); absent is fine.
    ///
    /// # Errors
    /// The file system's, other than "not found".
    pub fn remove(data_dir: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(data_dir.join(START_RECORD)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// A data dir's node as `node.json` and the start record show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Up: `node.json` names a live process.
    Up(Box<NodeInfo>),
    /// Its process lives but has not written `node.json` yet.
    Starting {
        /// The process id.
        pid: u32,
    },
    /// The start (or the run) failed with `error`.
    Failed {
        /// The process id.
        pid: u32,
        /// When it started, POSIX ms.
        started_at_ms: u64,
        /// Its error.
        error: String,
    },
    /// Its process is gone without a word (killed, crashed) before or after it was up.
    Died {
        /// The process id.
        pid: u32,
        /// When it started, POSIX ms.
        started_at_ms: u64,
    },
    /// It stopped cleanly (a `node.json` of a process that is gone, no start record).
    Stopped {
        /// The process id `node.json` names.
        pid: u32,
    },
    /// No node ever started here (neither file).
    NeverStarted,
}

impl Liveness {
    /// When the start this answer is about began (POSIX ms), where known: an answer about a
    /// start older than the one a caller waits for is not the last word.
    pub fn started_at_ms(&self) -> Option<u64> {
        match self {
            Self::Failed { started_at_ms, .. } | Self::Died { started_at_ms, .. } => {
                Some(*started_at_ms)
            }
            _ => None,
        }
    }
}

/// The node of `data_dir` now, with `alive` telling whether a process id runs.
pub fn liveness(data_dir: &Path, alive: impl Fn(u32) -> bool) -> Liveness {
    let info = NodeInfo::read(data_dir);
    let start = StartRecord::read(data_dir);
    liveness_of(info, start, alive)
}

fn liveness_of(
    info: Option<NodeInfo>,
    start: Option<StartRecord>,
    alive: impl Fn(u32) -> bool,
) -> Liveness {
    let info = match info {
        Some(i)
            if alive(i.pid)
                && start
                    .as_ref()
                    .is_none_or(|s| s.pid == i.pid && s.error.is_none()) =>
        {
            return Liveness::Up(Box::new(i));
        }
        other => other,
    };
    match (start, info) {
        (Some(s), _) => match s.error {
            Some(error) => Liveness::Failed {
                pid: s.pid,
                started_at_ms: s.started_at_ms,
                error,
            },
            None if alive(s.pid) => Liveness::Starting { pid: s.pid },
            None => Liveness::Died {
                pid: s.pid,
                started_at_ms: s.started_at_ms,
            },
        },
        (None, Some(i)) => Liveness::Stopped { pid: i.pid },
        (None, None) => Liveness::NeverStarted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(pid: u32) -> NodeInfo {
        NodeInfo {
            pid,
            peer_id: String::new(),
            p2p: Vec::new(),
            rpc: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            payment_key_hash: String::new(),
            bond: None,
            metrics: None,
            console: None,
            gateway: None,
            indexer_api: None,
        }
    }

    fn start(pid: u32, error: Option<&str>) -> StartRecord {
        StartRecord {
            pid,
            started_at_ms: 1_000,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn each_combination_of_files_and_processes_reads_as_one_state() {
        let alive = |live: &'static [u32]| move |pid: u32| live.contains(&pid);
        assert_eq!(
            liveness_of(Some(info(7)), Some(start(7, None)), alive(&[7])),
            Liveness::Up(Box::new(info(7)))
        );
        // A node.json from before the record's format: up when its process lives.
        assert_eq!(
            liveness_of(Some(info(7)), None, alive(&[7])),
            Liveness::Up(Box::new(info(7)))
        );
        assert_eq!(
            liveness_of(None, Some(start(8, None)), alive(&[8])),
            Liveness::Starting { pid: 8 }
        );
        // A new start over an old node.json whose pid was reused: the new start counts.
        assert_eq!(
            liveness_of(Some(info(7)), Some(start(8, None)), alive(&[7, 8])),
            Liveness::Starting { pid: 8 }
        );
        assert_eq!(
            liveness_of(
                Some(info(7)),
                Some(start(8, Some("no payment key"))),
                alive(&[7])
            ),
            Liveness::Failed {
                pid: 8,
                started_at_ms: 1_000,
                error: "no payment key".into()
            }
        );
        assert_eq!(
            liveness_of(None, Some(start(8, None)), alive(&[])),
            Liveness::Died {
                pid: 8,
                started_at_ms: 1_000
            }
        );
        assert_eq!(
            liveness_of(Some(info(7)), None, alive(&[])),
            Liveness::Stopped { pid: 7 }
        );
        assert_eq!(liveness_of(None, None, alive(&[])), Liveness::NeverStarted);
    }

    #[test]
    fn the_record_round_trips_and_a_clean_stop_removes_it() {
        let t = tempfile::tempdir().expect("tempdir");
        assert_eq!(StartRecord::read(t.path()), None);
        let mut r = StartRecord::now();
        r.write(t.path()).expect("write");
        assert_eq!(StartRecord::read(t.path()), Some(r.clone()));
        r.error = Some("the chain: connection refused".into());
        r.write(t.path()).expect("rewrite");
        assert_eq!(
            StartRecord::read(t.path()).and_then(|r| r.error).as_deref(),
            Some("the chain: connection refused")
        );
        StartRecord::remove(t.path()).expect("remove");
        StartRecord::remove(t.path()).expect("absent is fine");
        assert_eq!(StartRecord::read(t.path()), None);
    }
}
