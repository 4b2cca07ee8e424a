//! Rendezvous environment per container, so PyTorch, Horovod and JAX code runs unchanged
//! (DESIGN §6). One container per provider; it runs `local_world_size` processes (one per GPU).
//!
//! - torch `env://` (one process per container): `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`,
//!   `RANK` (= the container's first global rank), `LOCAL_RANK=0`, `LOCAL_WORLD_SIZE`,
//!   `GROUP_RANK`/`NODE_RANK` (= node rank). torch's `init_process_group("env://")` reads them.
//! - `torchrun` static rendezvous for multi-GPU containers: `PET_NNODES`, `PET_NODE_RANK`,
//!   `PET_NPROC_PER_NODE`, `PET_MASTER_ADDR`, `PET_MASTER_PORT`, `PET_RDZV_BACKEND=static`
//!   (torchrun reads every flag from `PET_<FLAG>`; it then sets `RANK`/`LOCAL_RANK` per worker).
//! - Horovod with the gloo controller and no ssh (what `horovodrun --gloo` exports to each
//!   worker): `HOROVOD_CONTROLLER=gloo`, `HOROVOD_CPU_OPERATIONS=gloo`,
//!   `HOROVOD_GLOO_RENDEZVOUS_ADDR`/`_PORT` (rank 0's host; the rendezvous HTTP server runs
//!   there), `HOROVOD_GLOO_IFACE`, `HOROVOD_RANK`/`SIZE`/`LOCAL_RANK`/`LOCAL_SIZE`/
//!   `CROSS_RANK`/`CROSS_SIZE`, `HOROVOD_HOSTNAME`.
//! - JAX: `JAX_COORDINATOR_ADDRESS` (`host:port`), `JAX_NUM_PROCESSES` (= containers; a JAX
//!   process drives all its local devices), `JAX_PROCESS_ID` (= node rank): the arguments of
//!   `jax.distributed.initialize`.
//! - Always: `GLOO_SOCKET_IFNAME`/`NCCL_SOCKET_IFNAME` = the job network's interface,
//!   `NCCL_IB_DISABLE=1` (tunnelled traffic), and `GANGLION_JOB_ID`, `GANGLION_NODE_RANK`,
//!   `GANGLION_NNODES`, `GANGLION_GPUS` (the container's GPU ids, comma-separated; the only
//!   GPU information a declared GPU gets).
//! - Latency groups (`placement.groups` of the spec, [`JobPlan::gpus_per_group`]): every
//!   `GANGLION_GROUP_SIZE` consecutive global ranks form one group, within a tight RTT bound
//!   (model or pipeline parallel inside, data parallel between groups).
//!   `GANGLION_GROUP_ID` (0-based), `GANGLION_GROUP_RANK` (the container's first process's
//!   rank within its group; a process adds its `LOCAL_RANK`), `GANGLION_GROUP_SIZE` (ranks
//!   per group), `GANGLION_GROUP_COUNT` (groups). Group `g` holds the global ranks
//!   `g × size .. (g + 1) × size`. Absent without groups. (torch's own `GROUP_RANK` is the
//!   node rank, as torchrun sets it; it is not the latency group.)

use std::collections::BTreeMap;

use super::plan::JobPlan;
use ganglion_market::spec::Framework;

/// Where the ranks are reachable, from the job network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousHosts {
    /// Hostname of each container, by node rank (resolvable by every container of the job).
    pub hostnames: Vec<String>,
    /// The interface the job's traffic uses inside the container, e.g. `eth0`.
    pub interface: String,
}

/// The environment of container `node_rank` of `plan`. Returns `None` for an unknown rank.
pub fn rank_env(
    plan: &JobPlan,
    node_rank: u32,
    hosts: &RendezvousHosts,
) -> Option<BTreeMap<String, String>> {
    let slot = plan.slot(node_rank)?;
    let master = hosts.hostnames.first()?.clone();
    let own_host = hosts.hostnames.get(node_rank as usize)?.clone();
    let nnodes = plan.world.len();
    let world_size = plan.world_size();
    let local_size = slot.local_world_size();
    let base_rank = plan.first_rank(node_rank);
    let port = plan.master_port;
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set("GANGLION_JOB_ID", plan.job.to_string());
    set("GANGLION_NODE_RANK", node_rank.to_string());
    set("GANGLION_NNODES", nnodes.to_string());
    set(
        "GANGLION_GPUS",
        slot.gpus
            .iter()
            .map(|g| g.id())
            .collect::<Vec<_>>()
            .join(","),
    );
    if let Some(g) = plan.group_of(node_rank) {
        set("GANGLION_GROUP_ID", g.group.to_string());
        set("GANGLION_GROUP_RANK", g.first_rank_in_group.to_string());
        set("GANGLION_GROUP_SIZE", g.group_size.to_string());
        set("GANGLION_GROUP_COUNT", g.groups.to_string());
    }
    set("GLOO_SOCKET_IFNAME", hosts.interface.clone());
    set("NCCL_SOCKET_IFNAME", hosts.interface.clone());
    set("NCCL_IB_DISABLE", "1".into());
    match plan.framework {
        Framework::Torch => {
            set("MASTER_ADDR", master.clone());
            set("MASTER_PORT", port.to_string());
            set("WORLD_SIZE", world_size.to_string());
            set("RANK", base_rank.to_string());
            set("LOCAL_RANK", "0".into());
            set("LOCAL_WORLD_SIZE", local_size.to_string());
            set("GROUP_RANK", node_rank.to_string());
            set("NODE_RANK", node_rank.to_string());
            set("PET_NNODES", nnodes.to_string());
            set("PET_NODE_RANK", node_rank.to_string());
            set("PET_NPROC_PER_NODE", local_size.to_string());
            set("PET_MASTER_ADDR", master);
            set("PET_MASTER_PORT", port.to_string());
            set("PET_RDZV_BACKEND", "static".into());
        }
        Framework::Horovod => {
            set("HOROVOD_CONTROLLER", "gloo".into());
            set("HOROVOD_CPU_OPERATIONS", "gloo".into());
            set("HOROVOD_GLOO_RENDEZVOUS_ADDR", master);
            set("HOROVOD_GLOO_RENDEZVOUS_PORT", port.to_string());
            set("HOROVOD_GLOO_IFACE", hosts.interface.clone());
            set("HOROVOD_RANK", base_rank.to_string());
            set("HOROVOD_SIZE", world_size.to_string());
            set("HOROVOD_LOCAL_RANK", "0".into());
            set("HOROVOD_LOCAL_SIZE", local_size.to_string());
            set("HOROVOD_CROSS_RANK", node_rank.to_string());
            set("HOROVOD_CROSS_SIZE", nnodes.to_string());
            set("HOROVOD_HOSTNAME", own_host);
        }
        Framework::Jax => {
            set("JAX_COORDINATOR_ADDRESS", format!("{master}:{port}"));
            set("JAX_NUM_PROCESSES", nnodes.to_string());
            set("JAX_PROCESS_ID", node_rank.to_string());
        }
        Framework::Mpi | Framework::None => {}
    }
    Some(env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::plan::{ContainerSlot, GpuAttachment, ImageSource, RunAs, RunId};

    fn plan(framework: Framework, gpus_per_slot: &[usize]) -> JobPlan {
        JobPlan {
            job: RunId::new("job-1").expect("valid"),
            image: ImageSource::Local { name: "x".into() },
            command: vec![],
            env: BTreeMap::new(),
            framework,
            master_port: 29511,
            world: gpus_per_slot
                .iter()
                .enumerate()
                .map(|(i, n)| ContainerSlot {
                    node_rank: i as u32,
                    gpus: (0..*n)
                        .map(|g| GpuAttachment::Declared {
                            id: format!("d{i}-{g}"),
                        })
                        .collect(),
                })
                .collect(),
            local: (0..gpus_per_slot.len() as u32).collect(),
            per_gpu: Default::default(),
            inputs: vec![],
            outputs: vec![],
            max_duration_s: 60,
            run_as: RunAs::default(),
            gpus_per_group: None,
            serve_port: None,
        }
    }

    fn hosts(n: usize) -> RendezvousHosts {
        RendezvousHosts {
            hostnames: (0..n).map(|i| format!("rank-{i}")).collect(),
            interface: "eth0".into(),
        }
    }

    #[test]
    fn torch_env_counts_ranks_across_uneven_containers() {
        let p = plan(Framework::Torch, &[2, 1, 3]);
        let h = hosts(3);
        let e: Vec<_> = (0..3).map(|r| rank_env(&p, r, &h).expect("rank")).collect();
        assert_eq!(e[0]["WORLD_SIZE"], "6");
        assert_eq!(
            [&e[0]["RANK"], &e[1]["RANK"], &e[2]["RANK"]],
            ["0", "2", "3"]
        );
        assert_eq!(e[2]["LOCAL_WORLD_SIZE"], "3");
        assert_eq!(e[2]["PET_NPROC_PER_NODE"], "3");
        assert_eq!(e[1]["PET_NODE_RANK"], "1");
        assert_eq!(e[1]["PET_NNODES"], "3");
        for env in &e {
            assert_eq!(env["MASTER_ADDR"], "rank-0");
            assert_eq!(env["PET_MASTER_ADDR"], "rank-0");
            assert_eq!(env["MASTER_PORT"], "29511");
            assert_eq!(env["GLOO_SOCKET_IFNAME"], "eth0");
            assert_eq!(env["NCCL_SOCKET_IFNAME"], "eth0");
            assert_eq!(env["NCCL_IB_DISABLE"], "1");
            assert!(!env.contains_key("HOROVOD_RANK"));
        }
        assert_eq!(e[0]["GANGLION_GPUS"], "d0-0,d0-1");
    }

    #[test]
    fn latency_groups_give_each_container_its_group_and_rank_within_it() {
        // Two groups of 4 ranks over containers of 2, 2, 1, 3 GPUs.
        let mut p = plan(Framework::Torch, &[2, 2, 1, 3]);
        p.gpus_per_group = Some(4);
        p.validate().expect("whole containers per group");
        let h = hosts(4);
        let e: Vec<_> = (0..4).map(|r| rank_env(&p, r, &h).expect("rank")).collect();
        let col = |k: &str| e.iter().map(|env| env[k].as_str()).collect::<Vec<_>>();
        assert_eq!(col("GANGLION_GROUP_ID"), ["0", "0", "1", "1"]);
        assert_eq!(col("GANGLION_GROUP_RANK"), ["0", "2", "0", "1"]);
        assert_eq!(col("GANGLION_GROUP_SIZE"), ["4"; 4]);
        assert_eq!(col("GANGLION_GROUP_COUNT"), ["2"; 4]);
        // Group g holds the global ranks g × size .. (g + 1) × size.
        for env in &e {
            let rank: u32 = env["RANK"].parse().expect("rank");
            let group: u32 = env["GANGLION_GROUP_ID"].parse().expect("group");
            let in_group: u32 = env["GANGLION_GROUP_RANK"].parse().expect("group rank");
            assert_eq!(rank, group * 4 + in_group);
        }
        // Without groups: none of the variables.
        let plain = rank_env(&plan(Framework::Torch, &[1, 1]), 0, &hosts(2)).expect("rank");
        assert!(!plain.keys().any(|k| k.starts_with("GANGLION_GROUP")));
    }

    #[test]
    fn a_container_straddling_two_groups_or_a_partial_group_is_an_invalid_plan() {
        let mut p = plan(Framework::Torch, &[1, 2, 1]);
        p.gpus_per_group = Some(2);
        let err = p.validate().expect_err("container 1 holds ranks 1 and 2");
        assert!(
            err.to_string()
                .contains("container 1 (ranks 1..3) straddles"),
            "{err}"
        );
        let mut p = plan(Framework::Torch, &[2, 1]);
        p.gpus_per_group = Some(2);
        let err = p.validate().expect_err("3 ranks in groups of 2");
        assert!(
            err.to_string().contains("does not split into whole groups"),
            "{err}"
        );
        let mut p = plan(Framework::Torch, &[2, 2]);
        p.gpus_per_group = Some(0);
        assert!(p.validate().is_err());
    }

    #[test]
    fn horovod_env_is_the_gloo_controller_without_ssh() {
        let p = plan(Framework::Horovod, &[1, 1]);
        let e = rank_env(&p, 1, &hosts(2)).expect("rank");
        assert_eq!(e["HOROVOD_CONTROLLER"], "gloo");
        assert_eq!(e["HOROVOD_CPU_OPERATIONS"], "gloo");
        assert_eq!(e["HOROVOD_GLOO_RENDEZVOUS_ADDR"], "rank-0");
        assert_eq!(e["HOROVOD_GLOO_RENDEZVOUS_PORT"], "29511");
        assert_eq!(e["HOROVOD_GLOO_IFACE"], "eth0");
        assert_eq!(e["HOROVOD_RANK"], "1");
        assert_eq!(e["HOROVOD_SIZE"], "2");
        assert_eq!(e["HOROVOD_CROSS_RANK"], "1");
        assert_eq!(e["HOROVOD_CROSS_SIZE"], "2");
        assert_eq!(e["HOROVOD_HOSTNAME"], "rank-1");
        assert!(!e.contains_key("MASTER_ADDR"));
    }

    #[test]
    fn jax_env_names_the_coordinator_and_process_ids() {
        let p = plan(Framework::Jax, &[4, 4]);
        let e = rank_env(&p, 1, &hosts(2)).expect("rank");
        assert_eq!(e["JAX_COORDINATOR_ADDRESS"], "rank-0:29511");
        assert_eq!(e["JAX_NUM_PROCESSES"], "2");
        assert_eq!(e["JAX_PROCESS_ID"], "1");
        assert_eq!(e["GLOO_SOCKET_IFNAME"], "eth0");
    }

    #[test]
    fn no_framework_gets_only_ganglion_and_interface_env() {
        let p = plan(Framework::None, &[0]);
        let e = rank_env(&p, 0, &hosts(1)).expect("rank");
        assert!(!e.contains_key("RANK"));
        assert_eq!(e["GANGLION_NNODES"], "1");
        assert_eq!(e["GANGLION_GPUS"], "");
        assert!(rank_env(&p, 1, &hosts(1)).is_none(), "unknown rank");
    }
}
