//! A provider whose overlay UDP port is taken (a second provider on one host with the same
//! `[overlay] listen_port`) stops at start naming the port, before it posts any bond: its
//! NTX never leaves its wallet (issue 18: it used to post the bond, then die on "Address
//! already in use"). Root only: without root the node binds no overlay port (jobs run on one
//! Docker bridge), which is said loudly and skipped.

use super::{Children, config, ganglion, support};
use ganglion_node::daemon::devnet::{self, DevnetProvider};
use support::{Chain, MIN_BOND_PER_GPU, RATE, dev_key, hash_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_overlay_port_stops_the_provider_before_its_bond() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("*** SKIPPED: the overlay (and its UDP port) needs root; CI runs as root");
        return;
    }
    let chain = Chain::start().await;
    let root = chain.dir.path().to_path_buf();
    let _ = support::probe_image();
    let busy = std::net::UdpSocket::bind(("0.0.0.0", 0)).expect("udp");
    let port = busy.local_addr().expect("addr").port();
    let mut node = config(
        &chain,
        chain.deployment.reference.reference,
        root.join("p"),
        1,
        vec![],
    );
    node.provider = Some(DevnetProvider {
        gpus: 1,
        price_ntx_per_gpu_hour: RATE,
        stake_ntx: 2 * MIN_BOND_PER_GPU,
        bond_gpus: Some(2),
    });
    let cfg = node.write().expect("config written");
    let text = std::fs::read_to_string(&cfg).expect("config");
    assert!(text.contains("listen_port = 0"), "{text}");
    std::fs::write(
        &cfg,
        text.replace("listen_port = 0", &format!("listen_port = {port}")),
    )
    .expect("config");
    let key = hash_of(&dev_key(1));
    let before = chain.ntx_of(&key);

    let log = root.join("p.log");
    let mut kids = Children::default();
    let child = devnet::spawn(ganglion(), &cfg, &log).expect("spawns");
    kids.0.push(child);
    let (status, text) = kids.first_exit(&log, std::time::Duration::from_secs(90));
    assert!(!status.success(), "{text}");
    assert!(
        text.contains(&format!("UDP port {port}")) && text.contains("[overlay] listen_port"),
        "the error names the port and the key:\n{text}"
    );
    assert!(!text.contains("bond posted"), "{text}");
    assert_eq!(chain.ntx_of(&key), before, "no bond was posted");
    drop(busy);
}
