//! `node run` offers the GPUs it detects, not only declared ones: a provider process whose
//! `[gpus] sysfs_root` holds an AMD card (a sysfs tree written here — the boundary this
//! machine cannot cross, having no GPU) posts a bond for it, and the orchestrator's market
//! shows the card as a real (not declared) GPU with its VRAM.

use super::support::{self, Chain, RATE, STAKE, dev_key};
use super::{Children, START, config, ganglion, start};
use ganglion_node::daemon::devnet;

/// An AMD card as the kernel shows it under `<root>/class/drm` (amdgpu): 64 GiB of VRAM and a
/// render node.
fn amd_sysfs(root: &std::path::Path) {
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    w("class/drm/card0/device/vendor", "0x1002\n");
    w("class/drm/card0/device/device", "0x740f\n");
    w(
        "class/drm/card0/device/mem_info_vram_total",
        "68702699520\n",
    );
    w(
        "class/drm/card0/device/uevent",
        "DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_SLOT_NAME=0000:41:00.0\n",
    );
    w("class/drm/card0/device/drm/renderD128/dev", "226:128\n");
    // Its KFD compute node (an MI210, gfx90a, 64 GiB of its own memory): without one ROCm
    // could not use the card and it would not be offered.
    w(
        "class/kfd/kfd/topology/nodes/1/properties",
        "cpu_cores_count 0\nsimd_count 416\ngfx_target_version 90010\n\
         drm_render_minor 128\nlocal_mem_size 68702699520\n",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_offers_the_amd_gpu_it_detects_in_sysfs() {
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let _ = support::probe_image();
    let reference = devnet::deploy_validator(
        chain.handle.n2c_tcp_addr().expect("n2c"),
        &chain.deployment.params,
        &dev_key(3),
    )
    .await
    .expect("validator deployed");
    let mut kids = Children::default();
    let orch_node = config(&chain, reference, root.join("orch"), 0, vec![]);
    let orch = start(&mut kids, &orch_node, "orchestrator");

    let sysfs = root.join("sysfs");
    amd_sysfs(&sysfs);
    let node = config(&chain, reference, root.join("amd"), 1, orch.p2p.clone());
    let cfg = node.write().expect("config");
    let text = format!(
        "{}\n[provider]\nprice_ntx_per_gpu_hour = {RATE}\n\n[bond]\nstake_ntx = {STAKE}\n\n\
         [gpus]\nsysfs_root = {}\n\n[overlay]\nlisten_port = 0\n",
        std::fs::read_to_string(&cfg).expect("config text"),
        toml::Value::String(sysfs.display().to_string()),
    );
    std::fs::write(&cfg, text).expect("config with sysfs");
    let log = node.data_dir.with_extension("log");
    let mut child = devnet::spawn(ganglion(), &cfg, &log).expect("spawns");
    let started =
        tokio::task::block_in_place(|| devnet::wait_started(&mut child, &node.data_dir, START));
    kids.0.push(child);
    let info = started.unwrap_or_else(|e| {
        panic!(
            "the AMD provider did not start: {e}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert!(info.bond.is_some(), "a bond posted for the detected GPU");

    let orch_config = orch_node.data_dir.join("node.toml");
    let offers: Vec<ganglion_rpc::audit::MarketOffer> =
        support::wait_for("the AMD offer in the orchestrator's market", || async {
            let offers = super::market_offers(&orch_config);
            (!offers.is_empty()).then_some(offers)
        })
        .await;
    assert_eq!(offers.len(), 1, "{offers:?}");
    let gpus = &offers[0].gpus;
    assert_eq!(gpus.len(), 1, "{offers:?}");
    assert!(!gpus[0].declared, "detected, not declared: {gpus:?}");
    assert_eq!(gpus[0].vram_mib, 68_702_699_520 / (1 << 20), "{gpus:?}");
    assert!(gpus[0].model.contains("0x740f"), "{gpus:?}");
    assert_eq!((gpus[0].free, offers[0].bond_gpus >= 1), (1, true));
    drop(kids);
    chain.handle.shutdown().await;
}
