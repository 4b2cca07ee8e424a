//! The pod model (DESIGN §6): a hardened sandbox container with `network_mode: none` owns the
//! job's network namespace on this node; the node puts the job's TUN inside it (on a dedicated
//! thread, [`super::netns`]) with the rank's address, the overlay MTU and the subnet route as
//! the only route; workload containers join with `network_mode: container:<sandbox>` and so
//! see the overlay and nothing else (no default route: no host, no LAN, no other job).

use std::path::PathBuf;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use ipnet::Ipv4Net;

use super::OverlayError;
use super::addressing::JobOverlay;
use super::netns;
use super::tun::{self, TunDevice};

/// The overlay interface's name inside every pod (what `GLOO_SOCKET_IFNAME` and
/// `NCCL_SOCKET_IFNAME` name).
pub const OVERLAY_IFNAME: &str = "ganglion0";

/// The create body of rank `rank`'s sandbox: `image` running `cmd` (something that sleeps
/// until stopped), no network but loopback, every capability dropped, no new privileges, a
/// read-only root, the rank's hostname and `extra_hosts` for every rank (joined containers
/// share its `/etc/hosts`).
pub fn sandbox_body(
    overlay: &JobOverlay,
    rank: u32,
    image: &str,
    cmd: Vec<String>,
    labels: std::collections::HashMap<String, String>,
) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(image.into()),
        cmd: Some(cmd),
        hostname: Some(JobOverlay::hostname(rank)),
        labels: Some(labels),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            privileged: Some(false),
            pids_limit: Some(16),
            memory: Some(32 << 20),
            extra_hosts: Some(overlay.extra_hosts()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The `HostConfig.NetworkMode` a workload uses to join `sandbox`.
pub fn join_mode(sandbox: &str) -> String {
    format!("container:{sandbox}")
}

/// The network namespace of running container `container` (`/proc/<pid>/ns/net`).
///
/// # Errors
/// [`OverlayError::Engine`] when inspection fails, [`OverlayError::SandboxNotRunning`] when
/// it has no PID.
pub async fn sandbox_netns(docker: &Docker, container: &str) -> Result<PathBuf, OverlayError> {
    let info = docker
        .inspect_container(
            container,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .map_err(|source| OverlayError::Engine {
            operation: "inspect sandbox",
            source,
        })?;
    match info.state.and_then(|s| s.pid) {
        Some(pid) if pid > 0 => Ok(PathBuf::from(format!("/proc/{pid}/ns/net"))),
        _ => Err(OverlayError::SandboxNotRunning(container.into())),
    }
}

/// Creates the TUN `name` inside namespace `netns` with `address` (its prefix installs the
/// route to the job subnet) and `mtu`, on a dedicated thread.
///
/// # Errors
/// [`OverlayError::Io`] from `setns`, `TUNSETIFF` or the address ioctls.
pub async fn install_tun(
    netns: PathBuf,
    name: &str,
    address: Ipv4Net,
    mtu: u32,
) -> Result<TunDevice, OverlayError> {
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || {
        netns::run_in(&netns, move || {
            let dev = TunDevice::create(&name)?;
            tun::configure(dev.name(), address, mtu)?;
            Ok(dev)
        })
    })
    .await
    .map_err(|e| OverlayError::Io {
        operation: "install TUN task",
        source: std::io::Error::other(e),
    })?
}
