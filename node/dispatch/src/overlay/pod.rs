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
use crate::executor::network::Endpoint;
use crate::executor::rendezvous::RendezvousHosts;

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

/// How a workload joins `sandbox`, in the executor's terms: `container:<sandbox>` with no
/// hostname, endpoints or `extra_hosts` of its own (the engine refuses those in a joined
/// namespace; the sandbox carries them and shares its `/etc/hosts`).
pub fn workload_endpoint(sandbox: &str) -> Endpoint {
    Endpoint {
        network_mode: join_mode(sandbox),
        hostname: String::new(),
        endpoints: std::collections::HashMap::new(),
        extra_hosts: vec![],
    }
}

/// The rendezvous view of `overlay`: `rank-<n>` hostnames and [`OVERLAY_IFNAME`] as the
/// interface `GLOO_SOCKET_IFNAME` / `NCCL_SOCKET_IFNAME` name.
pub fn rendezvous_hosts(overlay: &JobOverlay) -> RendezvousHosts {
    RendezvousHosts {
        hostnames: (0..overlay.addresses.len())
            .map(|rank| JobOverlay::hostname(u32::try_from(rank).unwrap_or(u32::MAX)))
            .collect(),
        interface: OVERLAY_IFNAME.into(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::plan::RunId;
    use crate::overlay::addressing::OverlayPool;

    #[test]
    fn sandbox_is_hardened_and_carries_the_hosts() {
        let job = RunId::new("pod-1").expect("id");
        let plan = OverlayPool::default()
            .plan(&job, 3, &std::collections::BTreeSet::new())
            .expect("plan");
        let body = sandbox_body(&plan, 1, "img", vec!["sleep".into()], Default::default());
        assert_eq!(body.hostname.as_deref(), Some("rank-1"));
        let host = body.host_config.expect("host config");
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.extra_hosts.map(|h| h.len()), Some(3));

        let joined = workload_endpoint("sb");
        assert_eq!(joined.network_mode, "container:sb");
        assert!(joined.hostname.is_empty() && joined.extra_hosts.is_empty());
        let hosts = rendezvous_hosts(&plan);
        assert_eq!(hosts.hostnames, vec!["rank-0", "rank-1", "rank-2"]);
        assert_eq!(hosts.interface, OVERLAY_IFNAME);
    }
}
