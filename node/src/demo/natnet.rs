//! Each demo provider in its own network namespace behind its own NAT, built with
//! `ip` and `iptables` where the machine allows it (root, both tools, `ip netns` usable).
//!
//! ```text
//!   this host (root netns): devnet N2C, orchestrator p2p (a circuit relay) and RPC
//!        10.211.K.1 ── veth ──┐
//!                              │  "internet": a bridge in its own netns (gdmK-pub)
//!   router i (gdmK-r<i>) ─────┘  10.211.K.(10+i), MASQUERADE, unsolicited inbound dropped
//!        │ 10.(212+i).K.1
//!   provider i (gdmK-h<i>): 10.(212+i).K.2 on `lan0`, default route via its router
//! ```
//!
//! A provider reaches the devnet, the orchestrator and the other routers' public addresses
//! only through its NAT; the routers have no route to another provider's LAN. So two
//! providers meet over libp2p only through the orchestrator's relay (then DCUtR), and their
//! WireGuard overlay links are hole-punched through both NATs (or relayed). The one exception
//! is management: this host routes to each LAN and each router forwards, from this host only,
//! new TCP connections to the provider's JSON-RPC port ([`RPC_PORT`]), as an operator's VPN
//! would; everything else unsolicited is dropped.
//!
//! `K` is a free slot (0..200) taken under a lock file, so demos (and tests) run side by
//! side. Dropping the [`NatNet`] deletes its namespaces (their veths go with them) and this
//! host's veth and routes; [`sweep`] removes those of demos that died without dropping.

use std::net::Ipv4Addr;
use std::process::Command;

/// The providers' JSON-RPC port inside their namespaces.
pub const RPC_PORT: u16 = 7070;
/// Namespace and link name prefix.
const PREFIX: &str = "gdm";
/// Slots (`K`) available.
const SLOTS: u8 = 200;
/// The lock file serialising slot choice between demos.
const LOCK: &str = "/run/ganglion-demo-natnet.lock";

/// One provider's namespace.
#[derive(Debug, Clone)]
pub struct NatHost {
    /// Its network namespace (`ip netns exec <netns> …`).
    pub netns: String,
    /// Its address on its LAN (where it listens).
    pub lan_ip: Ipv4Addr,
    /// Its router's public address (what others see it as).
    pub public_ip: Ipv4Addr,
}

/// The namespaces, veths and routes of one demo.
#[derive(Debug)]
pub struct NatNet {
    slot: u8,
    hosts: Vec<NatHost>,
}

/// Why the topology cannot be built here.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NatNetError(String);

/// Runs `line` (a program and its arguments, split at whitespace: every name and address here
/// is a single word).
fn run(line: &str) -> Result<(), NatNetError> {
    let mut words = line.split_whitespace();
    let cmd = words.next().ok_or_else(|| NatNetError("empty".into()))?;
    let out = Command::new(cmd)
        .args(words)
        .output()
        .map_err(|e| NatNetError(format!("`{cmd}`: {e} (apt-get install iproute2 iptables)")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NatNetError(format!(
            "`{line}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The standard output of `line` (as [`run`] splits it); empty when it cannot run.
fn output(line: &str) -> String {
    let mut words = line.split_whitespace();
    let Some(cmd) = words.next() else {
        return String::new();
    };
    Command::new(cmd)
        .args(words)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Why this machine cannot build the topology, or `None` when it can (root, `ip netns`,
/// `iptables` working).
pub fn unavailable() -> Option<String> {
    if !is_root() {
        return Some("not root (namespaces and iptables need root)".into());
    }
    ["ip netns list", "iptables -t nat -L -n"]
        .into_iter()
        .find_map(|line| run(line).err().map(|e| e.0))
}

fn ns(slot: u8, what: &str) -> String {
    format!("{PREFIX}{slot}-{what}")
}

/// Holds the lock file while alive: slot choice, building and sweeping never interleave.
fn lock() -> Result<std::fs::File, NatNetError> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::create(LOCK).map_err(|e| NatNetError(format!("{LOCK}: {e}")))?;
    // SAFETY: flock(2) on a descriptor this function owns; released when `file` closes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(NatNetError(format!(
            "locking {LOCK}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(file)
}

/// Removes the namespaces and host links of demos whose process is gone (their name holds
/// the slot; the slot's owner pid is in the host link's alias).
///
/// # Errors
/// [`NatNetError`] when the lock file cannot be taken.
pub fn sweep() -> Result<(), NatNetError> {
    let _lock = lock()?;
    sweep_locked();
    Ok(())
}

fn sweep_locked() {
    let links = output("ip -o link show");
    for line in links.lines() {
        let Some(name) = line
            .split(": ")
            .nth(1)
            .map(|n| n.split('@').next().unwrap_or(n))
        else {
            continue;
        };
        let Some(slot) = name
            .strip_prefix(PREFIX)
            .and_then(|s| s.strip_suffix("-x"))
            .and_then(|s| s.parse::<u8>().ok())
        else {
            continue;
        };
        let alias = line
            .split("alias ")
            .nth(1)
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.parse::<i32>().ok());
        // SAFETY: kill(2) with signal 0 only checks whether the pid exists.
        let alive = alias.is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
        if !alive {
            remove(slot, 8);
        }
    }
}

fn remove(slot: u8, hosts: usize) {
    for i in 0..hosts {
        let _ = run(&format!("ip netns del {}", ns(slot, &format!("h{i}"))));
        let _ = run(&format!("ip netns del {}", ns(slot, &format!("r{i}"))));
        let _ = run(&format!("ip route del {}/24", lan_net(i, slot)));
    }
    let _ = run(&format!("ip netns del {}", ns(slot, "pub")));
    let _ = run(&format!("ip link del {PREFIX}{slot}-x"));
}

/// Provider `i`'s LAN (a /24) in slot `slot`.
fn lan_net(i: usize, slot: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 212 + i as u8, slot, 0)
}

impl NatNet {
    /// This host's address on the "internet" bridge: the devnet and the orchestrator bind it.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 211, self.slot, 1)
    }

    /// The slot `K` (namespaces `gdmK-*`, this host's link `gdmK-x`).
    pub fn slot(&self) -> u8 {
        self.slot
    }

    /// Provider `i`'s namespace.
    pub fn host(&self, i: usize) -> Option<&NatHost> {
        self.hosts.get(i)
    }

    /// One line for the summary.
    pub fn describe(&self) -> String {
        let hosts: Vec<String> = self
            .hosts
            .iter()
            .map(|h| format!("{} ({} behind {})", h.netns, h.lan_ip, h.public_ip))
            .collect();
        format!(
            "NAT: each provider in its own network namespace behind its own NAT (MASQUERADE, \
             unsolicited inbound dropped): {}; devnet and orchestrator (circuit relay) at {}; \
             providers meet over libp2p through the relay (then DCUtR) and their containers \
             only through the job's WireGuard overlay",
            hosts.join(", "),
            self.host_ip()
        )
    }

    /// Builds the topology for `providers` providers (at most 8).
    ///
    /// # Errors
    /// [`NatNetError`] naming the command that failed (what was built is removed), or when
    /// no slot is free.
    pub fn create(providers: usize) -> Result<Self, NatNetError> {
        if providers > 8 {
            return Err(NatNetError("at most 8 providers".into()));
        }
        let _lock = lock()?;
        sweep_locked();
        let used = output("ip netns list");
        let start = (std::process::id() % u32::from(SLOTS)) as u8;
        let slot = (0..SLOTS)
            .map(|d| ((u16::from(start) + u16::from(d)) % u16::from(SLOTS)) as u8)
            .find(|s| !used.contains(&format!("{PREFIX}{s}-")))
            .ok_or_else(|| NatNetError("no free slot".into()))?;
        let net = Self {
            slot,
            hosts: Vec::new(),
        };
        // On an error `net` drops and removes what was built.
        net.build(providers)
    }

    fn build(mut self, providers: usize) -> Result<Self, NatNetError> {
        let k = self.slot;
        let public = ns(k, "pub");
        let (host_link, host_peer) = (format!("{PREFIX}{k}-x"), format!("{PREFIX}{k}-xp"));
        run(&format!("ip netns add {public}"))?;
        run(&format!("ip -n {public} link set lo up"))?;
        run(&format!("ip -n {public} link add br0 type bridge"))?;
        run(&format!("ip -n {public} link set br0 up"))?;
        // This host's leg: the alias holds the owner pid for `sweep`.
        run(&format!(
            "ip link add {host_link} type veth peer name {host_peer}"
        ))?;
        run(&format!(
            "ip link set {host_link} alias {}",
            std::process::id()
        ))?;
        run(&format!("ip link set {host_peer} netns {public}"))?;
        run(&format!(
            "ip -n {public} link set {host_peer} master br0 up"
        ))?;
        run(&format!(
            "ip addr add {}/24 dev {host_link}",
            self.host_ip()
        ))?;
        run(&format!("ip link set {host_link} up"))?;
        for i in 0..providers {
            let router = ns(k, &format!("r{i}"));
            let host = ns(k, &format!("h{i}"));
            let public_ip = Ipv4Addr::new(10, 211, k, 10 + i as u8);
            let lan = lan_net(i, k);
            let [a, b, c, _] = lan.octets();
            let (gateway, lan_ip) = (Ipv4Addr::new(a, b, c, 1), Ipv4Addr::new(a, b, c, 2));
            self.hosts.push(NatHost {
                netns: host.clone(),
                lan_ip,
                public_ip,
            });
            for n in [&router, &host] {
                run(&format!("ip netns add {n}"))?;
                run(&format!("ip -n {n} link set lo up"))?;
            }
            // Router ↔ bridge, as `wan0`.
            let (wan, wan_peer) = (format!("{PREFIX}{k}-w{i}"), format!("{PREFIX}{k}-b{i}"));
            run(&format!("ip link add {wan} type veth peer name {wan_peer}"))?;
            run(&format!("ip link set {wan} netns {router}"))?;
            run(&format!("ip link set {wan_peer} netns {public}"))?;
            run(&format!("ip -n {public} link set {wan_peer} master br0 up"))?;
            run(&format!("ip -n {router} link set {wan} name wan0"))?;
            run(&format!("ip -n {router} addr add {public_ip}/24 dev wan0"))?;
            run(&format!("ip -n {router} link set wan0 up"))?;
            // Router ↔ provider LAN, `lan0` on both ends.
            let (l, lp) = (format!("{PREFIX}{k}-l{i}"), format!("{PREFIX}{k}-p{i}"));
            run(&format!("ip link add {l} type veth peer name {lp}"))?;
            run(&format!("ip link set {l} netns {router}"))?;
            run(&format!("ip link set {lp} netns {host}"))?;
            run(&format!("ip -n {router} link set {l} name lan0"))?;
            run(&format!("ip -n {router} addr add {gateway}/24 dev lan0"))?;
            run(&format!("ip -n {router} link set lan0 up"))?;
            run(&format!("ip -n {host} link set {lp} name lan0"))?;
            run(&format!("ip -n {host} addr add {lan_ip}/24 dev lan0"))?;
            run(&format!("ip -n {host} link set lan0 up"))?;
            run(&format!("ip -n {host} route add default via {gateway}"))?;
            // The NAT: forward, masquerade out of wan0, drop unsolicited inbound except this
            // host's connections to the provider's RPC port.
            let ipt = |rule: &str| run(&format!("ip netns exec {router} iptables {rule}"));
            run(&format!(
                "ip netns exec {router} sysctl -qw net.ipv4.ip_forward=1"
            ))?;
            ipt("-t nat -A POSTROUTING -o wan0 -j MASQUERADE")?;
            ipt("-A INPUT -i wan0 -m conntrack --ctstate NEW,INVALID -j DROP")?;
            ipt(&format!(
                "-A FORWARD -i wan0 -s {} -d {lan_ip} -p tcp --dport {RPC_PORT} \
                 -m conntrack --ctstate NEW -j ACCEPT",
                self.host_ip()
            ))?;
            ipt("-A FORWARD -i wan0 -m conntrack --ctstate NEW,INVALID -j DROP")?;
            // Management: this host reaches the LAN through the router.
            run(&format!(
                "ip route add {lan}/24 via {public_ip} dev {host_link}"
            ))?;
        }
        Ok(self)
    }
}

impl Drop for NatNet {
    fn drop(&mut self) {
        remove(self.slot, self.hosts.len().max(8));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_lans_are_distinct_and_outside_the_public_subnet() {
        let a = lan_net(0, 7);
        let b = lan_net(1, 7);
        assert_ne!(a, b);
        assert_eq!(a, Ipv4Addr::new(10, 212, 7, 0));
        assert_ne!(lan_net(0, 8), a, "another slot, another LAN");
        assert_eq!(ns(7, "h1"), "gdm7-h1");
    }
}
