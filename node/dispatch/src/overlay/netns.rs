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

/// Opens a TCP connection to `addr` from inside the network namespace at `netns` and hands it
/// to tokio: how a provider's node reaches a service replica in a pod, whose port listens only
/// inside the pod (its loopback or overlay address) and which the host cannot route to. The
/// socket stays in that namespace. The connect runs on a dedicated thread ([`run_in`]) off the
/// async workers.
///
/// # Errors
/// [`OverlayError::Io`]: the namespace cannot be joined, the connection is refused or takes
/// longer than `timeout`.
pub async fn connect_in(
    netns: &Path,
    addr: std::net::SocketAddr,
    timeout: std::time::Duration,
) -> Result<tokio::net::TcpStream, OverlayError> {
    let netns = netns.to_path_buf();
    let stream = tokio::task::spawn_blocking(move || {
        run_in(&netns, move || {
            std::net::TcpStream::connect_timeout(&addr, timeout)
                .map_err(OverlayError::io("connect inside the pod"))
        })
    })
    .await
    .map_err(|e| OverlayError::Io {
        operation: "netns connect task",
        source: std::io::Error::other(e),
    })??;
    stream
        .set_nonblocking(true)
        .map_err(OverlayError::io("set_nonblocking"))?;
    let _ = stream.set_nodelay(true);
    tokio::net::TcpStream::from_std(stream).map_err(OverlayError::io("register the socket"))
}
