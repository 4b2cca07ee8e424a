#!/usr/bin/env bash
# Makes a Docker Engine available for the executor's tests (node/dispatch/tests/executor), for
# .ci/run and local runs. Idempotent:
#   1. installs what is missing (Debian): docker.io + iptables (the engine), debootstrap (the
#      torch image build), libc6-dev/gcc (the static probe binary);
#   2. starts dockerd in the background when nothing answers on /var/run/docker.sock
#      (log: /var/log/ganglion-dockerd.log) and waits until `docker info` works;
#   3. with --images: builds the test images now (probe: seconds; PyTorch CPU: ~3-7 minutes
#      once; the embedding service: ~30 s more; cached by tag), so the test run itself does not
#      pay for them.
# Needs root (apt, dockerd). Fails loudly: the executor tests never skip for want of Docker.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'ensure-docker: %s\n' "$*" >&2; exit 1; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -e /usr/lib/aarch64-linux-gnu/libc.a ] || missing+=(libc6-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install them by hand"
  echo "ensure-docker: installing ${missing[*]}" >&2
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
fi

if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "no Docker Engine answers and starting dockerd needs root"
  echo "ensure-docker: starting dockerd (log: /var/log/ganglion-dockerd.log)" >&2
  nohup dockerd >/var/log/ganglion-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -n 30 /var/log/ganglion-dockerd.log >&2; die "dockerd did not come up within 60 s"; }
fi
echo "ensure-docker: engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')" >&2

if [ "${1:-}" = "--images" ]; then
  bash scripts/build-probe-image.sh >/dev/null
  bash scripts/build-torch-image.sh >/dev/null
  # The example inference service (all-MiniLM-L6-v2 on CPU, ~30 s on top of the torch image).
  bash scripts/build-embed-image.sh >/dev/null
  echo "ensure-docker: test images ready" >&2
fi
