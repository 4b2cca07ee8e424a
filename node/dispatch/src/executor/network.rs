//! How a job's containers reach each other: behind [`ClusterNetwork`], so the cross-machine
//! overlay (a sandbox container owning the namespace, `network_mode:
//! container:<sandbox>`) can replace the single-host [`DockerBridge`] used now.

use std::collections::HashMap;
use std::future::Future;

use bollard::Docker;
use bollard::models::{EndpointSettings, NetworkCreateRequest};

use super::plan::RunId;
use super::rendezvous::RendezvousHosts;
use super::{ExecError, labels};

/// How one container joins the job network.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// `HostConfig.NetworkMode`: a network name, or `container:<id>` for a pod sandbox.
    pub network_mode: String,
    /// The container's hostname (`Config.Hostname`).
    pub hostname: String,
    /// Endpoint settings keyed by network name (`NetworkingConfig.EndpointsConfig`); empty for
    /// `container:` modes.
    pub endpoints: HashMap<String, EndpointSettings>,
    /// `HostConfig.ExtraHosts` (`host:ip`), for every rank where addresses are fixed.
    pub extra_hosts: Vec<String>,
}

/// A job's network on this node.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// Per node rank run here: how the container joins.
    pub endpoints: HashMap<u32, Endpoint>,
    /// Hostnames of every rank and the interface name, for the rendezvous env.
    pub hosts: RendezvousHosts,
}

/// Gives a job's containers a private network and takes it away again.
pub trait ClusterNetwork: Send + Sync {
    /// Creates (or reuses, after a restart) the network of `job` with `world` containers of
    /// which `local` run here.
    ///
    /// # Errors
    /// [`ExecError::Engine`] when the network cannot be created.
    fn attach(
        &self,
        job: &RunId,
        world: u32,
        local: &[u32],
    ) -> impl Future<Output = Result<Attachment, ExecError>> + Send;

    /// Removes the job's network; absent is fine.
    ///
    /// # Errors
    /// [`ExecError::Engine`] when the engine refuses (e.g. containers still attached).
    fn detach(&self, job: &RunId) -> impl Future<Output = Result<(), ExecError>> + Send;
}

/// One internal (no outside route) Docker bridge network per job on this host; containers find
/// each other by hostname (`rank-<n>`) through Docker's embedded DNS. Interface: `eth0`.
#[derive(Clone)]
pub struct DockerBridge {
    docker: Docker,
}

impl DockerBridge {
    /// A bridge network provider on `docker`.
    pub fn new(docker: Docker) -> Self {
        Self { docker }
    }

    /// The network's name for `job`.
    pub fn network_name(job: &RunId) -> String {
        format!("ganglion-{job}")
    }

    /// The hostname of node rank `rank`.
    pub fn hostname(rank: u32) -> String {
        format!("rank-{rank}")
    }
}

impl ClusterNetwork for DockerBridge {
    async fn attach(
        &self,
        job: &RunId,
        world: u32,
        local: &[u32],
    ) -> Result<Attachment, ExecError> {
        let name = Self::network_name(job);
        let exists = self
            .docker
            .inspect_network(
                &name,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
            .is_ok();
        if !exists {
            let request = NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                internal: Some(true),
                labels: Some(labels::for_job(job, None)),
                ..Default::default()
            };
            self.docker
                .create_network(request)
                .await
                .map_err(ExecError::engine("create network"))?;
        }
        let endpoints = local
            .iter()
            .map(|rank| {
                let hostname = Self::hostname(*rank);
                let settings = EndpointSettings {
                    aliases: Some(vec![hostname.clone()]),
                    ..Default::default()
                };
                (
                    *rank,
                    Endpoint {
                        network_mode: name.clone(),
                        hostname,
                        endpoints: HashMap::from([(name.clone(), settings)]),
                        extra_hosts: vec![],
                    },
                )
            })
            .collect();
        Ok(Attachment {
            endpoints,
            hosts: RendezvousHosts {
                hostnames: (0..world).map(Self::hostname).collect(),
                interface: "eth0".into(),
            },
        })
    }

    async fn detach(&self, job: &RunId) -> Result<(), ExecError> {
        match self.docker.remove_network(&Self::network_name(job)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(ExecError::Engine {
                operation: "remove network",
                source: e,
            }),
        }
    }
}
