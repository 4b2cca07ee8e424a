#!/usr/bin/env bash
# Installs the npm client's library (package.json + package-lock.json here: @blaze-cardano/sdk,
# exact versions) into a cache folder with `npm ci`, for node/tests/it/daemon_run's npm-client
# test. Nothing is installed into the repository; re-running is a no-op while the lock is
# unchanged.
#
#   node/tests/npm-client/setup.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $GANGLION_NPM_CLIENT_DIR, then ~/.cache/ganglion/npm-client. Prints it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${GANGLION_NPM_CLIENT_DIR:-$HOME/.cache/ganglion/npm-client}}"
mkdir -p "$dir"
if [ ! -d "$dir/node_modules/@blaze-cardano/sdk" ] || ! cmp -s "$here/package-lock.json" "$dir/package-lock.json"; then
  command -v npm >/dev/null || { echo "npm-client setup: npm not found" >&2; exit 2; }
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "$dir"
