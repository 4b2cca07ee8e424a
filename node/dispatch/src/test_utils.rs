//! Helpers shared by this crate's tests, examples and benches (feature `test-utils`).

use std::collections::BTreeMap;

use ganglion_market::spec::{Framework, ResourcesPerGpu};

use crate::executor::plan::{ContainerSlot, GpuAttachment, ImageSource, JobPlan, RunAs, RunId};

/// A plan of `ranks` containers (node ranks 0..`ranks`, all local) of the local image `image`
/// running `command` as a Torch job on port 29500, one declared GPU each (`declared-<rank>`),
/// 0.5 CPU cores, 0.25 GiB of memory and 1/16 GiB of shared memory per GPU, no inputs, at most
/// 60 seconds.
pub fn plan(job: RunId, image: &str, command: &[&str], ranks: u32) -> JobPlan {
    JobPlan {
        job,
        image: ImageSource::Local { name: image.into() },
        command: command.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        framework: Framework::Torch,
        master_port: 29500,
        world: (0..ranks)
            .map(|r| ContainerSlot {
                node_rank: r,
                gpus: vec![GpuAttachment::Declared {
                    id: format!("declared-{r}"),
                }],
            })
            .collect(),
        local: (0..ranks).collect(),
        per_gpu: ResourcesPerGpu {
            cpu_cores: 0.5,
            mem_gib: 0.25,
            shm_gib: 0.0625,
            disk_gib: 0.0,
        },
        inputs: vec![],
        outputs: vec![],
        max_duration_s: 60,
        run_as: RunAs::default(),
        gpus_per_group: None,
        serve_port: None,
    }
}
