#!/usr/bin/env bash
# Rebuilds plutus.json with aiken 1.1.24 and records the checksums of the sources it was
# built from (sources.sha256). The test `blueprint::sources_match_committed_checksums`
# fails when the sources and these checksums drift apart.
set -euo pipefail
cd "$(dirname "$0")"
want="v1.1.24"
have="$(aiken --version 2>/dev/null || true)"
case "$have" in
  *1.1.24*) ;;
  *) echo "build.sh: need aiken $want (cargo install aiken@1.1.24 --locked), found: ${have:-none}" >&2; exit 1 ;;
esac
aiken fmt --check
aiken check
aiken build --trace-level silent
{
  find aiken.toml lib validators -type f \( -name '*.ak' -o -name 'aiken.toml' \) | LC_ALL=C sort | xargs sha256sum
  sha256sum plutus.json
} > sources.sha256
echo "build.sh: plutus.json rebuilt, sources.sha256 updated"
