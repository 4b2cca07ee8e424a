#!/usr/bin/env bash
# Builds the PyTorch CPU workload image without a registry (DESIGN §6):
#   debootstrap --variant=minbase <suite> + Debian's python3-torch (CPU build, gloo)
#   -> tar | docker import.
# About 3 minutes and ~1.3 GB from nothing; cached by tag: when the image exists, nothing runs.
#
# Usage: scripts/build-torch-image.sh [tag]   (prints the tag as its last line)
# Env:   GANGLION_TORCH_IMAGE (default ganglion/torch-cpu:bookworm-1), DEBIAN_SUITE (bookworm),
#        DEBIAN_MIRROR (default: the first deb.debian.org-style URI of this host's apt sources,
#        else http://deb.debian.org/debian), FORCE=1 rebuilds.
# Needs: root, debootstrap, docker (a running engine).
set -euo pipefail

TAG="${1:-${GANGLION_TORCH_IMAGE:-ganglion/torch-cpu:bookworm-1}}"
SUITE="${DEBIAN_SUITE:-bookworm}"

# Concurrent callers (parallel tests) wait for one build.
exec 9>"/var/tmp/ganglion-torch-image.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "build-torch-image: $TAG already present (cached by tag)" >&2
  echo "$TAG"
  exit 0
fi

if [[ -z "${DEBIAN_MIRROR:-}" ]]; then
  DEBIAN_MIRROR="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | head -n1 | awk '{print $2}' || true)"
  DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
fi

command -v debootstrap >/dev/null || { echo "build-torch-image: debootstrap missing (apt-get install -y debootstrap)" >&2; exit 2; }
docker info >/dev/null || { echo "build-torch-image: no Docker engine (start dockerd)" >&2; exit 2; }

WORK="$(mktemp -d /var/tmp/ganglion-torch-rootfs.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
ROOT="$WORK/rootfs"
start=$(date +%s)
echo >&2 "build-torch-image: debootstrap $SUITE from $DEBIAN_MIRROR into $ROOT"
debootstrap --variant=minbase --include=python3-torch,python3-numpy,ca-certificates \
  "$SUITE" "$ROOT" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 \
  || { tail -n 30 "$WORK/debootstrap.log" >&2; exit 1; }

# Slim the rootfs: package caches, docs and locales are not needed at run time.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* \
  "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/locale/*
chroot "$ROOT" python3 -c 'import torch, torch.distributed as d; assert d.is_gloo_available(); print("torch", torch.__version__)' >&2

tar -C "$ROOT" --numeric-owner -c . | docker import \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
  --change 'ENV HOME=/tmp' \
  --change 'WORKDIR /tmp' \
  --change 'CMD ["python3"]' \
  - "$TAG" >&2
echo "build-torch-image: $TAG built in $(( $(date +%s) - start )) s" >&2
echo "$TAG"
