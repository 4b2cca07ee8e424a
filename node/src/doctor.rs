//! `ganglion doctor`: checks that this machine can run a node, each with a verdict and, when
//! something is wrong, the step that fixes it (DESIGN §8). The checks only read: nothing is
//! installed, started or written.
//!
//! | check        | passes when                                                    |
//! |--------------|----------------------------------------------------------------|
//! | `docker`     | the Docker Engine answers on its socket (API version negotiated) |
//! | `gpu-runtime`| NVIDIA GPUs can reach containers (runtime or CDI, confirmed by one smoke container when NVIDIA GPUs are present); warn if not, with the reason and fix |
//! | `gpus`       | GPUs are detected (NVML, AMD sysfs) or declared in the config, and some would be offered |
//! | `chain`      | the N2C endpoint answers the handshake with the network magic  |
//! | `validator`  | the validator's reference script is on chain (`[validator] reference`, else found at its address) |
//! | `bond`       | a provider's bond: live on chain (warn below its minimum stake), or `[bond]` at least `min_bond_per_gpu × GPUs` and held by the wallet (warn: no wallet yet) |
//! | `rpc-port`   | the RPC listen address can be bound (warn: in use, a node running?) |
//! | `disk`       | the data dir's file system has ≥ 10 GiB free (fail below 1 GiB) |
//! | `overlay`    | pods can get their tunnel: root and `/dev/net/tun` (warn if not: single-host jobs only) |
//! | `overlay-port` | a provider's `[overlay] listen_port` (UDP) can be bound (warn: in use, a node running?): every provider node on a host needs its own |

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::network::NetworkPreset;
use crate::settings::{N2cEndpoint, Settings};
use crate::wallet::chain::ChainClient;
use ganglion_dispatch::executor::engine::{DEFAULT_SOCKET, DockerEngine};
use ganglion_dispatch::gpu::{self, docker::NvidiaAccess};

/// Free space below which the disk check fails, in GiB.
pub const DISK_FAIL_GIB: f64 = 1.0;
/// Free space below which the disk check warns, in GiB (images, outputs, the indexer).
pub const DISK_WARN_GIB: f64 = 10.0;
/// How long the chain and Docker checks wait for an answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Works.
    Pass,
    /// Works with a limitation (no GPU runtime on a devnet machine, port in use).
    Warn,
    /// Does not work: the node cannot run as configured.
    Fail,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check's name (`docker`, `chain`, …).
    pub name: &'static str,
    /// Pass, warn or fail.
    pub verdict: Verdict,
    /// What was found.
    pub detail: String,
    /// What to do about a warning or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn pass(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            verdict: Verdict::Pass,
            detail: detail.into(),
            fix: None,
        }
    }

    fn not_ok(
        name: &'static str,
        verdict: Verdict,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            name,
            verdict,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Runs every check for `settings`, in the table's order.
pub async fn run(settings: &Settings) -> Vec<Check> {
    let engine = tokio::time::timeout(
        TIMEOUT,
        DockerEngine::connect(Path::new(DEFAULT_SOCKET), TIMEOUT.as_secs()),
    )
    .await;
    let cfg = settings.gpus.clone();
    let mut inv = tokio::task::spawn_blocking(move || gpu::detect(&cfg.sysfs_root, &cfg.declared))
        .await
        .unwrap_or_default();
    let (docker, runtime) = match engine {
        Ok(Ok(e)) => {
            // The provider's start-up check: a smoke container when NVIDIA GPUs are present.
            let (access, check) = crate::daemon::gpus::startup_check(
                &e,
                &mut inv,
                &crate::daemon::overlay::probe_image_tag(),
            )
            .await;
            (
                Check::pass(
                    "docker",
                    format!(
                        "Docker Engine {} at {} (API {})",
                        e.server_version,
                        e.socket.display(),
                        e.api_version
                    ),
                ),
                runtime_check(&access, check.is_some()),
            )
        }
        Ok(Err(err)) => no_docker(err.to_string()),
        Err(_) => no_docker(format!(
            "{DEFAULT_SOCKET} did not answer within {TIMEOUT:?}"
        )),
    };
    let mut checks = vec![
        docker,
        runtime,
        gpus_check(settings, &inv),
        chain_check(settings).await,
    ];
    let deployed = deployment(settings).await;
    checks.push(validator_check(settings, &deployed));
    checks.extend(bond_check(settings, &inv, &deployed).await);
    checks.extend([
        port_check(settings),
        disk_check(settings),
        overlay_check(
            // SAFETY: geteuid(2) has no preconditions and cannot fail.
            unsafe { libc::geteuid() } == 0,
            Path::new("/dev/net/tun").exists(),
            Path::new("/sys/module/wireguard").exists(),
        ),
    ]);
    checks.extend(overlay_port_check(settings));
    checks
}

/// The chain's environment and the validator's deployment as `node run` resolves them, or
/// why not (a failed chain check, a missing reference script).
type Deployed = Result<
    (
        ganglion_contracts::env::Env,
        ganglion_contracts::v2::build::Deployment,
    ),
    String,
>;

async fn deployment(settings: &Settings) -> Deployed {
    let Ok(endpoint) = settings.n2c() else {
        return Err("no chain to look on (see the chain check)".into());
    };
    let preset = NetworkPreset::of(settings.network());
    match tokio::time::timeout(
        TIMEOUT,
        crate::daemon::chain::resolve(settings, &preset, &endpoint),
    )
    .await
    {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("the chain did not answer within {TIMEOUT:?}")),
    }
}

/// The validator's reference script, as `node run` finds it: `[validator] reference` when
/// set, else at the validator's address (`ganglion devnet deploy` puts it there).
fn validator_check(settings: &Settings, deployed: &Deployed) -> Check {
    let fix = "on a devnet run `ganglion devnet deploy`; else set [validator] reference to the \
               UTxO holding the validator's reference script";
    match deployed {
        Ok((_, d)) => Check::pass(
            "validator",
            format!(
                "reference script at {}#{}{}",
                hex::encode(d.reference.reference.tx_hash),
                d.reference.reference.index,
                if settings.validator.is_some() {
                    " ([validator] reference)"
                } else {
                    " (found at the validator's address)"
                }
            ),
        ),
        Err(e) => Check::not_ok("validator", Verdict::Fail, e.clone(), fix),
    }
}

/// A provider's bond, as `node run` will find or post it: a live bond of this node's payment
/// key on chain (warn when its stake fell below the minimum for its GPUs, e.g. after a slash),
/// else `[bond]` with at least `min_bond_per_gpu × GPUs` NTX that the wallet holds. Only for
/// a provider.
async fn bond_check(
    settings: &Settings,
    inv: &gpu::Inventory,
    deployed: &Deployed,
) -> Option<Check> {
    settings.provider.as_ref()?;
    let fail = |detail: String, fix: &str| Some(Check::not_ok("bond", Verdict::Fail, detail, fix));
    let Ok((env, deployment)) = deployed else {
        return fail(
            "no validator to find or post a bond with (see the validator check)".into(),
            "fix the validator check first",
        );
    };
    let key = match settings
        .data_dir()
        .map(|d| crate::datadir::DataDir::at(d).payment_key())
        .map_err(|e| e.to_string())
        .and_then(|p| crate::wallet::PaymentKey::load(&p).map_err(|e| e.to_string()))
    {
        Ok(k) => k,
        // Not yet a failure: a new operator runs doctor before making the wallet.
        Err(e) => {
            return Some(Check::not_ok(
                "bond",
                Verdict::Warn,
                format!("no wallet yet, so no bond to check: {e}"),
                "run `ganglion wallet new` (then fund the wallet with ADA and NTX) and doctor \
                 again",
            ));
        }
    };
    let Ok(endpoint) = settings.n2c() else {
        return fail(
            "no chain (see the chain check)".into(),
            "fix the chain check first",
        );
    };
    let preset = NetworkPreset::of(settings.network());
    let looked = tokio::time::timeout(TIMEOUT, async {
        let mut client = ChainClient::connect(&endpoint, preset.magic).await?;
        let at_script = client.utxos_at(&deployment.address(env)).await;
        let wallet = client.utxos_at(&key.address(env.network).to_vec()).await;
        client.close().await;
        Ok::<_, crate::wallet::chain::Error>((at_script?, wallet?))
    })
    .await;
    let (at_script, wallet) = match looked {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return fail(format!("reading the chain: {e}"), "see the chain check"),
        Err(_) => {
            return fail(
                format!("the chain did not answer within {TIMEOUT:?}"),
                "see the chain check",
            );
        }
    };
    let params = &deployment.params;
    let bonds = mine(&at_script, &key.key_hash(), &params.ntx);
    let offerable = crate::config::offerable_on(inv, settings.network())
        .map(|g| g.len() as u64)
        .unwrap_or(0);
    Some(bond_verdict(
        &bonds,
        settings.bond.as_ref(),
        offerable,
        params.min_bond_per_gpu,
        wallet
            .iter()
            .map(|u| u.output.value.quantity_of(&params.ntx))
            .fold(0u64, u64::saturating_add),
    ))
}

/// The bonds (UTxO, datum, `ntx` held) of `provider` among `utxos`.
fn mine(
    utxos: &[ganglion_contracts::tx::Utxo],
    provider: &ganglion_contracts::params::KeyHash,
    ntx: &ganglion_contracts::params::AssetClass,
) -> Vec<(String, ganglion_contracts::v2::datum::BondDatum, u64)> {
    use ganglion_contracts::v2::datum::GanglionDatum;
    utxos
        .iter()
        .filter_map(|u| {
            let datum = GanglionDatum::from_plutus_data(u.output.datum.as_ref()?).ok()?;
            match datum {
                GanglionDatum::Bond(b) if b.provider == *provider => Some((
                    crate::audit::record::txo_text(&u.reference),
                    b,
                    u.output.value.quantity_of(ntx),
                )),
                _ => None,
            }
        })
        .collect()
}

/// The bond check's verdict from what was read: this node's bonds on chain (UTxO, datum,
/// stake in NTX base units), its `[bond]`, the GPUs it would offer, the deployment's minimum
/// stake per GPU and the wallet's NTX (base units).
fn bond_verdict(
    bonds: &[(String, ganglion_contracts::v2::datum::BondDatum, u64)],
    section: Option<&crate::daemon::config::BondSection>,
    offerable: u64,
    min_per_gpu: u64,
    wallet_ntx: u64,
) -> Check {
    use ganglion_rpc::amount::ntx_text;
    let live: Vec<_> = bonds
        .iter()
        .filter(|(_, d, _)| d.unbonding_since_ms.is_none())
        .collect();
    if let Some((at, d, stake)) = live.first() {
        let need = min_per_gpu.saturating_mul(d.gpus);
        if *stake < need {
            return Check::not_ok(
                "bond",
                Verdict::Warn,
                format!(
                    "bond {at} holds {} for {} GPUs, below the minimum {} (a slash?): it backs \
                     no job until topped up",
                    ntx_text(*stake),
                    d.gpus,
                    ntx_text(need)
                ),
                "top it up: `ganglion provider bond top-up --stake-ntx <NTX base units>` on the \
                 running node",
            );
        }
        return Check::pass(
            "bond",
            format!("live bond {at}: {} for {} GPUs", ntx_text(*stake), d.gpus),
        );
    }
    let unbonding = if bonds.is_empty() {
        String::new()
    } else {
        format!(" ({} unbonding)", bonds.len())
    };
    let Some(section) = section else {
        return Check::not_ok(
            "bond",
            Verdict::Fail,
            format!(
                "no live bond on chain{unbonding} and no [bond] in the config: `node run` stops"
            ),
            format!(
                "add [bond] stake_ntx = {} (at least {} per GPU) and gpus = {offerable}, or post \
                 one with `ganglion provider bond post` on a running node",
                min_per_gpu.saturating_mul(offerable.max(1)),
                min_per_gpu
            ),
        );
    };
    let gpus = section.gpus.unwrap_or(offerable);
    let need = min_per_gpu.saturating_mul(gpus);
    if section.stake_ntx < need {
        return Check::not_ok(
            "bond",
            Verdict::Fail,
            format!(
                "[bond] stake_ntx {} is below the minimum {} for {gpus} GPUs",
                ntx_text(section.stake_ntx),
                ntx_text(need)
            ),
            format!("set [bond] stake_ntx to at least {need} (NTX base units), or fewer gpus"),
        );
    }
    if wallet_ntx < section.stake_ntx {
        return Check::not_ok(
            "bond",
            Verdict::Fail,
            format!(
                "[bond] stake_ntx {} > the wallet's {}: the bond cannot be posted",
                ntx_text(section.stake_ntx),
                ntx_text(wallet_ntx)
            ),
            "fund the wallet with NTX (`ganglion wallet address` shows where), or lower [bond] \
             stake_ntx",
        );
    }
    Check::pass(
        "bond",
        format!(
            "no live bond yet{unbonding}: `node run` posts {} for {gpus} GPUs (the wallet holds {})",
            ntx_text(section.stake_ntx),
            ntx_text(wallet_ntx)
        ),
    )
}

/// A provider's overlay UDP port (`[overlay] listen_port`): free, or `node run` fails after
/// it started (each node on one host needs its own). Only for a provider, and not for port
/// 0 (any free port).
fn overlay_port_check(settings: &Settings) -> Option<Check> {
    settings.provider.as_ref()?;
    let port = settings.overlay.listen_port;
    if port == 0 {
        return None;
    }
    Some(match std::net::UdpSocket::bind(("0.0.0.0", port)) {
        Ok(_) => Check::pass("overlay-port", format!("UDP {port} is free")),
        // As for the RPC port: this very node may be the one holding it.
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Check::not_ok(
            "overlay-port",
            Verdict::Warn,
            format!("UDP {port} is in use (this node running, or another node's overlay?)"),
            "if no node of this config runs, set [overlay] listen_port to a free port: every \
             provider node on a host needs its own",
        ),
        Err(e) => Check::not_ok(
            "overlay-port",
            Verdict::Fail,
            format!("UDP {port}: {e}"),
            "set [overlay] listen_port to a port this user may bind",
        ),
    })
}

/// The per-job overlay (DESIGN §6): each pod's TUN needs root (`CAP_NET_ADMIN`) and
/// `/dev/net/tun`. The tunnels always run in the node (boringtun): the relay fallback and the
/// per-link direct/relayed switch need the encrypted datagrams in userspace, so a loaded
/// kernel WireGuard module is reported but not used.
fn overlay_check(root: bool, tun: bool, kernel_wireguard: bool) -> Check {
    let kernel = if kernel_wireguard {
        "kernel WireGuard module loaded but not used (the relay fallback needs userspace tunnels)"
    } else {
        "no kernel WireGuard module (not needed)"
    };
    let fix = "run the node as root with /dev/net/tun (modprobe tun) to take multi-host jobs";
    match (root, tun) {
        (true, true) => Check::pass(
            "overlay",
            format!("root and /dev/net/tun: per-job pods with boringtun tunnels; {kernel}"),
        ),
        (false, _) => Check::not_ok(
            "overlay",
            Verdict::Warn,
            format!("not root: jobs run on a per-job Docker bridge, single-host only; {kernel}"),
            fix,
        ),
        (true, false) => Check::not_ok(
            "overlay",
            Verdict::Warn,
            format!(
                "no /dev/net/tun: jobs run on a per-job Docker bridge, single-host only; {kernel}"
            ),
            fix,
        ),
    }
}

/// Whether any check failed (the CLI exits non-zero then).
pub fn failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.verdict == Verdict::Fail)
}

fn no_docker(why: String) -> (Check, Check) {
    (
        Check::not_ok(
            "docker",
            Verdict::Fail,
            why,
            "install Docker (`apt-get install -y docker.io iptables`) and start it \
             (`systemctl start docker`, or `bash scripts/ensure-docker.sh` in a checkout)",
        ),
        Check::not_ok(
            "gpu-runtime",
            Verdict::Warn,
            "not checked: no Docker Engine",
            "fix the docker check first",
        ),
    )
}

/// The `gpu-runtime` check from the verdict; `smoked` says whether a smoke container confirmed
/// it (it runs only when NVIDIA GPUs are present).
fn runtime_check(access: &NvidiaAccess, smoked: bool) -> Check {
    let how = if smoked {
        "confirmed by a smoke container"
    } else {
        "from the engine's /info; no NVIDIA GPU here to run a smoke container with"
    };
    match access {
        NvidiaAccess::Cdi { devices } => Check::pass(
            "gpu-runtime",
            format!(
                "CDI lists {} NVIDIA GPU(s) ({how})",
                // `nvidia.com/gpu=all` names every GPU, not one more.
                devices.iter().filter(|d| !d.ends_with("=all")).count()
            ),
        ),
        NvidiaAccess::Runtime => Check::pass(
            "gpu-runtime",
            format!("the `nvidia` runtime gives containers GPUs ({how})"),
        ),
        NvidiaAccess::Missing { reason, missing } if smoked => Check::not_ok(
            "gpu-runtime",
            Verdict::Warn,
            format!("NVIDIA GPUs present but not usable in containers: {missing}"),
            reason.fix(),
        ),
        NvidiaAccess::Missing { reason, missing } => Check::not_ok(
            "gpu-runtime",
            Verdict::Warn,
            format!(
                "NVIDIA GPUs could not reach containers: {missing} ({how}; fine for a devnet with \
                 declared GPUs)"
            ),
            reason.fix(),
        ),
    }
}

fn gpus_check(settings: &Settings, inv: &gpu::Inventory) -> Check {
    let declared = inv.gpus.iter().filter(|g| g.is_declared()).count();
    let detected = inv.gpus.len() - declared;
    let held: Vec<String> = inv
        .gpus
        .iter()
        .filter_map(|g| {
            g.not_offered
                .as_ref()
                .map(|n| format!("{} #{}: {n}", g.name, g.index))
        })
        .collect();
    let mut detail = format!("{detected} detected, {declared} declared");
    if !held.is_empty() {
        detail.push_str(&format!("; not offered: {}", held.join("; ")));
    }
    match crate::config::offerable_on(inv, settings.network()) {
        Ok(gpus) if !gpus.is_empty() => Check::pass("gpus", detail),
        Ok(_) => Check::not_ok(
            "gpus",
            Verdict::Warn,
            format!("{detail}; nothing to offer ({})", inv.notes.join("; ")),
            "install the NVIDIA driver (NVML) or the AMD kernel driver, or declare GPUs under \
             [[gpus.declared]] on a devnet; an orchestrator-only node needs none",
        ),
        Err(e) => Check::not_ok(
            "gpus",
            Verdict::Fail,
            format!("{detail}: {e}"),
            "remove [[gpus.declared]] entries on public networks: only detected GPUs are offered",
        ),
    }
}

async fn chain_check(settings: &Settings) -> Check {
    let fix = "start a cardano-node (or `ganglion-devnet`) and point [chain] n2c (or GANGLION_N2C) \
               at its socket or host:port";
    let endpoint = match settings.n2c() {
        Ok(e) => e,
        Err(e) => return Check::not_ok("chain", Verdict::Fail, e.to_string(), fix),
    };
    let preset = NetworkPreset::of(settings.network());
    let shown = match &endpoint {
        N2cEndpoint::Unix(p) => p.display().to_string(),
        N2cEndpoint::Tcp(a) => a.to_string(),
    };
    match tokio::time::timeout(TIMEOUT, ChainClient::connect(&endpoint, preset.magic)).await {
        Ok(Ok(_)) => Check::pass(
            "chain",
            format!("{shown} answers (network magic {})", preset.magic),
        ),
        Ok(Err(e)) => Check::not_ok("chain", Verdict::Fail, format!("{shown}: {e}"), fix),
        Err(_) => Check::not_ok(
            "chain",
            Verdict::Fail,
            format!("{shown} did not answer within {TIMEOUT:?}"),
            fix,
        ),
    }
}

fn port_check(settings: &Settings) -> Check {
    let addr = settings.rpc.listen;
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Check::pass("rpc-port", format!("{addr} is free")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Check::not_ok(
            "rpc-port",
            Verdict::Warn,
            format!("{addr} is in use"),
            "if no node is running here, set [rpc] listen (or GANGLION_RPC_LISTEN) to a free port",
        ),
        Err(e) => Check::not_ok(
            "rpc-port",
            Verdict::Fail,
            format!("{addr}: {e}"),
            "set [rpc] listen (or GANGLION_RPC_LISTEN) to an address of this machine",
        ),
    }
}

fn disk_check(settings: &Settings) -> Check {
    let fix = "free space or set data_dir (GANGLION_DATA_DIR) to a larger file system";
    let dir = match settings.data_dir() {
        Ok(d) => d,
        Err(e) => return Check::not_ok("disk", Verdict::Fail, e.to_string(), fix),
    };
    // The data dir may not exist yet: measure the nearest existing ancestor.
    let probe = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    match free_gib(probe) {
        Ok(gib) if gib < DISK_FAIL_GIB => Check::not_ok(
            "disk",
            Verdict::Fail,
            format!("{gib:.1} GiB free at {}", probe.display()),
            fix,
        ),
        Ok(gib) if gib < DISK_WARN_GIB => Check::not_ok(
            "disk",
            Verdict::Warn,
            format!("{gib:.1} GiB free at {}", probe.display()),
            fix,
        ),
        Ok(gib) => Check::pass("disk", format!("{gib:.1} GiB free at {}", probe.display())),
        Err(e) => Check::not_ok(
            "disk",
            Verdict::Fail,
            format!("{}: {e}", probe.display()),
            fix,
        ),
    }
}

/// Free space available to unprivileged users on the file system holding `path`, in GiB.
fn free_gib(path: &Path) -> std::io::Result<f64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` is a properly sized out-pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Ok(st.f_bavail as f64 * st.f_frsize as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::config::BondSection;
    use ganglion_contracts::v2::datum::BondDatum;
    use ganglion_contracts::v2::payout::Payout;

    const MIN: u64 = 100_000_000;

    fn bond(gpus: u64, stake: u64, unbonding: bool) -> (String, BondDatum, u64) {
        (
            "ab#0".into(),
            BondDatum {
                provider: [1; 28],
                attest_key: [2; 32],
                peer_id: vec![3],
                payout: Payout::enterprise([1; 28]),
                gpus,
                unbonding_since_ms: unbonding.then_some(5),
                commitments: vec![],
            },
            stake,
        )
    }

    fn section(stake_ntx: u64, gpus: Option<u64>) -> BondSection {
        BondSection { stake_ntx, gpus }
    }

    #[test]
    fn the_bond_check_passes_a_live_bond_and_a_postable_section_only() {
        let ok = bond_verdict(&[bond(4, 4 * MIN, false)], None, 4, MIN, 0);
        assert_eq!(ok.verdict, Verdict::Pass, "{ok:?}");
        assert!(
            ok.detail.contains("live bond ab#0: 400 NTX for 4 GPUs"),
            "{ok:?}"
        );

        // Slashed below its minimum: a warning naming the top-up.
        let slashed = bond_verdict(&[bond(4, 3 * MIN, false)], None, 4, MIN, 0);
        assert_eq!(slashed.verdict, Verdict::Warn, "{slashed:?}");
        assert!(
            slashed.fix.as_deref().unwrap_or("").contains("top-up"),
            "{slashed:?}"
        );

        // Only an unbonding bond and no [bond]: `node run` would stop.
        let none = bond_verdict(&[bond(4, 4 * MIN, true)], None, 2, MIN, 0);
        assert_eq!(none.verdict, Verdict::Fail, "{none:?}");
        assert!(none.detail.contains("(1 unbonding)"), "{none:?}");
        assert!(
            none.fix
                .as_deref()
                .unwrap_or("")
                .contains("stake_ntx = 200000000"),
            "{none:?}"
        );

        // A section below the minimum for the GPUs it would back (all offerable by default).
        let low = bond_verdict(&[], Some(&section(MIN, None)), 2, MIN, 10 * MIN);
        assert_eq!(low.verdict, Verdict::Fail, "{low:?}");
        assert!(
            low.detail.contains("below the minimum 200 NTX for 2 GPUs"),
            "{low:?}"
        );
        let one = bond_verdict(&[], Some(&section(MIN, Some(1))), 2, MIN, 10 * MIN);
        assert_eq!(one.verdict, Verdict::Pass, "{one:?}");

        // A wallet that cannot pay the stake.
        let poor = bond_verdict(&[], Some(&section(2 * MIN, None)), 2, MIN, MIN + 1);
        assert_eq!(poor.verdict, Verdict::Fail, "{poor:?}");
        assert!(
            poor.detail.contains("> the wallet's 100.000001 NTX"),
            "{poor:?}"
        );
    }

    /// `shared/fixtures/field/docker-gpu/engine-states.json` through `doctor`'s `gpu-runtime`
    /// check: on H1–H4 (`/info` classified, the smoke container refused with the host's engine
    /// error) it says "present but not usable in containers" with the named reason and its fix;
    /// on G1 and G2 it passes naming the path (CDI, the `nvidia` runtime).
    #[test]
    fn the_gpu_runtime_check_names_the_reason_on_each_field_host() {
        use gpu::docker::{SmokeOutcome, confirm, nvidia_access, smoke_request};
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/field/docker-gpu/engine-states.json"
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON");
        let info = |h: &serde_json::Value| {
            serde_json::from_value::<gpu::docker::EngineInfo>(h["info"].clone()).expect("info")
        };
        let granted = [("GPU-aa".to_string(), "0".to_string())];
        let hosts = v["hosts"].as_array().expect("hosts");
        let named = [
            "NVIDIA Container Toolkit missing",
            "NVIDIA Container Toolkit missing",
            "CDI is disabled in the Docker Engine",
            "no NVIDIA CDI spec",
        ];
        assert_eq!(hosts.len(), named.len());
        for (h, reason) in hosts.iter().zip(named) {
            let id = h["id"].as_str().expect("id");
            let from_info = nvidia_access(&info(h));
            let said = format!(
                "Error response from daemon: {}",
                h["engine_error_contains"].as_str().expect("error")
            );
            let smoked = confirm(
                &from_info,
                &smoke_request(&from_info, &granted),
                &SmokeOutcome::EngineError {
                    message: said.clone(),
                },
            );
            let c = runtime_check(&smoked, true);
            assert_eq!(c.verdict, Verdict::Warn, "{id}: {c:?}");
            assert!(
                c.detail
                    .starts_with("NVIDIA GPUs present but not usable in containers: ")
                    && c.detail.contains(reason)
                    && c.detail.contains(&said),
                "{id}: {c:?}"
            );
            assert!(!c.detail.contains("1.48"), "{id}: no API version problem");
            assert!(c.fix.as_deref().is_some_and(|f| !f.is_empty()), "{id}");
        }
        let good = v["good_host_examples"].as_array().expect("good hosts");
        for (h, how) in good
            .iter()
            .zip(["CDI lists 1 NVIDIA GPU(s)", "the `nvidia` runtime"])
        {
            let access = nvidia_access(&info(h));
            let smoked = confirm(
                &access,
                &smoke_request(&access, &granted),
                &SmokeOutcome::Passed,
            );
            let c = runtime_check(&smoked, true);
            assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
            assert!(c.detail.starts_with(how), "{c:?}");
            assert!(c.detail.contains("confirmed by a smoke container"), "{c:?}");
        }
    }
}
