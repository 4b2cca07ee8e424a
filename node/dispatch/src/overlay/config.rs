//! The `[overlay]` section of the node's config file (DESIGN §6): where job subnets
//! come from and how the node's tunnels run. Every key is optional; the defaults are shown
//! below.
//!
//! ```toml
//! [overlay]
//! pool = "100.96.0.0/12"        # inside 100.64.0.0/10, clear of Docker's ranges
//! job_prefix = 24               # one /24 per job: up to 253 containers
//! listen_port = 51820           # the node's one UDP socket (0 = any free port)
//! # mtu = 1412                  # bytes, the TUN inside each pod; absent = path MTU − 80
//! # path_mtu = 1492             # bytes, the underlay path; absent = learned, else 1500
//! ipv4_only = false             # true: peers are reached over IPv4 only (overhead 60, not 80)
//! keepalive_s = 25              # seconds between keepalives behind NAT (0 = off)
//! relay_fallback_s = 10         # seconds without a handshake before the relay is used
//! link_timeout_s = 60           # seconds for every link of a job to work; else it fails unpaid
//! relay = true                  # false: no relay fallback, and relayed datagrams are refused
//! direct = false                # true: this host's UDP port is reachable from the internet
//! ```

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::OverlayError;
use super::addressing::OverlayPool;

/// Path MTU assumed when none is configured or learned, bytes (Ethernet).
pub const DEFAULT_PATH_MTU: u32 = 1500;
/// WireGuard's per-packet overhead over IPv6, bytes: IPv6 header 40 + UDP 8 + WireGuard data
/// message framing 32 (type, receiver index, counter: 16; Poly1305 tag: 16). The WireGuard
/// whitepaper §5.4.6; `wg-quick` subtracts 80 from the route's MTU for the same reason.
pub const OVERHEAD_IPV6: u32 = 80;
/// WireGuard's per-packet overhead over IPv4, bytes: IPv4 header 20 + UDP 8 + 32.
pub const OVERHEAD_IPV4: u32 = 60;

/// The overlay MTU for a path of `path_mtu` bytes: `path_mtu − 80`, or `− 60` when the path is
/// known to be IPv4-only (`shared/fixtures/field/README.md`, "Overlay MTU"): 1500 → 1420,
/// 1492 (PPPoE) → 1412, 1450 (VXLAN cloud VM) → 1370. Saturates at 0 for absurd inputs
/// ([`OverlayConfig::resolve_mtu`] then refuses the result).
pub fn overlay_mtu(path_mtu: u32, ipv4_only: bool) -> u32 {
    path_mtu.saturating_sub(if ipv4_only {
        OVERHEAD_IPV4
    } else {
        OVERHEAD_IPV6
    })
}

/// The path MTU as learned from the underlay: the interface of the default route and its MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnedPath {
    /// The interface, e.g. `eth0`, `ppp0`.
    pub interface: String,
    /// Its MTU, bytes.
    pub mtu: u32,
}

/// Learns the path MTU from this machine: the IPv4 default route's interface in
/// `/proc/net/route` (lowest metric) and its `/sys/class/net/<if>/mtu`. `None` when there is
/// no default route or the MTU cannot be read (then [`DEFAULT_PATH_MTU`] is assumed).
pub fn learn_path_mtu() -> Option<LearnedPath> {
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    learn_path_mtu_from(&routes, std::path::Path::new("/sys/class/net"))
}

/// [`learn_path_mtu`] over a `/proc/net/route` text and a `class/net` directory.
pub fn learn_path_mtu_from(routes: &str, class_net: &std::path::Path) -> Option<LearnedPath> {
    // Columns: Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT.
    let interface = routes
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let (iface, dest, mask) = (*cols.first()?, *cols.get(1)?, *cols.get(7)?);
            let metric: u32 = cols.get(6)?.parse().ok()?;
            (dest == "00000000" && mask == "00000000").then(|| (metric, iface.to_string()))
        })
        .min()?
        .1;
    let mtu = std::fs::read_to_string(class_net.join(&interface).join("mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(LearnedPath { interface, mtu })
}

/// Smallest MTU accepted, bytes: the IPv4 minimum datagram every host must take (RFC 791).
pub const MIN_MTU: u32 = 576;
/// Largest MTU accepted, bytes: a jumbo frame underlay (9000) less the 60 bytes of IPv4, UDP
/// and WireGuard framing.
pub const MAX_MTU: u32 = 8940;
/// Largest path MTU accepted, bytes: a 9000-byte jumbo frame.
pub const MAX_PATH_MTU: u32 = 9000;
/// Longest keepalive interval accepted, seconds: NAT mappings of UDP expire after as little
/// as 30 s (RFC 4787 §4.3 asks for at least 120 s), so anything much longer cannot hold one.
pub const MAX_KEEPALIVE_S: u16 = 120;
/// Longest relay fallback accepted, seconds (a job's rendezvous times out long before).
pub const MAX_RELAY_FALLBACK_S: u16 = 300;
/// Longest link timeout accepted, seconds.
pub const MAX_LINK_TIMEOUT_S: u16 = 900;

/// `[overlay]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OverlayConfig {
    /// The pool job subnets are cut from; default `100.96.0.0/12`.
    pub pool: Ipv4Net,
    /// Prefix length of one job's subnet; default 24.
    pub job_prefix: u8,
    /// UDP port of the node's WireGuard socket; default 51820; 0 picks a free port.
    pub listen_port: u16,
    /// MTU of each pod's overlay interface, bytes; absent (the default) = [`overlay_mtu`] of the
    /// path (1420 = [`super::tun::OVERLAY_MTU`] on a 1500 path). At most the path MTU − 60 ([`OverlayConfig::resolve_mtu`]).
    pub mtu: Option<u32>,
    /// MTU of the underlay path to the other nodes, bytes; absent = learned from the default
    /// route's interface ([`learn_path_mtu`]), else [`DEFAULT_PATH_MTU`].
    pub path_mtu: Option<u32>,
    /// The path to peers is known to be IPv4-only: the overhead is [`OVERHEAD_IPV4`] instead of
    /// [`OVERHEAD_IPV6`]; default false.
    pub ipv4_only: bool,
    /// Persistent keepalive, seconds; default 25; 0 turns it off (only sensible without NAT).
    pub keepalive_s: u16,
    /// Seconds without a direct handshake before a link falls back to the libp2p relay;
    /// default 10 (see [`super::router`] and [`super::node::OverlayNode::set_relay`]).
    pub relay_fallback_s: u16,
    /// Seconds a job's node waits, after attaching its pod, for every link of the job to work
    /// (a handshake answered, directly or over the relay) before its ranks start; default 60,
    /// more than `relay_fallback_s`. A link still down then fails this node's share before any
    /// rank started: it claims no GPU time, is paid nothing and is not slashed, and the
    /// orchestrator is told which peer could not be reached (DESIGN §6).
    pub link_timeout_s: u16,
    /// Whether links may fall back to the libp2p relay (`/ganglion/overlay-relay/1`), this
    /// node's own and those of peers relaying to it; default true. False: a link that cannot
    /// go direct fails the job after `link_timeout_s` (for an operator who will not carry
    /// tunnel traffic over its p2p connections).
    pub relay: bool,
    /// Declares the node reachable without a relay (a public IP, or `listen_port` forwarded
    /// to it); default false, and then AutoNAT decides (a confirmed public address counts).
    /// A provider advertises the result in its offer (`direct_capable`), which the matcher
    /// prefers at equal price and score.
    pub direct: bool,
}

impl Default for OverlayConfig {
    fn default() -> Self {
        let pool = OverlayPool::default();
        Self {
            pool: pool.pool,
            job_prefix: pool.job_prefix,
            listen_port: 51820,
            mtu: None,
            path_mtu: None,
            ipv4_only: false,
            keepalive_s: 25,
            relay_fallback_s: 10,
            link_timeout_s: 60,
            relay: true,
            direct: false,
        }
    }
}

impl OverlayConfig {
    /// The address pool as the planner takes it.
    pub fn pool(&self) -> OverlayPool {
        OverlayPool {
            pool: self.pool,
            job_prefix: self.job_prefix,
        }
    }

    /// The relay fallback delay for [`super::node::OverlayNode::set_relay`].
    pub fn relay_fallback(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.relay_fallback_s.into())
    }

    /// The overlay MTU to use, bytes: `[overlay] mtu` when set, else [`overlay_mtu`] of the path
    /// (`path_mtu` when set, else `learned`, else [`DEFAULT_PATH_MTU`]: 1420).
    ///
    /// # Errors
    /// [`OverlayError::MtuAbovePath`] when `[overlay] mtu` is above the path MTU − 60 (no
    /// WireGuard packet of that size fits the path: 1500 on a 1500 path is refused);
    /// [`OverlayError::Config`] naming `overlay.mtu` when the result is below [`MIN_MTU`].
    pub fn resolve_mtu(&self, learned: Option<&LearnedPath>) -> Result<u32, OverlayError> {
        let (path_mtu, from) = match (self.path_mtu, learned) {
            (Some(p), _) => (p, "overlay.path_mtu".to_string()),
            (None, Some(l)) => (l.mtu, format!("the MTU of {}", l.interface)),
            (None, None) => (DEFAULT_PATH_MTU, "the default path MTU".to_string()),
        };
        let max = overlay_mtu(path_mtu, true);
        let mtu = match self.mtu {
            Some(m) if m > max => {
                return Err(OverlayError::MtuAbovePath {
                    key: "overlay.mtu",
                    mtu: m,
                    path_mtu,
                    from,
                    max,
                });
            }
            Some(m) => m,
            None => overlay_mtu(path_mtu, self.ipv4_only),
        };
        if mtu < MIN_MTU {
            return Err(OverlayError::Config {
                key: "overlay.mtu",
                reason: format!(
                    "{mtu} bytes (from a path MTU of {path_mtu}, {from}) is below {MIN_MTU}"
                ),
            });
        }
        Ok(mtu)
    }

    /// How long a job's links may take to work ([`Self::link_timeout_s`]).
    pub fn link_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.link_timeout_s.into())
    }

    /// The keepalive for each peer, `None` when off.
    pub fn keepalive(&self) -> Option<u16> {
        (self.keepalive_s > 0).then_some(self.keepalive_s)
    }

    /// Checks every value.
    ///
    /// # Errors
    /// [`OverlayError::Pool`] for a pool [`OverlayPool::validate`] refuses,
    /// [`OverlayError::Config`] naming the key for an MTU outside [`MIN_MTU`]..=[`MAX_MTU`],
    /// a path MTU outside [`MIN_MTU`]..=[`MAX_PATH_MTU`], a keepalive over
    /// [`MAX_KEEPALIVE_S`], a relay fallback of 0 or over [`MAX_RELAY_FALLBACK_S`], or a link
    /// timeout not above the relay fallback or over [`MAX_LINK_TIMEOUT_S`];
    /// [`OverlayError::MtuAbovePath`] for an MTU above the configured (or default 1500) path
    /// MTU − 60 (the learned path is checked again by [`Self::resolve_mtu`]).
    pub fn validate(&self) -> Result<(), OverlayError> {
        self.pool().validate()?;
        if let Some(mtu) = self.mtu
            && !(MIN_MTU..=MAX_MTU).contains(&mtu)
        {
            return Err(OverlayError::Config {
                key: "overlay.mtu",
                reason: format!("{mtu} bytes is outside {MIN_MTU}..={MAX_MTU}"),
            });
        }
        if let Some(path) = self.path_mtu
            && !(MIN_MTU..=MAX_PATH_MTU).contains(&path)
        {
            return Err(OverlayError::Config {
                key: "overlay.path_mtu",
                reason: format!("{path} bytes is outside {MIN_MTU}..={MAX_PATH_MTU}"),
            });
        }
        self.resolve_mtu(None)?;
        if self.keepalive_s > MAX_KEEPALIVE_S {
            return Err(OverlayError::Config {
                key: "overlay.keepalive_s",
                reason: format!(
                    "{} s is longer than NAT mappings last (at most {MAX_KEEPALIVE_S} s)",
                    self.keepalive_s
                ),
            });
        }
        if self.relay_fallback_s == 0 || self.relay_fallback_s > MAX_RELAY_FALLBACK_S {
            return Err(OverlayError::Config {
                key: "overlay.relay_fallback_s",
                reason: format!(
                    "{} s is outside 1..={MAX_RELAY_FALLBACK_S}",
                    self.relay_fallback_s
                ),
            });
        }
        if self.link_timeout_s <= self.relay_fallback_s || self.link_timeout_s > MAX_LINK_TIMEOUT_S
        {
            return Err(OverlayError::Config {
                key: "overlay.link_timeout_s",
                reason: format!(
                    "{} s must be above relay_fallback_s ({} s, a relayed link needs that long) and at most {MAX_LINK_TIMEOUT_S}",
                    self.link_timeout_s, self.relay_fallback_s
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_issues_and_valid() {
        let cfg = OverlayConfig::default();
        cfg.validate().expect("defaults");
        assert_eq!(cfg.pool.to_string(), "100.96.0.0/12");
        assert_eq!(cfg.job_prefix, 24);
        assert_eq!(cfg.listen_port, 51820);
        assert_eq!(cfg.mtu, None);
        assert_eq!(cfg.resolve_mtu(None).expect("default"), 1420);
        assert_eq!(
            cfg.resolve_mtu(None).expect("default"),
            crate::overlay::tun::OVERLAY_MTU
        );
        assert_eq!(cfg.keepalive(), Some(25));
        assert_eq!(cfg.relay_fallback_s, 10);
        assert_eq!(cfg.relay_fallback(), std::time::Duration::from_secs(10));
    }

    #[test]
    fn out_of_range_values_name_their_key() {
        let bad = |f: fn(&mut OverlayConfig)| {
            let mut cfg = OverlayConfig::default();
            f(&mut cfg);
            cfg.validate().expect_err("refused").to_string()
        };
        assert!(bad(|c| c.mtu = Some(100)).contains("overlay.mtu"));
        assert!(bad(|c| c.mtu = Some(9001)).contains("overlay.mtu"));
        assert!(bad(|c| c.path_mtu = Some(100)).contains("overlay.path_mtu"));
        assert!(bad(|c| c.keepalive_s = 600).contains("overlay.keepalive_s"));
        assert!(bad(|c| c.relay_fallback_s = 0).contains("overlay.relay_fallback_s"));
        assert!(bad(|c| c.link_timeout_s = 10).contains("overlay.link_timeout_s"));
        assert!(bad(|c| c.link_timeout_s = 901).contains("overlay.link_timeout_s"));
        assert!(bad(|c| c.pool = "172.16.0.0/12".parse().expect("net")).contains("100.64.0.0/10"));
        assert!(bad(|c| c.job_prefix = 8).contains("job prefix"));
        let off = OverlayConfig {
            keepalive_s: 0,
            ..OverlayConfig::default()
        };
        off.validate().expect("keepalive off is allowed");
        assert_eq!(off.keepalive(), None);
    }

    /// The field README's table: path MTU → overlay MTU.
    #[test]
    fn overlay_mtu_is_the_path_less_80_or_60_for_ipv4_only() {
        for (path, want) in [(1500, 1420), (1492, 1412), (1450, 1370)] {
            assert_eq!(overlay_mtu(path, false), want, "path {path}");
            let cfg = OverlayConfig {
                path_mtu: Some(path),
                ..OverlayConfig::default()
            };
            assert_eq!(cfg.resolve_mtu(None).expect("configured path"), want);
            let learned = LearnedPath {
                interface: "ppp0".into(),
                mtu: path,
            };
            assert_eq!(
                OverlayConfig::default()
                    .resolve_mtu(Some(&learned))
                    .expect("learned path"),
                want
            );
        }
        assert_eq!(overlay_mtu(1500, true), 1440);
        let v4 = OverlayConfig {
            ipv4_only: true,
            path_mtu: Some(1492),
            ..OverlayConfig::default()
        };
        assert_eq!(v4.resolve_mtu(None).expect("v4"), 1432);
        // A configured path wins over a learned one.
        let cfg = OverlayConfig {
            path_mtu: Some(1450),
            ..OverlayConfig::default()
        };
        let eth = LearnedPath {
            interface: "eth0".into(),
            mtu: 1500,
        };
        assert_eq!(cfg.resolve_mtu(Some(&eth)).expect("configured"), 1370);
    }

    #[test]
    fn a_configured_mtu_above_the_path_less_60_is_refused_naming_the_key() {
        let with = |mtu: u32, path: Option<u32>| OverlayConfig {
            mtu: Some(mtu),
            path_mtu: path,
            ..OverlayConfig::default()
        };
        let err = with(1500, None).validate().expect_err("1500 refused");
        assert!(
            matches!(
                err,
                OverlayError::MtuAbovePath {
                    key: "overlay.mtu",
                    mtu: 1500,
                    path_mtu: 1500,
                    max: 1440,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("overlay.mtu: "), "{err}");
        with(1440, None).validate().expect("path − 60 is the most");
        assert!(with(1441, None).validate().is_err());
        assert_eq!(with(1380, None).resolve_mtu(None).expect("below"), 1380);
        // Against a learned PPPoE path: 1420 no longer fits.
        let ppp = LearnedPath {
            interface: "ppp0".into(),
            mtu: 1492,
        };
        let cfg = with(1440, None);
        cfg.validate().expect("fits the default path");
        let err = cfg.resolve_mtu(Some(&ppp)).expect_err("does not fit ppp0");
        assert!(err.to_string().contains("ppp0"), "{err}");
        assert!(with(1432, None).resolve_mtu(Some(&ppp)).is_ok());
        // A path so small that − 80 falls below the IPv4 minimum.
        let tiny = OverlayConfig {
            path_mtu: Some(600),
            ..OverlayConfig::default()
        };
        assert!(
            tiny.validate()
                .expect_err("too small")
                .to_string()
                .contains("overlay.mtu")
        );
    }

    #[test]
    fn the_path_mtu_is_learned_from_the_default_routes_interface() {
        let t = tempfile::tempdir().expect("tempdir");
        for (iface, mtu) in [("eth0", "1500\n"), ("ppp0", "1492\n"), ("vxlan0", "1450\n")] {
            std::fs::create_dir_all(t.path().join(iface)).expect("mkdir");
            std::fs::write(t.path().join(iface).join("mtu"), mtu).expect("write");
        }
        let routes = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                      eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                      eth0\t00000000\t0100A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n\
                      ppp0\t00000000\t00000000\t0001\t0\t0\t100\t00000000\t0\t0\t0\n";
        assert_eq!(
            learn_path_mtu_from(routes, t.path()),
            Some(LearnedPath {
                interface: "ppp0".into(),
                mtu: 1492
            }),
            "the default route with the lowest metric"
        );
        let none = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
                    eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(
            learn_path_mtu_from(none, t.path()),
            None,
            "no default route"
        );
        // This machine: whatever it has, the learned MTU is that interface's.
        if let Some(l) = learn_path_mtu() {
            let sys = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", l.interface))
                .expect("sysfs mtu");
            assert_eq!(sys.trim().parse::<u32>().ok(), Some(l.mtu));
        }
    }
}
