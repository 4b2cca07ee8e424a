//! `ganglion rendezvous-env` (hidden): the environment the executor gives one container of a
//! job (`executor::rendezvous::rank_env`), for a plan of `--nodes` containers with one GPU
//! each. `scripts/gpu-check` starts its NCCL ranks with it, so they rendezvous exactly as a
//! job's containers would.

use std::collections::BTreeMap;

use anyhow::Context as _;
use ganglion_dispatch::executor::plan::{
    ContainerSlot, GpuAttachment, ImageSource, JobPlan, RunAs, RunId,
};
use ganglion_dispatch::executor::rendezvous::{RendezvousHosts, rank_env};
use ganglion_market::spec::Framework;

/// Print the rendezvous environment of one container of an N-container, one-GPU-each job.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Containers (providers) in the job, one GPU each.
    #[arg(long, default_value_t = 2)]
    pub nodes: u32,
    /// The container whose environment is printed (0 = the master).
    #[arg(long)]
    pub node_rank: u32,
    /// Hostname or address of each container by node rank, comma-separated (the job
    /// network's names); one value is used for every rank.
    #[arg(long, default_value = "127.0.0.1", value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// The interface the job's traffic uses (`NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`).
    #[arg(long, default_value = "lo")]
    pub interface: String,
    /// The rendezvous port (`MASTER_PORT`).
    #[arg(long, default_value_t = 29500)]
    pub port: u16,
    /// GPU UUID attached to each container (`nvidia` runtime request), comma-separated by
    /// node rank; one value is used for every rank.
    #[arg(long, default_value = "GPU-unknown", value_delimiter = ',')]
    pub gpu: Vec<String>,
    /// The job id (`GANGLION_JOB_ID`).
    #[arg(long, default_value = "gpu-check")]
    pub job: String,
    /// Print JSON instead of `KEY=VALUE` lines.
    #[arg(long)]
    pub json: bool,
}

fn nth(list: &[String], i: u32) -> String {
    list.get(i as usize)
        .or_else(|| list.first())
        .cloned()
        .unwrap_or_default()
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.nodes > 0, "--nodes must be at least 1");
    let plan = JobPlan {
        job: RunId::new(&args.job).context("--job")?,
        image: ImageSource::Local {
            name: "gpu-check".into(),
        },
        command: vec![],
        env: BTreeMap::new(),
        framework: Framework::Torch,
        master_port: args.port,
        world: (0..args.nodes)
            .map(|node_rank| ContainerSlot {
                node_rank,
                gpus: vec![GpuAttachment::NvidiaRuntime {
                    uuid: nth(&args.gpu, node_rank),
                }],
            })
            .collect(),
        local: vec![args.node_rank],
        per_gpu: Default::default(),
        inputs: vec![],
        outputs: vec![],
        max_duration_s: 600,
        run_as: RunAs::default(),
        gpus_per_group: None,
        serve_port: None,
    };
    let hosts = RendezvousHosts {
        hostnames: (0..args.nodes).map(|i| nth(&args.hosts, i)).collect(),
        interface: args.interface.clone(),
    };
    let env = rank_env(&plan, args.node_rank, &hosts).with_context(|| {
        format!(
            "--node-rank {} is not below --nodes {}",
            args.node_rank, args.nodes
        )
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&env)?);
    } else {
        for (k, v) in env {
            println!("{k}={v}");
        }
    }
    Ok(())
}
