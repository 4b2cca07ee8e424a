//! The `[overlay]` section of the node's config file (issue 9, DESIGN §6): where job subnets
//! come from and how the node's tunnels run. Every key is optional; the defaults are the
//! issue's.
//!
//! ```toml
//! [overlay]
//! pool = "100.96.0.0/12"        # inside 100.64.0.0/10, clear of Docker's ranges
//! job_prefix = 24               # one /24 per job: up to 253 containers
//! listen_port = 51820           # the node's one UDP socket (0 = any free port)
//! mtu = 1420                    # bytes, the TUN inside each pod
//! keepalive_s = 25              # seconds between keepalives behind NAT (0 = off)
//! relay_fallback_s = 10         # seconds without a handshake before the relay is used
//! direct = false                # true: this host's UDP port is reachable from the internet
//! ```

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::OverlayError;
use super::addressing::OverlayPool;
use super::tun::OVERLAY_MTU;

/// Smallest MTU accepted, bytes: the IPv4 minimum datagram every host must take (RFC 791).
pub const MIN_MTU: u32 = 576;
/// Largest MTU accepted, bytes: a jumbo frame underlay (9000) less the 60 bytes of IPv4, UDP
/// and WireGuard framing.
pub const MAX_MTU: u32 = 8940;
/// Longest keepalive interval accepted, seconds: NAT mappings of UDP expire after as little
/// as 30 s (RFC 4787 §4.3 asks for at least 120 s), so anything much longer cannot hold one.
pub const MAX_KEEPALIVE_S: u16 = 120;
/// Longest relay fallback accepted, seconds (a job's rendezvous times out long before).
pub const MAX_RELAY_FALLBACK_S: u16 = 300;

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
    /// MTU of each pod's overlay interface, bytes; default 1420.
    pub mtu: u32,
    /// Persistent keepalive, seconds; default 25; 0 turns it off (only sensible without NAT).
    pub keepalive_s: u16,
    /// Seconds without a direct handshake before a link falls back to the libp2p relay;
    /// default 10 (see [`super::router`] and [`super::node::OverlayNode::set_relay`]).
    pub relay_fallback_s: u16,
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
            mtu: OVERLAY_MTU,
            keepalive_s: 25,
            relay_fallback_s: 10,
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

    /// The keepalive for each peer, `None` when off.
    pub fn keepalive(&self) -> Option<u16> {
        (self.keepalive_s > 0).then_some(self.keepalive_s)
    }

    /// Checks every value.
    ///
    /// # Errors
    /// [`OverlayError::Pool`] for a pool [`OverlayPool::validate`] refuses,
    /// [`OverlayError::Config`] naming the key for an MTU outside [`MIN_MTU`]..=[`MAX_MTU`],
    /// a keepalive over [`MAX_KEEPALIVE_S`], or a relay fallback of 0 or over
    /// [`MAX_RELAY_FALLBACK_S`].
    pub fn validate(&self) -> Result<(), OverlayError> {
        self.pool().validate()?;
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(OverlayError::Config {
                key: "overlay.mtu",
                reason: format!("{} bytes is outside {MIN_MTU}..={MAX_MTU}", self.mtu),
            });
        }
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
        assert_eq!(cfg.mtu, 1420);
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
        assert!(bad(|c| c.mtu = 100).contains("overlay.mtu"));
        assert!(bad(|c| c.mtu = 9001).contains("overlay.mtu"));
        assert!(bad(|c| c.keepalive_s = 600).contains("overlay.keepalive_s"));
        assert!(bad(|c| c.relay_fallback_s = 0).contains("overlay.relay_fallback_s"));
        assert!(bad(|c| c.pool = "172.16.0.0/12".parse().expect("net")).contains("100.64.0.0/10"));
        assert!(bad(|c| c.job_prefix = 8).contains("job prefix"));
        let off = OverlayConfig {
            keepalive_s: 0,
            ..OverlayConfig::default()
        };
        off.validate().expect("keepalive off is allowed");
        assert_eq!(off.keepalive(), None);
    }
}
