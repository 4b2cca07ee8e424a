//! Running code inside another network namespace: a dedicated OS thread (never a tokio worker,
//! DESIGN §6) `setns(2)`s into the namespace, runs the closure and exits, so no other code ever
//! runs on a thread in the wrong namespace. Sockets and TUN fds created there stay bound to
//! that namespace when used elsewhere.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::OverlayError;

/// Runs `f` on a fresh thread inside the network namespace at `netns` (e.g.
/// `/proc/<pid>/ns/net` or `/run/netns/<name>`) and returns its result.
///
/// # Errors
/// [`OverlayError::Io`] when the namespace cannot be opened or joined (needs
/// `CAP_SYS_ADMIN`), or the thread cannot start; otherwise whatever `f` returns.
pub fn run_in<T, F>(netns: &Path, f: F) -> Result<T, OverlayError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, OverlayError> + Send + 'static,
{
    let path: PathBuf = netns.to_path_buf();
    let handle = std::thread::Builder::new()
        .name("ganglion-netns".into())
        .spawn(move || {
            let ns = File::open(&path).map_err(OverlayError::io("open netns"))?;
            // SAFETY: setns on a valid namespace fd affects only this (dedicated) thread.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
                return Err(OverlayError::Io {
                    operation: "setns",
                    source: std::io::Error::last_os_error(),
                });
            }
            f()
        })
        .map_err(OverlayError::io("spawn netns thread"))?;
    handle.join().unwrap_or_else(|_| {
        Err(OverlayError::Io {
            operation: "netns thread panicked",
            source: std::io::Error::other("panic"),
        })
    })
}
