//! Ganglion dispatch: the GPUs of this machine, the containers of a job on them, and the private
//! network between a job's machines (DESIGN §6).
//!
//! The node's job engine hands an assignment to an [`executor::Executor`]; the executor runs
//! it through the Docker Engine on the GPUs the [`gpu`] inventory found, on a
//! [`executor::network::ClusterNetwork`] that is either one Docker bridge (single host) or the
//! per-job [`overlay`] (WireGuard-protocol tunnels in userspace between pods on several hosts).
//! Nothing here knows the chain or the swarm: the overlay is given its peers and the relay
//! streams by the node.
//!
//! - [`gpu`]: inventory (NVML, AMD sysfs/KFD, declared), the CUDA/CPU benchmark and unified
//!   score, and whether the Docker Engine can give GPUs to containers.
//! - [`executor`]: a job's containers through the Docker Engine API (bollard): image, sandbox,
//!   GPUs, rendezvous env, outputs pinned with CID, CAR and piece CID, crash recovery.
//! - [`overlay`]: the per-job layer-3 network: addressing, keys, tunnels, TUN, pods, relay
//!   fallback, the sweep of orphans after a crash.

pub mod executor;
pub mod gpu;
pub mod overlay;
#[cfg(feature = "test-utils")]
pub mod test_utils;
