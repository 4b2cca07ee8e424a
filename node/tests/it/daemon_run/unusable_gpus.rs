//! Field case docker-gpu (`shared/fixtures/field/README.md`): a provider whose NVIDIA GPU is
//! present but cannot be given to a container decides so at start-up, from `/info` and one
//! smoke container, **before** it posts a bond: it stops naming the reason, and its NTX never
//! leaves its wallet. The GPU is an L4 of the NVML library's test double (`fake_nvml.c`, loaded
//! by the real binary as `libnvidia-ml.so.1`); the engine is this machine's, which has no
//! NVIDIA Container Toolkit (field host H1).

use std::process::{Command, Stdio};

use super::{Children, config, ganglion, support};
use crate::fake_nvml::{self, FakeNvml};
use support::{Chain, RATE, STAKE, dev_key, hash_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_containers_cannot_get_stops_the_provider_before_its_bond() {
    if fake_nvml::real_driver_here() {
        eprintln!("SKIPPED: this machine has the NVIDIA driver");
        return;
    }
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let _ = support::probe_image();
    let node = config(
        &chain,
        chain.deployment.reference.reference,
        root.join("p"),
        1,
        vec![],
    );
    let cfg = node.write().expect("config written");
    let no_amd = root.join("sysfs");
    std::fs::create_dir_all(&no_amd).expect("mkdir");
    let text = format!(
        "{}\n[provider]\nprice_ntx_per_gpu_hour = {RATE}\n\n[bond]\nstake_ntx = {STAKE}\n\n\
         [gpus]\nsysfs_root = {}\n\n[overlay]\nlisten_port = 0\n",
        std::fs::read_to_string(&cfg).expect("config text"),
        toml::Value::String(no_amd.display().to_string()),
    );
    std::fs::write(&cfg, text).expect("provider config");
    let key = hash_of(&dev_key(1));
    let before = chain.ntx_of(&key);

    let nvml = FakeNvml::build("l4");
    let log = root.join("p.log");
    let out = std::fs::File::create(&log).expect("log");
    let mut cmd = Command::new(ganglion());
    cmd.args(["node", "run", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out);
    let mut kids = Children::default();
    kids.0
        .push(nvml.apply(&mut cmd).spawn().expect("spawns the node"));
    let (status, text) = kids.first_exit(&log, std::time::Duration::from_secs(120));
    assert!(!status.success(), "{text}");
    assert!(
        text.contains("NVIDIA GPUs are present but not usable in containers")
            && text.contains("fix: ")
            && text.contains("no bond posted"),
        "the reason, its fix, and no bond:\n{text}"
    );
    assert_eq!(chain.ntx_of(&key), before, "no bond was posted");
}
