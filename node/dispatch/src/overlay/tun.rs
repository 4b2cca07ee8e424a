//! A TUN interface (layer 3, no packet-info header) and its configuration through the classic
//! `SIOCSIF*` ioctls (linux `netdevice(7)`, `Documentation/networking/tuntap.rst`).
//!
//! Both act in the network namespace of the *calling thread*: run them through
//! [`super::netns::run_in`] to place the interface inside a pod. The file descriptor stays
//! bound to that interface wherever it is used afterwards.

use std::ffi::CStr;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ipnet::Ipv4Net;

use super::OverlayError;

/// The overlay MTU: 1500 minus IPv4 (20), UDP (8) and WireGuard (32) framing, minus 20 for an
/// IPv6 underlay: WireGuard's usual 1420.
pub const OVERLAY_MTU: u32 = 1420;

/// An open TUN interface.
#[derive(Debug)]
pub struct TunDevice {
    fd: OwnedFd,
    name: String,
}

fn ifreq_named(name: &str) -> Result<libc::ifreq, OverlayError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(OverlayError::Io {
            operation: "interface name",
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

fn check(rc: libc::c_int, operation: &'static str) -> Result<(), OverlayError> {
    if rc < 0 {
        Err(OverlayError::Io {
            operation,
            source: std::io::Error::last_os_error(),
        })
    } else {
        Ok(())
    }
}

fn sockaddr_in(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size on Linux; this is how the ioctls
    // take an IPv4 address.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

impl TunDevice {
    /// Creates TUN interface `name` (at most 15 bytes) in the calling thread's namespace,
    /// non-blocking, close-on-exec. Needs `CAP_NET_ADMIN` there.
    ///
    /// # Errors
    /// [`OverlayError::Io`] when `/dev/net/tun` is missing or the ioctl is refused.
    pub fn create(name: &str) -> Result<Self, OverlayError> {
        let mut req = ifreq_named(name)?;
        let path = c"/dev/net/tun";
        // SAFETY: a valid C string; the returned fd is owned below.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        check(raw, "open /dev/net/tun")?;
        // SAFETY: raw is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq.
        check(
            unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) },
            "TUNSETIFF",
        )?;
        // SAFETY: the kernel NUL-terminates the (possibly templated) name.
        let actual = unsafe { CStr::from_ptr(req.ifr_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(Self { fd, name: actual })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives up the file descriptor (for the I/O driver).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsRawFd for TunDevice {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Sets `address` (with its prefix, which also installs the subnet route), the MTU and the up
/// flag on interface `name` in the calling thread's namespace.
///
/// # Errors
/// [`OverlayError::Io`] naming the ioctl the kernel refused.
pub fn configure(name: &str, address: Ipv4Net, mtu: u32) -> Result<(), OverlayError> {
    // SAFETY: a plain socket call; the fd is owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(raw, "control socket")?;
    // SAFETY: raw is a fresh fd we own.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let s = sock.as_raw_fd();

    let mut req = ifreq_named(name)?;
    req.ifr_ifru.ifru_addr = sockaddr_in(address.addr());
    // SAFETY: each SIOC* call below reads (and for SIOCGIFFLAGS writes) one ifreq.
    check(
        unsafe { libc::ioctl(s, libc::SIOCSIFADDR, &req) },
        "SIOCSIFADDR",
    )?;
    let mut req = ifreq_named(name)?;
    req.ifr_ifru.ifru_netmask = sockaddr_in(address.netmask());
    check(
        unsafe { libc::ioctl(s, libc::SIOCSIFNETMASK, &req) },
        "SIOCSIFNETMASK",
    )?;
    let mut req = ifreq_named(name)?;
    req.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu).unwrap_or(1420);
    check(
        unsafe { libc::ioctl(s, libc::SIOCSIFMTU, &req) },
        "SIOCSIFMTU",
    )?;
    let mut req = ifreq_named(name)?;
    check(
        unsafe { libc::ioctl(s, libc::SIOCGIFFLAGS, &mut req) },
        "SIOCGIFFLAGS",
    )?;
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    check(
        unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS, &req) },
        "SIOCSIFFLAGS",
    )?;
    Ok(())
}
