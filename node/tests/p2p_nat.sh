#!/usr/bin/env bash
# Two p2p nodes, each behind its own NAT (network namespace + iptables MASQUERADE), reach each
# other through a relay node on the "public" network, then try to upgrade to a direct
# connection with DCUtR. Needs root, `ip netns`, iptables. Usage:
#   cargo build -p ganglion-node --example p2p_peer && sudo node/tests/p2p_nat.sh
# (node/tests/p2p_nat.rs runs it as part of the test suite when run as root.)
# Prints RESULT relayed=<yes|no> direct=<yes|no>; exits non-zero when the relayed path fails.
set -euo pipefail
BIN=${BIN:-target/debug/examples/p2p_peer}
P=gp2p$$
LOG=$(mktemp -d)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  for ns in pub ra a rb b; do ip netns del "${P}_$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
for ns in pub ra a rb b; do ip netns add "${P}_$ns"; ip -n "${P}_$ns" link set lo up; done
ip -n "${P}_pub" link add br0 type bridge
ip -n "${P}_pub" addr add 10.77.0.1/24 dev br0
ip -n "${P}_pub" link set br0 up
nat() { # nat <router-ns-suffix> <host-ns-suffix> <public-ip> <lan-prefix>
  local r="${P}_$1" h="${P}_$2"
  ip link add "${P}$1p" type veth peer name "${P}$1b"
  ip link set "${P}$1p" netns "$r"; ip link set "${P}$1b" netns "${P}_pub"
  ip -n "${P}_pub" link set "${P}$1b" master br0 up
  ip -n "$r" addr add "$3/24" dev "${P}$1p"; ip -n "$r" link set "${P}$1p" up
  ip link add "${P}$1l" type veth peer name "${P}$2h"
  ip link set "${P}$1l" netns "$r"; ip link set "${P}$2h" netns "$h"
  ip -n "$r" addr add "$4.1/24" dev "${P}$1l"; ip -n "$r" link set "${P}$1l" up
  ip -n "$h" addr add "$4.2/24" dev "${P}$2h"; ip -n "$h" link set "${P}$2h" up
  ip -n "$h" route add default via "$4.1"
  ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1
  ip netns exec "$r" iptables -t nat -A POSTROUTING -o "${P}$1p" -j MASQUERADE
  # Like a home router: unsolicited inbound packets are dropped, not answered with a RST
  # (a RST would tear down the other side's fresh mapping during the simultaneous open).
  ip netns exec "$r" iptables -A INPUT -i "${P}$1p" -m conntrack --ctstate NEW,INVALID -j DROP
}
nat ra a 10.77.0.2 192.168.10
nat rb b 10.77.0.3 192.168.20

ip netns exec "${P}_pub" "$BIN" relay /ip4/10.77.0.1/tcp/0 >"$LOG/relay" 2>&1 &
for _ in $(seq 100); do grep -q '^ADDR' "$LOG/relay" && break; sleep 0.1; done
RELAY=$(awk '/^ADDR/{print $2; exit}' "$LOG/relay")
[ -n "$RELAY" ] || { echo "relay did not start"; cat "$LOG/relay"; exit 1; }
ip netns exec "${P}_a" env RUST_LOG="${RUST_LOG:-p2p=info}" "$BIN" listen "$RELAY" >"$LOG/a" 2>&1 &
for _ in $(seq 100); do grep -q '^ADDR' "$LOG/a" && break; sleep 0.1; done
CIRCUIT=$(awk '/^ADDR/{print $2; exit}' "$LOG/a")
[ -n "$CIRCUIT" ] || { echo "A got no reservation"; cat "$LOG/a"; exit 1; }
ip netns exec "${P}_b" env RUST_LOG="${RUST_LOG:-p2p=info}" timeout 60 "$BIN" dial "$RELAY" "$CIRCUIT" >"$LOG/b" 2>&1 || true
echo "--- relay"; cat "$LOG/relay"; echo "--- A"; cat "$LOG/a"; echo "--- B"; cat "$LOG/b"
relayed=no; direct=no
grep -q 'CONNECTED relayed=true' "$LOG/b" && relayed=yes
grep -q 'HOLEPUNCH ok=true' "$LOG/b" "$LOG/a" && direct=yes
echo "RESULT relayed=$relayed direct=$direct"
[ "$relayed" = yes ]
