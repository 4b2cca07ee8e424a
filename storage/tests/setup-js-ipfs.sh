#!/usr/bin/env bash
# Installs js-ipfs (npm `ipfs` 0.66, a Kubo-compatible HTTP RPC daemon that works off-line) into a
# cache directory for the `kubo` pinner interop tests. Nothing is committed; re-running is a no-op.
#
#   storage/tests/setup-js-ipfs.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $GANGLION_JS_IPFS_DIR, then ~/.cache/ganglion/js-ipfs. Prints the path of
# the launcher script the tests run (`$CACHE_DIR/run-daemon.sh REPO_DIR`).
set -euo pipefail

dir="${1:-${GANGLION_JS_IPFS_DIR:-$HOME/.cache/ganglion/js-ipfs}}"
mkdir -p "$dir"
cd "$dir"

if [ ! -x node_modules/.bin/jsipfs ]; then
  command -v npm >/dev/null || { echo "setup-js-ipfs: npm not found" >&2; exit 2; }
  [ -f package.json ] || echo '{"name":"ganglion-js-ipfs","private":true}' > package.json
  npm install --no-audit --no-fund --loglevel=error ipfs@0.66 >&2
fi

# Node < 22 lacks Promise.withResolvers, which js-ipfs' dependencies call.
cat > polyfill.cjs <<'JS'
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function () {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    return { promise, resolve, reject };
  };
}
JS

# run-daemon.sh REPO: init an off-line repo (no swarm, no bootstrap, API on a free port) and run
# the daemon in the foreground; it prints "RPC API listening on /ip4/127.0.0.1/tcp/<port>/http".
cat > run-daemon.sh <<SH
#!/usr/bin/env bash
set -euo pipefail
export IPFS_PATH="\$1"
export NODE_OPTIONS="--require $dir/polyfill.cjs"
bin="$dir/node_modules/.bin/jsipfs"
if [ ! -f "\$IPFS_PATH/config" ]; then
  "\$bin" init --empty-repo >/dev/null
  "\$bin" config --json Addresses.Swarm '[]' >/dev/null
  "\$bin" config --json Bootstrap '[]' >/dev/null
  "\$bin" config Addresses.API /ip4/127.0.0.1/tcp/0 >/dev/null
  "\$bin" config Addresses.Gateway /ip4/127.0.0.1/tcp/0 >/dev/null
  "\$bin" config --json Addresses.RPC '"/ip4/127.0.0.1/tcp/0"' >/dev/null 2>&1 || true
  "\$bin" config --json Discovery.MDNS.Enabled false >/dev/null
  "\$bin" config --json Discovery.webRTCStar.Enabled false >/dev/null 2>&1 || true
fi
exec "\$bin" daemon --offline
SH
chmod +x run-daemon.sh
echo "$dir/run-daemon.sh"
