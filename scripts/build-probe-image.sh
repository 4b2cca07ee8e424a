#!/usr/bin/env bash
# Builds the executor's fast test image: FROM scratch + one static binary (/probe), made from
# scripts/images/probe/probe.c with the host's C compiler and imported with `docker import`
# (no registry, no Dockerfile build). Cached by tag: the tag is a hash of the source.
# Prints the image tag as its last line.
# Needs: gcc (or $CC) with static glibc (libc6-dev), docker (a running engine).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/images/probe/probe.c"
tag="ganglion/probe:$(sha256sum "$src" | cut -c1-12)"
exec 9>"/var/tmp/ganglion-probe-image.lock"
flock 9
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root"
"${CC:-gcc}" -static -O2 -Wall -o "$work/root/probe" "$src" >&2
tar -C "$work/root" --numeric-owner --owner=0 --group=0 -c probe \
  | docker import --change 'ENTRYPOINT ["/probe"]' - "$tag" >&2
echo "$tag"
